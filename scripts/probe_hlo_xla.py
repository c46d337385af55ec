"""More cases for scripts/probe_hlo.py (source ``xlaops``): XLA's op semantics at their edges as
XLA's HLO tests state them, and further forms JAX and torch-xla emit.

``PIECES``: JAX functions (name -> (fn, args)), JAX:CPU the reference; ``TEXTS``: HLO text
(name -> (text, args)) written here from XLA's operation semantics, XLA:CPU the reference.
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

from support.sampling import top_p_threshold     # tests/support: probe_hlo.py puts tests/ on the path

R = np.random.RandomState(12)


def f32(*shape, scale=1.0):
    return (R.randn(*shape) * scale).astype(np.float32)


def ints(lo, hi, *shape, dtype=np.int32):
    return R.randint(lo, hi, size=shape).astype(dtype)


PIECES = {}
TEXTS = {}


def piece(*args):
    def deco(fn):
        PIECES[fn.__name__] = (fn, list(args))
        return fn
    return deco


def text(*args):
    def deco(fn):
        TEXTS[fn.__name__] = (fn(), list(args))
        return fn
    return deco


# --- JAX: activations, roundings and integer arithmetic as jax.nn / jnp write them ----------------

@piece(f32(4, 33, scale=4.0))
def jax_nn_activation_zoo(x):
    return (jax.nn.softplus(x), jax.nn.log_sigmoid(x), jax.nn.silu(x), jax.nn.mish(x), jax.nn.elu(x),
            jax.nn.selu(x), jax.nn.celu(x, 0.5), jax.nn.hard_tanh(x), jax.nn.relu6(x),
            jax.nn.gelu(x, approximate=True), jax.nn.leaky_relu(x, 0.1), jax.nn.hard_swish(x))


@piece(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 3.7, -3.7, np.nan, np.inf, -np.inf], np.float32))
def roundings_and_sign(x):
    return (jnp.round(x), jnp.trunc(x), jnp.floor(x), jnp.ceil(x), jnp.sign(x),
            lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO), jnp.signbit(x), jnp.isfinite(x), jnp.copysign(x, -1.0))


@piece(np.array([7, -7, 7, -7, 0, 13, -13, 2 ** 31 - 1], np.int32), np.array([2, 2, -2, -2, 3, 5, 5, 7], np.int32))
def jnp_floor_divide_and_mod(a, b):
    return a // b, a % b, jnp.fmod(a, b), jnp.remainder(a, b), lax.div(a, b), lax.rem(a, b)


@piece(f32(6, 5, scale=3.0), f32(6, 5))
def float_mod_power_atan2(a, b):
    return (jnp.fmod(a, b), jnp.remainder(a, b), jnp.power(jnp.abs(a), b), lax.integer_pow(a, 3),
            jnp.arctan2(a, b), jnp.hypot(a, b), jnp.logaddexp(a, b))


@piece(f32(3, 17, scale=10.0))
def reduce_precision_bf16_f16(x):
    return lax.reduce_precision(x, exponent_bits=8, mantissa_bits=7), lax.reduce_precision(x, 5, 10)


@piece(f32(8, 16), f32(16, 16, scale=0.3))
def remat_mlp_grad(x, w):
    @jax.checkpoint
    def layer(h):
        return jnp.tanh(h @ w)
    return jax.grad(lambda x: jnp.sum(layer(layer(x)) ** 2))(x)


@piece(f32(2, 3, 9, 9), f32(3, 1, 3, 3, scale=0.3))
def depthwise_conv_filter_grad(x, w):
    def f(w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=3,
                                     dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return jnp.sum(y * y)
    return jax.grad(f)(w)


@piece(f32(5, 7))
def argmin_argmax_axis0_and_cumulative(x):
    return (jnp.argmin(x, axis=0), jnp.argmax(x, axis=0), jnp.cumprod(x * 0.5 + 1.0, axis=0),
            lax.cummax(x, axis=1), lax.cummin(x, axis=0, reverse=True), jnp.diff(x, axis=1))


@piece(f32(4, 4), f32(3, 4, 4))
def einsum_diag_trace_tril(a, b):
    return (jnp.einsum("ii->i", a), jnp.trace(a), jnp.einsum("bij,bjk->bik", b, b), jnp.tril(a, -1),
            jnp.triu(a, 1), jnp.einsum("bii->b", b), jnp.outer(a[0], a[1]), jnp.kron(a[:2, :2], a[2:, 2:]))


@piece(f32(3, 10), np.array([[0, 9, -1], [3, 12, 5], [-11, 2, 2]], np.int32))
def take_modes_fill_clip_wrap(x, i):
    return (jnp.take_along_axis(x, i, axis=1, mode="fill", fill_value=-5.0),
            jnp.take(x, i[0], axis=1, mode="clip"), jnp.take(x, i[1], axis=1, mode="wrap"))


@piece(f32(2, 9))
def pad_modes_and_roll(x):
    return (jnp.pad(x, ((0, 0), (3, 2)), mode="reflect"), jnp.pad(x, ((1, 1), (2, 2)), mode="edge"),
            jnp.pad(x, ((0, 0), (4, 4)), mode="wrap"), jnp.roll(x, 3, axis=1), jnp.roll(x, -1, axis=0),
            jnp.pad(x, ((0, 1), (0, 3)), mode="symmetric"))


@piece(np.sort(f32(12)), f32(7, scale=2.0))
def searchsorted_and_interp(xp, x):
    fp = jnp.cumsum(jnp.abs(xp))
    return (jnp.searchsorted(xp, x), jnp.searchsorted(xp, x, side="right"), jnp.interp(x, xp, fp),
            jnp.digitize(x, xp))


@piece(f32(16, 8))
def associative_scan_and_fori(x):
    def body(i, acc):
        prev = lax.dynamic_slice_in_dim(acc, i - 1, 1, axis=0)
        return lax.dynamic_update_slice(acc, prev * 0.5 + lax.dynamic_slice_in_dim(x, i, 1, axis=0), (i, 0))
    return (lax.associative_scan(jnp.add, x, axis=0), lax.associative_scan(jnp.maximum, x, axis=1),
            lax.fori_loop(1, 16, body, x))


@piece(np.array(1, np.int32), f32(4, 6))
def switch_and_cond_with_operands(k, x):
    branches = [lambda v: v * 2.0, lambda v: jnp.sin(v), lambda v: v @ v.T @ v]
    return (lax.switch(k, branches, x), lax.cond(jnp.sum(x) > 0, lambda v: v - 1.0, lambda v: v + 1.0, x),
            lax.switch(k + 5, branches, x))


@piece(f32(8, 32).astype(np.float16), f32(32, 16).astype(np.float16))
def f16_matmul_softmax(a, b):
    y = a @ b
    return jax.nn.softmax(y, axis=-1), (y.astype(jnp.float32) * 2).astype(jnp.float16)


@piece(ints(-128, 128, 8, 32, dtype=np.int8), ints(-128, 128, 32, 16, dtype=np.int8))
def int8_matmul_s32_accumulate(a, b):
    return (lax.dot(a, b, preferred_element_type=jnp.int32),
            jnp.matmul(a.astype(jnp.int32), b.astype(jnp.int32)))


@piece(f32(2, 20), f32(5))
def conv1d_full_and_correlate(x, k):
    return (jnp.convolve(x[0], k, mode="full"), jnp.convolve(x[1], k, mode="same"),
            jnp.correlate(x[0], k, mode="valid"))


@piece(f32(4, 6), f32(4, 6))
def norms_and_clips(a, b):
    return (jnp.linalg.norm(a, axis=1), jnp.linalg.norm(a), jnp.linalg.norm(a, ord=1, axis=0),
            jnp.linalg.norm(a, ord=jnp.inf, axis=1), jnp.clip(a, -0.5, b), jnp.nan_to_num(a / (b * 0)),
            jnp.where(a > b, a, jnp.where(a < -b, -b, 0.0)))


@piece(np.array([3, 1, 2, 3, 3, 0, 1, 7], np.int32), f32(8))
def segment_ops_and_bincount(ids, x):
    return (jax.ops.segment_sum(x, ids, num_segments=8), jax.ops.segment_max(x, ids, num_segments=8),
            jax.ops.segment_min(x, ids, num_segments=8), jax.ops.segment_prod(x, ids, num_segments=8),
            jnp.bincount(ids, length=8))


# --- HLO text: XLA's operation semantics at the edges its HLO tests check --------------------------

_I32_MIN = -2 ** 31


@text(np.array([7, -7, 5, _I32_MIN, _I32_MIN, 0, -1, 9], np.int32),
      np.array([0, 0, -2, -1, 1, 0, 3, 4], np.int32),
      np.array([7, 0, 2 ** 32 - 1, 5, 3, 2 ** 31, 9, 1], np.uint32),
      np.array([0, 0, 2, 0, 2, 7, 9, 1], np.uint32))
def int_divide_remainder_by_zero_and_overflow():
    # XLA: x / 0 = -1 (all bits set), x % 0 = x; INT_MIN / -1 = INT_MIN, INT_MIN % -1 = 0
    return """HloModule d
ENTRY main {
  a = s32[8] parameter(0)
  b = s32[8] parameter(1)
  u = u32[8] parameter(2)
  v = u32[8] parameter(3)
  q = s32[8] divide(a, b)
  r = s32[8] remainder(a, b)
  uq = u32[8] divide(u, v)
  ur = u32[8] remainder(u, v)
  ROOT t = (s32[8], s32[8], u32[8], u32[8]) tuple(q, r, uq, ur)
}"""


@text(np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.0, 1e30, np.nan, -np.inf, 0.49999997, 3.5], np.float32))
def round_even_afz_sign_text():
    return """HloModule r
ENTRY main {
  x = f32[12] parameter(0)
  e = f32[12] round-nearest-even(x)
  a = f32[12] round-nearest-afz(x)
  s = f32[12] sign(x)
  f = pred[12] is-finite(x)
  ROOT t = (f32[12], f32[12], f32[12], pred[12]) tuple(e, a, s, f)
}"""


@text(f32(4, 6, scale=1e3), np.array([1e-8, 7e4, -7e4, 65519.0, 65520.0, 3.0e38], np.float32))
def reduce_precision_text():
    return """HloModule p
ENTRY main {
  x = f32[4,6] parameter(0)
  y = f32[6] parameter(1)
  a = f32[4,6] reduce-precision(x), exponent_bits=5, mantissa_bits=10
  b = f32[6] reduce-precision(y), exponent_bits=5, mantissa_bits=10
  c = f32[6] reduce-precision(y), exponent_bits=8, mantissa_bits=7
  d = f32[4,6] reduce-precision(x), exponent_bits=8, mantissa_bits=0
  ROOT t = (f32[4,6], f32[6], f32[6], f32[4,6]) tuple(a, b, c, d)
}"""


@text(f32(3, 4), ints(-9, 9, 3, 4))
def opt_barrier_tuple():
    return """HloModule o
ENTRY main {
  x = f32[3,4] parameter(0)
  i = s32[3,4] parameter(1)
  t = (f32[3,4], s32[3,4]) tuple(x, i)
  b = (f32[3,4], s32[3,4]) opt-barrier(t)
  y = f32[3,4] get-tuple-element(b), index=0
  j = s32[3,4] get-tuple-element(b), index=1
  e = f32[3,4] exponential(y)
  k = s32[3,4] multiply(j, j)
  ROOT r = (f32[3,4], s32[3,4]) tuple(e, k)
}"""


@text(f32(3, 5, scale=3.0), ints(-20, 20, 3, 5))
def clamp_with_scalar_bounds():
    return """HloModule c
ENTRY main {
  x = f32[3,5] parameter(0)
  i = s32[3,5] parameter(1)
  lo = f32[] constant(-1.5)
  hi = f32[] constant(2)
  ilo = s32[] constant(-3)
  ihi = s32[] constant(7)
  lob = f32[3,5] broadcast(lo), dimensions={}
  a = f32[3,5] clamp(lo, x, hi)
  b = s32[3,5] clamp(ilo, i, ihi)
  c = f32[3,5] clamp(lob, x, x)
  ROOT t = (f32[3,5], s32[3,5], f32[3,5]) tuple(a, b, c)
}"""


@text(f32(2, 3, 4), f32(3, 4, 5))
def dot_two_contracting_dims():
    return """HloModule d
ENTRY main {
  a = f32[2,3,4] parameter(0)
  b = f32[3,4,5] parameter(1)
  ROOT d = f32[2,5] dot(a, b), lhs_contracting_dims={1,2}, rhs_contracting_dims={0,1}
}"""


@text(ints(-128, 128, 6, 16, dtype=np.int8), ints(-128, 128, 16, 5, dtype=np.int8))
def dot_s8_to_s32_text():
    return """HloModule d
ENTRY main {
  a = s8[6,16] parameter(0)
  b = s8[16,5] parameter(1)
  ROOT d = s32[6,5] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}"""


@text(f32(6, 4))
def sort_along_major_dim():
    return """HloModule s
lt {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=LT
}
gt2 {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=GT
}
ENTRY main {
  x = f32[6,4] parameter(0)
  s = f32[6,4] sort(x), dimensions={0}, to_apply=lt
  io = s32[6,4] iota(), iota_dimension=0
  p = (f32[6,4], s32[6,4]) sort(x, io), dimensions={0}, is_stable=true, to_apply=gt2
  v = f32[6,4] get-tuple-element(p), index=0
  k = s32[6,4] get-tuple-element(p), index=1
  ROOT t = (f32[6,4], f32[6,4], s32[6,4]) tuple(s, v, k)
}"""


@text(f32(5, 4))
def variadic_argmin_along_dim0():
    return """HloModule a
amin {
  a = f32[] parameter(0)
  i = s32[] parameter(1)
  b = f32[] parameter(2)
  j = s32[] parameter(3)
  lt = pred[] compare(a, b), direction=LT
  eq = pred[] compare(a, b), direction=EQ
  il = pred[] compare(i, j), direction=LT
  ti = pred[] and(eq, il)
  take = pred[] or(lt, ti)
  v = f32[] select(take, a, b)
  k = s32[] select(take, i, j)
  ROOT r = (f32[], s32[]) tuple(v, k)
}
ENTRY main {
  x = f32[5,4] parameter(0)
  io = s32[5,4] iota(), iota_dimension=0
  big = f32[] constant(inf)
  z = s32[] constant(0)
  r = (f32[4], s32[4]) reduce(x, io, big, z), dimensions={0}, to_apply=amin
  ROOT t = s32[4] get-tuple-element(r), index=1
}"""


@text(f32(4, 5, 6))
def iota_broadcast_transpose_mix():
    return """HloModule i
ENTRY main {
  x = f32[4,5,6] parameter(0)
  i1 = f32[4,5,6] iota(), iota_dimension=1
  i2 = s32[5,6] iota(), iota_dimension=1
  b = s32[4,5,6,3] broadcast(i2), dimensions={1,2}
  bt = s32[6,3,4,5] transpose(b), dimensions={2,3,0,1}
  s = f32[4,5,6] add(x, i1)
  tr = f32[6,5,4] transpose(s), dimensions={2,1,0}
  rv = f32[6,5,4] reverse(tr), dimensions={0,2}
  ROOT t = (s32[6,3,4,5], f32[6,5,4]) tuple(bt, rv)
}"""


@text(f32(7), np.array([-3.0, -2.0, 0.0, 0.5, 2.0, 3.0, -0.5], np.float32))
def power_edges():
    # pow(negative, integer) keeps the sign; pow(negative, fraction) = NaN; pow(0, 0) = 1
    return """HloModule p
ENTRY main {
  x = f32[7] parameter(0)
  y = f32[7] parameter(1)
  c = f32[7] constant({-2, -2, 0, -4, 0, -1.5, 4})
  a = f32[7] power(c, y)
  b = f32[7] power(x, y)
  m = f32[7] remainder(c, y)
  ROOT t = (f32[7], f32[7], f32[7]) tuple(a, b, m)
}"""


@text(np.array([0, 1, 2 ** 31, 2 ** 32 - 1, 2 ** 31 - 1, 12345, 3000000000, 7], np.uint32))
def unsigned_compare_and_convert():
    return """HloModule u
ENTRY main {
  a = u32[8] parameter(0)
  h = u32[] constant(2147483648)
  hb = u32[8] broadcast(h), dimensions={}
  lt = pred[8] compare(a, hb), direction=LT
  ge = pred[8] compare(a, hb), direction=GE
  f = f32[8] convert(a)
  m = u32[8] maximum(a, hb)
  n = u32[8] minimum(a, hb)
  ROOT t = (pred[8], pred[8], f32[8], u32[8], u32[8]) tuple(lt, ge, f, m, n)
}"""


# (no subnormal input: XLA:CPU flushes them to zero, so its convert gives false where IEEE gives true)
@text(np.array([0.0, -0.0, 0.5, -3.0, np.nan, 1e-30, 2.0, -np.inf], np.float32))
def float_to_pred_and_back():
    return """HloModule b
ENTRY main {
  x = f32[8] parameter(0)
  p = pred[8] convert(x)
  f = f32[8] convert(p)
  i = s32[8] convert(p)
  n = pred[8] not(p)
  o = pred[8] xor(p, n)
  bc = s32[8] bitcast-convert(x)
  back = f32[8] bitcast-convert(bc)
  ROOT t = (pred[8], f32[8], s32[8], pred[8], s32[8], f32[8]) tuple(p, f, i, o, bc, back)
}"""


@text(f32(4, 10), np.array(7, np.int64), np.array(-2, np.int64))
def dynamic_slice_s64_indices_clamped():
    return """HloModule d
ENTRY main {
  x = f32[4,10] parameter(0)
  i = s64[] parameter(1)
  j = s64[] parameter(2)
  a = f32[2,5] dynamic-slice(x, i, i), dynamic_slice_sizes={2,5}
  b = f32[3,4] dynamic-slice(x, j, i), dynamic_slice_sizes={3,4}
  u = f32[2,5] negate(a)
  c = f32[4,10] dynamic-update-slice(x, u, j, i)
  ROOT t = (f32[2,5], f32[3,4], f32[4,10]) tuple(a, b, c)
}"""


@text(f32(3, 4), np.array(5, np.int64))
def torch_fori_loop_s64_counter_pred():
    return """HloModule w
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
cond {
  p = (s64[], f32[3,4], pred[]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  n = s64[] constant(6)
  lt = pred[] compare(i, n), direction=LT
  go = pred[] get-tuple-element(p), index=2
  ROOT c = pred[] and(lt, go)
}
body {
  p = (s64[], f32[3,4], pred[]) parameter(0)
  i = s64[] get-tuple-element(p), index=0
  x = f32[3,4] get-tuple-element(p), index=1
  one = s64[] constant(1)
  i2 = s64[] add(i, one)
  fi = f32[] convert(i)
  fb = f32[3,4] broadcast(fi), dimensions={}
  x2 = f32[3,4] add(x, fb)
  t = f32[] constant(100)
  z = f32[] constant(0)
  s = f32[] reduce(x2, z), dimensions={0,1}, to_apply=add_f
  go = pred[] compare(s, t), direction=LT
  ROOT r = (s64[], f32[3,4], pred[]) tuple(i2, x2, go)
}
ENTRY main {
  x = f32[3,4] parameter(0)
  n = s64[] parameter(1)
  z = s64[] constant(0)
  t = pred[] constant(true)
  init = (s64[], f32[3,4], pred[]) tuple(z, x, t)
  w = (s64[], f32[3,4], pred[]) while(init), condition=cond, body=body
  i = s64[] get-tuple-element(w), index=0
  y = f32[3,4] get-tuple-element(w), index=1
  ROOT r = (s64[], f32[3,4]) tuple(i, y)
}"""


@text(f32(2, 3, 4, 5))
def reduce_non_adjacent_dims_and_keep_layout():
    return """HloModule r
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[2,3,4,5] parameter(0)
  z = f32[] constant(0)
  ni = f32[] constant(-inf)
  a = f32[3,5] reduce(x, z), dimensions={0,2}, to_apply=add_f
  b = f32[2,4] reduce(x, ni), dimensions={1,3}, to_apply=max_f
  c = f32[5] reduce(x, z), dimensions={0,1,2}, to_apply=add_f
  ROOT t = (f32[3,5], f32[2,4], f32[5]) tuple(a, b, c)
}"""


@text(f32(1, 8, 8, 2), f32(3, 3, 2, 4, scale=0.3))
def convolution_strided_padded_nhwc_text():
    return """HloModule c
ENTRY main {
  x = f32[1,8,8,2] parameter(0)
  w = f32[3,3,2,4] parameter(1)
  ROOT c = f32[1,4,4,4] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
}"""


@text(f32(6, 5))
def exp_log_family_edges():
    return """HloModule e
ENTRY main {
  x = f32[6,5] parameter(0)
  c = f32[5] constant({0, -0, 1e-7, -1e-7, 80})
  a = f32[5] exponential-minus-one(c)
  b = f32[5] log-plus-one(c)
  t = f32[6,5] tan(x)
  r = f32[6,5] cbrt(x)
  e = f32[6,5] erf(x)
  l = f32[6,5] logistic(x)
  ROOT o = (f32[5], f32[5], f32[6,5], f32[6,5], f32[6,5], f32[6,5]) tuple(a, b, t, r, e, l)
}"""


# --- vmapped slicing (gathers / scatters with batching dims), and further jnp forms ----------------

@piece(f32(4, 10), np.array([0, 3, 9, 7], np.int32), f32(4, 3))
def vmapped_dynamic_slice_and_update(xs, idx, us):
    ds = jax.vmap(lambda x, i: lax.dynamic_slice(x, (i,), (3,)))(xs, idx)
    dus = jax.vmap(lambda x, i, u: lax.dynamic_update_slice(x, u, (i,)))(xs, idx, us)
    return ds, dus, jax.vmap(lambda x, i: x[i])(xs, idx)


@piece(f32(3, 6, 5), np.array([[1, 0], [5, 2], [3, 3]], np.int32))
def vmapped_take_and_index_add(x, i):
    take = jax.vmap(lambda r, j: jnp.take(r, j, axis=0))(x, i)
    add = jax.vmap(lambda r, j: r.at[j].add(1.0))(x, i)
    mx = jax.vmap(lambda r, j: r.at[j, 0].max(2.0))(x, i)
    return take, add, mx


@piece(np.array([3, 1, 2, 3, 3, 0, 1, 7, 2, 2], np.int32))
def unique_with_size_and_counts(x):
    u, c = jnp.unique(x, size=6, fill_value=-1, return_counts=True)
    return u, c, jnp.argsort(x, stable=True), jnp.sort(x)[::-1]


@piece(f32(6, 8))
def cumlogsumexp_and_reverse_cumsum(x):
    return (lax.cumlogsumexp(x, axis=1), jnp.flip(jnp.cumsum(jnp.flip(x, 1), 1), 1),
            lax.cumsum(x, axis=0, reverse=True), jax.nn.logsumexp(x, axis=0, keepdims=True))


@piece(f32(4, 7))
def top_k_one_and_sorted_rows(x):
    v1, i1 = lax.top_k(x, 1)
    v3, i3 = lax.top_k(-x, 3)
    return v1, i1, v3, i3, jnp.argsort(x, axis=0), jnp.sort(x, axis=0, descending=True)


@piece(f32(5, 12, scale=3.0))
def special_functions(x):
    from jax.scipy import special
    y = jnp.abs(x) + 0.1
    return (special.erfinv(jnp.tanh(x) * 0.99), special.gammaln(y), special.digamma(y), special.expit(x),
            special.logit(jax.nn.sigmoid(x) * 0.98 + 0.01), special.xlogy(y, y), special.ndtri(jax.nn.sigmoid(x) * 0.9 + 0.05))


@piece(f32(2, 4, 6, 6))
def maxpool_minpool_padded_nchw(x):
    mx = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), ((0, 0), (0, 0), (1, 1), (1, 1)))
    mn = lax.reduce_window(x, jnp.inf, lax.min, (1, 2, 2, 2), (1, 2, 1, 1), "VALID")
    av = lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "SAME") / 4.0
    return mx, mn, av


@piece(f32(4, 5), f32(4, 5))
def boolean_masks_and_counts(a, b):
    m = (a > 0) & ~(b > 0.5) | (a < -1)
    return (m, jnp.sum(m), jnp.count_nonzero(m, axis=1), jnp.any(m, axis=0), jnp.all(m), jnp.where(m, a, b),
            m.astype(jnp.int8), jnp.logical_xor(a > 0, b > 0), jnp.argmax(m, axis=1))


# --- HLO text in torch-xla's forms: layouts, metadata, s64 indices, rng ---------------------------

@text(f32(2, 3), f32(3, 4))
def torch_xla_layouts_metadata_and_attrs():
    return """HloModule IrToHlo.14, entry_computation_layout={(f32[2,3]{1,0}, f32[3,4]{1,0})->(f32[2,4]{1,0}, f32[4,2]{0,1})}

ENTRY %IrToHlo.14 (p0.1: f32[2,3], p1.2: f32[3,4]) -> (f32[2,4], f32[4,2]) {
  %p0.1 = f32[2,3]{1,0} parameter(0), metadata={op_type="xla__device_data" op_name="xla__device_data" source_file="/usr/lib/python3/site-packages/torch/_ops.py" source_line=854}
  %p1.2 = f32[3,4]{1,0} parameter(1), metadata={op_type="xla__device_data" op_name="xla__device_data"}
  %dot.3 = f32[2,4]{1,0} dot(f32[2,3]{1,0} %p0.1, f32[3,4]{1,0} %p1.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_type="aten__mm" op_name="aten__mm"}
  %constant.4 = f32[] constant(0.5), metadata={op_type="prim__Constant"}
  %broadcast.5 = f32[2,4]{1,0} broadcast(f32[] %constant.4), dimensions={}
  %multiply.6 = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %dot.3, f32[2,4]{1,0} %broadcast.5), frontend_attributes={_xla_stream_annotation="1"}
  %transpose.7 = f32[4,2]{0,1} transpose(f32[2,4]{1,0} %multiply.6), dimensions={1,0}
  ROOT %tuple.8 = (f32[2,4]{1,0}, f32[4,2]{0,1}) tuple(f32[2,4]{1,0} %multiply.6, f32[4,2]{0,1} %transpose.7), sharding={{replicated}, {replicated}}
}"""


@text(f32(4, 6), np.array([[1, 0], [3, 2], [0, 5]], np.int64))
def torch_xla_index_s64_pairs():
    # x[rows, cols] with s64 index tensors stacked on a trailing index_vector_dim
    return """HloModule g
ENTRY main {
  x = f32[4,6] parameter(0)
  i = s64[3,2] parameter(1)
  ROOT g = f32[3] gather(x, i), offset_dims={}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}
}"""


@text(np.array([42, 7], np.uint64), f32(4, 8))
def torch_xla_rng_bit_generator_u64_state_dropout():
    # torch-xla's dropout: u32 bits from an RngBitGenerator whose state is u64[2]; only the bits
    # are compared (the new state is 64-bit)
    return """HloModule r
ENTRY main {
  s = u64[2] parameter(0)
  x = f32[4,8] parameter(1)
  r = (u64[2], u32[4,8]) rng-bit-generator(s), algorithm=rng_default
  b = u32[4,8] get-tuple-element(r), index=1
  nine = u32[] constant(9)
  sh = u32[4,8] broadcast(nine), dimensions={}
  m = u32[4,8] shift-right-logical(b, sh)
  one = u32[] constant(1)
  ob = u32[4,8] broadcast(one), dimensions={}
  k = u32[4,8] and(m, ob)
  keep = pred[4,8] convert(k)
  z = f32[] constant(0)
  zb = f32[4,8] broadcast(z), dimensions={}
  two = f32[] constant(2)
  tb = f32[4,8] broadcast(two), dimensions={}
  xs = f32[4,8] multiply(x, tb)
  y = f32[4,8] select(keep, xs, zb)
  ROOT t = (u32[4,8], f32[4,8]) tuple(b, y)
}"""


# --- sizes off the tile grid, and integer arithmetic that float32 cannot hold exactly -------------

@piece(ints(-2 ** 30, 2 ** 30, 3, 5000), ints(0, 2 ** 31 - 1, 7000, dtype=np.int32))
def int32_reductions_beyond_float_precision(a, b):
    return (jnp.sum(a, axis=1), jnp.max(a, axis=1), jnp.min(a, axis=0), jnp.cumsum(b % 100000),
            jnp.argmax(a, axis=1), jnp.prod(a[:, :3] % 7 + 1, axis=1), jnp.sum(b.astype(jnp.uint32)))


@piece(ints(-2 ** 15, 2 ** 15, 6, 300), ints(-2 ** 15, 2 ** 15, 300, 5))
def int32_matmul_exact(a, b):
    return jnp.matmul(a, b), jnp.einsum("ij,jk->ik", a % 1000, b % 1000)


@piece(f32(129, 1000, scale=3.0), f32(3000, 7))
def off_grid_softmax_and_major_reductions(x, y):
    return jax.nn.softmax(x, axis=-1), jnp.sum(y, axis=0), jnp.max(y, axis=0), jnp.mean(x, axis=0)


@piece(f32(129, 513), f32(7, 3, 130, 5))
def off_grid_transposes(a, b):
    return a.T, jnp.transpose(b, (2, 0, 3, 1)), jnp.transpose(b, (3, 2, 1, 0)) * 2.0


@piece(f32(2, 50257, scale=4.0))
def gpt2_vocab_argmax_topk(logits):
    v, i = lax.top_k(logits, 40)
    return jnp.argmax(logits, axis=-1), v, i, jax.nn.logsumexp(logits, axis=-1)


@piece(f32(17, 33, 65), f32(17, 65, 9), f32(1, 4096), f32(4096, 1))
def odd_batched_and_long_k_dots(a, b, u, v):
    return jnp.einsum("bij,bjk->bik", a, b), u @ v, jnp.einsum("bij,bkj->bik", a, a)


@piece(f32(2, 3, 4, 5, 6), f32(3, 1, 5, 1))
def rank5_broadcast_and_reduce(x, y):
    z = x * y[None] + 1.0
    return jnp.sum(z, axis=(1, 3)), jnp.max(z, axis=-1), jnp.moveaxis(z, 4, 1)


@piece(f32(1, 64, 28, 28, scale=0.5), f32(64, 64, 3, 3, scale=0.05))
def conv_stride2_dilated_64ch(x, w):
    a = lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
    b = lax.conv_general_dilated(x, w, (1, 1), ((2, 2), (2, 2)), rhs_dilation=(2, 2),
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return a, b


@piece(ints(-128, 128, 1, 64, 10, 10, dtype=np.int8), ints(-128, 128, 32, 64, 3, 3, dtype=np.int8))
def int8_convolution_s32_accumulate(x, w):
    # 64 * 9 = 576 products of up to 2^14 per output: past fp32's 2^24
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                    preferred_element_type=jnp.int32)


@piece(np.array([2 ** 24 + 1, 2 ** 25 + 3, -(2 ** 26) - 5, 2 ** 31 - 1, -2 ** 31, 16777217, 123456789, 7],
                np.int32), ints(-2 ** 20, 2 ** 20, 4, 3000))
def int_to_float_rounding_and_window_sums(a, b):
    return (a.astype(jnp.float32), a.astype(jnp.bfloat16), a.astype(jnp.float16),
            lax.reduce_window(b, 0, lax.add, (1, 500), (1, 250), "VALID"),
            lax.reduce_window(b, jnp.iinfo(jnp.int32).min, lax.max, (2, 7), (1, 3), "SAME"))


@piece(f32(3, 7, 9), np.array([[0, 2], [1, 1], [2, 6]], np.int32), f32(3, 2, 9))
def gather_scatter_rows_of_rank3(x, i, u):
    rows = x[jnp.arange(3)[:, None], i]                    # [3, 2, 9]
    sc = x.at[jnp.arange(3)[:, None], i].add(u)
    mn = x.at[jnp.arange(3)[:, None], i].min(u)
    st = x.at[:, ::2].set(0.0)
    return rows, sc, mn, st


@piece(f32(2, 5, 4), f32(2, 5, 4))
def complex_free_fft_substitutes(a, b):
    # what models write instead of complex rotary: interleaved pairs rotated in real arithmetic
    ar, ai = a[..., ::2], a[..., 1::2]
    br, bi = b[..., ::2], b[..., 1::2]
    re = ar * br - ai * bi
    im = ar * bi + ai * br
    return jnp.stack([re, im], axis=-1).reshape(a.shape), jnp.concatenate([re, im], axis=-1)


@piece(f32(4, 16), np.array([3, 0, 15, 8], np.int32))
def sampling_masks_top_p_style(logits, k):
    s = jnp.sort(logits, axis=-1)[:, ::-1]
    p = jax.nn.softmax(s, axis=-1)
    c = jnp.cumsum(p, axis=-1)
    keep = c - p < 0.9
    thr = jnp.min(jnp.where(keep, s, jnp.inf), axis=-1, keepdims=True)
    masked = jnp.where(logits >= thr, logits, -jnp.inf)
    kth = jnp.take_along_axis(s, k[:, None], axis=1)
    return masked, kth, jnp.argmax(masked, axis=-1)


@piece(f32(6, 6), f32(6))
def while_loop_power_iteration(a, v):
    m = a @ a.T
    def cond(s):
        i, x, lam = s
        return i < 30
    def body(s):
        i, x, lam = s
        y = m @ x
        n = jnp.linalg.norm(y)
        return i + 1, y / n, n
    _, x, lam = lax.while_loop(cond, body, (0, v / jnp.linalg.norm(v), 0.0))
    return x, lam


@piece(f32(64, 16384, scale=0.1), np.array([[3, 63, 0], [7, 7, 1]], np.int32), f32(2, 3, 16384))
def wide_rows_gather_and_scatter_16k(table, ids, g):
    # a 405B-class embedding width: rows of 16384 elements (64 KiB in fp32)
    return jnp.take(table, ids, axis=0), table.at[ids].add(g)


@piece(np.array([1e30, -1e30, 7.5e9, 123456.7, -5.5, 5.5, 1e-30, 0.0], np.float32),
       np.array([3.0, 7.0, 0.3, 0.01, 2.0, -2.0, 3.0, 0.0], np.float32))
def float_remainder_large_ratios_and_ieee_edges(a, b):
    # (2e-37, not a subnormal: XLA:CPU flushes subnormals to zero)
    z = jnp.array([0.0, -0.0, -1.0, 2e-37, np.inf, -np.inf, np.nan, 100.0], np.float32)
    return (jnp.fmod(a, b), jnp.remainder(a, b), jnp.sqrt(z), lax.rsqrt(z), jnp.log(z), jnp.exp(z),
            jnp.expm1(z), jnp.log1p(-jnp.abs(z)), jnp.tanh(z), 1.0 / z, jnp.power(z, -1.0), jnp.arctan(z))


# --- single-device forms of distributed programs: what torch-xla / JAX emit on one core -----------

@text(f32(4, 8))
def torch_xla_all_reduce_one_replica():
    # xm.optimizer_step's gradient all-reduce, compiled for one device
    return """HloModule a
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  g = f32[4,8] parameter(0)
  r = f32[4,8] all-reduce(g), replica_groups={}, to_apply=add_f
  c = f32[] constant(1)
  cb = f32[4,8] broadcast(c), dimensions={}
  m = f32[4,8] multiply(r, cb)
  i = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (f32[4,8], u32[], u32[]) tuple(m, i, p)
}"""


@text(f32(8, 16), f32(16, 4))
def sharding_custom_calls_on_one_device():
    # with_sharding_constraint / SPMD annotations as HLO carries them before partitioning
    return """HloModule s
ENTRY main {
  x = f32[8,16] parameter(0), sharding={replicated}
  w = f32[16,4] parameter(1), sharding={maximal device=0}
  xs = f32[8,16] custom-call(x), custom_call_target="Sharding", sharding={replicated}
  d = f32[8,4] dot(xs, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ds = f32[8,4] custom-call(d), custom_call_target="Sharding", sharding={maximal device=0}
  ROOT t = f32[8,4] tanh(ds)
}"""


@piece(f32(8, 16), f32(16, 4))
def jax_sharding_constraint_and_named_scope(x, w):
    from jax.sharding import PartitionSpec as P, NamedSharding, Mesh
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    with jax.named_scope("layer0"):
        y = jax.lax.with_sharding_constraint(x @ w, NamedSharding(mesh, P("d", None)))
    return jnp.tanh(y)


@piece(np.array([3, 1, 2, 3, 1, 2, 3, 1], np.int32), np.array([0, 1, 1, 0, 0, 1, 1, 0], np.int32),
       f32(8))
def lexsort_three_keys_and_descending_pairs(a, b, x):
    return (jnp.lexsort((x, b, a)), lax.sort((a, b, x), num_keys=3),
            lax.sort((-a, -b, x), num_keys=2), jnp.argsort(a * 10 + b, descending=True, stable=True))


# --- long axes and sampling, as LLM serving and training clients write them ------------------------

_VOCAB = f32(1, 128256, scale=4.5)
_VOCAB[0, ::97] = -np.inf                      # tokens masked before sampling
_TOP_P = top_p_threshold(_VOCAB, 0.9)


@piece(_VOCAB)
def top_p_nucleus_filter_128k_vocab(x):
    # the whole vocabulary sorted descending with positions, softmax, cumsum, the kept set (about 0.9
    # of the mass; the threshold sits between two tokens' sums, as a discontinuous output needs)
    i = lax.broadcasted_iota(jnp.int32, x.shape, 1)
    sv, si = lax.sort((-x, i), dimension=1, num_keys=1)
    p = jax.nn.softmax(-sv, axis=-1)
    keep = jnp.cumsum(p, axis=-1) - p < _TOP_P
    return si, jnp.where(keep, -sv, -jnp.inf)


@piece(ints(-10 ** 9, 10 ** 9, 2, 9000), f32(2, 20000))
def long_rows_argsort_int_and_top_k_9000(a, x):
    return jnp.argsort(a, axis=-1, stable=True), lax.top_k(x, 9000), jnp.median(x, axis=-1)


@piece(np.arange(20000, dtype=np.int32))
def random_permutation_20000(x):
    return jax.random.permutation(jax.random.PRNGKey(3), x)


@piece(f32(1, 12, 12, 4), np.round(f32(1, 20, 20, 2, scale=2.0)))
def max_pool_grads_9x9_and_10x10(x, xi):
    def pool(x, w, s, pad):
        return lax.reduce_window(x, -jnp.inf, lax.max, (1,) + w + (1,), (1,) + s + (1,), pad)
    return (jax.grad(lambda x: jnp.sum(pool(x, (9, 9), (1, 1), "SAME")))(x),
            jax.grad(lambda x: jnp.sum(jnp.sin(pool(x, (10, 10), (10, 10), "VALID"))))(xi))


@piece(f32(2, 12000))
def reduce_window_5000_taps_and_long_cumsum(x):
    return (lax.reduce_window(x, -jnp.inf, lax.max, (1, 5000), (1, 700), "VALID"),
            lax.cumsum(x, axis=1, reverse=True))


@piece()
def random_samplers_gamma_beta_truncated_normal():
    k = jax.random.PRNGKey(5)
    return (jax.random.gamma(k, 2.5, (128,)), jax.random.beta(k, 2.0, 3.0, (64,)),
            jax.random.truncated_normal(k, -2.0, 2.0, (32, 16)))


@piece((np.random.RandomState(4).rand(3, 40) * 8 + 0.1).astype(np.float32))
def special_functions_igamma_lgamma_erf_inv(x):
    return (lax.igamma(x, x[::-1]), lax.lgamma(x), lax.digamma(x), lax.erf_inv(x / 9.0 - 0.45),
            lax.bessel_i0e(x), jax.scipy.special.log_ndtr(x - 4.0))
