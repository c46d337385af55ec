"""Ops along axes longer than one kernel call takes, as real clients emit them, compiled through
Penguin and run on birsim against JAX:

* sorts of rows longer than the sort custom op's row (top-p sampling sorts the whole vocabulary,
  descending, with its positions): chunk sorts merged by a bitonic network (penguin/longsort.py);
  a top-k of more candidates than the two-round top-k holds goes through the same sort;
* cumulative sums along axes too long for one triangle matrix (top-p's cumsum of the sorted
  probabilities): blocked prefix sums;
* reduce-windows of more than 4096 taps along one axis (sqrt-sized steps, recursively);
* max-pool gradients (jax.grad of a max-pool: select-and-scatter) over windows of more than 64
  positions, overlapping or not.

Each of them used to be refused (or, for cumsum, ran out of HBM on an (n, n) triangle). The long
forms are also checked at small sizes with the kernel limits patched down, so every merge level and
the recursion run in a second.
"""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import lax

from penguin_helpers import check
from support.sampling import top_p_threshold

R = np.random.RandomState(23)


def _edge_rows(rows, n):
    x = R.randn(rows, n).astype(np.float32)
    x[0, ::7] = x[0, 3]                       # ties: the stable order keeps positions ascending
    x[-1, 5] = np.nan
    x[-1, 9] = -np.inf
    x[-1, 11] = np.inf
    x[-1, 100:130] = 0.0
    x[-1, 131] = -0.0
    x[-1, 140] = 1e-40                        # subnormal: equal to zero for XLA's compare
    return x


def _sorts(x):
    i = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    v, j = lax.sort((x, i), dimension=1, num_keys=1)
    return v, j, jnp.argsort(x, axis=1, descending=True, stable=True), jnp.sort(x, axis=1, descending=True)


@pytest.mark.parametrize("patched", [False, True])
def test_sorts_of_rows_longer_than_the_custom_op_row(monkeypatch, patched):
    if patched:
        from neuronxcc.starfish.penguin import windows
        monkeypatch.setattr(windows, "SORT_MAX_ROW", 64)     # 300 -> 5 chunks padded to 8: three merge levels
        x = _edge_rows(3, 300)
        x[1] = np.round(x[1] * 2)                 # many ties across every chunk
    else:
        x = _edge_rows(2, 20000)
    check(_sorts, x)


def test_top_p_sampling_over_a_128k_vocabulary():
    """Nucleus filtering as samplers write it over Llama-3's 128256-token vocabulary: the logits
    sorted descending with their positions, softmax, cumulative sum, the kept set."""
    x = (R.randn(1, 128256) * 4.5).astype(np.float32)
    x[0, ::97] = -np.inf                          # tokens masked before sampling
    th = top_p_threshold(x, 0.9)

    def top_p(x):
        i = lax.broadcasted_iota(jnp.int32, x.shape, 1)
        sv, si = lax.sort((-x, i), dimension=1, num_keys=1)
        p = jax.nn.softmax(-sv, axis=-1)
        c = jnp.cumsum(p, axis=-1)
        keep = c - p < th
        return si, jnp.where(keep, -sv, -jnp.inf), c
    check(top_p, x)


def test_top_k_of_more_candidates_than_two_rounds_hold():
    x = R.randn(2, 20000).astype(np.float32)
    x[:, ::5] = 0.5
    check(lambda x: lax.top_k(x, 9000), x)


@pytest.mark.parametrize("patched", [False, True])
def test_cumsums_along_long_axes(monkeypatch, patched):
    if patched:
        from neuronxcc.starfish.penguin import windows
        monkeypatch.setattr(windows, "CUMSUM_DIRECT_MAX", 8)
        monkeypatch.setattr(windows, "CUMSUM_BLOCK", 4)    # 103 -> 26 blocks > 8: the block totals recurse
        x = R.rand(3, 103).astype(np.float32)
    else:
        x = R.rand(2, 10000).astype(np.float32)
    check(lambda x: (jnp.cumsum(x, axis=1), lax.cumsum(x, axis=1, reverse=True), jnp.cumsum(x.T, axis=0)), x)


def test_reduce_windows_of_more_than_4096_taps():
    x = R.randn(2, 12000).astype(np.float32)
    b = R.randint(-2 ** 20, 2 ** 20, (3, 9000)).astype(np.int32)
    check(lambda x, b: (lax.reduce_window(x, -jnp.inf, lax.max, (1, 5000), (1, 700), "VALID"),
                        lax.reduce_window(b, 0, lax.add, (1, 4500), (1, 1500), ((0, 0), (10, 20))),
                        lax.reduce_window(x, 1.0, lax.min, (1, 4099), (1, 3), "VALID", window_dilation=(1, 2))),
          x, b)


def test_max_pool_gradients_over_windows_of_more_than_64_positions():
    """jax.grad of max-pools: 9 x 9 windows at stride 1 (81 positions, overlapping) and 10 x 10 at
    stride 10 (non-overlapping), with ties, next to the common 3 x 3 / 2 forms."""
    x = R.randn(1, 12, 12, 4).astype(np.float32)
    xi = np.round(R.randn(1, 20, 20, 2) * 2).astype(np.float32)      # ties: the first maximum wins

    def pool(x, w, s, pad):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1,) + w + (1,), (1,) + s + (1,), pad)

    def f(x, xi):
        return (jax.grad(lambda x: jnp.sum(pool(x, (3, 3), (2, 2), "SAME") ** 2))(x),
                jax.grad(lambda x: jnp.sum(pool(x, (9, 9), (1, 1), "SAME")))(x),
                jax.grad(lambda x: jnp.sum(jnp.sin(pool(x, (10, 10), (10, 10), "VALID"))))(xi))
    check(f, x, xi)
