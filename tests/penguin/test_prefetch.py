"""Weight prefetch across kernels (penguin/prefetch.py): a streamed matvec's first weight DMAs go
out before the kernels in front of it, right behind the previous stream's weight loads."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from neuronxcc.starfish.birsim import simulate
from neuronxcc.starfish.penguin import prefetch
from neuronxcc.starfish.birpy import Module
from penguin_helpers import assert_close, bir_of, jax_outputs


def _rms(h):
    hf = h.astype(jnp.float32)
    return (hf * jax.lax.rsqrt(jnp.mean(hf * hf, axis=-1, keepdims=True) + 1e-5)).astype(h.dtype)


def _reads(node, name):
    if node.kind == "inst":
        return any(ap.target == name for ap in node.srcs)
    return any(_reads(n, name) for body in node.children() for n in body)


def test_next_weight_streams_while_the_norm_between_two_matvecs_computes():
    # x @ w1 -> RMSNorm -> @ w2: w2's two peeled weight DMAs move in front of the norm's kernels,
    # behind w1's weight loads (a K loop here); the result still matches JAX
    s = [jax.ShapeDtypeStruct((1, 4096), jnp.bfloat16), jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16),
         jax.ShapeDtypeStruct((4096, 2048), jnp.bfloat16)]

    def f(x, w1, w2):
        return _rms(x @ w1) @ w2
    mod = bir_of(f, *s)
    body = mod.body
    w1_loads = [k for k, n in enumerate(body) if _reads(n, "input1")]
    w2_loads = [k for k, n in enumerate(body) if _reads(n, "input2")]
    first_w2 = w2_loads[0]
    assert first_w2 > w1_loads[-1], (w1_loads, w2_loads)
    assert [body[k].opcode for k in w2_loads[:2]] == ["dma_copy", "dma_copy"]
    # the norm (a reduce kernel) runs between the moved DMAs and w2's matmuls
    names = [getattr(n, "name", None) or "" for n in body[first_w2:]]
    assert any(nm.startswith("reduce") for nm in names)
    norm_at = first_w2 + next(k for k, nm in enumerate(names) if nm.startswith("reduce"))
    assert all(k < norm_at for k in w2_loads[:2]) and w2_loads[2] > norm_at
    rng = np.random.default_rng(3)
    args = [(rng.standard_normal(a.shape) / 8).astype(ml_dtypes.bfloat16) for a in s]
    assert_close(simulate(mod, args).outputs[0], jax_outputs(f, *args)[0], "rms(x @ w1) @ w2")


def test_a_dma_never_moves_over_a_write_of_the_tensor_it_reads():
    # the scan stops at a node that writes the moved DMA's source (or touches its buffer)
    from neuronxcc.starfish import birpy
    m = Module("m", "trn1")
    m.add_tensor("w", "input", "bfloat16", (128, 64))
    m.add_tensor("o", "output", "bfloat16", (128, 64))
    m.add_memloc("a", "SBUF", 128, 128)
    m.add_memloc("b", "SBUF", 128, 128)
    b = birpy.Builder(m)
    hbm = lambda t: birpy.AccessPattern(t, "bfloat16", 0, [[64, 128], [1, 64]])    # noqa: E731
    chip = lambda ml: birpy.AccessPattern(ml, "bfloat16", 0, [[1, 64]], 0, 128)     # noqa: E731
    other = b.inst("dma_copy", "SP", [chip("a")], [hbm("o")], queue="q0")
    write = b.inst("dma_copy", "SP", [hbm("w")], [chip("a")], queue="q1")
    mid = b.inst("dma_copy", "SP", [hbm("o")], [chip("a")], queue="q2")
    load = b.inst("dma_copy", "SP", [chip("b")], [hbm("w")], queue="q3")
    assert prefetch.hoist(m, [([load], load)]) == 1
    assert m.body == [other, write, load, mid]


def _matmuls_reading(node, name):
    if node.kind == "inst":
        return node.opcode == "matmul" and any(ap.target == name for ap in node.srcs)
    return any(_matmuls_reading(n, name) for body in node.children() for n in body)


def test_the_last_stream_runs_its_held_step_before_its_k_loop():
    # one streamed matvec (8 weight steps: step 0 and the last are loaded before the K loop): being the
    # program's last stream, the held last step's matmuls sit in front of the K loop, not after it
    # (where they would run after the last weight DMA), and the result still matches JAX
    s = [jax.ShapeDtypeStruct((1, 4096), jnp.bfloat16), jax.ShapeDtypeStruct((4096, 4096), jnp.bfloat16)]

    def f(x, w):
        return x @ w
    mod = bir_of(f, *s)
    body = mod.body
    kloop = next(k for k, n in enumerate(body) if n.kind == "loop" and _reads(n, "input1"))
    held_buf = next(ap.target for n in body[:kloop] if n.kind == "inst" and n.opcode == "dma_copy"
                    for ap in n.dsts if any(a.target == "input1" for a in n.srcs))
    bufs = [n.dsts[0].target for n in body[:kloop] if n.kind == "inst" and n.opcode == "dma_copy"
            and any(a.target == "input1" for a in n.srcs)]
    assert len(bufs) == 2 and held_buf == bufs[0]
    held = bufs[1]
    uses = [k for k, n in enumerate(body) if _matmuls_reading(n, held)]
    assert uses and max(uses) < kloop, (uses, kloop)
    rng = np.random.default_rng(5)
    args = [(rng.standard_normal(a.shape) / 8).astype(ml_dtypes.bfloat16) for a in s]
    assert_close(simulate(mod, args).outputs[0], jax_outputs(f, *args)[0], "x @ w")
