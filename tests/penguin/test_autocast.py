"""--auto-cast / --auto-cast-type / --fast-math as the reference documents them: which fp32
operations run in the narrow type, checked against XLA with the mode's tolerance; the cast
operands make the PE run at its low-precision rate; the goldens follow the precision."""
import jax
import ml_dtypes
import jax.numpy as jnp
import numpy as np
import pytest

from neuronxcc.common.dtypes import round_to
from neuronxcc.errors import InvalidArgumentError
from neuronxcc.common.tolerances import cast_precision, mismatch
from neuronxcc.starfish.birsim import simulate
from neuronxcc.starfish.penguin.autocast import policy
from neuronxcc.starfish.penguin.codegen import lower_graph
from penguin_helpers import jax_outputs, penguin_of

SPECS = [jax.ShapeDtypeStruct((256, 384), jnp.float32), jax.ShapeDtypeStruct((384, 256), jnp.float32),
         jax.ShapeDtypeStruct((256,), jnp.float32)]
ROUND = {t: round_to(t if t != "fp8_e4m3" else "float8_e4m3") for t in ("bf16", "fp16", "tf32", "fp8_e4m3")}


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


@pytest.mark.parametrize("type_flag", ["bf16", "fp16", "tf32", "fp8_e4m3"])
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
    x, w, b = vals
    ref = jax_outputs(mlp, ROUND[type_flag](x), ROUND[type_flag](w), b)[0]
    assert mismatch(got, ref) == ""
    if type_flag in ("bf16", "fp8_e4m3"):     # and the rounding shows: exact fp32 it is not
        assert mismatch(got, jax_outputs(mlp, *vals)[0]) != ""


@pytest.mark.parametrize("type_flag", ["bf16", "tf32"])
def test_all_casts_elementwise_too(type_flag):
    m = _compile({"auto_cast": "all", "auto_cast_type": type_flag})
    dt = policy({"auto_cast_type": type_flag}).dtype
    counts = m.attrs["auto_cast"]["counts"]
    assert counts["matmult"] == 1 and counts["elementwise"] >= 2
    narrow = [i for i in m.instructions() if i.engine in ("ACT", "DVE") and i.dsts and i.dsts[0].dtype == dt]
    assert narrow
    vals = _vals()
    got = simulate(m, vals).outputs[0]
    assert _mode_tolerance_mismatch(got, jax_outputs(mlp, *vals)[0], type_flag, "all") == ""
    # elementwise results are rounded too: not what rounding only the matmul operands gives
    x, w, b = vals
    assert mismatch(got, jax_outputs(mlp, ROUND[type_flag](x), ROUND[type_flag](w), b)[0]) != ""


@pytest.mark.parametrize("type_flag", ["bf16", "tf32"])
def test_cast_matmuls_run_at_the_low_precision_pe_rate(type_flag):
    vals = _vals()
    t32 = simulate(_compile({"auto_cast": "none"}), vals).busy_s["PE"]
    t16 = simulate(_compile({"auto_cast": "matmult", "auto_cast_type": type_flag}), vals).busy_s["PE"]
    assert t16 < 0.5 * t32


@pytest.mark.parametrize("flag,mode,typ,relayout", [
    ("all", "all", "bf16", True), ("none", "matmult", "bf16", False), ("fp32-cast-all-fp16", "all", "fp16", True),
    ("fp32-cast-matmult-fp16", "matmult", "fp16", True), ("fp32-cast-matmult no-fast-relayout", "matmult", "bf16", False)])
def test_fast_math_values_as_documented(flag, mode, typ, relayout):
    p = policy({"fast_math": flag})
    assert (p.mode, p.type_flag, p.fast_relayout) == (mode, typ, relayout)


def test_policy_refusals_and_report():
    assert policy(None).mode == "none" and policy({"auto_cast": "fp32"}).mode == "fp32"
    assert policy({"auto_cast": "matmul"}).mode == "matmult"
    assert policy({"auto_cast": "matmult", "auto_cast_type": "tf32"}).dtype == "tfloat32"
    with pytest.raises(InvalidArgumentError, match="--auto-cast-type: unknown type 'int8'"):
        policy({"auto_cast": "matmult", "auto_cast_type": "int8"})
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


BF_SPECS = [jax.ShapeDtypeStruct((128, 256), jnp.bfloat16), jax.ShapeDtypeStruct((256,), jnp.bfloat16)]


def chain(x, b):
    return jnp.tanh(x * 1.7 + b) * x - b * 0.3


def test_fp32_mode_computes_narrow_elementwise_math_in_fp32():
    rng = np.random.default_rng(3)
    vals = [rng.standard_normal(s.shape).astype(ml_dtypes.bfloat16) for s in BF_SPECS]
    m32 = lower_graph(penguin_of(chain, *BF_SPECS), "trn1", {"auto_cast": "fp32"})
    mnone = lower_graph(penguin_of(chain, *BF_SPECS), "trn1", {"auto_cast": "none"})
    assert m32.attrs["auto_cast"]["counts"]["elementwise"] >= 3 and "auto_cast" not in mnone.attrs
    wide = lambda m: [i for i in m.instructions() if i.engine in ("ACT", "DVE") and i.dsts  # noqa: E731
                      and i.dsts[0].dtype == "float32"]
    assert len(wide(m32)) > len(wide(mnone))
    got = simulate(m32, vals).outputs[0]
    assert got.dtype == ml_dtypes.bfloat16                      # the stored tensors keep their types
    assert mismatch(got, jax_outputs(chain, *vals)[0], row="compiled") == ""
    # it is the chain computed in fp32 and rounded once
    f32 = jax_outputs(chain, *[v.astype(np.float32) for v in vals])[0].astype(ml_dtypes.bfloat16)
    assert mismatch(got, f32, row="compiled") == ""
    per_op = simulate(mnone, vals).outputs[0]
    err = lambda a: np.abs(a.astype(np.float64) - f32.astype(np.float64)).sum()  # noqa: E731
    assert err(got) < err(per_op)                               # fewer roundings than per-op bf16
    assert policy({"auto_cast": "fp32"}).report() == ""
    p = policy({"auto_cast": "fp32", "auto_cast_type": "fp16"})
    p.count("elementwise", 3)
    assert p.dtype == "float32" and p.report().startswith("Auto-cast (--auto-cast fp32): computed 3 elementwise "
                                                          "operations of bf16/fp16/fp8 type in fp32 on chip")
