"""argmax / argmin lowering checked by execution against jax (birsim vs jax.jit).

XLA's reducer picks a NaN value first (``a > b or a != a``), ties keep the smallest index,
and integer values compare exactly at any magnitude (no trip through fp32).  Rows longer
than 512 need several free tiles, so the running (value, index) accumulator is exercised
across tiles."""
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from penguin_helpers import check

R = np.random.default_rng(7)


def _argboth(x):
    return jnp.argmax(x, -1), jnp.argmin(x, -1)


def _nan_rows(n):
    x = R.standard_normal((6, n)).astype(np.float32)
    x[0, 3] = np.nan                      # a NaN ahead of the max
    x[1, 5] = np.nan
    x[1, 0] = 50.0                        # a bigger value before the NaN: the NaN still wins
    x[1, 1] = -50.0
    x[2, n - 2] = np.nan                  # two NaNs: the first one wins
    x[2, n - 1] = np.nan
    x[3, :] = np.nan                      # all NaN
    x[4, n // 2] = np.inf                 # inf, no NaN
    x[4, 0] = -np.inf
    return x


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_nan_wins_first_nan_index(dtype):
    x = _nan_rows(10).astype(dtype)
    check(_argboth, x)
    got = np.asarray(jnp.argmax(x, -1))
    assert got[0] == 3 and got[1] == 5         # the oracle's semantics the lowering must match


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_nan_across_free_tiles(dtype):
    x = _nan_rows(1200).astype(dtype)
    x[5, 900] = np.nan                         # NaN only in a later tile, a big value in the first
    x[5, 10] = 1e4
    check(_argboth, x)


def test_ties_keep_first_index():
    x = np.zeros((5, 700), np.float32)
    x[0, [4, 9, 600]] = 3.0                    # max tie inside one tile and across tiles
    x[1, [650, 690]] = -2.0                    # min tie in a later tile
    x[2, :] = 1.0                              # all equal -> 0
    x[3, [1, 513]] = 7.0
    x[3, [2, 514]] = -7.0
    x[4] = R.integers(-3, 3, 700)
    check(_argboth, x)
    xi = x.astype(np.int32)
    check(_argboth, xi)
    check(lambda x: (jnp.argmax(x, 0), jnp.argmin(x, 0)), x)


def test_int32_exact_above_2_pow_24():
    i = np.array([[2 ** 30, 2 ** 30 + 1, 5],
                  [2 ** 31 - 1, 2 ** 31 - 2, 2 ** 31 - 1],
                  [-2 ** 31, -2 ** 31 + 1, -2 ** 31],
                  [2 ** 24 + 1, 2 ** 24, 2 ** 24 + 1]], np.int32)
    check(lambda i: (jnp.argmax(i, 1), jnp.argmin(i, 1)), i)
    assert list(np.asarray(jnp.argmax(i, 1))) == [1, 0, 1, 0]


def test_int32_multi_tile_large_values():
    base = np.int32(2 ** 29)
    i = (base + R.integers(0, 8, (130, 1100))).astype(np.int32)
    i[:, 700] = base + 9                       # exceeds the rest by less than the fp32 ulp
    i[:, 3] = base - 1
    i[5, 1099] = base + 10
    check(_argboth, i)
    check(lambda i: (jnp.argmax(i, 0), jnp.argmin(i, 0)), i)


def test_float_multi_tile_rows():
    x = R.standard_normal((200, 1500)).astype(np.float32)
    check(_argboth, x)
    check(lambda x: jnp.argmax(x.astype(jnp.bfloat16), -1), x)


_NONAN = """
HloModule m

r {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  t = pred[] and(eq, lt)
  p = pred[] or(gt, t)
  v = f32[] select(p, a, b)
  i = s32[] select(p, ai, bi)
  ROOT o = (f32[], s32[]) tuple(v, i)
}

ENTRY e {
  x = f32[4,600] parameter(0)
  io = s32[4,600] iota(), iota_dimension=1
  c = f32[] constant(-inf)
  z = s32[] constant(0)
  red = (f32[4], s32[4]) reduce(x, io, c, z), dimensions={1}, to_apply=r
  ROOT g = s32[4] get-tuple-element(red), index=1
}
"""


def test_reducer_kind_sees_nan_clause():
    from neuronxcc.hlo import load_module, parse_hlo_text
    from neuronxcc.starfish.penguin.hlo2penguin import reducer_kind
    from penguin_helpers import hlo_bytes

    def kinds(mod):
        return sorted(reducer_kind(c) for c in mod.computations.values()
                      if c is not mod.entry and len(list(c.parameters)) == 4)

    x = np.zeros((2, 3), np.float32)
    assert "argmax" in kinds(load_module(hlo_bytes(lambda x: jnp.argmax(x, -1), x)))
    assert "argmin" in kinds(load_module(hlo_bytes(lambda x: jnp.argmin(x, -1), x)))
    assert "argmax" in kinds(load_module(hlo_bytes(lambda x: jnp.argmax(x, -1), x.astype(np.int32))))
    assert kinds(parse_hlo_text(_NONAN)) == ["argmax_nonan"]


def test_reducer_without_nan_clause_ignores_nan():
    """A hand-written reducer without ``a != a``: NaNs never win (checked without NaNs against
    the HLO interpreter, and with NaNs against numpy's nan-ignoring argmax)."""
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.hlo.interpreter import evaluate
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    from penguin_helpers import run_bir
    x = R.standard_normal((4, 600)).astype(np.float32)
    x[1, 550] = x[1, 20] = 9.0
    mod = lower_graph(hlo_to_penguin(parse_hlo_text(_NONAN)))
    got = np.asarray(run_bir(mod, [x])[0])
    want = np.asarray(evaluate(parse_hlo_text(_NONAN), [x])[0])
    assert list(got) == list(want) == list(np.argmax(x, -1))
    x[0, 5] = np.nan
    x[2, 580] = np.nan
    got = np.asarray(run_bir(mod, [x])[0])
    assert list(got) == list(np.nanargmax(x, -1))
