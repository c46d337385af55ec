"""The one registry of element types: HLO name, BIR/Penguin name, numpy type, size, on-chip type.

Every table of element types in the package is a view of ``DTYPES`` (``hlo.model`` and the
HLO interpreter: HLO name -> numpy; ``birpy.dtypes``: the BIR types and the simulator's kernel
codes; the Penguin IR and ``hlo2penguin``: the names the middle-end accepts; the tolerances).

Row fields:
  hlo       HLO element-type spelling (``f32``, ``pred``, ``f8e4m3fn``); None for a BIR-only type
            (``tfloat32``)
  name      BIR / Penguin spelling (``float32``, ``bool``, ``float8_e4m3fn``)
  np        numpy dtype of host arrays of the type (ml_dtypes for bf16, fp8, int4)
  kind      ``float``, ``int``, ``uint``, ``bool`` or ``complex``
  code      the birsim kernels' code (``birsim/_kernels.pxd`` C_* enum; checked against this table
            when birsim imports its kernels); None: not a BIR type
  onchip    may live in SBUF/PSUM and be computed on by the engines
  lowered   the Penguin lowering (hlo2penguin) accepts values of the type
  itemsize  bytes of one element in host arrays (``np.itemsize``; BIR ``bool`` is one byte)
  nan_payload  mantissa bits of a float type whose NaNs carry a payload XLA's HLO text prints
            as ``nan(0x...)`` (0: none; f8e4m3fn has one NaN, the IEEE-like fp8 types and
            f8e3m4 print plain ``nan``)

``onchip_as(name)``: the BIR type a value is held in on chip (64-bit types narrow to 32 bits).

Invariants: codes are stable (they are the kernels' ABI); names and HLO spellings are unique;
``float8_e4m3`` is Neuron's FP8_EXP4 (IEEE-like, max 240, has inf), ``float8_e4m3fn`` the OCP
variant (max 448, no inf); ``bool`` is stored as one byte 0/1 in BIR (``bir_np`` uint8);
``int64``/``uint64``/``float64`` exist in BIR for HBM I/O tensors only.
"""
from dataclasses import dataclass

import ml_dtypes
import numpy as np

__all__ = ["DType", "DTYPES", "BY_HLO", "BY_NAME", "BY_NUMPY", "NAN_PAYLOAD_BITS", "by_hlo", "by_name",
           "by_numpy", "hlo_numpy", "hlo_name_of", "onchip_as", "round_tf32", "round_to", "TF32_MANTISSA_BITS",
           "AUTO_CAST_TYPES"]


@dataclass(frozen=True)
class DType:
    hlo: str
    name: str
    np: object
    kind: str
    code: object = None
    onchip: bool = False
    lowered: bool = False
    nan_payload: int = 0

    @property
    def itemsize(self):
        return self.np.itemsize

    @property
    def mantissa_bits(self):
        """Explicit significand bits of a float type (tfloat32: 10, in its fp32 container)."""
        if self.kind != "float":
            raise ValueError("%s is not a float type" % self.name)
        return TF32_MANTISSA_BITS if self.name == "tfloat32" else int(ml_dtypes.finfo(self.np).nmant)

    @property
    def unit_roundoff(self):
        """Half an ulp at 1: the relative error of one round-to-nearest into the type."""
        return 2.0 ** -(self.mantissa_bits + 1)

    @property
    def is_float(self):
        return self.kind == "float"

    @property
    def is_int(self):
        """Integer-valued in BIR (bool included: stored as 0/1)."""
        return self.kind in ("int", "uint", "bool")

    @property
    def signed(self):
        return self.kind in ("int", "float", "complex")

    @property
    def bir_np(self):
        """numpy dtype of the type's BIR storage (``bool`` is a uint8 0/1)."""
        return np.dtype(np.uint8) if self.kind == "bool" else self.np


def _row(hlo, name, npdt, kind, code=None, onchip=False, lowered=False, nan_payload=0):
    if isinstance(npdt, str):
        npdt = getattr(ml_dtypes, npdt, None)
        if npdt is None:                 # an older ml_dtypes without this type
            return None
    return DType(hlo, name, np.dtype(npdt), kind, code, onchip, lowered, nan_payload)


_ROWS = [
    #    HLO             BIR / Penguin          numpy                 kind     code onchip lowered
    _row("f32", "float32", np.float32, "float", 0, True, True, nan_payload=23),
    _row("bf16", "bfloat16", "bfloat16", "float", 1, True, True, nan_payload=7),
    _row("f16", "float16", np.float16, "float", 2, True, True, nan_payload=10),
    _row("f8e4m3", "float8_e4m3", "float8_e4m3", "float", 3, True, False),
    _row("f8e5m2", "float8_e5m2", "float8_e5m2", "float", 4, True, True, nan_payload=2),
    _row("f8e4m3fn", "float8_e4m3fn", "float8_e4m3fn", "float", 5, True, True),
    # TensorFloat-32 (1-8-10 in 32-bit containers; HLO has no such type): a PE input type that
    # --auto-cast-type tf32 rounds fp32 matmul operands to. Host arrays are float32 (round_tf32).
    _row(None, "tfloat32", np.float32, "float", 6, True, False),
    _row("s8", "int8", np.int8, "int", 10, True, True),
    _row("u8", "uint8", np.uint8, "uint", 11, True, True),
    _row("s16", "int16", np.int16, "int", 12, True, True),
    _row("u16", "uint16", np.uint16, "uint", 13, True, True),
    _row("s32", "int32", np.int32, "int", 14, True, True),
    _row("u32", "uint32", np.uint32, "uint", 15, True, True),
    _row("pred", "bool", np.bool_, "bool", 16, True, True),
    _row("s64", "int64", np.int64, "int", 20, False, True),
    _row("u64", "uint64", np.uint64, "uint", 21, False, True),
    _row("f64", "float64", np.float64, "float", 22, False, True, nan_payload=52),
    # HLO types with no BIR type (the interpreter computes on them; the lowering refuses them:
    # hlo2penguin.NOT_LOWERED_TYPES names the reason for complex)
    _row("c64", "complex64", np.complex64, "complex"),
    _row("c128", "complex128", np.complex128, "complex"),
    _row("s4", "int4", "int4", "int"),
    _row("u4", "uint4", "uint4", "uint"),
    _row("s2", "int2", "int2", "int"),
    _row("u2", "uint2", "uint2", "uint"),
    _row("f8e3m4", "float8_e3m4", "float8_e3m4", "float"),
    _row("f8e4m3fnuz", "float8_e4m3fnuz", "float8_e4m3fnuz", "float"),
    _row("f8e5m2fnuz", "float8_e5m2fnuz", "float8_e5m2fnuz", "float"),
    _row("f8e4m3b11fnuz", "float8_e4m3b11fnuz", "float8_e4m3b11fnuz", "float"),
]
DTYPES = tuple(r for r in _ROWS if r is not None)
BY_HLO = {d.hlo: d for d in DTYPES if d.hlo is not None}
BY_NAME = {d.name: d for d in DTYPES}
# numpy dtype -> row: the HLO types' rows (tfloat32's host arrays are float32, which is f32's row)
BY_NUMPY = {d.np: d for d in DTYPES if d.hlo is not None}
# float HLO type -> mantissa bits, for the types whose NaNs print their payload (``nan(0x...)``)
NAN_PAYLOAD_BITS = {d.hlo: d.nan_payload for d in DTYPES if d.nan_payload}
assert len(BY_HLO) == len([d for d in DTYPES if d.hlo is not None]) and len(BY_NAME) == len(DTYPES), \
    "element-type names must be unique"

# Spellings accepted for a BIR name besides its own (HLO names and the short float names).
ALIASES = {"fp32": "float32", "fp16": "float16", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2",
           "f8e4m3fn": "float8_e4m3fn", "tf32": "tfloat32", "fp8_e4m3": "float8_e4m3"}
# The types ``--auto-cast-type`` names (neuronx-cc's spellings; each an alias above): what matmul
# operands (and under --auto-cast all, elementwise results) are rounded to.
AUTO_CAST_TYPES = ("bf16", "fp16", "tf32", "fp8_e4m3")
ALIASES.update({d.hlo: d.name for d in DTYPES if d.hlo is not None})

_ONCHIP_AS = {"int64": "int32", "uint64": "uint32", "float64": "float32"}


def by_hlo(hlo_name):
    """The row of an HLO element type (KeyError when there is none)."""
    return BY_HLO[hlo_name]


def by_name(name):
    """The row of a BIR/Penguin name, or of an alias (HLO spelling, ``fp32``); KeyError otherwise."""
    d = BY_NAME.get(name)
    if d is None:
        d = BY_NAME[ALIASES[name]]
    return d


def hlo_numpy():
    """{HLO element type: numpy dtype} for every array type."""
    return {d.hlo: d.np for d in DTYPES if d.hlo is not None}


def hlo_name_of(dtype):
    """HLO element-type name of a numpy dtype, or None."""
    d = BY_NUMPY.get(np.dtype(dtype))
    return d.hlo if d is not None else None


def by_numpy(dtype):
    """The row of a numpy dtype, or None."""
    return BY_NUMPY.get(np.dtype(dtype))


def onchip_as(name):
    """The BIR type a value of type ``name`` is held in on chip (64-bit types narrow to 32)."""
    return _ONCHIP_AS.get(name, name)


# TensorFloat-32: fp32's sign and 8-bit exponent with a 10-bit mantissa (1-8-10), held in 32-bit
# containers. ml_dtypes has no such type, so the rounding is done on fp32's bits.
TF32_MANTISSA_BITS = 10
_TF32_DROP = 23 - TF32_MANTISSA_BITS
_TF32_LOW = np.uint32((1 << _TF32_DROP) - 1)


def round_tf32(x):
    """fp32 values rounded to tf32 (round to nearest, ties to even; the low 13 mantissa bits cleared),
    as float32. Infinities stay; a finite value past tf32's largest rounds to infinity as in IEEE;
    NaNs become the quiet NaN of their sign (as birsim's encoder writes them; clearing payload
    bits must not turn one into an infinity)."""
    a = np.array(x, dtype=np.float32)          # a copy: C-contiguous, 0-d stays 0-d
    u = a.view(np.uint32)
    bias = ((u >> np.uint32(_TF32_DROP)) & np.uint32(1)) + np.uint32((1 << (_TF32_DROP - 1)) - 1)
    with np.errstate(over="ignore"):
        r = (u + bias) & ~_TF32_LOW
    nan = np.isnan(a)
    if nan.any():
        r = np.where(nan, (u & np.uint32(0x80000000)) | np.uint32(0x7FC00000), r)
    return np.asarray(r, dtype=np.uint32).view(np.float32).reshape(a.shape)


def round_to(name):
    """The function rounding fp32 values to element type ``name`` (a BIR name or alias) and back:
    float32 -> float32 arrays holding the values the type can hold (RNE, as the engines write it)."""
    d = by_name(name)
    if d.name == "tfloat32":
        return round_tf32
    if d.name == "float32":
        return lambda x: np.asarray(x, np.float32)
    return lambda x: np.asarray(x, np.float32).astype(d.np).astype(np.float32)
