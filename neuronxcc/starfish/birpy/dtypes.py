"""BIR element types: the one registry of dtype names.

A BIR dtype is named by a string (``"float32"``, ``"bfloat16"``, ``"int32"``,
...). Each entry knows its numpy dtype (via ml_dtypes for the narrow floats),
its size in bytes, whether it is an integer type, and a small integer code
that the simulator's Cython kernels switch on. Invariant: codes are stable
(they are part of the kernels' ABI), names are the JSON spelling.

``float8_e4m3`` is Neuron's FP8_EXP4 (IEEE-like, max 240, has inf);
``float8_e4m3fn`` is the OCP variant (max 448, no inf). ``bool`` is stored as
one byte (0/1). ``int64``/``uint64``/``float64`` exist for HBM I/O tensors
only (v2 engines do not compute on them; DMA converts).
"""
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = ["DType", "DTYPES", "get", "np_dtype", "itemsize", "is_int", "is_float", "from_numpy",
           "ONCHIP_DTYPES"]


@dataclass(frozen=True)
class DType:
    name: str
    code: int           # kernel code (stable)
    np: object          # numpy dtype
    itemsize: int
    is_int: bool
    signed: bool
    onchip: bool        # may live in SBUF/PSUM and be computed on by engines


def _d(name, code, npdt, is_int, signed, onchip=True):
    npdt = np.dtype(npdt)
    return DType(name, code, npdt, npdt.itemsize, is_int, signed, onchip)


_ALL = [
    _d("float32", 0, np.float32, False, True),
    _d("bfloat16", 1, ml_dtypes.bfloat16, False, True),
    _d("float16", 2, np.float16, False, True),
    _d("float8_e4m3", 3, ml_dtypes.float8_e4m3, False, True),
    _d("float8_e5m2", 4, ml_dtypes.float8_e5m2, False, True),
    _d("float8_e4m3fn", 5, ml_dtypes.float8_e4m3fn, False, True),
    _d("int8", 10, np.int8, True, True),
    _d("uint8", 11, np.uint8, True, False),
    _d("int16", 12, np.int16, True, True),
    _d("uint16", 13, np.uint16, True, False),
    _d("int32", 14, np.int32, True, True),
    _d("uint32", 15, np.uint32, True, False),
    _d("bool", 16, np.uint8, True, False),
    _d("int64", 20, np.int64, True, True, onchip=False),
    _d("uint64", 21, np.uint64, True, False, onchip=False),
    _d("float64", 22, np.float64, False, True, onchip=False),
]

DTYPES = {d.name: d for d in _ALL}
ONCHIP_DTYPES = tuple(d.name for d in _ALL if d.onchip)

_ALIASES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16", "fp32": "float32",
            "fp16": "float16", "s8": "int8", "u8": "uint8", "s16": "int16", "u16": "uint16",
            "s32": "int32", "u32": "uint32", "s64": "int64", "u64": "uint64", "f64": "float64",
            "pred": "bool", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2",
            "f8e4m3fn": "float8_e4m3fn"}


def get(name):
    """The DType for NAME (JSON spelling or an HLO alias). Raises KeyError."""
    if isinstance(name, DType):
        return name
    name = _ALIASES.get(name, name)
    return DTYPES[name]


def np_dtype(name):
    return get(name).np


def itemsize(name):
    return get(name).itemsize


def is_int(name):
    return get(name).is_int


def is_float(name):
    return not get(name).is_int


def from_numpy(dt):
    """BIR name of a numpy dtype (bool arrays map to ``bool``)."""
    dt = np.dtype(dt)
    if dt == np.bool_:
        return "bool"
    for d in _ALL:
        if d.np == dt and d.name != "bool":
            return d.name
    raise KeyError("no BIR dtype for numpy dtype %s" % dt)
