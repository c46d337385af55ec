"""--auto-cast / --auto-cast-type / --fast-math as the reference documents them: which fp32
operations run in the narrow type, checked against XLA with the mode's tolerance; the cast
operands make the PE run at its low-precision rate; the goldens follow the precision."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from neuronxcc.errors import InvalidArgumentError
from neuronxcc.common.tolerances import cast_precision, mismatch
from neuronxcc.starfish.birsim import simulate
from neuronxcc.starfish.penguin.autocast import policy
from neuronxcc.starfish.penguin.codegen import lower_graph
from penguin_helpers import jax_outputs, penguin_of

SPECS = [jax.ShapeDtypeStruct((256, 384), jnp.float32), jax.ShapeDtypeStruct((384, 256), jnp.float32),
         jax.ShapeDtypeStruct((256,), jnp.float32)]
NARROW = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8_e4m3": ml_dtypes.float8_e4m3}


def mlp(x, w, b):
    return jax.nn.gelu(x @ w + b) * 0.5 + 1.0


def _vals(seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal(s.shape) / 4).astype(np.float32) for s in SPECS]


def _compile(opts):
    return lower_graph(penguin_of(mlp, *SPECS), "trn1", opts)


def _mode_tolerance_mismatch(got, want, type_flag, mode="matmult"):
    """Compare with the tolerance of the precision the mode computes in: the cast row of the
    tolerance table (fp32 through matmuls on rounded operands) or, under --auto-cast all, the narrow
    type's own compiled row (elementwise results rounded to it)."""
    if mode == "all" and type_flag != "tf32":
        return mismatch(got, want, row="compiled", dtype=policy({"auto_cast_type": type_flag}).dtype)
    return mismatch(got, want, row="compiled", dtype=cast_precision(type_flag))


def test_none_keeps_fp32_exact_as_before():
    m = _compile({"auto_cast": "none"})
    assert "auto_cast" not in m.attrs
    assert all(ap.dtype == "float32" for i in m.instructions() if i.opcode == "matmul" for ap in i.srcs)
    vals = _vals()
    assert mismatch(simulate(m, vals).outputs[0], jax_outputs(mlp, *vals)[0]) == ""


@pytest.mark.parametrize("type_flag", ["bf16", "fp16", "fp8_e4m3"])
def test_matmult_casts_only_the_pe_operands(type_flag):
    m = _compile({"auto_cast": "matmult", "auto_cast_type": type_flag})
    dt = policy({"auto_cast_type": type_flag, "auto_cast": "matmult"}).dtype
    mms = [i for i in m.instructions() if i.opcode == "matmul"]
    assert mms and all(ap.dtype == dt for i in mms for ap in i.srcs)
    assert m.attrs["auto_cast"]["counts"] == {"matmult": 1}
    # nothing else is narrow: every non-PE compute instruction writes fp32 (or the PSUM eviction)
    others = [i for i in m.instructions() if i.engine in ("ACT", "DVE", "POOL") and i.dsts]
    assert all(i.dsts[0].dtype in ("float32", dt) for i in others)
    vals = _vals()
    got = simulate(m, vals).outputs[0]
    assert got.dtype == np.float32                       # the i/o tensors keep the model's type
    assert _mode_tolerance_mismatch(got, jax_outputs(mlp, *vals)[0], type_flag) == ""
    # and it is what rounding the operands and accumulating in fp32 gives
    npdt = NARROW[type_flag]
    x, w, b = vals
    ref = jax_outputs(mlp, x.astype(npdt).astype(np.float32), w.astype(npdt).astype(np.float32), b)[0]
    assert mismatch(got, ref) == ""


def test_all_casts_elementwise_too():
    m = _compile({"auto_cast": "all", "auto_cast_type": "bf16"})
    counts = m.attrs["auto_cast"]["counts"]
    assert counts["matmult"] == 1 and counts["elementwise"] >= 2
    narrow = [i for i in m.instructions() if i.engine in ("ACT", "DVE") and i.dsts and i.dsts[0].dtype == "bfloat16"]
    assert narrow
    vals = _vals()
    assert _mode_tolerance_mismatch(simulate(m, vals).outputs[0], jax_outputs(mlp, *vals)[0], "bf16", "all") == ""


def test_cast_matmuls_run_at_the_low_precision_pe_rate():
    vals = _vals()
    t32 = simulate(_compile({"auto_cast": "none"}), vals).busy_s["PE"]
    t16 = simulate(_compile({"auto_cast": "matmult"}), vals).busy_s["PE"]
    assert t16 < 0.5 * t32


@pytest.mark.parametrize("flag,mode,typ,relayout", [
    ("all", "all", "bf16", True), ("none", "matmult", "bf16", False), ("fp32-cast-all-fp16", "all", "fp16", True),
    ("fp32-cast-matmult-fp16", "matmult", "fp16", True), ("fp32-cast-matmult no-fast-relayout", "matmult", "bf16", False)])
def test_fast_math_values_as_documented(flag, mode, typ, relayout):
    p = policy({"fast_math": flag})
    assert (p.mode, p.type_flag, p.fast_relayout) == (mode, typ, relayout)


def test_policy_refusals_and_report():
    assert policy(None).mode == "none" and policy({"auto_cast": "fp32"}).mode == "none"
    assert policy({"auto_cast": "matmul"}).mode == "matmult"
    with pytest.raises(InvalidArgumentError, match="tf32"):
        policy({"auto_cast": "matmult", "auto_cast_type": "tf32"})
    with pytest.raises(InvalidArgumentError, match="fast-math"):
        policy({"fast_math": "fastest"})
    p = policy({"auto_cast": "all"})
    p.count("matmult", 2)
    p.count("elementwise")
    assert p.report() == ("Auto-cast (--auto-cast all --auto-cast-type bf16): cast 1 elementwise operation and "
                          "2 matrix multiplications (dot/convolution; fp32 accumulation, fp32 result) from fp32 "
                          "to bf16")


def test_bir_sim_judges_by_the_precision_used():
    from neuronxcc.walrus.passes.simcheck import precision_dtype
    assert precision_dtype(_compile({"auto_cast": "none"}), "float32") == "float32"
    mm = _compile({"auto_cast": "matmult", "auto_cast_type": "fp16"})
    assert precision_dtype(mm, "float32") == cast_precision("fp16")
    assert precision_dtype(mm, "int32") == "int32"
    assert precision_dtype(_compile({"auto_cast": "all"}), "float32") == "bfloat16"
