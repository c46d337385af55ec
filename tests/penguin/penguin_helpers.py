"""Test helpers: JAX function -> HLO -> Penguin -> BIR (-> birsim) without the CLI."""
import numpy as np

from neuronxcc.common.tolerances import assert_close


def hlo_bytes(f, *args):
    import jax
    return jax.jit(f).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()


def penguin_of(f, *args):
    from neuronxcc.hlo import load_module
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    return hlo_to_penguin(load_module(hlo_bytes(f, *args)))


def bir_of(f, *args):
    from neuronxcc.starfish.penguin.codegen import lower_graph
    return lower_graph(penguin_of(f, *args))


def jax_outputs(f, *args):
    import jax
    res = jax.jit(f)(*args)
    leaves = jax.tree_util.tree_leaves(res)
    return [np.asarray(r) for r in leaves]


def run_bir(module, args):
    from neuronxcc.starfish import birsim
    return birsim.run_module(module, [np.asarray(a) for a in args])


def check(f, *args):
    """Compile f through Penguin, run on birsim, compare with jax."""
    mod = bir_of(f, *args)
    outs = run_bir(mod, args)
    exp = jax_outputs(f, *args)
    assert len(outs) == len(exp)
    for k, (a, e) in enumerate(zip(outs, exp)):
        assert_close(a, e, "output%d" % k, row="compiled")
    return mod


def rotary(x):
    """The Llama rotary embedding (rotate-half; cos / sin tables built from positions) of a
    [tokens, heads, head_dim] tensor, fp32 math, as the model writes it in jax."""
    import jax.numpy as jnp
    t, h, d = x.shape
    inv = 1.0 / (500000.0 ** (np.arange(0, d, 2, dtype=np.float32) / d))
    ang = jnp.arange(t, dtype=jnp.float32)[:, None] * jnp.asarray(inv)[None, :]
    cos, sin = jnp.cos(ang)[:, None, :], jnp.sin(ang)[:, None, :]
    xf = x.astype(jnp.float32)
    x1, x2 = xf[..., : d // 2], xf[..., d // 2:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)
