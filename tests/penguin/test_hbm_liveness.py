"""HBM by liveness at the Penguin level: a while's loop-invariant operands (lax.scan's stacked
weights) are read in place, a loop-carried value whose operand dies at the while is updated in
that operand's own tensor, and the HBM check counts what is live at once, so programs whose
summed intermediates exceed HBM but whose live set fits compile. Numerics against jax on birsim."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from neuronxcc.errors import TensorTooLargeError
from neuronxcc.starfish.birpy import hbm
from neuronxcc.starfish.penguin.codegen import lower_graph
from penguin_helpers import check, penguin_of

GiB = 1 << 30


def _scan(x, ws, bs):
    def body(h, wb):
        w, b = wb
        return jnp.tanh(h @ w + b), (h * 2.0).sum()
    return jax.lax.scan(body, x, (ws, bs))


def _scratch(m):
    return [t for t in m.tensors.values() if t.kind == "scratch"]


def test_scan_reads_its_stacked_weights_in_place():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 64)).astype(np.float32)
    ws = (rng.standard_normal((6, 64, 64)) / 8).astype(np.float32)
    bs = rng.standard_normal((6, 64)).astype(np.float32)
    m = check(_scan, x, ws, bs)
    # no state tensor or per-trip temporary as large as the stacked weights
    assert max(t.nbytes for t in _scratch(m)) < ws.nbytes // 4
    assert not [t for t in _scratch(m) if t.shape == ws.shape]


def test_a_while_operand_that_dies_there_is_updated_in_place():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)

    def f(x, w, n):
        y = x @ w                                  # materialised; its only use is the loop
        return jax.lax.fori_loop(0, n, lambda i, c: c * 0.5 + 1.0, y)
    m = check(f, x, w, np.int32(3))
    assert not [t for t in _scratch(m) if t.name.startswith("state_") and t.shape == (128, 64)]


def test_a_scan_whose_stacked_weights_fill_most_of_hbm_compiles():
    """9.1 GB of stacked bf16 weights on a 16 GiB core: a state copy (18 GB) cannot fit."""
    ws = jax.ShapeDtypeStruct((68, 8192, 8192), jnp.bfloat16)
    x = jax.ShapeDtypeStruct((1, 8192), jnp.bfloat16)

    def f(x, ws):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0]
    m = lower_graph(penguin_of(f, x, ws), "trn1")
    weights = 68 * 8192 * 8192 * 2
    assert hbm.footprint(m) < weights + GiB // 4
    assert sum(t.nbytes for t in _scratch(m)) < GiB // 4


def _chain(x, w):
    for _ in range(10):
        x = jnp.tanh(x @ w)
    return x


def test_the_hbm_check_counts_what_is_live_at_once():
    """Ten 2 GiB matmul results (20 GiB summed) of which two are live at a time."""
    x = jax.ShapeDtypeStruct((32768, 16384), jnp.float32)
    w = jax.ShapeDtypeStruct((16384, 16384), jnp.float32)
    m = lower_graph(penguin_of(_chain, x, w), "trn1")
    summed = sum(t.nbytes for t in _scratch(m))
    assert summed > 16 * GiB
    assert hbm.arena_bytes(m) <= 3 * 2 * GiB
    assert hbm.footprint(m) < 16 * GiB


def test_a_program_whose_live_set_does_not_fit_still_fails_the_check():
    x = jax.ShapeDtypeStruct((32768, 16384), jnp.float32)
    w = jax.ShapeDtypeStruct((16384, 16384), jnp.float32)

    def f(x, w):
        ys = [jnp.tanh((x + k) @ w) for k in range(8)]
        return jnp.concatenate(ys, axis=1).sum(axis=1)     # one op reads all eight: live at once
    with pytest.raises(TensorTooLargeError, match="at once"):
        lower_graph(penguin_of(f, x, w), "trn1")
