"""Elementwise chains jax emits for the ScalarE functions become one ACT instruction (birsim
computes the function per its public definition); near misses stay per-op and correct."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from neuronxcc.starfish.birsim import simulate
from penguin_helpers import assert_close, bir_of, jax_outputs

ONE_ACT = [
    ("gelu_apprx_tanh", lambda x: jax.nn.gelu(x, approximate=True)),
    ("gelu", lambda x: jax.nn.gelu(x, approximate=False)),
    ("silu", jax.nn.silu),
    ("sigmoid", jax.nn.sigmoid),
    ("softplus", jax.nn.softplus),
    ("mish", lambda x: x * jnp.tanh(jax.nn.softplus(x))),
    ("rsqrt", lambda x: 1.0 / jnp.sqrt(x)),
]


def _x(pos=False):
    x = np.random.default_rng(0).standard_normal((128, 96)).astype(np.float32) * 4
    return np.abs(x) + 1e-3 if pos else x


def _compute(mod):
    return [(i.opcode, i.engine, i.attrs.get("func")) for i in mod.instructions() if not i.opcode.startswith("dma")]


@pytest.mark.parametrize("func,f", ONE_ACT, ids=[n for n, _ in ONE_ACT])
def test_chain_is_one_activation(func, f):
    s = jax.ShapeDtypeStruct((128, 96), jnp.float32)
    mod = bir_of(f, s)
    assert _compute(mod) == [("activation", "ACT", func)]
    x = _x(func == "rsqrt")
    assert_close(simulate(mod, [x]).outputs[0], jax_outputs(f, x)[0], func)


def test_activation_of_a_matmul_output_with_bias():
    # the variable of the chain is an inner value (x @ w + b), not an input
    def f(x, w, b):
        return jax.nn.gelu(x @ w + b, approximate=False)
    args = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((128, 128), (128, 256), (256,))]
    mod = bir_of(f, *args)
    acts = [c for c in _compute(mod) if c[0] == "activation"]
    assert ("activation", "ACT", "gelu") in acts
    rng = np.random.default_rng(1)
    vals = [(rng.standard_normal(a.shape) / 4).astype(np.float32) for a in args]
    assert_close(simulate(mod, vals).outputs[0], jax_outputs(f, *vals)[0], "gelu(x @ w + b)")


@pytest.mark.parametrize("name,f", [("erfc", jax.lax.erfc), ("recip_abs", lambda x: 1.0 / jnp.abs(x)),
                                    ("log_abs", lambda x: jnp.log(jnp.abs(x))),
                                    ("swish_beta2", lambda x: x * jax.nn.sigmoid(2 * x))])
def test_near_misses_are_not_matched(name, f):
    s = jax.ShapeDtypeStruct((128, 96), jnp.float32)
    mod = bir_of(f, s)
    funcs = {c[2] for c in _compute(mod) if c[0] == "activation"}
    assert not funcs & {"reciprocal", "log", "gelu", "silu", "erf"} or name == "log_abs" and funcs == {"abs", "log"}
    x = _x()
    assert_close(simulate(mod, [x]).outputs[0], jax_outputs(f, x)[0], name)
