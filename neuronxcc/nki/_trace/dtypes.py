"""NKI dtypes: normalisation to numpy dtypes / BIR names, and the promotion rules.

Kernel authors pass numpy types (``np.float32``), numpy dtypes (``nl.bfloat16`` =
``np.dtype('bfloat16')``, registered by ml_dtypes) or ``nl.tfloat32`` (``|V4``, computed as
float32 here). Promotion (the original's "NKI Type Promotion" rules):
  (float, int) -> the float; (float, float) -> the wider, fp16 x bf16 -> fp32, fp8e4 x fp8e5 -> bf16;
  (int, int) -> the wider, or the next signed type that holds both (int8 x uint8 -> int16,
  int32 x uint32 -> fp32); weak Python scalars: bool -> uint8, int -> int32, float -> fp32.
"""
import numpy as np

from neuronxcc.common import dtypes as _R
from neuronxcc.starfish.birpy import dtypes as _bdt

TFLOAT32 = np.dtype("|V4")
BF16 = _R.by_name("bfloat16").np
FP8E4 = _R.by_name("float8_e4m3").np
FP8E5 = _R.by_name("float8_e5m2").np
FP8E4FN = _R.by_name("float8_e4m3fn").np
F32 = _R.by_name("float32").np

# promotion rank of the on-chip float types (the registry's): by width, tfloat32 between 16 and 32 bits
_FLOAT_RANK = {d.np: {1: 1, 2: 2, 4: 4}[d.itemsize] for d in _R.DTYPES if d.is_float and d.onchip}
_FLOAT_RANK[TFLOAT32] = 3


def np_dtype(dt):
    """A numpy dtype for any dtype spelling a kernel may use (None stays None)."""
    if dt is None:
        return None
    if isinstance(dt, str):
        try:
            return _bdt.np_dtype(dt)
        except KeyError:
            pass
    d = np.dtype(dt)
    row = _R.by_numpy(d)
    if row is not None and not row.onchip and row.kind != "complex":   # 64-bit: held in 32 bits on chip
        return _R.by_name(_R.onchip_as(row.name)).np
    return d


def bir_name(dt):
    """BIR dtype name of a dtype (tfloat32 is computed as float32)."""
    d = np_dtype(dt)
    if d == TFLOAT32:
        return "float32"
    if d == np.bool_:
        return "uint8"
    return _bdt.from_numpy(d)


def is_float(dt):
    d = np_dtype(dt)
    return d in _FLOAT_RANK or d.kind == "f"


def is_int(dt):
    return not is_float(dt)


def itemsize(dt):
    return np_dtype(dt).itemsize


def scalar_dtype(v):
    """The weak type of a Python / numpy scalar."""
    if isinstance(v, (bool, np.bool_)):
        return np.dtype(np.uint8)
    if isinstance(v, np.generic):
        return np_dtype(v.dtype)
    if isinstance(v, int):
        return np.dtype(np.int32)
    return F32


def promote(a, b):
    """The promoted dtype of two operand dtypes."""
    a, b = np_dtype(a), np_dtype(b)
    if a == np.bool_:
        a = np.dtype(np.uint8)
    if b == np.bool_:
        b = np.dtype(np.uint8)
    if a == b:
        return a
    fa, fb = is_float(a), is_float(b)
    if fa and not fb:
        return a
    if fb and not fa:
        return b
    if fa and fb:
        ra, rb = _FLOAT_RANK.get(a, 4), _FLOAT_RANK.get(b, 4)
        if ra != rb:
            return a if ra > rb else b
        return BF16 if ra == 1 else F32
    if a.kind == b.kind:                  # both signed or both unsigned
        return a if a.itemsize >= b.itemsize else b
    s, u = (a, b) if a.kind == "i" else (b, a)
    if s.itemsize > u.itemsize:
        return s
    wider = {1: np.int16, 2: np.int32}.get(u.itemsize)
    return np.dtype(wider) if wider is not None else F32
