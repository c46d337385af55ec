"""Reductions with any reducer built from elementwise ops, lowered by lowering the reducer:
reduce (boolean, logaddexp, xor, max-abs, product, variadic min-with-index, non-constant
init), reduce-window with such reducers and base dilation, and select-and-scatter with
overlapping padded windows (the 3x3 stride-2 max-pool gradient), against XLA:CPU via jax."""
import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from hlo_text_helpers import check_text
from penguin_helpers import check
from support.hlo_reducers import logaddexp_reducer, torch_bool_reducer

R = np.random.default_rng(11)


def f32(*shape, scale=1.0):
    return (R.standard_normal(shape) * scale).astype(np.float32)


def test_reducers_built_from_elementwise_ops():
    x = f32(24, 33, scale=3.0)
    i = R.integers(-1000, 1000, (24, 33)).astype(np.int32)

    def f(x, i):
        lae = lax.reduce(x, -np.inf, lambda a, b: jnp.logaddexp(a, b), (1,))
        maxabs = lax.reduce(x, np.float32(0), lambda a, b: jnp.maximum(jnp.abs(a), jnp.abs(b)), (0,))
        prod = lax.reduce(x[:, :5] * 0.5 + 1, np.float32(1), lax.mul, (1,))
        xor = lax.reduce(i, np.int32(0), lax.bitwise_xor, (1,))
        return lae, maxabs, prod, xor, jnp.any(x > 2.0, axis=0), jnp.all(x > -3.0, axis=1)
    check(f, x, i)


def test_variadic_min_with_index_and_nonconstant_init():
    x = f32(16, 40)
    idx = np.broadcast_to(np.arange(40, dtype=np.int32), (16, 40)).copy()

    def minidx(a, b):
        (av, ai), (bv, bi) = a, b
        pick = (av < bv) | ((av == bv) & (ai < bi))
        return jnp.where(pick, av, bv), jnp.where(pick, ai, bi)

    def f(x, idx, s):
        v, k = lax.reduce((x, idx), (np.float32(np.inf), np.int32(2 ** 31 - 1)), minidx, (1,))
        total = lax.reduce(x, s, lax.add, (0,))          # init from a parameter
        return v, k, total
    check(f, x, idx, np.float32(0.0))


TORCH_ALL = "HloModule all\n" + torch_bool_reducer("and_f", "and") + torch_bool_reducer("or_f", "or") + """ENTRY main {
  x = f32[30,50] parameter(0)
  z = f32[] constant(1.5)
  zb = f32[30,50] broadcast(z), dimensions={}
  c = pred[30,50] compare(x, zb), direction=GT
  t = pred[] constant(true)
  f = pred[] constant(false)
  all = pred[50] reduce(c, t), dimensions={0}, to_apply=and_f
  any = pred[30] reduce(c, f), dimensions={1}, to_apply=or_f
  ROOT r = (pred[50], pred[30]) tuple(all, any)
}"""


def test_torch_xla_any_all_reducers():
    x = f32(30, 50)
    x[:, 3] = 2.0
    _, bir = check_text(TORCH_ALL, [x], expected=[(x > 1.5).all(0), (x > 1.5).any(1)])


VARIADIC_F32 = """HloModule variadic_f32
sum2 {
  a0 = f32[] parameter(0)
  a1 = f32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = f32[] parameter(3)
  s0 = f32[] add(a0, b0)
  s1 = f32[] maximum(a1, b1)
  ROOT t = (f32[], f32[]) tuple(s0, s1)
}
ENTRY main {
  x = f32[12,20] parameter(0)
  y = f32[12,20] parameter(1)
  z = f32[] constant(0)
  m = f32[] constant(-inf)
  ROOT r = (f32[12], f32[12]) reduce(x, y, z, m), dimensions={1}, to_apply=sum2
}"""


def test_variadic_f32_reduce():
    x, y = f32(12, 20), f32(12, 20)
    check_text(VARIADIC_F32, [x, y], expected=[x.sum(1), y.max(1)])


def test_reduce_window_any_reducer_and_base_dilation():
    x = f32(2, 9, 11, 3)

    def f(x):
        lae = lax.reduce_window(x, -np.inf, jnp.logaddexp, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        dil = lax.reduce_window(x, np.float32(0), lax.add, (1, 2, 2, 1), (1, 1, 1, 1), "VALID",
                                base_dilation=(1, 2, 2, 1))
        return lae, dil
    check(f, x)


def test_max_pool_gradient_overlapping_padded_windows():
    x = f32(2, 9, 9, 4)

    def pool_loss(x):
        y = lax.reduce_window(x, -np.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), ((0, 0), (1, 1), (1, 1), (0, 0)))
        return (y * jnp.arange(y.size, dtype=jnp.float32).reshape(y.shape)).sum()
    hlo = jax.jit(jax.grad(pool_loss)).lower(x).compiler_ir("hlo").as_hlo_text()
    assert "select-and-scatter" in hlo
    check(jax.grad(pool_loss), x)


MIN_POOL_GRAD = """HloModule minpool_grad
le_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LE
}
max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[10,10] parameter(0)
  s = f32[5,5] parameter(1)
  z = f32[] constant(-1)
  ROOT r = f32[10,10] select-and-scatter(x, s, z), window={size=3x3 stride=2x2 pad=0_1x0_1}, select=le_f, scatter=max_f
}"""


def test_select_and_scatter_with_min_select_and_max_scatter():
    x = f32(10, 10)
    s = f32(5, 5)
    check_text(MIN_POOL_GRAD, [x, s])


def test_scatter_any_combiner_and_variadic():
    """A scatter combiner built from elementwise ops (logaddexp) and a variadic scatter (values
    and their counts updated by one index array), written as HLO, against numpy."""
    x = f32(20, 6)
    cnt = np.zeros((20, 6), np.float32)
    idx = R.integers(0, 20, (9, 1)).astype(np.int32)
    idx[3] = idx[0]                                   # a repeated index combines twice
    upd = f32(9, 6)
    # jax.lax has no public scatter with a custom combiner: the HLO is written out here
    text = """HloModule scatter_general
""" + logaddexp_reducer("lae") + """sum_count {
  a = f32[] parameter(0)
  c = f32[] parameter(1)
  b = f32[] parameter(2)
  d = f32[] parameter(3)
  s = f32[] add(a, b)
  one = f32[] constant(1)
  n = f32[] add(c, one)
  ROOT t = (f32[], f32[]) tuple(s, n)
}
ENTRY main {
  x = f32[20,6] parameter(0)
  cnt = f32[20,6] parameter(1)
  idx = s32[9,1] parameter(2)
  upd = f32[9,6] parameter(3)
  l = f32[20,6] scatter(x, idx, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=lae
  v = (f32[20,6], f32[20,6]) scatter(x, cnt, idx, upd, upd), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=sum_count
  v0 = f32[20,6] get-tuple-element(v), index=0
  v1 = f32[20,6] get-tuple-element(v), index=1
  ROOT t = (f32[20,6], f32[20,6], f32[20,6]) tuple(l, v0, v1)
}"""
    lae = x.astype(np.float64).copy()
    s, c = x.astype(np.float64).copy(), cnt.astype(np.float64).copy()
    for k, i in enumerate(idx[:, 0]):
        lae[i] = np.logaddexp(lae[i], upd[k])
        s[i] += upd[k]
        c[i] += 1
    check_text(text, [x, cnt, idx, upd], expected=[v.astype(np.float32) for v in (lae, s, c)])


def test_scatter_apply_combiner_from_jax():
    """x.at[i].apply(f): jax's scatter whose combiner computes f of the old value, on XLA:CPU."""
    x = f32(12, 5)
    i = np.array([1, 4, 4, 9], np.int32)
    check(lambda x, i: (x.at[i].apply(lambda v: jnp.tanh(v) * 2.0 + 1.0), x.at[i].multiply(1.5)), x, i)


def test_variadic_reduce_window_argmax_pool():
    """A (value, index) reduce-window: the max and where it is, per 2x2 window, on XLA:CPU."""
    x = f32(6, 8)
    idx = np.arange(48, dtype=np.int32).reshape(6, 8)

    def pick(a, b):
        (av, ai), (bv, bi) = a, b
        take = (av > bv) | ((av == bv) & (ai < bi))
        return jnp.where(take, av, bv), jnp.where(take, ai, bi)

    def f(x, idx):
        return lax.reduce_window((x, idx), (np.float32(-np.inf), np.int32(2 ** 31 - 1)), pick, (2, 2), (2, 2),
                                 "VALID")
    check(f, x, idx)
