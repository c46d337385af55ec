"""nl element-wise math, reductions, matmul, transpose, where, softmax and norms.

Binary ops: tile (op) tile -> ``tensor_tensor`` on VectorE; a [P, 1] column or a scalar as one
side -> ``tensor_scalar`` (the column broadcast along the free axes). Unary math that ScalarE has
as an activation function -> ``activation``; the rest is composed of ALU ops. ``OPS`` maps each
function (and the numpy ufunc with the same meaning) to its ALU / activation / reduce name, which
``nki.isa`` reads from ``op=`` arguments.
"""
import builtins as _bi
import math as _m

import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import dtypes as _D
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.tensor import Tensor as _Tensor

__all__ = ["OPS", "op_name"]
OPS = {}


def _reg(f, alu=None, act=None, red=None, np_fns=()):
    info = {"alu": alu, "act": act, "reduce": red, "name": f.__name__}
    OPS[f] = info
    for g in np_fns:
        OPS.setdefault(g, info)
    __all__.append(f.__name__)
    return f


def op_name(op, kind):
    """The ALU ('alu'), activation ('act') or reduce ('reduce') name of OP (an nl function or numpy ufunc)."""
    info = OPS.get(op)
    if info is None and isinstance(op, str):
        return op
    if info is None or info.get(kind) is None:
        raise _E.err_invalid_argument("%s is not a supported %s operator" % (getattr(op, "__name__", op),
                                                                             {"alu": "ALU", "act": "activation",
                                                                              "reduce": "reduce"}[kind]))
    return info[kind]


def _col(t):
    """True when T is a [P, 1] column (broadcast along free)."""
    return isinstance(t, _Tensor) and len(t.shape) >= 1 and _bi.all(s == 1 for s in t.shape[1:])


def _binary(alu, x, y, dtype, mask, api, engine="DVE", out_dtype=None):
    sx, sy = _ops.is_scalar(x), _ops.is_scalar(y)
    if sx and sy:
        raise _E.err_invalid_argument("%s needs at least one tile operand" % api)
    dts = [_D.scalar_dtype(v) if _ops.is_scalar(v) else v.dtype for v in (x, y)]
    dt = _D.np_dtype(dtype) if dtype is not None else (out_dtype or _D.promote(*dts))
    if sx or sy:
        t, s, rev = (y, x, True) if sx else (x, y, False)
        _ops.tile_operand(t, api, "x")
        out = _ops.new_tile(t.shape, dt, "SBUF", api)
        inst = _ops.emit("tensor_scalar", engine, [out], [t], {"op0": alu, "operand0": float(s), "reverse0": rev},
                         mask)
        return _ops.mark_producer(out, inst)
    _ops.tile_operand(x, api, "x")
    _ops.tile_operand(y, api, "y")
    x, y = _ops.rank_align(x, y)
    from neuronxcc.nki._trace.index import _broadcast
    shape = _broadcast(x.shape, y.shape)
    if x.shape[0] != y.shape[0]:
        if x.shape[0] == 1:
            x = _ops.partition_broadcast(x, y.shape[0])
        elif y.shape[0] == 1:
            y = _ops.partition_broadcast(y, x.shape[0])
        else:
            raise _E.err_num_partition_mismatch("number of partitions mismatch in parameters (x%s, y%s) of '%s'"
                                                % (list(x.shape), list(y.shape), api))
    out = _ops.new_tile(shape, dt, "SBUF", api)
    if _col(y) and not _col(x) and alu not in ("pow",):
        inst = _ops.emit("tensor_scalar", engine, [out], [x, y],
                         {"op0": alu, "operand0_ap": True, "reverse0": False}, mask, links=_col_links(out, x, y))
    elif _col(x) and not _col(y) and alu not in ("pow",):
        inst = _ops.emit("tensor_scalar", engine, [out], [y, x],
                         {"op0": alu, "operand0_ap": True, "reverse0": True}, mask, links=_col_links(out, y, x))
    else:
        inst = _ops.emit("tensor_tensor", engine, [out], [_ops.expand(x, shape), _ops.expand(y, shape)],
                         {"op": alu}, mask)
    return _ops.mark_producer(out, inst)


def _col_links(out, t, col):
    groups = [[(0, r), (1, r)] for r in range(len(out.shape))]
    groups[0].append((2, 0))
    return groups


def _mk_binary(name, alu, np_fns=(), bool_out=False):
    def f(x, y, *, dtype=None, mask=None, **kwargs):
        return _binary(alu, x, y, dtype, mask, name, out_dtype=np.dtype(np.uint8) if bool_out else None)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "Element-wise %s of x and y (promoted dtype unless dtype=)." % name
    return _reg(f, alu=alu, red=alu if alu in ("add", "max", "min", "mult", "bitwise_and", "bitwise_or",
                                                "logical_and", "logical_or") else None, np_fns=np_fns)


add = _mk_binary("add", "add", (np.add,))
subtract = _mk_binary("subtract", "subtract", (np.subtract,))
multiply = _mk_binary("multiply", "mult", (np.multiply,))
divide = _mk_binary("divide", "divide", (np.divide, np.true_divide))
maximum = _mk_binary("maximum", "max", (np.maximum,))
minimum = _mk_binary("minimum", "min", (np.minimum,))
power = _mk_binary("power", "pow", (np.power,))
fmod = _mk_binary("fmod", "mod", (np.fmod,))
mod = _mk_binary("mod", "mod", (np.mod,))
bitwise_and = _mk_binary("bitwise_and", "bitwise_and", (np.bitwise_and,))
bitwise_or = _mk_binary("bitwise_or", "bitwise_or", (np.bitwise_or,))
bitwise_xor = _mk_binary("bitwise_xor", "bitwise_xor", (np.bitwise_xor,))
left_shift = _mk_binary("left_shift", "logical_shift_left", (np.left_shift,))
right_shift = _mk_binary("right_shift", "logical_shift_right", (np.right_shift,))
equal = _mk_binary("equal", "eq", (np.equal,), True)
not_equal = _mk_binary("not_equal", "ne", (np.not_equal,), True)
greater = _mk_binary("greater", "gt", (np.greater,), True)
greater_equal = _mk_binary("greater_equal", "ge", (np.greater_equal,), True)
less = _mk_binary("less", "lt", (np.less,), True)
less_equal = _mk_binary("less_equal", "le", (np.less_equal,), True)
logical_and = _mk_binary("logical_and", "logical_and", (np.logical_and,), True)
logical_or = _mk_binary("logical_or", "logical_or", (np.logical_or,), True)
logical_xor = _mk_binary("logical_xor", "logical_xor", (np.logical_xor,), True)
for _f in (equal, not_equal, greater, greater_equal, less, less_equal, logical_and, logical_or, logical_xor):
    _f.__kwdefaults__ = {"dtype": np.bool_, "mask": None}


def _activation(func, x, dtype, mask, api, scale=1.0, bias=0.0):
    _ops.tile_operand(x, api, "x")
    out = _ops.new_tile(x.shape, dtype or x.dtype, "SBUF", api)
    inst = _ops.emit("activation", "ACT", [out], [x], {"func": func, "scale": float(scale), "bias": float(bias)},
                     mask)
    return _ops.mark_producer(out, inst)


def _mk_act(name, func, np_fns=()):
    def f(x, *, dtype=None, mask=None, **kwargs):
        return _activation(func, x, dtype, mask, name)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "Element-wise %s on ScalarE (activation function %s)." % (name, func)
    return _reg(f, act=func, np_fns=np_fns)


exp = _mk_act("exp", "exp", (np.exp,))
log = _mk_act("log", "log", (np.log,))
tanh = _mk_act("tanh", "tanh", (np.tanh,))
sigmoid = _mk_act("sigmoid", "sigmoid")
relu = _mk_act("relu", "relu")
gelu = _mk_act("gelu", "gelu")
gelu_dx = _mk_act("gelu_dx", "gelu_dx")
gelu_apprx_tanh = _mk_act("gelu_apprx_tanh", "gelu_apprx_tanh")
gelu_apprx_sigmoid = _mk_act("gelu_apprx_sigmoid", "gelu_apprx_sigmoid")
silu = _mk_act("silu", "silu")
silu_dx = _mk_act("silu_dx", "silu_dx")
erf = _mk_act("erf", "erf")
erf_dx = _mk_act("erf_dx", "erf_dx")
sqrt = _mk_act("sqrt", "sqrt", (np.sqrt,))
rsqrt = _mk_act("rsqrt", "rsqrt")
square = _mk_act("square", "square", (np.square,))
sign = _mk_act("sign", "sign", (np.sign,))
sin = _mk_act("sin", "sin", (np.sin,))
arctan = _mk_act("arctan", "arctan", (np.arctan,))
softplus = _mk_act("softplus", "softplus")
mish = _mk_act("mish", "mish")
abs = _mk_act("abs", "abs", (np.abs, np.absolute))


def copy_op(x, *, dtype=None, mask=None, **kwargs):
    return _activation("copy", x, dtype, mask, "copy")


OPS[copy_op] = {"alu": "bypass", "act": "copy", "reduce": None, "name": "copy"}


def reciprocal(x, *, dtype=None, mask=None, **kwargs):
    """1/x on VectorE (divide)."""
    return _binary("divide", 1.0, x, dtype or x.dtype, mask, "reciprocal")


_reg(reciprocal, act="reciprocal", np_fns=(np.reciprocal,))


def negative(x, *, dtype=None, mask=None, **kwargs):
    return _binary("mult", x, -1.0, dtype or x.dtype, mask, "negative")


_reg(negative, np_fns=(np.negative,))


def cos(x, *, dtype=None, mask=None, **kwargs):
    return _activation("sin", x, dtype, mask, "cos", bias=_m.pi / 2)


_reg(cos, np_fns=(np.cos,))


def tan(x, *, dtype=None, mask=None, **kwargs):
    s = _activation("sin", x, np.float32, mask, "tan")
    c = _activation("sin", x, np.float32, mask, "tan", bias=_m.pi / 2)
    return divide(s, c, dtype=dtype or x.dtype, mask=mask)


_reg(tan, np_fns=(np.tan,))


def logical_not(x, *, dtype=np.bool_, mask=None, **kwargs):
    return _binary("eq", x, 0.0, dtype, mask, "logical_not")


_reg(logical_not, np_fns=(np.logical_not,))


def invert(x, *, dtype=None, mask=None, **kwargs):
    if _D.is_float(x.dtype):
        raise _E.err_unsupported_dtype("invert (bitwise not) needs an integer tile")
    return _binary("bitwise_xor", x, -1, dtype or x.dtype, mask, "invert")


_reg(invert, np_fns=(np.invert,))


def _trunc_f32(x, mask):
    r = _binary("mod", x, 1.0, np.float32, mask, "trunc")          # fmod: the sign of x
    return _binary("subtract", x, r, np.float32, mask, "trunc")


def trunc(x, *, dtype=None, mask=None, **kwargs):
    """Round toward zero (x - fmod(x, 1), exact in fp32)."""
    return copy(_trunc_f32(x, mask), dtype=dtype or x.dtype) if (dtype or x.dtype) != np.float32 else \
        _trunc_f32(x, mask)


def floor(x, *, dtype=None, mask=None, **kwargs):
    """Round toward -inf: trunc(x) - (trunc(x) > x)."""
    t = _trunc_f32(x, mask)
    over = _binary("gt", t, x, np.float32, mask, "floor")
    return _binary("subtract", t, over, dtype or x.dtype, mask, "floor")


def ceil(x, *, dtype=None, mask=None, **kwargs):
    """Round toward +inf: trunc(x) + (trunc(x) < x)."""
    t = _trunc_f32(x, mask)
    under = _binary("lt", t, x, np.float32, mask, "ceil")
    return _binary("add", t, under, dtype or x.dtype, mask, "ceil")


for _f, _g in ((trunc, np.trunc), (floor, np.floor), (ceil, np.ceil)):
    _reg(_f, np_fns=(_g,))


def copy(x, dtype):
    _ops.tile_operand(x, "copy", "x")
    out = _ops.new_tile(x.shape, dtype, "SBUF", "copy")
    return _ops.mark_producer(out, _ops.emit("tensor_copy", "DVE", [out], [x], {}, None))


# -- reductions --------------------------------------------------------------------------------
def _axes(x, axis):
    ax = [axis] if isinstance(axis, int) else list(axis)
    n = len(x.shape)
    ax = sorted(a if a >= 0 else n + a for a in ax)
    if 0 in ax:
        raise _E.err_invalid_argument("reductions run over free axes; axis 0 is the partition axis")
    if len(set(ax)) != len(ax) or not ax or ax[-1] >= n:
        raise _E.err_invalid_argument("bad reduction axes %s for a tile of rank %d" % (ax, n))
    return ax


def reduce(op, x, axis, dtype, mask, keepdims, api, negate=False, engine="DVE"):
    _ops.tile_operand(x, api, "x")
    ax = _axes(x, axis)
    n = len(x.shape)
    kept = [r for r in range(n) if r not in ax]
    keep = tuple(x.shape[r] for r in kept)
    if ax != list(range(n - len(ax), n)):
        # reduced axes moved innermost (a strided view; the instruction reduces the innermost axes)
        x = x.copy_view(axes=[x.axes[r] for r in kept + ax])
    shape = tuple(1 if r in ax else x.shape[kept.index(r)] for r in range(n)) if keepdims else keep
    out = _ops.new_tile(shape, dtype or x.dtype, "SBUF", api, check=False)
    nkeep = len(keep)
    links = [[(0, r), (1, r)] for r in range(nkeep)]
    inst = _ops.emit("tensor_reduce", engine, [out], [x], {"op": op, "axes": len(ax), "negate": bool(negate)}, mask,
                     links=links)
    return _ops.mark_producer(out, inst)


def _mk_reduce(name, op, np_fns=()):
    def f(x, axis, *, dtype=None, mask=None, keepdims=False, **kwargs):
        return reduce(op, x, axis, dtype, mask, keepdims, name)
    f.__name__ = f.__qualname__ = name
    return _reg(f, red=op, alu=op, np_fns=np_fns)


sum = _mk_reduce("sum", "add", (np.sum,))
max = _mk_reduce("max", "max", (np.max, np.amax))
min = _mk_reduce("min", "min", (np.min, np.amin))
prod = _mk_reduce("prod", "mult", (np.prod,))


def all(x, axis, *, dtype=np.bool_, mask=None, **kwargs):
    nz = not_equal(x, 0.0, dtype=np.float32, mask=mask)
    return reduce("min", nz, axis, dtype, mask, False, "all")


_reg(all)


def mean(x, axis, *, dtype=None, mask=None, keepdims=False, **kwargs):
    ax = _axes(x, axis)
    n = 1
    for a in ax:
        n *= x.shape[a]
    s = reduce("add", x, axis, np.float32, mask, keepdims, "mean")
    return _binary("mult", s, 1.0 / n, dtype or x.dtype, mask, "mean")


_reg(mean, np_fns=(np.mean,))


def var(x, axis, *, dtype=None, mask=None, **kwargs):
    mu = mean(x, axis, dtype=np.float32, mask=mask, keepdims=True)
    d = subtract(x, mu, dtype=np.float32, mask=mask)
    return mean(multiply(d, d, dtype=np.float32, mask=mask), axis, dtype=dtype or x.dtype, mask=mask,
                keepdims=bool(kwargs.get("keepdims", False)))


_reg(var, np_fns=(np.var,))


# -- composite ------------------------------------------------------------------------------------
def where(condition, x, y, *, dtype=None, mask=None, **kwargs):
    _ops.tile_operand(condition, "where", "condition")
    shape = condition.shape
    dts = [v.dtype if isinstance(v, _Tensor) else _D.scalar_dtype(v) for v in (x, y)]
    dt = _D.np_dtype(dtype) if dtype is not None else _D.promote(*dts)

    def tile_of(v):
        if isinstance(v, _Tensor):
            return _ops.broadcast_to(v, shape)
        t = _ops.new_tile(shape, dt, "SBUF", "where_c")
        _ops.emit("memset", "DVE", [t], [], {"value": float(v)})
        return t
    out = _ops.new_tile(shape, dt, "SBUF", "where")
    inst = _ops.emit("select", "DVE", [out], [condition, tile_of(x), tile_of(y)], {}, mask)
    return _ops.mark_producer(out, inst)


_reg(where, np_fns=(np.where,))


def softmax(x, axis, *, dtype=None, compute_dtype=None, mask=None, **kwargs):
    mx = max(x, axis, dtype=np.float32, mask=mask, keepdims=True)
    sh = subtract(x, mx, dtype=np.float32, mask=mask)
    e = exp(sh, dtype=np.float32, mask=mask)
    s = sum(e, axis, dtype=np.float32, mask=mask, keepdims=True)
    return divide(e, s, dtype=dtype or x.dtype, mask=mask)


_reg(softmax)


def rms_norm(x, w, axis, n, epsilon=1e-06, *, dtype=None, compute_dtype=None, mask=None, **kwargs):
    sq = multiply(x, x, dtype=np.float32, mask=mask)
    ms = sum(sq, axis, dtype=np.float32, mask=mask, keepdims=True)
    ms = _binary("mult", ms, 1.0 / float(n), np.float32, mask, "rms_norm")
    ms = _binary("add", ms, float(epsilon), np.float32, mask, "rms_norm")
    r = rsqrt(ms, dtype=np.float32, mask=mask)
    y = multiply(x, r, dtype=np.float32, mask=mask)
    return multiply(y, w, dtype=dtype or x.dtype, mask=mask)


_reg(rms_norm)


def dropout(x, rate, *, dtype=None, mask=None, **kwargs):
    """Zero elements of x with probability RATE (a scalar, a [P, 1] tile or a 1-element tile), as
    nisa.dropout: birsim's counter-based uniform draws, no rescaling of the kept elements."""
    from neuronxcc.nki import isa as nisa
    from neuronxcc.nki._trace.tensor import Tensor
    _ops.tile_operand(x, "dropout", "x")
    if isinstance(rate, Tensor) and rate.size == 1 and x.shape[0] > 1:
        rate = _ops.broadcast_to(rate, (x.shape[0], 1))
    return nisa.dropout(x, rate, mask=mask, dtype=dtype)


_reg(dropout)


# -- TensorE --------------------------------------------------------------------------------------
def matmul(x, y, *, transpose_x=False, mask=None, **kwargs):
    """x @ y (x.T @ y with transpose_x=True) on TensorE into a PSUM fp32 tile."""
    from neuronxcc.nki import isa as nisa
    _ops.tile_operand(x, "matmul", "x", ("SBUF", "PSUM"))
    if not transpose_x:
        xt = transpose(x)
        x = _ops.copy_to_sbuf(xt)
    elif x.buf.memory == "PSUM":
        x = _ops.copy_to_sbuf(x)
    if y.buf.memory == "PSUM":
        y = _ops.copy_to_sbuf(y)
    return nisa.nc_matmul(x, y, mask=mask)


_reg(matmul, np_fns=(np.matmul,))


def transpose(x, *, dtype=None, mask=None, **kwargs):
    """2-D transpose of a tile (TensorE for > 32x32, VectorE otherwise) into PSUM."""
    from neuronxcc.nki import isa as nisa
    return nisa.nc_transpose(x, mask=mask, dtype=dtype)


_reg(transpose, np_fns=(np.transpose,))
