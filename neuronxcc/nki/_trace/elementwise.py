"""Element-wise arithmetic and free-axis reductions of traced tiles: the core ``nki.language`` /
``nki.isa`` and the ``Tensor`` operators share (``t + u`` is ``nl.add(t, u)``, the same function).

Binary ops: tile (op) tile -> ``tensor_tensor`` on VectorE; a [P, 1] column or a scalar as one
side -> ``tensor_scalar`` (the column broadcast along the free axes). Unary math that ScalarE has
as an activation function -> ``activation``; the rest is composed of ALU ops. ``OPS`` maps each
function (and the numpy ufunc with the same meaning) to its ALU / activation / reduce name, which
``nki.isa`` reads from ``op=`` arguments (``op_name``); ``register`` adds a function to it.

The public functions here are ``nki.language``'s (re-exported there, names and signatures as the
original's); ``__all__`` lists them.
"""
import builtins as _bi
import math as _m

import numpy as np

from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import dtypes as D
from neuronxcc.nki._trace import ops
from neuronxcc.nki._trace.index import broadcast_shapes
from neuronxcc.nki._trace.view import View

__all__ = ["OPS", "op_name"]
OPS = {}


def register(f, alu=None, act=None, red=None, np_fns=()):
    """Record F (an nl function) in OPS with its ALU / activation / reduce names; numpy ufuncs NP_FNS
    of the same meaning map to it too. Returns F."""
    info = {"alu": alu, "act": act, "reduce": red, "name": f.__name__}
    OPS[f] = info
    for g in np_fns:
        OPS.setdefault(g, info)
    return f


def _register(f, alu=None, act=None, red=None, np_fns=()):
    __all__.append(f.__name__)
    return register(f, alu, act, red, np_fns)


def op_name(op, kind):
    """The ALU ('alu'), activation ('act') or reduce ('reduce') name of OP (an nl function or numpy ufunc)."""
    info = OPS.get(op)
    if info is None and isinstance(op, str):
        return op
    if info is None or info.get(kind) is None:
        raise E.err_invalid_argument("%s is not a supported %s operator" % (getattr(op, "__name__", op),
                                                                            {"alu": "ALU", "act": "activation",
                                                                             "reduce": "reduce"}[kind]))
    return info[kind]


def is_column(t):
    """True when T is a [P, 1] column (broadcast along free)."""
    return isinstance(t, View) and len(t.shape) >= 1 and _bi.all(s == 1 for s in t.shape[1:])


def binary(alu, x, y, dtype, mask, api, engine="DVE", out_dtype=None):
    sx, sy = ops.is_scalar(x), ops.is_scalar(y)
    if sx and sy:
        raise E.err_invalid_argument("%s needs at least one tile operand" % api)
    dts = [D.scalar_dtype(v) if ops.is_scalar(v) else v.dtype for v in (x, y)]
    dt = D.np_dtype(dtype) if dtype is not None else (out_dtype or D.promote(*dts))
    if sx or sy:
        t, s, rev = (y, x, True) if sx else (x, y, False)
        ops.tile_operand(t, api, "x")
        out = ops.new_tile(t.shape, dt, "SBUF", api)
        inst = ops.emit("tensor_scalar", engine, [out], [t], {"op0": alu, "operand0": float(s), "reverse0": rev},
                        mask)
        return ops.mark_producer(out, inst)
    ops.tile_operand(x, api, "x")
    ops.tile_operand(y, api, "y")
    x, y = ops.rank_align(x, y)
    shape = broadcast_shapes(x.shape, y.shape)
    if x.shape[0] != y.shape[0]:
        if x.shape[0] == 1:
            x = ops.partition_broadcast(x, y.shape[0])
        elif y.shape[0] == 1:
            y = ops.partition_broadcast(y, x.shape[0])
        else:
            raise E.err_num_partition_mismatch("number of partitions mismatch in parameters (x%s, y%s) of '%s'"
                                               % (list(x.shape), list(y.shape), api))
    out = ops.new_tile(shape, dt, "SBUF", api)
    if is_column(y) and not is_column(x) and alu not in ("pow",):
        inst = ops.emit("tensor_scalar", engine, [out], [x, y],
                        {"op0": alu, "operand0_ap": True, "reverse0": False}, mask, links=_col_links(out, x, y))
    elif is_column(x) and not is_column(y) and alu not in ("pow",):
        inst = ops.emit("tensor_scalar", engine, [out], [y, x],
                        {"op0": alu, "operand0_ap": True, "reverse0": True}, mask, links=_col_links(out, y, x))
    else:
        inst = ops.emit("tensor_tensor", engine, [out], [ops.expand(x, shape), ops.expand(y, shape)],
                        {"op": alu}, mask)
    return ops.mark_producer(out, inst)


def _col_links(out, t, col):
    groups = [[(0, r), (1, r)] for r in range(len(out.shape))]
    groups[0].append((2, 0))
    return groups


def _mk_binary(name, alu, np_fns=(), bool_out=False):
    def f(x, y, *, dtype=None, mask=None, **kwargs):
        return binary(alu, x, y, dtype, mask, name, out_dtype=np.dtype(np.uint8) if bool_out else None)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "Element-wise %s of x and y (promoted dtype unless dtype=)." % name
    red = alu if alu in ("add", "max", "min", "mult", "bitwise_and", "bitwise_or", "logical_and", "logical_or") \
        else None
    return _register(f, alu=alu, red=red, np_fns=np_fns)


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


def activation(func, x, dtype, mask, api, scale=1.0, bias=0.0):
    ops.tile_operand(x, api, "x")
    out = ops.new_tile(x.shape, dtype or x.dtype, "SBUF", api)
    inst = ops.emit("activation", "ACT", [out], [x], {"func": func, "scale": float(scale), "bias": float(bias)},
                    mask)
    return ops.mark_producer(out, inst)


def _mk_act(name, func, np_fns=()):
    def f(x, *, dtype=None, mask=None, **kwargs):
        return activation(func, x, dtype, mask, name)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = "Element-wise %s on ScalarE (activation function %s)." % (name, func)
    return _register(f, act=func, np_fns=np_fns)


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
    return activation("copy", x, dtype, mask, "copy")


OPS[copy_op] = {"alu": "bypass", "act": "copy", "reduce": None, "name": "copy"}


def reciprocal(x, *, dtype=None, mask=None, **kwargs):
    """1/x on VectorE (divide)."""
    return binary("divide", 1.0, x, dtype or x.dtype, mask, "reciprocal")


_register(reciprocal, act="reciprocal", np_fns=(np.reciprocal,))


def negative(x, *, dtype=None, mask=None, **kwargs):
    return binary("mult", x, -1.0, dtype or x.dtype, mask, "negative")


_register(negative, np_fns=(np.negative,))


def cos(x, *, dtype=None, mask=None, **kwargs):
    return activation("sin", x, dtype, mask, "cos", bias=_m.pi / 2)


_register(cos, np_fns=(np.cos,))


def tan(x, *, dtype=None, mask=None, **kwargs):
    s = activation("sin", x, np.float32, mask, "tan")
    c = activation("sin", x, np.float32, mask, "tan", bias=_m.pi / 2)
    return divide(s, c, dtype=dtype or x.dtype, mask=mask)


_register(tan, np_fns=(np.tan,))


def logical_not(x, *, dtype=np.bool_, mask=None, **kwargs):
    return binary("eq", x, 0.0, dtype, mask, "logical_not")


_register(logical_not, np_fns=(np.logical_not,))


def invert(x, *, dtype=None, mask=None, **kwargs):
    if D.is_float(x.dtype):
        raise E.err_unsupported_dtype("invert (bitwise not) needs an integer tile")
    return binary("bitwise_xor", x, -1, dtype or x.dtype, mask, "invert")


_register(invert, np_fns=(np.invert,))


def _trunc_f32(x, mask):
    r = binary("mod", x, 1.0, np.float32, mask, "trunc")          # fmod: the sign of x
    return binary("subtract", x, r, np.float32, mask, "trunc")


def trunc(x, *, dtype=None, mask=None, **kwargs):
    """Round toward zero (x - fmod(x, 1), exact in fp32)."""
    return cast(_trunc_f32(x, mask), dtype=dtype or x.dtype) if (dtype or x.dtype) != np.float32 else \
        _trunc_f32(x, mask)


def floor(x, *, dtype=None, mask=None, **kwargs):
    """Round toward -inf: trunc(x) - (trunc(x) > x)."""
    t = _trunc_f32(x, mask)
    over = binary("gt", t, x, np.float32, mask, "floor")
    return binary("subtract", t, over, dtype or x.dtype, mask, "floor")


def ceil(x, *, dtype=None, mask=None, **kwargs):
    """Round toward +inf: trunc(x) + (trunc(x) < x)."""
    t = _trunc_f32(x, mask)
    under = binary("lt", t, x, np.float32, mask, "ceil")
    return binary("add", t, under, dtype or x.dtype, mask, "ceil")


for _f, _g in ((trunc, np.trunc), (floor, np.floor), (ceil, np.ceil)):
    _register(_f, np_fns=(_g,))


def cast(x, dtype):
    """X cast to DTYPE by a VectorE tensor_copy (a new SBUF tile)."""
    ops.tile_operand(x, "copy", "x")
    out = ops.new_tile(x.shape, dtype, "SBUF", "copy")
    return ops.mark_producer(out, ops.emit("tensor_copy", "DVE", [out], [x], {}, None))


# -- reductions --------------------------------------------------------------------------------
def reduce_axes(x, axis):
    """AXIS (an int or a sequence) as sorted free axes of X; the partition axis is refused."""
    ax = [axis] if isinstance(axis, int) else list(axis)
    n = len(x.shape)
    ax = sorted(a if a >= 0 else n + a for a in ax)
    if 0 in ax:
        raise E.err_invalid_argument("reductions run over free axes; axis 0 is the partition axis")
    if len(set(ax)) != len(ax) or not ax or ax[-1] >= n:
        raise E.err_invalid_argument("bad reduction axes %s for a tile of rank %d" % (ax, n))
    return ax


def reduce(op, x, axis, dtype, mask, keepdims, api, negate=False, engine="DVE"):
    """X reduced with ALU OP over the free AXIS (one tensor_reduce; the reduced axes moved innermost)."""
    ops.tile_operand(x, api, "x")
    ax = reduce_axes(x, axis)
    n = len(x.shape)
    kept = [r for r in range(n) if r not in ax]
    keep = tuple(x.shape[r] for r in kept)
    if ax != list(range(n - len(ax), n)):
        # reduced axes moved innermost (a strided view; the instruction reduces the innermost axes)
        x = x.copy_view(axes=[x.axes[r] for r in kept + ax])
    shape = tuple(1 if r in ax else x.shape[kept.index(r)] for r in range(n)) if keepdims else keep
    out = ops.new_tile(shape, dtype or x.dtype, "SBUF", api, check=False)
    nkeep = len(keep)
    links = [[(0, r), (1, r)] for r in range(nkeep)]
    inst = ops.emit("tensor_reduce", engine, [out], [x], {"op": op, "axes": len(ax), "negate": bool(negate)}, mask,
                    links=links)
    return ops.mark_producer(out, inst)
