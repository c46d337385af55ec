"""HLO breadth through the whole compiler (neuronx-cc compile: goldens, lowering, walrus, the
compiler's own bir_sim check, NEFF) as a user hands it over: torch-xla's LayerNorm forward and
backward (batch-norm-training / -grad) with its any/all reducers in headerless HLO text, and a
JAX training step with dropout from an rbg key and a 3x3 stride-2 padded max pool's gradient."""
import os

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from neuronxcc.common.tolerances import mismatch
from support.cli import run_ncc
from support.hlo_reducers import torch_bool_reducer

TORCH_LN = torch_bool_reducer("or_f", "or") + """
ENTRY SyncTensorsGraph.42 {
  x = f32[1,96,48] parameter(0)
  dy = f32[1,96,48] parameter(1)
  one = f32[] constant(1)
  zero = f32[] constant(0)
  sc = f32[96] broadcast(one), dimensions={}
  of = f32[96] broadcast(zero), dimensions={}
  bn = (f32[1,96,48], f32[96], f32[96]) batch-norm-training(x, sc, of), epsilon=1e-05, feature_index=1
  y = f32[1,96,48] get-tuple-element(bn), index=0
  m = f32[96] get-tuple-element(bn), index=1
  v = f32[96] get-tuple-element(bn), index=2
  g = (f32[1,96,48], f32[96], f32[96]) batch-norm-grad(x, sc, m, v, dy), epsilon=1e-05, feature_index=1
  dx = f32[1,96,48] get-tuple-element(g), index=0
  big = f32[1,96,48] broadcast(one), dimensions={}
  c = pred[1,96,48] compare(y, big), direction=GT
  f = pred[] constant(false)
  any = pred[1,96] reduce(c, f), dimensions={2}, to_apply=or_f
  ROOT t = (f32[1,96,48], f32[1,96,48], pred[1,96]) tuple(y, dx, any)
}
"""


def _compile(model, out_dir):
    neff = os.path.join(out_dir, "out.neff")
    r = run_ncc(["compile", model, "--framework", "XLA", "--target", "trn1", "--output", neff], cwd=out_dir)
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    return neff


def test_torch_xla_layernorm_forward_backward_headerless_text(tmp_path):
    from neuronxcc.hlo import load_module
    from neuronxcc.hlo.interpreter import evaluate
    from neuronxcc.starfish.birsim import run_neff
    model = tmp_path / "graph.hlo"
    model.write_text(TORCH_LN)
    neff = _compile(str(model), str(tmp_path))
    r = np.random.default_rng(1)
    args = [r.standard_normal((1, 96, 48)).astype(np.float32) * 2 + 1,
            r.standard_normal((1, 96, 48)).astype(np.float32)]
    outs = run_neff(neff, args)
    want = evaluate(load_module(str(model)), args)
    x = args[0].astype(np.float64)
    ln = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    assert mismatch(np.asarray(want[0]), ln.astype(np.float32)) == ""
    problems = [why for a, e in zip(outs, want) for why in [mismatch(np.asarray(a), np.asarray(e))] if why]
    assert not problems, problems


def _step(kd, x, w):
    key = jax.random.wrap_key_data(kd, impl="rbg")

    def loss(w, x):
        y = lax.reduce_window(x, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0)))
        keep = jax.random.bernoulli(key, 0.8, y.shape)
        h = jnp.where(keep, y / 0.8, 0.0).reshape(y.shape[0], -1)
        return jnp.mean(jnp.tanh(h @ w) ** 2)
    l, (gw, gx) = jax.value_and_grad(loss, argnums=(0, 1))(w, x)
    return l, w - 0.1 * gw, gx


def test_jax_training_step_with_dropout_and_max_pool_gradient(tmp_path):
    from neuronxcc.starfish.birsim import run_neff
    kd = np.asarray(jax.random.key_data(jax.random.key(3, impl="rbg")))
    r = np.random.default_rng(2)
    x = r.standard_normal((2, 9, 9, 4)).astype(np.float32)
    w = (r.standard_normal((5 * 5 * 4, 6)) * 0.1).astype(np.float32)
    lowered = jax.jit(_step).lower(kd, x, w).compiler_ir("hlo")
    text = lowered.as_hlo_text()
    assert "rng-bit-generator" in text and "select-and-scatter" in text
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(lowered.as_serialized_hlo_module_proto())
    neff = _compile(str(model), str(tmp_path))
    outs = run_neff(neff, [kd, x, w])
    ref = [np.asarray(v) for v in jax.jit(_step)(kd, x, w)]
    problems = ["output%d: %s" % (k, why) for k, (a, e) in enumerate(zip(outs, ref))
                for why in [mismatch(np.asarray(a), e)] if why]
    assert not problems, problems


def _small_resnet_step(x, w1, w2, g, b):
    def conv(h, w):
        return lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loss(w1, w2, g, b):
        h = conv(x, w1)
        m, v = h.mean((0, 1, 2)), h.var((0, 1, 2))
        h = jax.nn.relu((h - m) * lax.rsqrt(v + 1e-5) * g + b)
        return jnp.mean((conv(h, w2) + x) ** 2)
    return jax.value_and_grad(loss, argnums=(0, 1, 2, 3))(w1, w2, g, b)


def test_small_channel_resnet_training_step_fits_psum(tmp_path):
    # every 3x3 kernel position of a 4-channel conv gradient loads a small PE-transposed operand
    # inside one loop; their PSUM banks, sized to a whole bank but written in part, all stayed live
    # over the loop and the program failed PSUM allocation (NCC_EOOM002)
    from neuronxcc.starfish.birsim import run_neff
    r = np.random.default_rng(5)
    args = [r.standard_normal((2, 6, 6, 4)).astype(np.float32),
            (r.standard_normal((3, 3, 4, 4)) * 0.3).astype(np.float32),
            (r.standard_normal((3, 3, 4, 4)) * 0.3).astype(np.float32),
            np.ones(4, np.float32), np.zeros(4, np.float32)]
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(jax.jit(_small_resnet_step).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto())
    outs = run_neff(_compile(str(model), str(tmp_path)), args)
    ref = [np.asarray(v) for v in jax.tree_util.tree_leaves(jax.jit(_small_resnet_step)(*args))]
    problems = ["output%d: %s" % (k, why) for k, (a, e) in enumerate(zip(outs, ref))
                for why in [mismatch(np.asarray(a), e)] if why]
    assert not problems, problems
