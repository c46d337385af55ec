"""Bits: bitcast with layouts, bitcast-convert across widths, reduce-precision on the bits,
sub-byte integers (s4 / u4 / s2 / u2), as Penguin ops.

* bitcast reinterprets the operand's bytes: its elements in physical (layout) order are the
  result's elements in the result's physical order, each element's bits reinterpreted
  (bitcast-convert); a change of element width is refused.
* bitcast-convert between 32-bit words and 64-bit integers (jax's rbg keys): the device holds
  a 64-bit integer as its low word (README: 64-bit integers are computed in 32 bits);
  between types of 1, 2 and 4 bytes (f32 <-> u8[4], bf16 <-> u8[2], u32 <-> u16[2], ...) by
  shifts and masks on int32 words, least significant piece first.
* reduce-precision to widths other than f16 / bf16: XLA's algorithm on the f32 bits.
* sub-byte integers are stored one value per byte; every op computing one wraps its result
  to the type's width (hlo2penguin calls ``wrap_narrow`` after such ops).
"""
import numpy as np

from neuronxcc.starfish.penguin import ir
from neuronxcc.starfish.penguin.hloinst import loc as hloinst_loc, penguin_dtype, unsupported

NARROW_INT = {"s4": (4, True), "u4": (4, False), "s2": (2, True), "u2": (2, False)}


def bitcast_convert_width(g, inst, x, loc):
    """bitcast-convert between 32-bit words and 64-bit integers (jax's rbg keys): the device holds
    a 64-bit integer as its low word (README), so u32[..., 2] -> u64[...] keeps word 0 and
    u64[...] -> u32[..., 2] gives (low word, its zero / sign extension)."""
    src, dst = penguin_dtype(inst.operands[0].shape), penguin_dtype(inst.shape)
    sdims, ddims = tuple(inst.operands[0].shape.dims), tuple(inst.shape.dims)
    wide = ("int64", "uint64")
    if src in ("uint32", "int32") and dst in wide and sdims == ddims + (2,):
        lo = g.add_op("slice", [x], [(inst.name + ".lo", ddims + (1,), src)],
                      {"starts": [0] * len(sdims), "limits": list(ddims) + [1], "strides": [1] * len(sdims)},
                      loc)[0]
        lo = g.add_op("reshape", [lo], [(inst.name + ".lo", ddims, src)], {}, loc)[0]
        return g.add_op("convert", [lo], [(inst.name, ddims, dst)], {}, loc)[0]
    if src in wide and dst in ("uint32", "int32") and ddims == sdims + (2,):
        lo = g.add_op("convert", [x], [(inst.name + ".lo", sdims, "int32")], {}, loc)[0]
        if src == "int64":
            k = g.add_op("constant", [], [(inst.name + ".k", sdims, "int32")], {"value": 31}, loc)[0]
            hi = g.add_op("shift-right-arithmetic", [lo, k], [(inst.name + ".hi", sdims, "int32")], {}, loc)[0]
        else:
            hi = g.add_op("constant", [], [(inst.name + ".hi", sdims, "int32")], {"value": 0}, loc)[0]
        cols = [g.add_op("reshape", [w], [(inst.name + ".w", sdims + (1,), "int32")], {}, loc)[0] for w in (lo, hi)]
        both = g.add_op("concatenate", cols, [(inst.name + ".pair", ddims, "int32")],
                        {"dimension": len(sdims)}, loc)[0]
        return g.add_op("bitcast-convert", [both], [(inst.name, ddims, dst)], {}, loc)[0] if dst != "int32" \
            else both
    ss, ds = ir.dtype_size(src), ir.dtype_size(dst)
    if ss <= 4 and ds <= 4 and (ss > ds and sdims + (ss // ds,) == ddims
                                or ss < ds and sdims == ddims + (ds // ss,)):
        return _bitcast_split_join(g, inst, x, src, dst, sdims, ddims, loc)
    raise unsupported(inst, "bitcast-convert from %s%s to %s%s" % (src, list(sdims), dst, list(ddims)))


def _word(g, x, dt, sh, name, loc):
    """The bits of x (an element type of 1, 2 or 4 bytes) zero-extended into an int32."""
    n = ir.dtype_size(dt)
    if n == 4:
        return x if dt == "int32" else g.add_op("bitcast-convert", [x], [(name + ".w", sh, "int32")], {}, loc)[0]
    if ir.is_float(dt):
        x = g.add_op("bitcast-convert", [x], [(name + ".u", sh, "uint%d" % (8 * n))], {}, loc)[0]
    w = g.add_op("convert", [x], [(name + ".w", sh, "int32")], {}, loc)[0]
    m = g.add_op("constant", [], [(name + ".m", sh, "int32")], {"value": (1 << (8 * n)) - 1}, loc)[0]
    return g.add_op("and", [w, m], [(name + ".wm", sh, "int32")], {}, loc)[0]


def _from_word(g, w, dt, sh, name, loc):
    """An int32 holding the low bits of a dt element, as that element type."""
    n = ir.dtype_size(dt)
    if n == 4:
        return w if dt == "int32" else g.add_op("bitcast-convert", [w], [(name, sh, dt)], {}, loc)[0]
    if ir.is_float(dt):
        u = g.add_op("convert", [w], [(name + ".u", sh, "uint%d" % (8 * n))], {}, loc)[0]
        return g.add_op("bitcast-convert", [u], [(name, sh, dt)], {}, loc)[0]
    return g.add_op("convert", [w], [(name, sh, dt)], {}, loc)[0]


def _bitcast_split_join(g, inst, x, src, dst, sdims, ddims, loc):
    """bitcast-convert between element types of 1, 2 and 4 bytes: a wider element is its narrower
    pieces along a new minor dimension, least significant first (the little-endian byte order XLA
    gives), computed with shifts and masks on int32 words."""
    name = inst.name
    ss, ds = ir.dtype_size(src), ir.dtype_size(dst)

    def c(v, sh):
        return g.add_op("constant", [], [(name + ".c", sh, "int32")], {"value": v}, loc)[0]
    if ss > ds:         # split: x[..] -> y[.., r]
        r, bits = ss // ds, 8 * ds
        w = _word(g, x, src, sdims, name, loc)
        cols = []
        for k in range(r):
            p = g.add_op("shift-right-logical", [w, c(k * bits, sdims)], [(name + ".s%d" % k, sdims, "int32")],
                         {}, loc)[0] if k else w
            p = g.add_op("and", [p, c((1 << bits) - 1, sdims)], [(name + ".p%d" % k, sdims, "int32")], {}, loc)[0]
            cols.append(g.add_op("reshape", [p], [(name + ".col%d" % k, sdims + (1,), "int32")], {}, loc)[0])
        both = g.add_op("concatenate", cols, [(name + ".pieces", ddims, "int32")], {"dimension": len(sdims)},
                        loc)[0]
        return _from_word(g, both, dst, ddims, name, loc)
    r, bits = ds // ss, 8 * ss         # join: x[.., r] -> y[..]
    w = _word(g, x, src, sdims, name, loc)
    acc = None
    for k in range(r):
        st = [0] * len(sdims)
        st[-1] = k
        lim = list(ddims) + [k + 1]
        p = g.add_op("slice", [w], [(name + ".sl%d" % k, ddims + (1,), "int32")],
                     {"starts": st, "limits": lim, "strides": [1] * len(sdims)}, loc)[0]
        p = g.add_op("reshape", [p], [(name + ".r%d" % k, ddims, "int32")], {}, loc)[0]
        if k:
            p = g.add_op("shift-left", [p, c(k * bits, ddims)], [(name + ".sh%d" % k, ddims, "int32")], {}, loc)[0]
        acc = p if acc is None else g.add_op("or", [acc, p], [(name + ".or%d" % k, ddims, "int32")], {}, loc)[0]
    return _from_word(g, acc, dst, ddims, name, loc)


def bitcast(g, inst, x, loc):
    """bitcast reinterprets the operand's bytes: its elements in physical (layout) order are the
    result's elements in the result's physical order, each element's bits reinterpreted."""
    src, dst = inst.operands[0].shape, inst.shape
    v = g.values[x]
    dtype = penguin_dtype(dst)
    if ir.dtype_size(dtype) != ir.dtype_size(v.dtype):
        raise unsupported(inst, "bitcast between element types of different widths (%s to %s)"
                               % (src.element_type, dst.element_type))
    m_src, m_dst = major_to_minor(src), major_to_minor(dst)
    if m_src != list(range(len(m_src))):
        x = g.add_op("transpose", [x], [(inst.name + ".phys", tuple(src.dims[d] for d in m_src), v.dtype)],
                     {"permutation": m_src}, loc)[0]
    pdims = tuple(dst.dims[d] for d in m_dst)
    if g.values[x].shape != pdims:
        x = g.add_op("reshape", [x], [(inst.name + ".flat", pdims, v.dtype)], {}, loc)[0]
    if dtype != v.dtype:
        x = g.add_op("bitcast-convert", [x], [(inst.name + ".bits", pdims, dtype)], {}, loc)[0]
    if m_dst != list(range(len(m_dst))):
        inv = [int(k) for k in np.argsort(m_dst)]
        x = g.add_op("transpose", [x], [(inst.name, tuple(dst.dims), dtype)], {"permutation": inv}, loc)[0]
    return x


def convert_to_narrow(g, inst, x, loc):
    """convert into a sub-byte integer, as int32 (``wrap_narrow`` follows): floats saturate to the
    type's range and NaN becomes 0 (XLA:CPU), integers are wrapped by the caller."""
    v = g.values[x]
    sh = v.shape
    if ir.is_float(v.dtype):
        bits, signed = NARROW_INT[inst.shape.element_type]
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        f = x if v.dtype == "float32" else g.add_op("convert", [x], [(inst.name + ".f32", sh, "float32")], {},
                                                     loc)[0]

        def c(val, dt="float32"):
            return g.add_op("constant", [], [(inst.name + ".c", sh, dt)], {"value": val}, loc)[0]
        cl = g.add_op("clamp", [c(float(lo)), f, c(float(hi))], [(inst.name + ".clamp", sh, "float32")], {},
                      loc)[0]
        nan = g.add_op("compare", [f, f], [(inst.name + ".nan", sh, "bool")], {"direction": "NE"}, loc)[0]
        x = g.add_op("select", [nan, c(0.0), cl], [(inst.name + ".sat", sh, "float32")], {}, loc)[0]
    return g.add_op("convert", [x], [(inst.name + ".i32", sh, "int32")], {}, loc)[0]


def wrap_narrow(g, inst, x):
    """The value of a sub-byte integer result wrapped to its width (two's complement for s4/s2)."""
    bits, signed = NARROW_INT[inst.shape.element_type]
    v = g.values[x]
    loc = hloinst_loc(inst)
    sh = v.shape
    w = g.add_op("convert", [x], [(inst.name + ".i32", sh, "int32")], {}, loc)[0]
    if signed:
        k = g.add_op("constant", [], [(inst.name + ".k", sh, "int32")], {"value": 32 - bits}, loc)[0]
        w = g.add_op("shift-left", [w, k], [(inst.name + ".shl", sh, "int32")], {}, loc)[0]
        w = g.add_op("shift-right-arithmetic", [w, k], [(inst.name + ".sra", sh, "int32")], {}, loc)[0]
    else:
        m = g.add_op("constant", [], [(inst.name + ".m", sh, "int32")], {"value": (1 << bits) - 1}, loc)[0]
        w = g.add_op("and", [w, m], [(inst.name + ".and", sh, "int32")], {}, loc)[0]
    return g.add_op("convert", [w], [(inst.name + ".wrap", sh, penguin_dtype(inst.shape))], {}, loc)[0]


def reduce_precision_bits(g, x, e, m, loc, name):
    """XLA's reduce-precision on the bits of an f32 (narrower floats widened first): round the
    mantissa to ``m`` bits (to nearest even), then clamp the exponent to ``e`` bits (overflow to
    signed infinity, underflow to signed zero); NaNs pass through. int32 arithmetic wraps only on
    NaN bit patterns, which the last select discards."""
    v = g.values[x]
    sh, dt = v.shape, v.dtype

    def op(kind, ins, dtype="int32", attrs=None, suffix=""):
        return g.add_op(kind, ins, [(name + "." + (suffix or kind), sh, dtype)], attrs or {}, loc)[0]

    def c(value, dtype="int32"):
        return op("constant", [], dtype, {"value": value}, "c")

    def i32(u):          # a 32-bit pattern as the int32 constant with those bits
        return c(u - (1 << 32) if u >= 1 << 31 else u)

    f = x if dt == "float32" else op("convert", [x], "float32")
    bits = op("bitcast-convert", [f])
    if m < 23:
        shift = 23 - m
        last = 1 << shift
        lastbit = op("shift-right-logical", [op("and", [bits, i32(last)]), c(shift)])
        biased = op("add", [op("add", [bits, lastbit]), c((last >> 1) - 1)])
        bits = op("and", [biased, i32(0xFFFFFFFF & ~(last - 1))])
    if e < 8:
        red_bias = (1 << (e - 1)) - 1
        expo = op("and", [bits, i32(0x7F800000)])
        sign = op("and", [bits, i32(0x80000000)])
        inf = op("or", [sign, i32(0x7F800000)])
        over = op("compare", [expo, c((127 + red_bias) << 23)], "bool", {"direction": "GT"})
        under = op("compare", [expo, c((127 - red_bias) << 23)], "bool", {"direction": "LE"})
        bits = op("select", [over, inf, op("select", [under, sign, bits])])
    y = op("bitcast-convert", [bits], "float32", suffix="f32")
    nan = op("compare", [f, f], "bool", {"direction": "NE"}, "nan")
    y = op("select", [nan, f, y], "float32", suffix="keep")
    if dt != "float32":
        y = op("convert", [y], dt, suffix="out")
    return y


def major_to_minor(shape):
    """The logical dimensions of an array shape from the most to the least significant in memory."""
    lay = shape.layout if shape.layout is not None else tuple(range(len(shape.dims) - 1, -1, -1))
    return [int(d) for d in reversed(lay)]
