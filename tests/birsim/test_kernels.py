"""The Cython cast kernels against ml_dtypes (round-to-nearest-even, overflow,
NaN/inf, subnormals) and the float->int rule (truncate, saturate, NaN -> 0)."""
import ml_dtypes
import numpy as np
import pytest

from neuronxcc.starfish.birpy import dtypes as D
from neuronxcc.starfish.birsim import _kernels as K


def _samples():
    rng = np.random.default_rng(0)
    normal = rng.standard_normal(50000).astype(np.float32) * np.float32(10.0) ** rng.integers(-10, 8, 50000).astype(np.float32)
    bits = rng.integers(0, 2**32, 50000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 65504, 65520, 240, 248, 448, 464, 57344, 61440,
                        2.0**-24, 2.0**-25, 3 * 2.0**-25, 2.0**-9, 2.0**-10, 1 + 2.0**-8, 1 + 3 * 2.0**-8], np.float32)
    return np.concatenate([normal, bits, special, -special])


@pytest.mark.parametrize("name", ["bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn"])
def test_float_casts_match_ml_dtypes(name):
    x = _samples()
    d = D.get(name)
    out = np.zeros(x.size * d.itemsize, np.uint8)
    K.cast_f32(x, d.code, out)
    got = out.view(d.np).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(d.np).astype(np.float32)
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    assert same.all(), (x[~same][:5], ref[~same][:5], got[~same][:5])
    # signed zeros keep their sign
    assert np.array_equal(np.signbit(got[ref == 0]), np.signbit(ref[ref == 0]))


@pytest.mark.parametrize("name,lo,hi", [("int8", -128, 127), ("uint8", 0, 255), ("int16", -32768, 32767),
                                        ("uint16", 0, 65535), ("int32", -2**31, 2**31 - 1), ("uint32", 0, 2**32 - 1)])
def test_float_to_int_truncates_and_saturates(name, lo, hi):
    x = np.array([0.5, -0.5, 1.9, -1.9, 1e10, -1e10, np.nan, np.inf, -np.inf, 100.7, -100.7], np.float32)
    d = D.get(name)
    out = np.zeros(x.size * d.itemsize, np.uint8)
    K.cast_f32(x, d.code, out)
    with np.errstate(invalid="ignore"):
        ref = np.where(np.isnan(x), 0, np.clip(np.trunc(x.astype(np.float64)), lo, hi))
    np.testing.assert_array_equal(out.view(d.np).astype(np.float64), ref)


def test_strided_read_write_roundtrip():
    buf = np.arange(4 * 64, dtype=np.float32).view(np.uint8).copy()
    strides = np.array([0, 0, 0, 256, 32, 8], np.intp)      # 4 rows of 256 B, [8 x step 8 elems], [4 x step 2]
    # base 4: element 1 of each row
    nums = np.array([1, 1, 1, 4, 8, 4], np.intp)
    out = np.empty(4 * 8 * 4, np.float32)
    K.read_f32(buf, 0, 4, strides, nums, out)
    ref = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    want = np.array([[ref[r, 1 + 8 * i + 2 * j] for i in range(8) for j in range(4)] for r in range(4)], np.float32)
    np.testing.assert_array_equal(out.reshape(4, 32), want)
    out2 = np.zeros_like(buf)
    K.write_f32(out, out2, 1, 0, np.array([0, 0, 0, 128, 16, 4], np.intp), nums)   # bf16, dense-ish
    got = out2[:4 * 128].view(ml_dtypes.bfloat16).reshape(4, 64)[:, ::2][:, :32].astype(np.float32)
    np.testing.assert_array_equal(got, want.astype(ml_dtypes.bfloat16).astype(np.float32))
