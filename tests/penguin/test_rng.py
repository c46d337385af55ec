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


@pytest.mark.parametrize("alg", ["philox", "three_fry"])
def test_64_bit_outputs_are_xlas_low_words(alg):
    """u64 outputs (jax.random's 64-bit draws under x64 with the rbg PRNG): every value is two words
    (x0 | x1 << 32) and the device holds a 64-bit integer as its low word (README), so the low 32
    bits of each value and of the new state are XLA:CPU's; a u32 draw from the state that follows
    is exact. They used to be refused."""
    from penguin_helpers import bir_of, jax_outputs, run_bir
    key = np.array([0x89ABCDEF, 0x01234567, 0xFFFFFFF0, 0xFFFFFFFF], np.uint32)   # the counter wraps

    def f(k):
        s = lax.bitcast_convert_type(k.reshape(2, 2), jnp.uint64)
        s1, a = lax.rng_bit_generator(s, (5,), jnp.uint64, ALGS[alg])
        s2, b = lax.rng_bit_generator(s1, (2, 3), jnp.uint64, ALGS[alg])
        _, c = lax.rng_bit_generator(s2, (7,), jnp.uint32, ALGS[alg])
        return s1, a, s2, b, c
    jax.config.update("jax_enable_x64", True)
    try:
        got = run_bir(bir_of(f, key), [key])
        want = jax_outputs(f, key)
    finally:
        jax.config.update("jax_enable_x64", False)
    assert len(got) == len(want) == 5
    for k, (g, w) in enumerate(zip(got, want)):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, k
        assert np.array_equal(g.astype(np.uint64) & 0xFFFFFFFF, w.astype(np.uint64) & 0xFFFFFFFF), k
    assert np.array_equal(got[4], want[4])


def test_the_compile_check_compares_64_bit_goldens_as_the_device_holds_them():
    """bir_sim's check reduces a 64-bit integer golden to the word the device holds (its low 32
    bits, sign-extended for s64): a u64 random draw's golden has all 64 bits."""
    from neuronxcc.walrus.passes.simcheck import device_word
    s = np.array([2 ** 40 + 5, -1, 2 ** 31, -2 ** 31 - 1, 7], np.int64)
    assert device_word(s, "int64").tolist() == [5, -1, -2 ** 31, 2 ** 31 - 1, 7]
    u = np.array([2 ** 40 + 5, 2 ** 64 - 1, 2 ** 31], np.uint64)
    assert device_word(u, "uint64").tolist() == [5, 2 ** 32 - 1, 2 ** 31]
    f = np.array([1.5], np.float64)
    assert device_word(f, "float64") is f


def test_the_compile_check_says_when_a_64_bit_golden_needs_more_than_its_low_word(caplog):
    """The low-word comparison passes, and the log names the output whose goldens hold more."""
    import logging
    from types import SimpleNamespace
    from neuronxcc.walrus.passes.simcheck import BirSim
    module = SimpleNamespace(outputs=["o", "p"], attrs={},
                             tensors={"o": SimpleNamespace(dtype="int64"), "p": SimpleNamespace(dtype="int64")})
    small = np.array([3, -4], np.int64)
    wide = np.array([2 ** 40 + 3, -4], np.int64)
    with caplog.at_level(logging.WARNING, logger="neuronxcc.walrus"):
        BirSim._compare(None, module, [small, small], [small, wide], [None, None], "")
    said = [r.getMessage() for r in caplog.records if "beyond 32 bits" in r.getMessage()]
    assert len(said) == 1 and "'p'" in said[0], said
