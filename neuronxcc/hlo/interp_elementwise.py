"""Interpreter handlers for the elementwise ops: unary and binary arithmetic,
compare, select, clamp, convert, bitcast-convert, reduce-precision and map
(the leaves and tuple structure are in ``interp_structure``).

Semantics follow XLA's operation semantics as XLA:CPU implements them:
floats narrower than f32 are computed in f32 and rounded to nearest even;
integer arithmetic wraps; integer x/0 = -1 (all ones) and x%0 = x;
INT_MIN/-1 = INT_MIN; shifts by >= the bit width give 0 (or the sign fill
for arithmetic shifts); maximum/minimum propagate NaN; float->int convert
truncates toward zero and saturates, NaN -> 0.

Handlers work on arrays of any shape (the same code serves lifted scalar
computations); they cast their result to the instruction's dtype.
"""
import math

import ml_dtypes
import numpy as np

from neuronxcc.errors import HloVerifyError
from neuronxcc.hlo.interp_attrs import computation, int_attr, str_attr
from neuronxcc.hlo.interp_base import (as_array, cast, dims_of, dtype_of, handler, is_float, is_low_float,
                                       preparer, upcast)

_F32 = np.dtype(np.float32)

# --- unary ------------------------------------------------------------------


def _round_afz(x):
    t = np.trunc(x)
    frac = x - t
    return t + np.where(np.abs(frac) >= 0.5, np.sign(x), 0).astype(x.dtype)


def _sign(x):
    if x.dtype.kind in "iu":
        return np.sign(x)
    return np.where((x == 0) | np.isnan(x), x, np.sign(x))


def _not(x):
    if x.dtype == np.bool_:
        return np.logical_not(x)
    return np.invert(x)


_erf64 = np.frompyfunc(math.erf, 1, 1)


def _erf(x):
    # frompyfunc gives a Python float (not an array) for a 0-d operand: asarray takes both
    return np.asarray(_erf64(np.asarray(x, np.float64)), np.float64)


def _logistic(x):
    return 1.0 / (1.0 + np.exp(-x))


def _rsqrt(x):
    return 1.0 / np.sqrt(x)


def _popcnt(x):
    return np.bitwise_count(x.astype(_unsigned(x.dtype)) if x.dtype.kind == "i" else x)


def _clz(x):
    bits = x.dtype.itemsize * 8
    u = x.astype(np.dtype("u%d" % x.dtype.itemsize)).astype(np.uint64)
    # binary search for the highest set bit
    length = np.zeros(u.shape, np.int64)
    v = u.copy()
    step = 32
    while step:
        hi = v >> np.uint64(step)
        has = hi != 0
        length = np.where(has, length + step, length)
        v = np.where(has, hi, v)
        step //= 2
    length = np.where(u != 0, length + 1, 0)
    return bits - length


def _real(x):
    return np.real(x)


def _imag(x):
    if np.iscomplexobj(x):
        return np.imag(x)
    return np.zeros_like(x)


UNARY = {
    "abs": np.abs,
    "ceil": np.ceil,
    "floor": np.floor,
    "round-nearest-afz": _round_afz,
    "round-nearest-even": np.rint,
    "sign": _sign,
    "negate": np.negative,
    "not": _not,
    "exponential": np.exp,
    "exponential-minus-one": np.expm1,
    "log": np.log,
    "log-plus-one": np.log1p,
    "logistic": _logistic,
    "sqrt": np.sqrt,
    "rsqrt": _rsqrt,
    "cbrt": np.cbrt,
    "tanh": np.tanh,
    "sine": np.sin,
    "cosine": np.cos,
    "tan": np.tan,
    "acos": np.arccos,
    "acosh": np.arccosh,
    "asin": np.arcsin,
    "asinh": np.arcsinh,
    "atanh": np.arctanh,
    "cosh": np.cosh,
    "sinh": np.sinh,
    "erf": _erf,
    "is-finite": np.isfinite,
    "popcnt": _popcnt,
    "count-leading-zeros": _clz,
    "real": _real,
    "imag": _imag,
}

_FLOAT_ONLY = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "sqrt", "rsqrt",
               "cbrt", "tanh", "sine", "cosine", "tan", "acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh",
               "erf", "is-finite", "ceil", "floor",
               "round-nearest-afz", "round-nearest-even"}


# Transcendentals XLA:CPU evaluates to (about) correct rounding in f32: numpy's own f32
# kernels are off by up to ~1 ulp (f32 power by more), which a rotary embedding's
# position * inv_freq amplifies past the f32 tolerance. These run in f64 and round once.
_VIA_F64 = {"exponential", "exponential-minus-one", "log", "log-plus-one", "logistic", "rsqrt", "cbrt",
            "tanh", "sine", "cosine", "tan", "power", "atan2", "acos", "acosh", "asin", "asinh", "atanh", "cosh",
            "sinh"}
_F64 = np.dtype(np.float64)


def _f64_then(fn, dt):
    """fn evaluated in f64 on f32-or-narrower floats, rounded to f32 and then to ``dt``."""
    if dt == _F32:
        return lambda *xs: fn(*[x.astype(_F64) for x in xs]).astype(_F32)
    return lambda *xs: fn(*[x.astype(_F64) for x in xs]).astype(_F32).astype(dt)


def _unary_fn(opc, in_dt, dt):
    fn = UNARY[opc]
    if opc in _VIA_F64 and is_float(in_dt) and in_dt.itemsize <= 4:
        return _f64_then(fn, dt)
    if is_low_float(in_dt):
        return lambda x: fn(x.astype(_F32))
    return fn


@handler("unary")
def h_unary(ev, inst, args):
    x = np.asarray(args[0])
    dt = dtype_of(inst.shape)
    if inst.opcode in _FLOAT_ONLY and x.dtype.kind in "iub":
        if inst.opcode in ("ceil", "floor", "round-nearest-afz", "round-nearest-even"):
            return cast(x, dt)
        raise HloVerifyError("%s %s: operand must be floating point, got %s" % (inst.opcode, inst.name, x.dtype))
    return as_array(_unary_fn(inst.opcode, x.dtype, dt)(x), dt)


@preparer("unary")
def p_unary(ev, inst):
    dt = dtype_of(inst.shape)
    in_dt = dtype_of(inst.operands[0].shape)
    if inst.opcode in _FLOAT_ONLY and in_dt.kind in "iub":
        return None
    fn = _unary_fn(inst.opcode, in_dt, dt)
    return lambda args: as_array(fn(args[0]), dt)


# --- binary -----------------------------------------------------------------


def _int_div(x, y):
    zero = y == 0
    safe = np.where(zero, 1, y).astype(y.dtype)
    if x.dtype.kind == "i":
        info = np.iinfo(x.dtype)
        ovf = (x == info.min) & (y == -1)
        safe = np.where(ovf, 1, safe).astype(y.dtype)
    r = np.fmod(x, safe)
    q = ((x - r) // safe).astype(x.dtype)
    minus_one = np.array(-1).astype(x.dtype) if x.dtype.kind == "i" else np.array(np.iinfo(x.dtype).max, x.dtype)
    return np.where(zero, minus_one, q)


def _int_rem(x, y):
    zero = y == 0
    safe = np.where(zero, 1, y).astype(y.dtype)
    if x.dtype.kind == "i":
        info = np.iinfo(x.dtype)
        safe = np.where((x == info.min) & (y == -1), 1, safe).astype(y.dtype)
    return np.where(zero, x, np.fmod(x, safe))


def _int_pow(x, y):
    # XLA: x**y by repeated squaring (wrapping); negative exponents give 1 when x == 1, else 0.
    e = np.where(y < 0, 0, y).astype(np.uint64)
    acc = np.ones(np.broadcast_shapes(x.shape, y.shape), x.dtype)
    base = np.broadcast_to(x, acc.shape).copy()
    e = np.broadcast_to(e, acc.shape).copy()
    while np.any(e):
        odd = (e & np.uint64(1)) != 0
        acc = np.where(odd, acc * base, acc)
        base = base * base
        e = e >> np.uint64(1)
    neg = y < 0
    if np.any(neg):
        acc = np.where(neg, np.where(x == 1, 1, 0).astype(x.dtype), acc)
    return acc


def _unsigned(dt):
    return np.dtype("u%d" % dt.itemsize)


def _signed(dt):
    return np.dtype("i%d" % dt.itemsize)


def _shift_amount(x, s):
    bits = x.dtype.itemsize * 8
    su = s if s.dtype.kind == "u" else s.astype(_unsigned(s.dtype))
    oob = su >= bits
    ut = _unsigned(x.dtype)
    amt = np.where(oob, 0, su)
    if amt.dtype != ut:
        amt = amt.astype(ut)
    return oob, amt


def _uniform(a):
    """The single value of an array that is one value broadcast (all strides 0), else None."""
    if a.ndim == 0 or (a.size and not any(a.strides)):
        return a.reshape(-1)[0]
    return None


def _logical_shift(shift):
    """shift-left / shift-right-logical: amounts >= the bit width (or negative) give 0."""
    def fn(x, s):
        s0 = _uniform(s)
        if s0 is not None and x.dtype.kind == "u":       # fast path: one in-range amount, unsigned
            if 0 <= int(s0) < x.dtype.itemsize * 8:
                return shift(x, x.dtype.type(s0))
            return np.zeros(np.broadcast_shapes(x.shape, s.shape), x.dtype)
        oob, amt = _shift_amount(x, s)
        ut = _unsigned(x.dtype)
        xu = x if x.dtype == ut else x.astype(ut)
        r = np.where(oob, ut.type(0), shift(xu, amt))
        return r if r.dtype == x.dtype else r.astype(x.dtype)
    return fn


_shl = _logical_shift(np.left_shift)
_shr_logical = _logical_shift(np.right_shift)


def _shr_arith(x, s):
    oob, amt = _shift_amount(x, s)
    xs = x.astype(_signed(x.dtype))
    fill = np.where(xs < 0, -1, 0).astype(xs.dtype)
    return np.where(oob, fill, np.right_shift(xs, amt.astype(xs.dtype))).astype(x.dtype)


def _divide(x, y):
    if x.dtype.kind in "iu":
        return _int_div(x, y)
    return np.divide(x, y)


def _remainder(x, y):
    if x.dtype.kind in "iu":
        return _int_rem(x, y)
    return np.fmod(x, y)


def _power(x, y):
    if x.dtype.kind in "iu":
        return _int_pow(x, y)
    return np.power(x, y)


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": _divide,
    "remainder": _remainder,
    "power": _power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "and": np.bitwise_and,
    "or": np.bitwise_or,
    "xor": np.bitwise_xor,
    "shift-left": _shl,
    "shift-right-logical": _shr_logical,
    "shift-right-arithmetic": _shr_arith,
    "atan2": np.arctan2,
}

_BOOL_ARITH = {"add": np.logical_or, "multiply": np.logical_and, "subtract": np.logical_xor,
               "maximum": np.logical_or, "minimum": np.logical_and}


def _binary_fn(opc, in_dt, dt):
    if in_dt == np.bool_ and opc in _BOOL_ARITH:
        return _BOOL_ARITH[opc]
    fn = BINARY[opc]
    if opc in _VIA_F64 and is_float(in_dt) and in_dt.itemsize <= 4:
        return _f64_then(fn, dt)
    if is_low_float(in_dt):
        return lambda x, y: fn(x.astype(_F32), y.astype(_F32))
    return fn


@handler("binary")
def h_binary(ev, inst, args):
    x, y = np.asarray(args[0]), np.asarray(args[1])
    dt = dtype_of(inst.shape)
    return as_array(_binary_fn(inst.opcode, x.dtype, dt)(x, y), dt)


@preparer("binary")
def p_binary(ev, inst):
    dt = dtype_of(inst.shape)
    fn = _binary_fn(inst.opcode, dtype_of(inst.operands[0].shape), dt)
    return lambda args: as_array(fn(args[0], args[1]), dt)


# --- compare ------------------------------------------------------------------

_CMP = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
        "GT": np.greater, "GE": np.greater_equal}


def total_order_key(x):
    """Integers ordering floats as XLA's TOTALORDER: -NaN < -inf < ... < -0 < +0 < ... < inf < NaN."""
    x = np.asarray(x)
    it = _signed(x.dtype)
    b = np.ascontiguousarray(x).view(it)
    return np.where(b < 0, b ^ np.array(np.iinfo(it).max, it), b)


def compare(x, y, direction, ctype=None):
    fn = _CMP[direction]
    if ctype == "TOTALORDER" and is_float(x.dtype):
        return fn(total_order_key(x), total_order_key(y))
    if ctype == "UNSIGNED" and x.dtype.kind == "i":
        x, y = x.astype(_unsigned(x.dtype)), y.astype(_unsigned(y.dtype))
    elif ctype == "SIGNED" and x.dtype.kind == "u":
        x, y = x.astype(_signed(x.dtype)), y.astype(_signed(y.dtype))
    return fn(upcast(x), upcast(y))


@handler("compare")
def h_compare(ev, inst, args):
    direction = str_attr(inst, "direction")
    if direction not in _CMP:
        raise HloVerifyError("compare %s: bad direction %r" % (inst.name, direction))
    ctype = str_attr(inst, "type", None) or str_attr(inst, "comparison_type", None)
    return np.asarray(compare(np.asarray(args[0]), np.asarray(args[1]), direction, ctype))


@preparer("compare")
def p_compare(ev, inst):
    direction = str_attr(inst, "direction")
    ctype = str_attr(inst, "type", None) or str_attr(inst, "comparison_type", None)
    in_dt = dtype_of(inst.operands[0].shape)
    if direction not in _CMP:
        return None
    fn = _CMP[direction]
    b = np.dtype(np.bool_)
    if (ctype == "TOTALORDER" and is_float(in_dt)) or (ctype == "UNSIGNED" and in_dt.kind == "i") or \
            (ctype == "SIGNED" and in_dt.kind == "u") or is_low_float(in_dt):
        return lambda args: as_array(compare(args[0], args[1], direction, ctype), b)
    return lambda args: as_array(fn(args[0], args[1]), b)


# --- select, clamp ------------------------------------------------------------


@handler("select")
def h_select(ev, inst, args):
    p, a, b = args
    return cast(np.where(p, a, b), dtype_of(inst.shape))


@preparer("select")
def p_select(ev, inst):
    dt = dtype_of(inst.shape)
    return lambda args: as_array(np.where(args[0], args[1], args[2]), dt)


@handler("clamp")
def h_clamp(ev, inst, args):
    lo, x, hi = (upcast(a) for a in args)
    return cast(np.minimum(np.maximum(x, lo), hi), dtype_of(inst.shape))


# --- conversions ----------------------------------------------------------------


_NARROW_INTS = frozenset(np.dtype(getattr(ml_dtypes, n)) for n in ("int4", "uint4", "int2", "uint2")
                         if hasattr(ml_dtypes, n))


def convert(x, dt):
    """XLA convert of array ``x`` to dtype ``dt``."""
    x = np.asarray(x)
    src = x.dtype
    if src == dt:
        return x
    if dt == np.bool_:
        return np.asarray(x != 0) if not is_low_float(src) else np.asarray(x.astype(np.float32) != 0)
    if is_float(src) and (dt.kind in "iu" or dt in _NARROW_INTS):
        # saturating, NaN -> 0 (XLA:CPU's float -> int, sub-byte integers included)
        info = np.iinfo(dt) if dt.kind in "iu" else ml_dtypes.iinfo(dt)
        t = np.trunc(x.astype(np.float64))
        t = np.where(np.isnan(t), 0, t)
        hi_f = float(info.max)
        over = t >= hi_f
        under = t <= float(info.min)
        t = np.where(over | under, 0, t)
        out = t.astype(dt)
        out = np.where(over, info.max, out)
        out = np.where(under, info.min, out)
        return out.astype(dt)
    if src == np.bool_:
        return x.astype(dt)
    return x.astype(dt)


@handler("convert")
def h_convert(ev, inst, args):
    return np.asarray(convert(args[0], dtype_of(inst.shape)))


@preparer("convert")
def p_convert(ev, inst):
    dt = dtype_of(inst.shape)
    return lambda args: as_array(convert(args[0], dt), dt)


@handler("bitcast_convert")
def h_bitcast_convert(ev, inst, args):
    x = np.asarray(args[0], order="C")   # (np.ascontiguousarray would make a scalar 1-d)
    dt = dtype_of(inst.shape)
    out_dims = dims_of(inst.shape)
    if x.dtype.itemsize == dt.itemsize:
        return x.view(dt).reshape(x.shape)
    if x.dtype.itemsize > dt.itemsize:
        return x.reshape(x.shape + (1,)).view(dt).reshape(out_dims)
    return x.view(dt).reshape(out_dims)


_FLOAT_LAYOUT = {np.dtype(np.float32): (8, 23, np.uint32), np.dtype(np.float64): (11, 52, np.uint64)}


def reduce_precision(x, exponent_bits, mantissa_bits):
    """Round ``x`` to a float with the given exponent and mantissa widths (XLA's reduce-precision)."""
    x = np.asarray(x)
    orig = x.dtype
    if is_low_float(orig):
        x = x.astype(np.float32)
    src_exp, src_mant, ut = _FLOAT_LAYOUT[x.dtype]
    nbits = x.dtype.itemsize * 8
    bits = np.ascontiguousarray(x).view(ut).copy()
    one = ut(1)
    if mantissa_bits < src_mant:
        shift = ut(src_mant - mantissa_bits)
        last_bit_mask = one << shift
        base_bias = (last_bit_mask >> one) - one
        last_bit = (bits & last_bit_mask) >> shift
        bits = (bits + last_bit + base_bias) & ~(last_bit_mask - one)
    if exponent_bits < src_exp:
        sign_mask = one << ut(nbits - 1)
        exp_mask = ((one << ut(src_exp)) - one) << ut(src_mant)
        src_bias = (1 << (src_exp - 1)) - 1
        red_bias = (1 << (exponent_bits - 1)) - 1
        max_exp = ut(src_bias + red_bias) << ut(src_mant)
        min_exp = ut(src_bias - red_bias) << ut(src_mant)
        e = bits & exp_mask
        signed_zero = bits & sign_mask
        signed_inf = signed_zero | exp_mask
        bits = np.where(e > max_exp, signed_inf, np.where(e <= min_exp, signed_zero, bits))
    out = bits.astype(ut).view(x.dtype).reshape(x.shape)
    out = np.where(np.isnan(x), x, out)
    return cast(out, orig)


@handler("reduce_precision")
def h_reduce_precision(ev, inst, args):
    e = int_attr(inst, "exponent_bits")
    m = int_attr(inst, "mantissa_bits")
    return cast(reduce_precision(args[0], e, m), dtype_of(inst.shape))


# --- map ----------------------------------------------------------------------


@handler("map")
def h_map(ev, inst, args):
    comp = computation(ev, inst, "to_apply")
    out = ev.apply(comp, list(args))
    return np.asarray(cast(out, dtype_of(inst.shape)), order="C")
