"""batch-norm-training / -inference / -grad: torch-xla's LayerNorm ([1, rows, D], scale 1,
offset 0) and BatchNorm2d (NCHW, feature_index 1) written as the HLO torch-xla emits,
compiled and run on birsim, checked against the interpreter, whose batch-norm handlers
are checked here against the formulas XLA's semantics define."""
import ml_dtypes
import numpy as np
import pytest

from hlo_text_helpers import check_text, compile_text
from neuronxcc.common.tolerances import assert_close

R = np.random.default_rng(7)


def _layernorm_hlo(dt, rows, d, outputs="y"):
    root = {"y": "ROOT y = %s[1,%d,%d] get-tuple-element(bn), index=0" % (dt, rows, d),
            "all": "y = %s[1,%d,%d] get-tuple-element(bn), index=0\n  m = %s[%d] get-tuple-element(bn), index=1\n"
                   "  v = %s[%d] get-tuple-element(bn), index=2\n  ROOT t = (%s[1,%d,%d], %s[%d], %s[%d]) "
                   "tuple(y, m, v)" % (dt, rows, d, dt, rows, dt, rows, dt, rows, d, dt, rows, dt, rows)}[outputs]
    return """HloModule SyncTensorsGraph.1
ENTRY main {
  x = %(dt)s[1,%(r)d,%(d)d] parameter(0)
  one = %(dt)s[] constant(1)
  zero = %(dt)s[] constant(0)
  sc = %(dt)s[%(r)d] broadcast(one), dimensions={}
  of = %(dt)s[%(r)d] broadcast(zero), dimensions={}
  bn = (%(dt)s[1,%(r)d,%(d)d], %(dt)s[%(r)d], %(dt)s[%(r)d]) batch-norm-training(x, sc, of), epsilon=1e-05, feature_index=1
  %(root)s
}""" % {"dt": dt, "r": rows, "d": d, "root": root}


def _np_stats(x, axes):
    x = x.astype(np.float64)
    return x.mean(axis=axes), x.var(axis=axes)


def test_interpreter_batch_norm_matches_the_formulas():
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.hlo.interpreter import evaluate
    x = R.standard_normal((1, 6, 10)).astype(np.float32) * 2 + 1
    y, m, v = evaluate(parse_hlo_text(_layernorm_hlo("f32", 6, 10, "all")), [x])
    em, ev = _np_stats(x, (0, 2))
    assert_close(m, em, row="compiled")
    assert_close(v, ev, row="compiled")
    assert_close(y, (x - em[None, :, None]) / np.sqrt(ev[None, :, None] + 1e-5), row="compiled")


def test_layernorm_as_batch_norm_training_f32_all_outputs():
    x = R.standard_normal((1, 200, 96)).astype(np.float32) * 3 + 0.5
    check_text(_layernorm_hlo("f32", 200, 96, "all"), [x])


def test_layernorm_as_batch_norm_training_bf16():
    x = (R.standard_normal((1, 130, 64)) * 2).astype(ml_dtypes.bfloat16)
    check_text(_layernorm_hlo("bf16", 130, 64, "all"), [x])


def test_layernorm_as_batch_norm_is_as_cheap_as_the_hand_written_layernorm():
    """Row statistics fused in one pass: no more instructions than jax's own layernorm."""
    import jax
    from penguin_helpers import bir_of
    _, bn = compile_text(_layernorm_hlo("f32", 256, 64))

    def ln(x):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    ref = bir_of(ln, np.zeros((256, 64), np.float32))
    assert len(list(bn.instructions())) <= len(list(ref.instructions()))
    assert not [t for t in bn.tensors.values() if t.kind == "scratch"]


BN2D_TRAIN = """HloModule bn2d
ENTRY main {
  x = f32[4,6,5,7] parameter(0)
  s = f32[6] parameter(1)
  o = f32[6] parameter(2)
  ROOT bn = (f32[4,6,5,7], f32[6], f32[6]) batch-norm-training(x, s, o), epsilon=0.001, feature_index=1
}"""

BN2D_INFER = """HloModule bn2d_eval
ENTRY main {
  x = bf16[3,8,4,4] parameter(0)
  s = bf16[8] parameter(1)
  o = bf16[8] parameter(2)
  m = bf16[8] parameter(3)
  v = bf16[8] parameter(4)
  ROOT y = bf16[3,8,4,4] batch-norm-inference(x, s, o, m, v), epsilon=1e-05, feature_index=1
}"""

BN_GRAD = """HloModule bn_grad
ENTRY main {
  x = f32[%s] parameter(0)
  s = f32[%d] parameter(1)
  m = f32[%d] parameter(2)
  v = f32[%d] parameter(3)
  dy = f32[%s] parameter(4)
  ROOT g = (f32[%s], f32[%d], f32[%d]) batch-norm-grad(x, s, m, v, dy), epsilon=1e-05, feature_index=%d
}"""


def test_batchnorm2d_training_nchw():
    x = R.standard_normal((4, 6, 5, 7)).astype(np.float32) + 2
    s, o = R.standard_normal(6).astype(np.float32), R.standard_normal(6).astype(np.float32)
    outs, _ = check_text(BN2D_TRAIN, [x, s, o])
    em, ev = _np_stats(x, (0, 2, 3))
    assert_close(outs[1], em, row="compiled")
    assert_close(outs[2], ev, row="compiled")


def test_batchnorm2d_inference_bf16():
    bf = ml_dtypes.bfloat16
    x = R.standard_normal((3, 8, 4, 4)).astype(bf)
    s, o, m = (R.standard_normal(8).astype(bf) for _ in range(3))
    v = R.uniform(0.5, 2.0, 8).astype(bf)
    check_text(BN2D_INFER, [x, s, o, m, v])


@pytest.mark.parametrize("dims,fi", [((1, 40, 48), 1), ((5, 3, 6, 4), 1), ((12, 9), 1)])
def test_batch_norm_grad(dims, fi):
    c = dims[fi]
    ds = ",".join(map(str, dims))
    text = BN_GRAD % (ds, c, c, c, ds, ds, c, c, fi)
    x = R.standard_normal(dims).astype(np.float32)
    axes = tuple(k for k in range(len(dims)) if k != fi)
    m, v = (a.astype(np.float32) for a in _np_stats(x, axes))
    s = R.standard_normal(c).astype(np.float32)
    dy = R.standard_normal(dims).astype(np.float32)
    outs, _ = check_text(text, [x, s, m, v, dy])
    # grad_offset is the sum of dy over the non-feature axes
    assert_close(outs[2], dy.astype(np.float64).sum(axis=axes), row="compiled")


def test_interpreter_batch_norm_grad_is_the_gradient_of_training():
    """XLA's batch-norm-grad is the vjp of batch-norm-training's output (jax computes it)."""
    import jax
    import jax.numpy as jnp
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.hlo.interpreter import evaluate
    x = R.standard_normal((5, 3, 6, 4)).astype(np.float32)
    s = R.standard_normal(3).astype(np.float32)
    dy = R.standard_normal(x.shape).astype(np.float32)

    def train(x, s, o):
        m = x.mean(axis=(0, 2, 3), keepdims=True)
        v = ((x - m) ** 2).mean(axis=(0, 2, 3), keepdims=True)
        return (x - m) * jax.lax.rsqrt(v + 1e-5) * s[None, :, None, None] + o[None, :, None, None]
    _, vjp = jax.vjp(train, x, s, np.zeros(3, np.float32))
    want = vjp(dy)
    m, v = (a.astype(np.float32) for a in _np_stats(x, (0, 2, 3)))
    text = BN_GRAD % ("5,3,6,4", 3, 3, 3, "5,3,6,4", "5,3,6,4", 3, 3, 1)
    got = evaluate(parse_hlo_text(text), [x, s, m, v, dy])
    for g, w in zip(got, want):
        assert_close(g, np.asarray(w), row="compiled")
