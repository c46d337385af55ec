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

import ml_dtypes

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

_DTYPES = {
    "pred": np.dtype(np.bool_),
    "s4": np.dtype(ml_dtypes.int4), "u4": np.dtype(ml_dtypes.uint4),
    "s8": np.dtype(np.int8), "s16": np.dtype(np.int16), "s32": np.dtype(np.int32), "s64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8), "u16": np.dtype(np.uint16), "u32": np.dtype(np.uint32), "u64": np.dtype(np.uint64),
    "f16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16), "f32": np.dtype(np.float32),
    "f64": np.dtype(np.float64),
    "f8e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn), "f8e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "f8e4m3fnuz": np.dtype(ml_dtypes.float8_e4m3fnuz), "f8e5m2fnuz": np.dtype(ml_dtypes.float8_e5m2fnuz),
    "f8e4m3b11fnuz": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    "c64": np.dtype(np.complex64), "c128": np.dtype(np.complex128),
}
_SUB_F32 = {np.dtype(ml_dtypes.bfloat16), np.dtype(np.float16), np.dtype(ml_dtypes.float8_e4m3fn),
            np.dtype(ml_dtypes.float8_e5m2), np.dtype(ml_dtypes.float8_e4m3fnuz),
            np.dtype(ml_dtypes.float8_e5m2fnuz), np.dtype(ml_dtypes.float8_e4m3b11fnuz)}


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
    return dt.kind in "iu" or dt in (np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4))


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
