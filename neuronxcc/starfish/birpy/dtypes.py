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

The rows are the BIR view of ``neuronxcc.common.dtypes`` (the one element-type registry).
"""
from dataclasses import dataclass

import numpy as np

from neuronxcc.common import dtypes as _registry

__all__ = ["DType", "DTYPES", "get", "np_dtype", "itemsize", "is_int", "is_float", "from_numpy",
           "ONCHIP_DTYPES"]


@dataclass(frozen=True)
class DType:
    name: str
    code: int           # kernel code (stable)
    np: object          # numpy dtype of the BIR storage (bool: uint8 0/1)
    itemsize: int
    is_int: bool
    signed: bool
    onchip: bool        # may live in SBUF/PSUM and be computed on by engines


# The BIR rows of the one element-type registry, in kernel-code order.
_ALL = [DType(d.name, d.code, d.bir_np, d.bir_np.itemsize, d.is_int, d.signed, d.onchip)
        for d in sorted((d for d in _registry.DTYPES if d.code is not None), key=lambda d: d.code)]

DTYPES = {d.name: d for d in _ALL}
ONCHIP_DTYPES = tuple(d.name for d in _ALL if d.onchip)

_ALIASES = {a: n for a, n in _registry.ALIASES.items() if n in DTYPES}


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
