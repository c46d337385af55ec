"""nl reductions, where, softmax, norms, dropout, matmul and transpose.

The element-wise functions (add ... invert, exp ... abs) and the reduction core are the tracer's
(``neuronxcc.nki._trace.elementwise``, which the ``Tensor`` operators call too); they are
re-exported here, so ``__all__`` is the whole nl math surface. ``OPS`` (shared with
``elementwise``) maps each function to its ALU / activation / reduce name.
"""
import numpy as np

from neuronxcc.nki._trace import dtypes as _D
from neuronxcc.nki._trace import elementwise as _ew
from neuronxcc.nki._trace import movement as _mv
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.elementwise import *  # noqa: F401,F403
from neuronxcc.nki._trace.elementwise import divide, exp, multiply, not_equal, reduce, rsqrt, subtract
from neuronxcc.nki._trace.tensor import Tensor as _Tensor

__all__ = list(_ew.__all__)


def _reg(f, alu=None, act=None, red=None, np_fns=()):
    __all__.append(f.__name__)
    return _ew.register(f, alu, act, red, np_fns)


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
    ax = _ew.reduce_axes(x, axis)
    n = 1
    for a in ax:
        n *= x.shape[a]
    s = reduce("add", x, axis, np.float32, mask, keepdims, "mean")
    return _ew.binary("mult", s, 1.0 / n, dtype or x.dtype, mask, "mean")


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
    ms = _ew.binary("mult", ms, 1.0 / float(n), np.float32, mask, "rms_norm")
    ms = _ew.binary("add", ms, float(epsilon), np.float32, mask, "rms_norm")
    r = rsqrt(ms, dtype=np.float32, mask=mask)
    y = multiply(x, r, dtype=np.float32, mask=mask)
    return multiply(y, w, dtype=dtype or x.dtype, mask=mask)


_reg(rms_norm)


def dropout(x, rate, *, dtype=None, mask=None, **kwargs):
    """Zero elements of x with probability RATE (a scalar, a [P, 1] tile or a 1-element tile), as
    nisa.dropout: birsim's counter-based uniform draws, no rescaling of the kept elements."""
    from neuronxcc.nki import isa as nisa
    _ops.tile_operand(x, "dropout", "x")
    if isinstance(rate, _Tensor) and rate.size == 1 and x.shape[0] > 1:
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
    return _mv.nc_transpose(x, mask=mask, dtype=dtype)


_reg(transpose, np_fns=(np.transpose,))
