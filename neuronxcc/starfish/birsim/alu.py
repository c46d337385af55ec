"""Element math of birsim: ALU ops, reduce ops and ScalarE activation functions.

Two numeric domains:
  * fp32 (``alu_f``, ``reduce_f``, ``act``): float32 numpy arrays; results are
    float32 (comparisons and logical ops give 1.0 / 0.0). ``mod`` is C fmod
    (sign of the dividend); ``divide`` is IEEE division.
  * exact integer (``alu_i``, ``reduce_i``): int64 arrays, wrapped to the
    destination dtype on store. ``divide`` truncates toward zero, x/0 = -1;
    ``mod`` has the dividend's sign, x%0 = x; ``pow`` with a negative exponent
    gives 0 except for bases 1 and -1; shifts by >= the operand width give 0
    (arithmetic right shift: the sign). ``width`` is the first operand's bits.

The ScalarE functions are evaluated in fp32 except ``erf`` (and the gelu
family built on it), computed in float64 with a rational approximation of
relative error < 1.2e-7 and rounded to fp32. Hardware uses piecewise
polynomials; the results agree to fp32 rounding, not bit for bit.
"""
import numpy as np

from neuronxcc.starfish.birsim import _pe
from neuronxcc.starfish.birsim._elementwise import gelu_f32 as _gelu_f32

__all__ = ["alu_f", "alu_i", "reduce_f", "reduce_i", "act", "compare_f", "matmul_f"]

_F = np.float32


def _erf64(x):
    """erf in float64 (Numerical Recipes erfc Chebyshev fit, |rel err| < 1.2e-7)."""
    x = np.asarray(x, np.float64)
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))))))
    erfc = t * np.exp(poly)
    return np.where(x >= 0, 1.0 - erfc, erfc - 1.0)


def _sigmoid(x):
    return (_F(1) / (_F(1) + np.exp(-x))).astype(_F, copy=False)


def _gelu(x):
    """0.5 x (1 + erf(x / sqrt 2)) in float64 with _erf64's fit, rounded to fp32: the typed passes of
    ``_elementwise.gelu_f32`` (the numpy expression ``(0.5 * x64 * (1 + _erf64(x / np.sqrt(2)))).astype(
    float32)`` operation for operation, exp included, without its temporaries)."""
    return _gelu_f32(x)


def _gelu_tanh(x):
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) in fp32: the float32 operations of
    ``_F(0.5) * x * (_F(1) + np.tanh(_F(0.7978845608028654) * (x + _F(0.044715) * x * x * x)))``
    in that order and operand order, in two arrays instead of one temporary per operation."""
    t = np.multiply(_F(0.044715), x, dtype=_F)
    np.multiply(t, x, out=t)
    np.multiply(t, x, out=t)
    np.add(x, t, out=t)
    np.multiply(_F(0.7978845608028654), t, out=t)
    np.tanh(t, out=t)
    np.add(_F(1), t, out=t)
    u = np.multiply(_F(0.5), x, dtype=_F)
    np.multiply(u, t, out=u)
    return u


def _gelu_dx(x):
    xd = x.astype(np.float64)
    return (0.5 * (1.0 + _erf64(xd / np.sqrt(2.0))) + xd * np.exp(-0.5 * xd * xd) / np.sqrt(2 * np.pi)).astype(_F)


def _softplus(x):
    return np.logaddexp(_F(0), x).astype(_F, copy=False)


_ACT = {
    "copy": lambda x, a: x,
    "identity": lambda x, a: x,
    "exp": lambda x, a: np.exp(x),
    "log": lambda x, a: np.log(x),
    "tanh": lambda x, a: np.tanh(x),
    "sigmoid": lambda x, a: _sigmoid(x),
    "relu": lambda x, a: np.maximum(x, _F(0)),
    "gelu": lambda x, a: _gelu(x),
    "gelu_dx": lambda x, a: _gelu_dx(x),
    "gelu_apprx_tanh": lambda x, a: _gelu_tanh(x),
    "gelu_apprx_sigmoid": lambda x, a: x * _sigmoid(_F(1.702) * x),
    "silu": lambda x, a: x * _sigmoid(x),
    "silu_dx": lambda x, a: (lambda s: s * (_F(1) + x * (_F(1) - s)))(_sigmoid(x)),
    "erf": lambda x, a: _erf64(x).astype(_F),
    "erf_dx": lambda x, a: (2.0 / np.sqrt(np.pi) * np.exp(-(x.astype(np.float64) ** 2))).astype(_F),
    "sqrt": lambda x, a: np.sqrt(x),
    "rsqrt": lambda x, a: _F(1) / np.sqrt(x),
    "reciprocal": lambda x, a: _F(1) / x,
    "square": lambda x, a: x * x,
    "abs": lambda x, a: np.abs(x),
    "sign": lambda x, a: np.sign(x),
    "sin": lambda x, a: np.sin(x),
    "arctan": lambda x, a: np.arctan(x),
    "softplus": lambda x, a: _softplus(x),
    "mish": lambda x, a: x * np.tanh(_softplus(x)),
    "lrelu": lambda x, a: np.where(x > 0, x, _F(a) * x),
    "prelu": lambda x, a: np.where(x > 0, x, _F(a) * x),
}


def act(func, x, alpha=0.01):
    """func(x) in fp32; callers run under np.errstate(all="ignore") (Executor.run)."""
    return np.asarray(_ACT[func](x.astype(_F, copy=False), alpha), dtype=_F)


def compare_f(op, a, b):
    if op == "eq":
        return a == b
    if op == "ne":
        return a != b
    if op == "lt":
        return a < b
    if op == "le":
        return a <= b
    if op == "gt":
        return a > b
    if op == "ge":
        return a >= b
    raise KeyError(op)


def alu_f(op, a, b):
    """fp32 ALU op (a, b float32 arrays or scalars broadcasting)."""
    # callers run under np.errstate(all="ignore") (Executor.run)
    if op == "add":
        r = np.add(a, b, dtype=_F)
    elif op == "subtract":
        r = np.subtract(a, b, dtype=_F)
    elif op == "rsub":
        r = np.subtract(b, a, dtype=_F)
    elif op == "mult":
        r = np.multiply(a, b, dtype=_F)
    elif op == "divide":
        r = np.divide(a, b, dtype=_F)
    elif op == "max":
        r = np.maximum(a, b, dtype=_F)
    elif op == "min":
        r = np.minimum(a, b, dtype=_F)
    elif op == "pow":
        r = np.power(a, b, dtype=_F)
    elif op == "mod":
        r = np.fmod(a, b, dtype=_F)
    elif op == "average":
        r = np.multiply(np.add(a, b, dtype=_F), _F(0.5), dtype=_F)
    elif op == "bypass":
        r = np.broadcast_to(np.asarray(a, _F), np.broadcast(a, b).shape).copy()
    elif op == "abs_max":
        r = np.maximum(np.abs(a), np.abs(b), dtype=_F)
    elif op in ("eq", "ne", "lt", "le", "gt", "ge"):
        r = compare_f(op, a, b).astype(_F)
    elif op == "logical_and":
        r = ((a != 0) & (b != 0)).astype(_F)
    elif op == "logical_or":
        r = ((a != 0) | (b != 0)).astype(_F)
    elif op == "logical_xor":
        r = ((a != 0) ^ (b != 0)).astype(_F)
    else:
        raise KeyError("ALU op %s is not defined on fp32 data" % op)
    return r


def _idiv(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    safe = np.where(b == 0, 1, b)
    q = np.abs(a) // np.abs(safe)
    q = np.where((a < 0) != (safe < 0), -q, q)
    return np.where(b == 0, -1, q)


def _imod(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    safe = np.where(b == 0, 1, b)
    r = a - _idiv(a, safe) * safe
    return np.where(b == 0, a, r)


def _ipow(a, b):
    a, b = np.broadcast_arrays(np.asarray(a, np.int64), np.asarray(b, np.int64))
    pos = np.power(a, np.maximum(b, 0))
    neg = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(b >= 0, pos, neg)


def alu_i(op, a, b, width=32):
    """Exact integer ALU op on int64 arrays (see module doc)."""
    a = np.asarray(a, np.int64)
    b = np.asarray(b, np.int64)
    mask = (1 << width) - 1
    if op == "add":
        return a + b
    if op == "subtract":
        return a - b
    if op == "rsub":
        return b - a
    if op == "mult":
        return a * b
    if op == "divide":
        return _idiv(a, b)
    if op == "mod":
        return _imod(a, b)
    if op == "max":
        return np.maximum(a, b)
    if op == "min":
        return np.minimum(a, b)
    if op == "pow":
        return _ipow(a, b)
    if op == "average":
        return (a + b) >> 1
    if op == "bypass":
        return a + 0 * b
    if op == "abs_max":
        return np.maximum(np.abs(a), np.abs(b))
    if op == "bitwise_and":
        return a & b
    if op == "bitwise_or":
        return a | b
    if op == "bitwise_xor":
        return a ^ b
    if op in ("arith_shift_left", "logical_shift_left"):
        sh = np.minimum(np.maximum(b, 0), 63)
        return np.where(b >= width, 0, (a << sh) & mask)
    if op == "arith_shift_right":
        sh = np.minimum(np.maximum(b, 0), 63)
        return np.where(b >= width, np.where(a < 0, -1, 0), a >> sh)
    if op == "logical_shift_right":
        sh = np.minimum(np.maximum(b, 0), 63)
        return np.where(b >= width, 0, (a & mask) >> sh)
    if op in ("eq", "ne", "lt", "le", "gt", "ge"):
        return compare_f(op, a, b).astype(np.int64)
    if op == "logical_and":
        return ((a != 0) & (b != 0)).astype(np.int64)
    if op == "logical_or":
        return ((a != 0) | (b != 0)).astype(np.int64)
    if op == "logical_xor":
        return ((a != 0) ^ (b != 0)).astype(np.int64)
    raise KeyError(op)


def matmul_f(s, m):
    """The PE's s.T @ m for fp32 s [K, M], m [K, N] (fp32 result): each result is the fp32 sum
    over k in order of the fp32 products (none fused), ``_pe``'s kernel at every size, as the PE
    accumulates in fp32. Operands that do not pair (other ranks, K mismatch): np.matmul's error."""
    if s.ndim == 2 and m.ndim == 2 and s.shape[0] == m.shape[0]:
        return _pe.matmul(s, m)
    return np.matmul(s.T, m)


def reduce_f(op, x, axis):
    # callers run under np.errstate(all="ignore") (Executor.run)
    if op == "add":
        return np.sum(x, axis=axis, dtype=_F)
    if op == "max":
        return np.max(x, axis=axis)
    if op == "min":
        return np.min(x, axis=axis)
    if op == "mult":
        return np.prod(x, axis=axis, dtype=_F)
    if op == "logical_and":
        return np.all(x != 0, axis=axis).astype(_F)
    if op == "logical_or":
        return np.any(x != 0, axis=axis).astype(_F)
    raise KeyError("reduce op %s is not defined on fp32 data" % op)


def reduce_i(op, x, axis):
    if op == "add":
        return np.sum(x, axis=axis, dtype=np.int64)
    if op == "max":
        return np.max(x, axis=axis)
    if op == "min":
        return np.min(x, axis=axis)
    if op == "mult":
        return np.prod(x, axis=axis, dtype=np.int64)
    if op == "bitwise_and":
        return np.bitwise_and.reduce(x, axis=axis)
    if op == "bitwise_or":
        return np.bitwise_or.reduce(x, axis=axis)
    if op == "logical_and":
        return np.all(x != 0, axis=axis).astype(np.int64)
    if op == "logical_or":
        return np.any(x != 0, axis=axis).astype(np.int64)
    raise KeyError(op)
