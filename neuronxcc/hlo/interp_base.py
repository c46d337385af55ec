"""Shared pieces of the HLO reference interpreter: the handler registry and
value helpers.

Values flowing through the interpreter are numpy arrays (shape and dtype
exactly the instruction's shape; bf16/f8 via ml_dtypes), Python tuples for
tuple shapes, and ``TOKEN`` for token shapes.

Each handler is ``fn(ev, inst, args) -> value`` where ``ev`` is the running
``Evaluator`` and ``args`` are the operand values; it registers itself under
the handler name that ``neuronxcc.hlo.ops.OPS`` gives for its opcodes.
"""
import numpy as np

from neuronxcc.common import dtypes as _dtypes

HANDLERS = {}
# Optional fast paths: ``prep(ev, inst) -> f(args)`` builds, once per instruction,
# a closure with the attributes already parsed (or returns None to use the handler).
PREPARERS = {}


def handler(*names):
    def deco(fn):
        for n in names:
            if n in HANDLERS:
                raise AssertionError("duplicate interpreter handler %r" % n)
            HANDLERS[n] = fn
        return fn
    return deco


def preparer(*names):
    def deco(fn):
        for n in names:
            if n in PREPARERS:
                raise AssertionError("duplicate interpreter preparer %r" % n)
            PREPARERS[n] = fn
        return fn
    return deco


def as_array(v, dt):
    """``v`` as an ndarray of dtype ``dt`` (numpy scalars from 0-d ufuncs become arrays)."""
    if type(v) is not np.ndarray:
        v = np.asarray(v)
    if v.dtype != dt:
        v = v.astype(dt)
    return v


class _Token(object):
    """The value of a token-shaped instruction (after-all, ...)."""

    __slots__ = ()

    def __repr__(self):
        return "TOKEN"


TOKEN = _Token()

_DTYPES = _dtypes.hlo_numpy()
# floats narrower than f32 (computed in f32 and rounded back) and the integer types, from the registry
_SUB_F32 = frozenset(d.np for d in _dtypes.DTYPES if d.kind == "float" and d.itemsize < 4)
_INTS = frozenset(d.np for d in _dtypes.DTYPES if d.kind in ("int", "uint"))


def dtype_of(shape):
    """numpy dtype of an array shape (via ``shape.numpy_dtype()`` when present)."""
    et = shape.element_type
    dt = _DTYPES.get(et)
    if dt is not None:
        return dt
    return np.dtype(shape.numpy_dtype())


def dims_of(shape):
    return tuple(int(d) for d in shape.dims)


def is_tuple_shape(shape):
    return shape.element_type == "tuple"


def is_float(dt):
    return dt.kind == "f" or dt in _SUB_F32


def is_low_float(dt):
    """Floats narrower than f32: computed in f32 and rounded back, as XLA:CPU does."""
    return dt in _SUB_F32


def is_int(dt):
    return dt.kind in "iu" or dt in _INTS


def compute_dtype(dt):
    """The dtype arithmetic on ``dt`` is carried out in."""
    if dt in _SUB_F32:
        return np.dtype(np.float32)
    return dt


def upcast(x):
    x = np.asarray(x)
    if x.dtype in _SUB_F32:
        return x.astype(np.float32)
    return x


def cast(x, dt):
    """``x`` as dtype ``dt`` (round-to-nearest-even for floats), always an ndarray."""
    x = np.asarray(x)
    if x.dtype == dt:
        return x
    return x.astype(dt)


def shape_bytes(shape):
    """Bytes a value of ``shape`` occupies (tuples summed, tokens 0)."""
    et = shape.element_type
    if et == "tuple":
        return sum(shape_bytes(s) for s in shape.tuple_shapes)
    if et == "token":
        return 0
    n = 1
    for d in shape.dims:
        n *= int(d)
    return n * dtype_of(shape).itemsize


def flatten_value(v, out=None):
    """Leaves of a (nested) tuple value, tokens dropped."""
    if out is None:
        out = []
    if isinstance(v, tuple):
        for x in v:
            flatten_value(x, out)
    elif v is not TOKEN:
        out.append(v)
    return out


class NotLiftable(Exception):
    """A called computation cannot be evaluated on whole arrays at once."""
