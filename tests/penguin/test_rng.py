"""rng-bit-generator on the device, bit-exact with XLA:CPU: Philox (rng_default / rng_philox) and
Threefry for the output shapes and dtypes jax emits, jax's rbg keys, torch-xla's seed-built
state, and dropout inside a training step whose mask (and so every output) equals XLA's."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from hlo_text_helpers import check_text
from penguin_helpers import check

ALGS = {"philox": lax.RandomAlgorithm.RNG_PHILOX, "default": lax.RandomAlgorithm.RNG_DEFAULT,
        "three_fry": lax.RandomAlgorithm.RNG_THREE_FRY}


# Philox costs ~750 Penguin ops per generator: each algorithm gets its own share of the cases
# (rng_default is Philox on XLA:CPU too); a chained state checks the new state's words.
CASES = {"default": (((5, 7), jnp.uint32), ((2, 3, 5), jnp.uint8)),
         "philox": (((33,), jnp.uint32), ((4, 9), jnp.uint16)),
         "three_fry": (((5, 7), jnp.uint32), ((33,), jnp.uint32), ((2, 3, 5), jnp.uint8), ((6, 1, 4), jnp.uint16),
                       ((1,), jnp.uint32))}


@pytest.mark.parametrize("alg", sorted(ALGS))
def test_rng_bit_generator_shapes_and_dtypes_bit_exact(alg):
    key = np.array([12345, 678, 0xDEADBEEF, 0x7FFFFFFF], np.uint32)

    def f(k):
        outs = []
        for shape, dt in CASES[alg]:
            k, bits = lax.rng_bit_generator(k, shape, dtype=dt, algorithm=ALGS[alg])
            outs.append(bits)
        return outs
    check(f, key)


def test_jax_rbg_random_api_and_dropout_training_step():
    kd = np.asarray(jax.random.key_data(jax.random.key(7, impl="rbg")))
    x = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)
    w = np.random.default_rng(1).standard_normal((32, 8)).astype(np.float32) * 0.1

    def step(kd, x, w):
        key = jax.random.wrap_key_data(kd, impl="rbg")

        def loss(w):
            keep = jax.random.bernoulli(key, 0.9, x.shape)
            h = jnp.where(keep, x / 0.9, 0.0)
            return jnp.mean(jnp.tanh(h @ w) ** 2)
        l, g = jax.value_and_grad(loss)(w)
        return l, w - 0.1 * g, jax.random.bernoulli(key, 0.9, x.shape)
    hlo = jax.jit(step).lower(kd, x, w).compiler_ir("hlo").as_hlo_text()
    assert "rng-bit-generator" in hlo
    check(step, kd, x, w)


TORCH_STATE = """HloModule torch_dropout
ENTRY main {
  seed = s64[] parameter(0)
  x = f32[8,64] parameter(1)
  s = u64[] convert(seed)
  s1 = u64[1] reshape(s)
  z = u64[1] constant({0})
  st = u64[2] concatenate(s1, z), dimensions={0}
  r = (u64[2], u32[8,64]) rng-bit-generator(st), algorithm=rng_default
  bits = u32[8,64] get-tuple-element(r), index=1
  k = u32[] constant(9)
  kb = u32[8,64] broadcast(k), dimensions={}
  sh = u32[8,64] shift-right-logical(bits, kb)
  one = u32[] constant(1065353216)
  ob = u32[8,64] broadcast(one), dimensions={}
  o = u32[8,64] or(sh, ob)
  f = f32[8,64] bitcast-convert(o)
  c1 = f32[] constant(1)
  cb = f32[8,64] broadcast(c1), dimensions={}
  u = f32[8,64] subtract(f, cb)
  p = f32[] constant(0.9)
  pb = f32[8,64] broadcast(p), dimensions={}
  keep = pred[8,64] compare(u, pb), direction=LT
  zero = f32[] constant(0)
  zb = f32[8,64] broadcast(zero), dimensions={}
  ROOT y = f32[8,64] select(keep, x, zb)
}"""


@pytest.mark.parametrize("seed", [42, 2 ** 31 - 5])
def test_torch_xla_style_seed_state_dropout(seed):
    x = np.random.default_rng(2).standard_normal((8, 64)).astype(np.float32)
    # the same stream from XLA:CPU: state (seed, 0) as a u32[4] key for lax.rng_bit_generator
    key = np.array([seed & 0xFFFFFFFF, seed >> 32, 0, 0], np.uint32)
    bits = np.asarray(jax.jit(lambda k: lax.rng_bit_generator(k, (8, 64), dtype=jnp.uint32)[1])(key))
    u = (((bits >> 9) | np.uint32(0x3F800000)).view(np.float32) - 1.0)
    want = np.where(u < np.float32(0.9), x, 0.0).astype(np.float32)
    check_text(TORCH_STATE, [np.int64(seed), x], expected=[want])


def test_64_bit_outputs_refused_with_reason():
    from neuronxcc.errors import UnsupportedOperatorError
    from hlo_text_helpers import compile_text
    text = """HloModule r64
ENTRY main {
  s = u64[2] parameter(0)
  ROOT r = (u64[2], u64[4]) rng-bit-generator(s), algorithm=rng_default
}"""
    with pytest.raises(UnsupportedOperatorError) as ei:
        compile_text(text)
    assert "64-bit random outputs" in ei.value.one_line()
