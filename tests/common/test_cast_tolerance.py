"""The --auto-cast rows of the tolerance table: fp32 results of matmuls whose operands were rounded
to the --auto-cast-type, judged against the unrounded fp32 product. The rows' claim that the error,
measured against the tensor's magnitude, does not grow with the contracted size is pinned here."""
import ml_dtypes
import numpy as np
import pytest

from neuronxcc.common import dtypes as D
from neuronxcc.common.tolerances import (CAST_TOLERANCES, CAST_UNIT_ROUNDOFF, cast_precision, mismatch,
                                         tolerance)

NARROW = {"bf16": lambda x: x.astype(ml_dtypes.bfloat16).astype(np.float32),
          "fp16": lambda x: x.astype(np.float16).astype(np.float32),
          "fp8_e4m3": lambda x: x.astype(ml_dtypes.float8_e4m3).astype(np.float32),
          "tf32": D.round_tf32}


def test_one_row_per_auto_cast_type():
    assert set(CAST_UNIT_ROUNDOFF) == {"bf16", "fp16", "tf32", "fp8_e4m3"}
    for t, u in CAST_UNIT_ROUNDOFF.items():
        name = cast_precision(t)
        assert name in CAST_TOLERANCES
        assert tolerance(name, "compiled") == tolerance(name, "interpreter") == (4 * u, 4 * u)
    # the narrow rows are looser than fp32's and ordered by precision
    f32 = tolerance("f32", "compiled")
    assert all(tolerance(cast_precision(t), "compiled")[1] > f32[1] for t in CAST_UNIT_ROUNDOFF)
    assert tolerance(cast_precision("fp16"), "compiled") < tolerance(cast_precision("bf16"), "compiled") \
        < tolerance(cast_precision("fp8_e4m3"), "compiled")
    with pytest.raises(ValueError, match="int8"):
        cast_precision("int8")


def _rounded_dot(t, a, b):
    if t == "fp16":                  # fp16's range: scale the operands in, the product back out
        s = np.float32(1 / np.sqrt(a.shape[1]))
        return (NARROW[t](a * s).astype(np.float64) @ NARROW[t](b * s).astype(np.float64)) / (s * s)
    return NARROW[t](a).astype(np.float64) @ NARROW[t](b).astype(np.float64)


@pytest.mark.parametrize("t", sorted(CAST_UNIT_ROUNDOFF))
def test_error_against_the_tensor_magnitude_does_not_grow_with_k(t):
    rng = np.random.default_rng(1)
    u = CAST_UNIT_ROUNDOFF[t]
    for K in (64, 1024, 8192):
        for mean in (0.0, 0.5):
            a = (rng.standard_normal((32, K)) + mean).astype(np.float32)
            b = (rng.standard_normal((K, 32)) + mean).astype(np.float32)
            want = a.astype(np.float64) @ b.astype(np.float64)
            got = _rounded_dot(t, a, b)
            worst = np.abs(got - want).max() / max(1.0, np.abs(want).max())
            assert worst < 1.0 * u, (t, K, mean, worst / u)
            assert mismatch(got.astype(np.float32), want.astype(np.float32), row="compiled",
                            dtype=cast_precision(t)) == ""
            if t in ("bf16", "fp8_e4m3") and mean == 0.0:
                # the fp32 row is too tight for these: the cast row is needed, not decoration
                assert mismatch(got.astype(np.float32), want.astype(np.float32), row="compiled") != ""


@pytest.mark.parametrize("t", sorted(CAST_UNIT_ROUNDOFF))
def test_cast_row_still_catches_a_wrong_operand(t):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((32, 256)).astype(np.float32)
    b = rng.standard_normal((256, 32)).astype(np.float32)
    want = (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    bad = b.copy()
    bad[:, [3, 7]] = bad[:, [7, 3]]          # two columns swapped
    got = _rounded_dot(t, a, bad).astype(np.float32)
    assert "differs" in mismatch(got, want, row="compiled", dtype=cast_precision(t))
