"""Integer shifts and bit counts with XLA's full semantics, as Penguin ops on int32 words.

XLA defines every shift amount (its HLO tests check the edges):
* an amount outside [0, width) (negative ones included: the amount is read unsigned) shifts every
  bit out: shift-left and shift-right-logical give 0, shift-right-arithmetic gives the sign fill;
* shift-right-arithmetic of an unsigned type propagates the type's top bit (u8 133 >> 3 = 240);
* shift-right-logical of a signed narrow type brings in zeros at the type's width (s8 -1 >>> 1 = 127).

The engines shift 32-bit words, so the value is widened to the int32 that holds its bits (sign-
extended for an arithmetic shift, masked to the width for a logical one), shifted, and the word
narrowed back (convert wraps). The amount's range (a constant, else ``intrange``'s interval of the
HLO value: a loop carry of constants, an ``and`` with width - 1, a ``rem``, a clamp ...) decides what
is emitted around the shift:
* inside [0, width): the plain shift (a 32-bit value: the one op, nothing else);
* wholly outside (every value >= width, or negative): 0, or the sign fill for an arithmetic shift;
* else: the engine shifts by min(amount, width - 1) with the amount read unsigned at its width, and
  a logical shift's lanes with amount >= width (one unsigned compare) are replaced by 0; an
  arithmetic shift by width - 1 already is the sign fill.

popcnt / count-leading-zeros of a narrow type count the type's own bits (an s8 -1 has 8 bits set
and no leading zero; a u8 7 has 5 leading zeros): the engines count a 32-bit word, so the value is
masked to its width first and clz subtracts the 32 - width leading zeros the word adds. Of a 64-bit
type, held in its low word, they add what the high word (the sign fill) holds: exact for every
value that fits 32 bits.
"""
from neuronxcc.starfish.penguin import intrange, ir
from neuronxcc.starfish.penguin.hloinst import penguin_dtype

WIDTH = {"s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s4": 4, "u4": 4, "s2": 2, "u2": 2}
OPS = ("shift-left", "shift-right-logical", "shift-right-arithmetic")
COUNTS = ("popcnt", "count-leading-zeros")


def _const_amount(conv, g, v):
    c = conv._const_of(g, v)
    return int(c[1]) if c is not None and c[0] == "splat" else None


def amount_range(conv, g, inst, ins):
    """(lo, hi) of the shift amount's values (a splat constant, else ``intrange`` on the HLO), or None."""
    k = _const_amount(conv, g, ins[1])
    if k is not None:
        return (k, k)
    module = getattr(conv, "module", None)
    return intrange.of(module, inst.operands[1]) if module is not None else None


def lower(conv, g, inst, ins, loc):
    """The shift ``inst`` (operands already converted: ``ins``), or None to keep the plain op
    (64-bit types, computed in 32 bits as the README says)."""
    et = inst.shape.element_type
    w = WIDTH.get(et)
    if w is None or not inst.shape.is_array:
        return None
    op = inst.opcode
    sh = tuple(inst.shape.dims)
    dt = penguin_dtype(inst.shape)
    signed = et.startswith("s")
    rng = amount_range(conv, g, inst, ins)
    # the amount read unsigned: a negative one is >= 2^(w-1) >= w, so out of range like one >= w
    inside = rng is not None and 0 <= rng[0] and rng[1] < w
    outside = rng is not None and (rng[0] >= w or rng[1] < 0)
    if w == 32 and inside and (op != "shift-right-arithmetic" or signed):
        return None
    name = inst.name

    def add(kind, xs, dtype="int32", attrs=None, suffix=None):
        return g.add_op(kind, xs, [("%s.%s" % (name, suffix or kind), sh, dtype)], attrs or {}, loc)[0]

    def const(v, dtype="int32"):
        return add("constant", [], dtype, {"value": v}, "c")

    def word(v, dtype):
        if dtype == "int32":
            return v
        if dtype == "uint32":
            return add("bitcast-convert", [v], "int32", suffix="bits")
        return add("convert", [v], "int32", suffix="i32")

    x = word(ins[0], dt)
    if op == "shift-right-arithmetic" and w < 32 or op == "shift-right-arithmetic" and not signed:
        if w < 32:      # sign-extend from the type's top bit
            e = const(32 - w)
            x = add("shift-right-arithmetic", [add("shift-left", [x, e]), e], suffix="sext")
    elif op == "shift-right-logical" and w < 32:
        x = add("and", [x, const((1 << w) - 1)], suffix="mask")
    if inside:
        r = add(op, [x, word(ins[1], penguin_dtype(inst.operands[1].shape))], suffix="shift")
    elif outside:
        r = add(op, [x, const(w - 1)], suffix="shift") if op == "shift-right-arithmetic" else const(0)
    else:
        # one unsigned compare of the amount against the width; the engine shifts by min(amount, w - 1)
        u = _unsigned_amount(add, const, ins[1], penguin_dtype(inst.operands[1].shape), w)
        udt = g.values[u].dtype
        amt = add("minimum", [u, const(w - 1, udt)], udt, suffix="amount")
        if udt != "int32":
            amt = add("bitcast-convert", [amt], "int32", suffix="amount_bits")
        r = add(op, [x, amt], suffix="shift")
        if op != "shift-right-arithmetic":
            lt = add("compare", [u, const(w, udt)], "bool", {"direction": "LT", "type": "UNSIGNED"}, "inside")
            r = add("select", [lt, r, const(0)], suffix="out")
    if dt == "int32":
        return g.add_op("copy", [r], [(name, sh, dt)], {}, loc)[0]
    if dt == "uint32":
        return g.add_op("bitcast-convert", [r], [(name, sh, dt)], {}, loc)[0]
    return g.add_op("convert", [r], [(name, sh, dt)], {}, loc)[0]


def _unsigned_amount(add, const, v, dtype, w):
    """The amount as a word holding its value read unsigned at its own width: a uint32 (as is, or the
    bits of an int32) or a non-negative int32 (narrow types: widened, signed ones masked to w bits)."""
    if dtype == "uint32":
        return v
    if dtype == "int32":
        return add("bitcast-convert", [v], "uint32", suffix="amount_u32")
    a = add("convert", [v], "int32", suffix="amount_i32")
    if dtype.startswith("int"):
        a = add("and", [a, const((1 << w) - 1)], suffix="amount_mask")
    return a


def lower_count(g, inst, ins, loc):
    """popcnt / count-leading-zeros of a narrow or 64-bit integer type, or None (32-bit types: one
    op)."""
    et = inst.shape.element_type
    w = WIDTH.get(et)
    if not inst.shape.is_array or (w is None and et not in ("s64", "u64")) or w == 32:
        return None
    sh = tuple(inst.shape.dims)
    dt = penguin_dtype(inst.shape)
    name = inst.name

    def add(kind, xs, suffix, attrs=None, dtype="int32"):
        return g.add_op(kind, xs, [("%s.%s" % (name, suffix), sh, dtype)], attrs or {}, loc)[0]

    if w is None:
        # 64-bit: the value is held in its low 32-bit word (the README's 64-bit rule); the high word
        # is the sign fill of an s64 and zero of a u64, so it adds 32 leading zeros (s64: when not
        # negative) or 32 set bits (s64: when negative). Exact for every value that fits the word.
        if et == "u64":
            x = add("bitcast-convert", [add("convert", [ins[0]], "u32", dtype="uint32")], "i32")
        else:
            x = add("convert", [ins[0]], "i32")
        r = add(inst.opcode, [x], "count")
        c32 = add("constant", [], "c32", {"value": 32})
        if et == "u64":
            hi = c32 if inst.opcode == "count-leading-zeros" else None
        else:
            zero = add("constant", [], "c0", {"value": 0})
            neg = add("compare", [x, zero], "neg", {"direction": "LT", "type": ""}, dtype="bool")
            hi = add("select", [neg, zero, c32] if inst.opcode == "count-leading-zeros" else [neg, c32, zero], "hi")
        if hi is not None:
            r = add("add", [r, hi], "wide")
        return g.add_op("convert", [r], [(name, sh, dt)], {}, loc)[0]
    x = add("convert", [ins[0]], "i32")
    x = add("and", [x, add("constant", [], "mask", {"value": (1 << w) - 1})], "bits")
    r = add(inst.opcode, [x], "count")
    if inst.opcode == "count-leading-zeros":
        r = add("subtract", [r, add("constant", [], "pad", {"value": 32 - w})], "clz")
    return g.add_op("convert", [r], [(name, sh, dt)], {}, loc)[0]


def total_order_compare(g, inst, ins, loc):
    """compare with type=TOTALORDER on floats (-NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN), as
    a signed compare of int32 keys: the float32 bits with the magnitude bits flipped when the sign is
    set. None when the compare is not one (the plain compare follows IEEE order)."""
    from neuronxcc.hlo import interp_attrs as A
    if (A.str_attr(inst, "type") or "").upper() != "TOTALORDER":
        return None
    if not ir.is_float(penguin_dtype(inst.operands[0].shape)):
        return None
    sh = tuple(inst.shape.dims)
    name = inst.name

    def add(kind, xs, suffix, dtype="int32", attrs=None):
        return g.add_op(kind, xs, [("%s.%s" % (name, suffix), sh, dtype)], attrs or {}, loc)[0]

    keys = []
    for k, x in enumerate(ins):
        if g.values[x].dtype != "float32":
            x = add("convert", [x], "f32_%d" % k, "float32")
        b = add("bitcast-convert", [x], "bits%d" % k)
        sign = add("shift-right-arithmetic", [b, add("constant", [], "c31", attrs={"value": 31})], "sign%d" % k)
        flip = add("and", [sign, add("constant", [], "mag", attrs={"value": 0x7FFFFFFF})], "flip%d" % k)
        keys.append(add("xor", [b, flip], "key%d" % k))
    direction = (A.str_attr(inst, "direction") or A.str_attr(inst, "comparison_direction")).upper()
    return g.add_op("compare", keys, [(name, sh, "bool")], {"direction": direction, "type": "SIGNED"}, loc)[0]
