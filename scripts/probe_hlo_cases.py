"""Cases for scripts/probe_hlo.py.

``PIECES``: model pieces written in JAX the way framework code writes them (name -> (fn, args)).
``TEXTS``: HLO text in the forms XLA's own HLO tests and torch-xla's graphs use (name -> (text,
args)); written here from the HLO semantics, XLA:CPU is their reference.
"""
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

import ml_dtypes

R = np.random.RandomState(7)


def f32(*shape, scale=1.0):
    return (R.randn(*shape) * scale).astype(np.float32)


def bf16(*shape, scale=1.0):
    return f32(*shape, scale=scale).astype(ml_dtypes.bfloat16)


def ints(lo, hi, *shape, dtype=np.int32):
    return R.randint(lo, hi, size=shape).astype(dtype)


PIECES = {}


def piece(*args):
    def deco(fn):
        PIECES[fn.__name__] = (fn, list(args))
        return fn
    return deco


# --- transformer pieces ---------------------------------------------------------------------------

@piece(f32(2, 8, 32), f32(32, 64, scale=0.2), f32(64), f32(64, 32, scale=0.2))
def mlp_gelu_exact(x, w1, b1, w2):
    return jax.nn.gelu(x @ w1 + b1, approximate=False) @ w2


@piece(f32(16, 32), f32(32, 48, scale=0.2), f32(32, 48, scale=0.2), f32(48, 32, scale=0.2))
def swiglu(x, wg, wu, wd):
    return (jax.nn.silu(x @ wg) * (x @ wu)) @ wd


@piece(f32(4, 24, 40), f32(40), f32(40))
def layernorm_lastdim(x, g, b):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + 1e-6) * g + b


@piece(f32(3, 20, 64), f32(64))
def rmsnorm_bf16_cast(x, w):
    xb = x.astype(jnp.bfloat16)
    v = jnp.mean(jnp.square(xb.astype(jnp.float32)), -1, keepdims=True)
    return (xb.astype(jnp.float32) * lax.rsqrt(v + 1e-5)).astype(jnp.bfloat16) * w.astype(jnp.bfloat16)


@piece(f32(2, 4, 16, 8), f32(2, 4, 16, 8), f32(2, 4, 16, 8), (R.rand(2, 16) > 0.2))
def attention_padding_mask(q, k, v, keep):
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(8.0)
    s = jnp.where(keep[:, None, None, :], s, -1e9)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)


@piece(f32(1, 8, 12, 16), f32(1, 2, 12, 16), f32(1, 2, 12, 16))
def attention_gqa_causal(q, k, v):
    k = jnp.repeat(k, 4, axis=1)
    v = jnp.repeat(v, 4, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) * 0.25
    mask = jnp.tril(jnp.ones((12, 12), bool))
    s = jnp.where(mask, s, jnp.finfo(jnp.float32).min)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)


@piece(f32(2, 10, 4, 16), np.arange(10, dtype=np.int32))
def rotary_half_split(x, pos):
    inv = 1.0 / (10000 ** (jnp.arange(0, 16, 2, dtype=jnp.float32) / 16))
    ang = pos[:, None].astype(jnp.float32) * inv[None, :]
    cos, sin = jnp.cos(ang)[None, :, None, :], jnp.sin(ang)[None, :, None, :]
    x1, x2 = x[..., :8], x[..., 8:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


@piece(f32(50, 16), ints(0, 50, 3, 7))
def embedding_and_tied_logits(table, ids):
    h = table[ids]
    return h @ table.T


@piece(f32(6, 11), ints(0, 11, 6))
def cross_entropy_and_grad(logits, labels):
    def loss(lg):
        lp = jax.nn.log_softmax(lg, -1)
        return -jnp.mean(jnp.take_along_axis(lp, labels[:, None], 1))
    return jax.value_and_grad(loss)(logits)


@piece(f32(50, 16), ints(0, 50, 4, 5), f32(4, 5, 16))
def embedding_grad(table, ids, g):
    return jax.grad(lambda t: jnp.sum(t[ids] * g))(table)


@piece(f32(4, 32), f32(32, 32, scale=0.2))
def layernorm_matmul_grad(x, w):
    def f(x, w):
        m = x.mean(-1, keepdims=True)
        y = (x - m) * lax.rsqrt(x.var(-1, keepdims=True) + 1e-5)
        return jnp.sum(jnp.tanh(y @ w))
    return jax.grad(f, argnums=(0, 1))(x, w)


@piece(f32(8, 16), f32(8, 16), f32(8, 16), np.abs(f32(8, 16)), np.float32(0.01))
def adamw_clip(p, g, m, v, lr):
    n = jnp.sqrt(jnp.sum(g * g))
    g = g * jnp.minimum(1.0, 1.0 / (n + 1e-6))
    m = 0.9 * m + 0.1 * g
    v = 0.999 * v + 0.001 * g * g
    return p - lr * (m / (jnp.sqrt(v) + 1e-8) + 0.01 * p), m, v


@piece(f32(2, 33))
def softmax_logsumexp_top(x):
    return jax.nn.softmax(x, -1), jax.nn.logsumexp(x, -1), jnp.argmax(x, -1), lax.top_k(x, 5)


@piece(f32(16, 32), np.float32(0.05))
def int8_quant_dequant(x, s):
    q = jnp.clip(jnp.round(x / s), -128, 127).astype(jnp.int8)
    return q, q.astype(jnp.float32) * s


@piece(bf16(16, 64), bf16(64, 48), f32(48))
def bf16_linear_f32_acc(x, w, b):
    y = lax.dot(x, w, preferred_element_type=jnp.float32) + b
    return y.astype(jnp.bfloat16), jax.nn.relu(y)


@piece(f32(2, 6, 16), f32(2, 16, 6))
def einsum_heads_reshape(a, b):
    x = a.reshape(2, 6, 4, 4).transpose(0, 2, 1, 3)
    y = b.reshape(2, 4, 4, 6)
    return jnp.einsum("bhqd,bhdk->bhqk", x, y).reshape(2, 4 * 6, 6)


@piece(f32(6, 4, 8), f32(8, 8, scale=0.3))
def scan_layers(xs, w):
    def body(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.sum(-1)
    return lax.scan(body, jnp.zeros((4, 8), jnp.float32), xs)


@piece(np.array([0, 1], np.uint32), f32(8, 16))
def dropout_threefry(key, x):
    keep = jax.random.bernoulli(jax.random.wrap_key_data(key), 0.9, x.shape)
    return jnp.where(keep, x / 0.9, 0.0)


@piece(f32(1, 32), ints(0, 10, 1))
def kv_cache_decode_write(cache_row, pos):
    cache = jnp.zeros((10, 32), jnp.float32)
    return lax.dynamic_update_slice(cache, cache_row, (pos[0], 0))


# --- vision / conv pieces (torch layout NCHW) -----------------------------------------------------

@piece(f32(2, 3, 12, 12), f32(8, 3, 3, 3, scale=0.3), f32(8))
def conv2d_nchw_bias_relu(x, w, b):
    y = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return jax.nn.relu(y + b[None, :, None, None])


@piece(f32(2, 8, 10, 10))
def avgpool_maxpool_nchw(x):
    a = lax.reduce_window(x, 0.0, lax.add, (1, 1, 2, 2), (1, 1, 2, 2), "VALID") / 4
    m = lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), ((0, 0), (0, 0), (1, 1), (1, 1)))
    return a, m, x.mean((2, 3))


@piece(f32(2, 8, 6, 6), f32(8), f32(8), f32(8), np.abs(f32(8)) + 0.5)
def batchnorm_inference(x, g, b, mean, var):
    return ((x - mean[None, :, None, None]) * lax.rsqrt(var[None, :, None, None] + 1e-5) * g[None, :, None, None]
            + b[None, :, None, None])


@piece(f32(2, 8, 6, 6), f32(8), f32(8))
def groupnorm(x, g, b):
    y = x.reshape(2, 4, 2, 6, 6)
    m = y.mean((2, 3, 4), keepdims=True)
    v = y.var((2, 3, 4), keepdims=True)
    y = ((y - m) * lax.rsqrt(v + 1e-5)).reshape(2, 8, 6, 6)
    return y * g[None, :, None, None] + b[None, :, None, None]


@piece(f32(2, 16, 20), f32(8, 16, 5, scale=0.3))
def conv1d_same(x, w):
    return lax.conv_general_dilated(x, w, (1,), "SAME", dimension_numbers=("NCH", "OIH", "NCH"))


@piece(f32(1, 4, 8, 8), f32(4, 4, 2, 2, scale=0.3))
def conv_transpose_upsample(x, w):
    return lax.conv_transpose(x, w, (2, 2), "VALID", dimension_numbers=("NCHW", "OIHW", "NCHW"))


@piece(f32(1, 2, 6, 6))
def resize_bilinear(x):
    return jax.image.resize(x, (1, 2, 12, 12), "bilinear")


# --- misc tensor programs -------------------------------------------------------------------------

@piece(f32(5, 7), ints(0, 7, 5))
def one_hot_where_cumsum(x, i):
    oh = jax.nn.one_hot(i, 7)
    return jnp.where(oh > 0, x, 0.0).sum(-1), jnp.cumsum(x, 1), jnp.cumprod(x[:, :3], 0)


@piece(f32(4, 9), f32(4, 3))
def concat_pad_split_flip(a, b):
    c = jnp.concatenate([a, b], 1)
    p = jnp.pad(c, ((1, 0), (0, 2)))
    x, y = jnp.split(p, [5], 1)
    return x[::-1], y[:, ::-1], jnp.roll(a, 2, 1)


@piece(f32(6, 5), ints(0, 6, 4))
def segment_sum_and_max(x, seg):
    return jax.ops.segment_sum(x[:4], seg, 6), jax.ops.segment_max(x[:4], seg, 6)


@piece(f32(3, 8))
def clamp_abs_sign_round(x):
    return jnp.clip(x, -0.5, 0.5), jnp.abs(x), jnp.sign(x), jnp.round(x * 3), jnp.floor(x), jnp.ceil(x)


@piece(f32(4, 4) + 4 * np.eye(4, dtype=np.float32), f32(4, 2))
def triangular_solve_cholesky(a, b):
    s = a @ a.T
    ll = jnp.linalg.cholesky(s)
    return ll, jax.scipy.linalg.solve_triangular(ll, b, lower=True)


@piece(ints(-100, 100, 6, 4), ints(1, 9, 6, 4))
def int_arith_mix(a, b):
    return a // b, a % b, a * b, jnp.maximum(a, b), (a & b) ^ (a | 3), a >> 2, (a < b).astype(jnp.int32)


@piece(f32(8, 16))
def reduce_variants(x):
    return (x.sum(), x.max(0), x.min(1), jnp.prod(x[:2, :4], 1), jnp.any(x > 2, 1), jnp.all(x > -3, 0),
            jnp.argmin(x, 0))


@piece(f32(3, 10))
def sort_argsort_topk(x):
    return jnp.sort(x, 1), jnp.argsort(x, 1), lax.top_k(x, 3)[1]


@piece(f32(2, 3, 4))
def transpose_broadcast_mix(x):
    return x.transpose(2, 0, 1) + 1, jnp.broadcast_to(x[:, None], (2, 5, 3, 4)).sum(1), x.reshape(6, 4).T


@piece(f32(5, 6), f32(5, 6))
def transcendental_zoo(x, y):
    return (jnp.exp(x), jnp.log1p(jnp.abs(x)), jnp.expm1(x), jnp.sin(x), jnp.cos(y), jnp.tan(x * 0.3),
            jnp.arctan2(x, y), jnp.sqrt(jnp.abs(x)), lax.rsqrt(jnp.abs(y) + 1), jnp.power(jnp.abs(x), y),
            jax.nn.sigmoid(x), jnp.tanh(y), lax.erf(x), jax.nn.softplus(x), lax.logistic(y))


TEXTS = {}


def text(*args):
    def deco(fn):
        TEXTS[fn.__name__] = (fn(), list(args))
        return fn
    return deco


_ADD = """
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""

_MUL = """
mul_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] multiply(a, b)
}
"""

_SET = """
set_f {
  a = f32[] parameter(0)
  ROOT b = f32[] parameter(1)
}
"""

_MAX = """
max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
"""

_GE = """
ge_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
"""


@text(ints(-20, 20, 4, 5), np.array([3, 0, 2], np.int32))
def gather_rows_s32():
    return """HloModule g
ENTRY main {
  op = s32[4,5] parameter(0)
  idx = s32[3] parameter(1)
  ROOT g = s32[3,5] gather(op, idx), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,5}
}"""


@text(f32(4, 6), np.array([5, 1], np.int32))
def gather_columns():
    return """HloModule g
ENTRY main {
  op = f32[4,6] parameter(0)
  idx = s32[2] parameter(1)
  ROOT g = f32[4,2] gather(op, idx), offset_dims={0}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1, slice_sizes={4,1}
}"""


@text(f32(4, 3, 5), np.array([2, 0], np.int32))
def gather_batch_dim_in_middle():
    return """HloModule g
ENTRY main {
  op = f32[4,3,5] parameter(0)
  idx = s32[2] parameter(1)
  ROOT g = f32[4,1,2,5] gather(op, idx), offset_dims={0,1,3}, collapsed_slice_dims={}, start_index_map={1}, index_vector_dim=1, slice_sizes={4,1,5}
}"""


@text(f32(5, 4, 3), np.array([[0, 3], [4, 1], [2, 2]], np.int32))
def gather_nd_pairs():
    return """HloModule g
ENTRY main {
  op = f32[5,4,3] parameter(0)
  idx = s32[3,2] parameter(1)
  ROOT g = f32[3,3] gather(op, idx), offset_dims={1}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1,3}
}"""


@text(f32(5, 4, 3), np.array([[0, 3, 1], [4, 1, 2]], np.int32))
def gather_index_vector_dim_0():
    return """HloModule g
ENTRY main {
  op = f32[5,4,3] parameter(0)
  idx = s32[2,3] parameter(1)
  ROOT g = f32[3,3] gather(op, idx), offset_dims={1}, collapsed_slice_dims={0,1}, start_index_map={0,1}, index_vector_dim=0, slice_sizes={1,1,3}
}"""


@text(ints(0, 50, 4, 4), np.array([[3, 9], [-2, 1], [1, 1], [7, -9], [2147483647, 0]], np.int32))
def gather_out_of_range_clamps():
    return """HloModule g
ENTRY main {
  op = s32[4,4] parameter(0)
  idx = s32[5,2] parameter(1)
  g = s32[5,2,2] gather(op, idx), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}
  ROOT r = s32[5,4] reshape(g)
}"""


@text(f32(6, 8), np.array([[1, 7], [5, 0], [255, 3]], np.uint8))
def gather_u8_indices():
    return """HloModule g
ENTRY main {
  op = f32[6,8] parameter(0)
  idx = u8[3,2] parameter(1)
  g = f32[3,1,1] gather(op, idx), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={1,1}
  ROOT r = f32[3] reshape(g)
}"""


@text(f32(3, 4, 2), np.int32(2))
def gather_scalar_index():
    return """HloModule g
ENTRY main {
  op = f32[3,4,2] parameter(0)
  i = s32[] parameter(1)
  ROOT g = f32[1,4,2] gather(op, i), offset_dims={0,1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=0, slice_sizes={1,4,2}
}"""


@text(f32(5, 4), np.array([1, 3, 1], np.int32), f32(3, 4))
def scatter_add_rows():
    return """HloModule s
""" + _ADD + """
ENTRY main {
  op = f32[5,4] parameter(0)
  idx = s32[3] parameter(1)
  up = f32[3,4] parameter(2)
  ROOT s = f32[5,4] scatter(op, idx, up), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f
}"""


@text(f32(3, 6), np.array([4, 0, 2], np.int32), f32(3, 3))
def scatter_add_into_columns():
    return """HloModule s
""" + _ADD + """
ENTRY main {
  op = f32[3,6] parameter(0)
  idx = s32[3] parameter(1)
  up = f32[3,3] parameter(2)
  ROOT s = f32[3,6] scatter(op, idx, up), update_window_dims={0}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, index_vector_dim=1, to_apply=add_f
}"""


@text(f32(4, 4), np.array([[0, 1], [2, 3], [3, 0], [9, 9]], np.int32), f32(4))
def scatter_set_points_oob_dropped():
    return """HloModule s
""" + _SET + """
ENTRY main {
  op = f32[4,4] parameter(0)
  idx = s32[4,2] parameter(1)
  up = f32[4] parameter(2)
  ROOT s = f32[4,4] scatter(op, idx, up), update_window_dims={}, inserted_window_dims={0,1}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=set_f
}"""


@text(f32(6, 3), np.array([0, 5, 2], np.int32), f32(3, 3))
def scatter_multiply():
    return """HloModule s
""" + _MUL + """
ENTRY main {
  op = f32[6,3] parameter(0)
  idx = s32[3] parameter(1)
  up = f32[3,3] parameter(2)
  ROOT s = f32[6,3] scatter(op, idx, up), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, indices_are_sorted=false, unique_indices=true, to_apply=mul_f
}"""


@text(f32(6, 5), np.int32(4), np.int32(-2))
def dynamic_slice_clamped():
    return """HloModule d
ENTRY main {
  x = f32[6,5] parameter(0)
  i = s32[] parameter(1)
  j = s32[] parameter(2)
  ROOT d = f32[3,2] dynamic-slice(x, i, j), dynamic_slice_sizes={3,2}
}"""


@text(f32(6, 5), f32(2, 3), np.uint32(5), np.uint32(1))
def dynamic_update_slice_u32_clamped():
    return """HloModule d
ENTRY main {
  x = f32[6,5] parameter(0)
  u = f32[2,3] parameter(1)
  i = u32[] parameter(2)
  j = u32[] parameter(3)
  ROOT d = f32[6,5] dynamic-update-slice(x, u, i, j)
}"""


@text(f32(4, 6))
def reduce_window_padded_strided():
    return """HloModule rw
""" + _ADD + """
ENTRY main {
  x = f32[4,6] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[3,3] reduce-window(x, z), window={size=2x3 stride=2x2 pad=1_1x0_1}, to_apply=add_f
}"""


@text(f32(1, 4, 4, 2))
def reduce_window_max_same_nhwc():
    return """HloModule rw
""" + _MAX + """
ENTRY main {
  x = f32[1,4,4,2] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[1,2,2,2] reduce-window(x, z), window={size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}, to_apply=max_f
}"""


@text(f32(4, 6), f32(2, 3))
def select_and_scatter_maxpool_grad():
    return """HloModule ss
""" + _ADD + _GE + """
ENTRY main {
  x = f32[4,6] parameter(0)
  g = f32[2,3] parameter(1)
  z = f32[] constant(0)
  ROOT s = f32[4,6] select-and-scatter(x, g, z), window={size=2x2 stride=2x2}, select=ge_f, scatter=add_f
}"""


@text(f32(8))
def while_counter_tuple():
    return """HloModule w
cond {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(5)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[8] get-tuple-element(p), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  h = f32[] constant(0.5)
  hb = f32[8] broadcast(h), dimensions={}
  x1 = f32[8] multiply(x, hb)
  fi = f32[] convert(i)
  fb = f32[8] broadcast(fi), dimensions={}
  x2 = f32[8] add(x1, fb)
  ROOT t = (s32[], f32[8]) tuple(i1, x2)
}
ENTRY main {
  x = f32[8] parameter(0)
  z = s32[] constant(0)
  t = (s32[], f32[8]) tuple(z, x)
  w = (s32[], f32[8]) while(t), condition=cond, body=body
  ROOT r = f32[8] get-tuple-element(w), index=1
}"""


@text(np.int32(1), f32(3, 4))
def conditional_indexed_branches():
    return """HloModule c
b0 {
  x = f32[3,4] parameter(0)
  ROOT e = f32[3,4] exponential(x)
}
b1 {
  x = f32[3,4] parameter(0)
  ROOT n = f32[3,4] negate(x)
}
b2 {
  x = f32[3,4] parameter(0)
  ROOT a = f32[3,4] abs(x)
}
ENTRY main {
  i = s32[] parameter(0)
  x = f32[3,4] parameter(1)
  ROOT c = f32[3,4] conditional(i, x, x, x), branch_computations={b0, b1, b2}
}"""


@text(np.array(True), f32(5))
def conditional_pred_true_false():
    return """HloModule c
t {
  x = f32[5] parameter(0)
  ROOT e = f32[5] tanh(x)
}
f {
  x = f32[5] parameter(0)
  ROOT n = f32[5] floor(x)
}
ENTRY main {
  p = pred[] parameter(0)
  x = f32[5] parameter(1)
  ROOT c = f32[5] conditional(p, x, x), true_computation=t, false_computation=f
}"""


@text(f32(3, 7))
def sort_descending_with_iota_payload():
    return """HloModule s
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  ROOT c = pred[] compare(a, b), direction=GT
}
ENTRY main {
  x = f32[3,7] parameter(0)
  io = s32[3,7] iota(), iota_dimension=1
  ROOT s = (f32[3,7], s32[3,7]) sort(x, io), dimensions={1}, is_stable=true, to_apply=cmp
}"""


@text(f32(4, 9))
def reduce_argmax_variadic():
    return """HloModule r
amax {
  a = f32[] parameter(0)
  ai = s32[] parameter(1)
  b = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = f32[] select(pick, a, b)
  k = s32[] select(pick, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
ENTRY main {
  x = f32[4,9] parameter(0)
  io = s32[4,9] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  z = s32[] constant(0)
  ROOT r = (f32[4], s32[4]) reduce(x, io, ninf, z), dimensions={1}, to_apply=amax
}"""


@text(f32(6, 4), f32(6, 5))
def dot_contract_dim0():
    return """HloModule d
ENTRY main {
  a = f32[6,4] parameter(0)
  b = f32[6,5] parameter(1)
  ROOT d = f32[4,5] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}"""


@text(f32(3, 5, 2), f32(5, 3, 4))
def dot_batch_dims_not_leading():
    return """HloModule d
ENTRY main {
  a = f32[3,5,2] parameter(0)
  b = f32[5,3,4] parameter(1)
  ROOT d = f32[3,2,4] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={1}, rhs_contracting_dims={0}
}"""


@text(f32(7), f32(7))
def dot_vector_inner_product():
    return """HloModule d
ENTRY main {
  a = f32[7] parameter(0)
  b = f32[7] parameter(1)
  ROOT d = f32[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
}"""


@text(f32(2, 3, 4, 5))
def transpose_reverse_rank4():
    return """HloModule t
ENTRY main {
  x = f32[2,3,4,5] parameter(0)
  t = f32[5,2,4,3] transpose(x), dimensions={3,0,2,1}
  ROOT r = f32[5,2,4,3] reverse(t), dimensions={0,3}
}"""


@text(f32(4, 5))
def pad_negative_and_interior():
    return """HloModule p
ENTRY main {
  x = f32[4,5] parameter(0)
  c = f32[] constant(-2)
  ROOT p = f32[8,6] pad(x, c), padding=1_0_1x-1_-2_1
}"""


@text(f32(2, 3), f32(4, 3), f32(1, 3))
def concatenate_dim0_three():
    return """HloModule c
ENTRY main {
  a = f32[2,3] parameter(0)
  b = f32[4,3] parameter(1)
  c = f32[1,3] parameter(2)
  ROOT r = f32[7,3] concatenate(a, b, c), dimensions={0}
}"""


@text(f32(4, 6))
def slice_strided():
    return """HloModule s
ENTRY main {
  x = f32[4,6] parameter(0)
  ROOT s = f32[2,2] slice(x), slice={[1:4:2], [0:6:4]}
}"""


@text(f32(3, 4), f32(3, 4))
def clamp_select_scalar_pred():
    return """HloModule c
ENTRY main {
  x = f32[3,4] parameter(0)
  y = f32[3,4] parameter(1)
  lo = f32[] constant(-0.5)
  hi = f32[] constant(0.5)
  c = f32[3,4] clamp(lo, x, hi)
  p = pred[] constant(true)
  ROOT s = f32[3,4] select(p, c, y)
}"""


@text(f32(4, 5) * 40)
def convert_f32_to_s8_u16_saturate():
    return """HloModule c
ENTRY main {
  x = f32[4,5] parameter(0)
  a = s8[4,5] convert(x)
  b = u16[4,5] convert(x)
  ROOT t = (s8[4,5], u16[4,5]) tuple(a, b)
}"""


@text(f32(2, 12))
def reshape_then_reduce_layouts():
    return """HloModule r
""" + _ADD + """
ENTRY main {
  x = f32[2,12]{1,0} parameter(0)
  r = f32[2,3,4]{2,1,0} reshape(x)
  t = f32[4,3,2]{0,1,2} transpose(r), dimensions={2,1,0}
  z = f32[] constant(0)
  ROOT s = f32[4,2]{1,0} reduce(t, z), dimensions={1}, to_apply=add_f
}"""


@text(f32(5), f32(5))
def map_computation():
    return """HloModule m
fm {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  m = f32[] multiply(a, b)
  ROOT s = f32[] subtract(m, a)
}
ENTRY main {
  x = f32[5] parameter(0)
  y = f32[5] parameter(1)
  ROOT r = f32[5] map(x, y), dimensions={0}, to_apply=fm
}"""


@text(f32(4, 8))
def fusion_and_call_computations():
    return """HloModule f
fused {
  p0 = f32[4,8] parameter(0)
  p1 = f32[] parameter(1)
  b = f32[4,8] broadcast(p1), dimensions={}
  m = f32[4,8] multiply(p0, b)
  ROOT t = f32[4,8] tanh(m)
}
helper {
  q = f32[4,8] parameter(0)
  ROOT e = f32[4,8] exponential(q)
}
ENTRY main {
  x = f32[4,8] parameter(0)
  c = f32[] constant(0.3)
  f = f32[4,8] fusion(x, c), kind=kLoop, calls=fused
  ROOT k = f32[4,8] call(f), to_apply=helper
}"""


@text(f32(3, 4), f32(3, 4))
def torch_xla_headerless_tuple_root():
    return """ENTRY %SyncTensorsGraph.12 (p0.1: f32[3,4], p1.2: f32[3,4]) -> (f32[3,4], f32[3,4]) {
  %p0.1 = f32[3,4]{1,0} parameter(0), metadata={op_type="xla__device_data" op_name="xla__device_data"}
  %p1.2 = f32[3,4]{1,0} parameter(1), metadata={op_type="xla__device_data" op_name="xla__device_data"}
  %constant.3 = f32[] constant(2), metadata={op_type="aten__mul" op_name="aten__mul"}
  %broadcast.4 = f32[3,4]{1,0} broadcast(f32[] %constant.3), dimensions={}
  %multiply.5 = f32[3,4]{1,0} multiply(f32[3,4]{1,0} %p0.1, f32[3,4]{1,0} %broadcast.4)
  %add.6 = f32[3,4]{1,0} add(f32[3,4]{1,0} %multiply.5, f32[3,4]{1,0} %p1.2), metadata={op_type="aten__add"}
  %transpose.7 = f32[4,3]{0,1} transpose(f32[3,4]{1,0} %add.6), dimensions={1,0}
  %dot.8 = f32[3,3]{1,0} dot(f32[3,4]{1,0} %p0.1, f32[4,3]{0,1} %transpose.7), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  %slice.9 = f32[3,3]{1,0} slice(f32[3,4]{1,0} %add.6), slice={[0:3], [1:4]}
  %add.10 = f32[3,3]{1,0} add(%dot.8, %slice.9)
  %pad.11 = f32[3,4]{1,0} pad(%add.10, %constant.3), padding=0_0x0_1
  ROOT %tuple.12 = (f32[3,4]{1,0}, f32[3,4]{1,0}) tuple(f32[3,4]{1,0} %pad.11, f32[3,4]{1,0} %add.6)
}"""


@text(f32(2, 5))
def rng_free_iota_compare_select():
    return """HloModule i
ENTRY main {
  x = f32[2,5] parameter(0)
  i0 = s32[2,5] iota(), iota_dimension=0
  i1 = s32[2,5] iota(), iota_dimension=1
  ge = pred[2,5] compare(i1, i0), direction=GE
  z = f32[] constant(0)
  zb = f32[2,5] broadcast(z), dimensions={}
  ROOT s = f32[2,5] select(ge, x, zb)
}"""


@text(np.array([0x12345678, 0xFFFFFFFF, 7, 0x80000000], np.uint32), np.array([3, 31, 0, 1], np.uint32))
def u32_bit_ops():
    return """HloModule b
ENTRY main {
  a = u32[4] parameter(0)
  s = u32[4] parameter(1)
  l = u32[4] shift-left(a, s)
  r = u32[4] shift-right-logical(a, s)
  x = u32[4] xor(l, r)
  n = u32[4] not(a)
  p = u32[4] popcnt(a)
  c = u32[4] count-leading-zeros(a)
  ROOT t = (u32[4], u32[4], u32[4], u32[4]) tuple(x, n, p, c)
}"""


@text(f32(3, 4), f32(3, 4))
def binary_float_edge_ops():
    return """HloModule e
ENTRY main {
  a = f32[3,4] parameter(0)
  b = f32[3,4] parameter(1)
  r = f32[3,4] remainder(a, b)
  p = f32[3,4] power(a, b)
  t = f32[3,4] atan2(a, b)
  d = f32[3,4] divide(a, b)
  rn = f32[3,4] round-nearest-even(d)
  ra = f32[3,4] round-nearest-afz(d)
  ROOT o = (f32[3,4], f32[3,4], f32[3,4], f32[3,4], f32[3,4]) tuple(r, p, t, rn, ra)
}"""


@text(f32(4, 4))
def reduce_multiple_dims_to_scalar():
    return """HloModule r
""" + _MAX + """
ENTRY main {
  x = f32[4,4] parameter(0)
  z = f32[] constant(-inf)
  m = f32[] reduce(x, z), dimensions={0,1}, to_apply=max_f
  b = f32[4,4] broadcast(m), dimensions={}
  ROOT s = f32[4,4] subtract(x, b)
}"""


@text(f32(2, 3, 3, 4), f32(2, 2, 4, 5))
def convolution_text_nhwc_dilated():
    return """HloModule c
ENTRY main {
  x = f32[2,3,3,4] parameter(0)
  w = f32[2,2,4,5] parameter(1)
  ROOT c = f32[2,2,2,5] convolution(x, w), window={size=2x2 pad=0_1x0_1 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f
}"""


# --- torch-xla shaped graphs (s64 indices, pred masks, bf16 with f32 math, rng) ---------------

@text(f32(50, 16), np.array([[3, 49], [0, 7]], np.int64))
def torch_embedding_s64_indices():
    return """HloModule IrToHlo.9
ENTRY %IrToHlo.9 (p0.1: f32[50,16], p1.2: s64[2,2]) -> (f32[2,2,16]) {
  %p0.1 = f32[50,16]{1,0} parameter(0)
  %p1.2 = s64[2,2]{1,0} parameter(1)
  %reshape.3 = s64[4]{0} reshape(s64[2,2]{1,0} %p1.2)
  %gather.4 = f32[4,16]{1,0} gather(f32[50,16]{1,0} %p0.1, s64[4]{0} %reshape.3), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,16}, indices_are_sorted=false
  %reshape.5 = f32[2,2,16]{2,1,0} reshape(f32[4,16]{1,0} %gather.4)
  ROOT %tuple.6 = (f32[2,2,16]{2,1,0}) tuple(f32[2,2,16]{2,1,0} %reshape.5)
}"""


@text(f32(4, 10))
def torch_argmax_s64_variadic_reduce():
    return """HloModule IrToHlo.20
%argmax.7 (x.8: f32[], y.9: s64[], x.10: f32[], y.11: s64[]) -> (f32[], s64[]) {
  %x.8 = f32[] parameter(0)
  %x.10 = f32[] parameter(2)
  %compare.12 = pred[] compare(f32[] %x.8, f32[] %x.10), direction=GT
  %compare.13 = pred[] compare(f32[] %x.8, f32[] %x.10), direction=NE
  %compare.14 = pred[] compare(f32[] %x.8, f32[] %x.8), direction=NE
  %or.15 = pred[] or(pred[] %compare.12, pred[] %compare.14)
  %select.16 = f32[] select(pred[] %or.15, f32[] %x.8, f32[] %x.10)
  %y.9 = s64[] parameter(1)
  %y.11 = s64[] parameter(3)
  %compare.17 = pred[] compare(f32[] %x.8, f32[] %x.10), direction=EQ
  %minimum.18 = s64[] minimum(s64[] %y.9, s64[] %y.11)
  %select.19 = s64[] select(pred[] %or.15, s64[] %y.9, s64[] %y.11)
  %select.20 = s64[] select(pred[] %compare.17, s64[] %minimum.18, s64[] %select.19)
  ROOT %tuple.21 = (f32[], s64[]) tuple(f32[] %select.16, s64[] %select.20)
}
ENTRY %IrToHlo.30 (p0.1: f32[4,10]) -> (s64[4]) {
  %p0.1 = f32[4,10]{1,0} parameter(0)
  %iota.2 = s64[4,10]{1,0} iota(), iota_dimension=1
  %constant.3 = f32[] constant(-inf)
  %constant.4 = s64[] constant(0)
  %reduce.5 = (f32[4]{0}, s64[4]{0}) reduce(f32[4,10]{1,0} %p0.1, s64[4,10]{1,0} %iota.2, f32[] %constant.3, s64[] %constant.4), dimensions={1}, to_apply=%argmax.7
  %get-tuple-element.6 = s64[4]{0} get-tuple-element((f32[4]{0}, s64[4]{0}) %reduce.5), index=1
  ROOT %tuple.7 = (s64[4]{0}) tuple(s64[4]{0} %get-tuple-element.6)
}"""


@text(f32(6, 8), np.array([[4], [1]], np.int64), f32(2, 8))
def torch_index_put_scatter_s64():
    return """HloModule IrToHlo.12
%scatter-combiner.5 (p0.6: f32[], p1.7: f32[]) -> f32[] {
  %p0.6 = f32[] parameter(0)
  ROOT %p1.7 = f32[] parameter(1)
}
ENTRY %IrToHlo.12 (p0.1: f32[6,8], p1.2: s64[2,1], p2.3: f32[2,8]) -> (f32[6,8]) {
  %p0.1 = f32[6,8]{1,0} parameter(0)
  %p1.2 = s64[2,1]{1,0} parameter(1)
  %p2.3 = f32[2,8]{1,0} parameter(2)
  %scatter.8 = f32[6,8]{1,0} scatter(f32[6,8]{1,0} %p0.1, s64[2,1]{1,0} %p1.2, f32[2,8]{1,0} %p2.3), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=%scatter-combiner.5
  ROOT %tuple.9 = (f32[6,8]{1,0}) tuple(f32[6,8]{1,0} %scatter.8)
}"""


@text(f32(2, 4, 16), f32(1, 4, 16), np.int64(2))
def torch_kv_cache_dus_s64():
    return """HloModule IrToHlo.10
ENTRY %IrToHlo.10 (p0.1: f32[2,4,16], p1.2: f32[1,4,16], p2.3: s64[]) -> (f32[2,4,16]) {
  %p0.1 = f32[2,4,16]{2,1,0} parameter(0)
  %p1.2 = f32[1,4,16]{2,1,0} parameter(1)
  %p2.3 = s64[] parameter(2)
  %constant.4 = s64[] constant(0)
  %constant.5 = s64[] constant(1)
  %dynamic-update-slice.6 = f32[2,4,16]{2,1,0} dynamic-update-slice(f32[2,4,16]{2,1,0} %p0.1, f32[1,4,16]{2,1,0} %p1.2, s64[] %constant.5, s64[] %p2.3, s64[] %constant.4)
  %dynamic-slice.7 = f32[2,2,16]{2,1,0} dynamic-slice(f32[2,4,16]{2,1,0} %dynamic-update-slice.6, s64[] %constant.4, s64[] %p2.3, s64[] %constant.4), dynamic_slice_sizes={2,2,16}
  ROOT %tuple.8 = (f32[2,4,16]{2,1,0}, f32[2,2,16]{2,1,0}) tuple(%dynamic-update-slice.6, %dynamic-slice.7)
}"""


@text(bf16(8, 32), f32(32), f32(32))
def torch_bf16_layernorm_f32_math():
    return """HloModule IrToHlo.30
%add.1 (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}
ENTRY %IrToHlo.30 (p0: bf16[8,32], p1: f32[32], p2: f32[32]) -> (bf16[8,32]) {
  %p0 = bf16[8,32]{1,0} parameter(0)
  %p1 = f32[32]{0} parameter(1)
  %p2 = f32[32]{0} parameter(2)
  %x = f32[8,32]{1,0} convert(bf16[8,32]{1,0} %p0)
  %zero = f32[] constant(0)
  %sum = f32[8]{0} reduce(f32[8,32]{1,0} %x, f32[] %zero), dimensions={1}, to_apply=%add.1
  %n = f32[] constant(0.03125)
  %nb = f32[8]{0} broadcast(f32[] %n), dimensions={}
  %mean = f32[8]{0} multiply(%sum, %nb)
  %meanb = f32[8,32]{1,0} broadcast(%mean), dimensions={0}
  %xc = f32[8,32]{1,0} subtract(%x, %meanb)
  %sq = f32[8,32]{1,0} multiply(%xc, %xc)
  %ss = f32[8]{0} reduce(%sq, %zero), dimensions={1}, to_apply=%add.1
  %var = f32[8]{0} multiply(%ss, %nb)
  %eps = f32[] constant(1e-05)
  %epsb = f32[8]{0} broadcast(%eps), dimensions={}
  %ve = f32[8]{0} add(%var, %epsb)
  %rs = f32[8]{0} rsqrt(%ve)
  %rsb = f32[8,32]{1,0} broadcast(%rs), dimensions={0}
  %y = f32[8,32]{1,0} multiply(%xc, %rsb)
  %gb = f32[8,32]{1,0} broadcast(%p1), dimensions={1}
  %bb = f32[8,32]{1,0} broadcast(%p2), dimensions={1}
  %yg = f32[8,32]{1,0} multiply(%y, %gb)
  %yo = f32[8,32]{1,0} add(%yg, %bb)
  %out = bf16[8,32]{1,0} convert(%yo)
  ROOT %tuple = (bf16[8,32]{1,0}) tuple(%out)
}"""


@text(f32(5, 6), R.rand(5, 6) > 0.5, f32(6, 3))
def torch_masked_fill_addmm_pow():
    return """HloModule IrToHlo.20
ENTRY %IrToHlo.20 (p0: f32[5,6], p1: pred[5,6], p2: f32[6,3]) -> (f32[5,3], f32[5,6]) {
  %p0 = f32[5,6]{1,0} parameter(0)
  %p1 = pred[5,6]{1,0} parameter(1)
  %p2 = f32[6,3]{1,0} parameter(2)
  %c = f32[] constant(-10000)
  %cb = f32[5,6]{1,0} broadcast(%c), dimensions={}
  %m = f32[5,6]{1,0} select(%p1, %cb, %p0)
  %two = f32[] constant(2)
  %twob = f32[5,6]{1,0} broadcast(%two), dimensions={}
  %pw = f32[5,6]{1,0} power(%p0, %twob)
  %t = f32[3,6]{0,1} transpose(%p2), dimensions={1,0}
  %d = f32[5,3]{1,0} dot(%pw, %t), lhs_contracting_dims={1}, rhs_contracting_dims={1}
  %beta = f32[] constant(0.5)
  %betab = f32[5,3]{1,0} broadcast(%beta), dimensions={}
  %r = f32[5,3]{1,0} multiply(%d, %betab)
  ROOT %tuple = (f32[5,3]{1,0}, f32[5,6]{1,0}) tuple(%r, %m)
}"""


@text(R.rand(4, 7) > 0.3, ints(-5, 5, 4, 7, dtype=np.int64))
def torch_all_any_sum_s64():
    return """HloModule IrToHlo.20
%and.1 (a: pred[], b: pred[]) -> pred[] {
  %a = pred[] parameter(0)
  %b = pred[] parameter(1)
  ROOT %r = pred[] and(%a, %b)
}
%or.2 (a: pred[], b: pred[]) -> pred[] {
  %a = pred[] parameter(0)
  %b = pred[] parameter(1)
  ROOT %r = pred[] or(%a, %b)
}
%add.3 (a: s64[], b: s64[]) -> s64[] {
  %a = s64[] parameter(0)
  %b = s64[] parameter(1)
  ROOT %r = s64[] add(%a, %b)
}
ENTRY %IrToHlo.20 (p0: pred[4,7], p1: s64[4,7]) -> (pred[4], pred[7], s64[4], s64[4,7]) {
  %p0 = pred[4,7]{1,0} parameter(0)
  %p1 = s64[4,7]{1,0} parameter(1)
  %t = pred[] constant(true)
  %f = pred[] constant(false)
  %all = pred[4]{0} reduce(%p0, %t), dimensions={1}, to_apply=%and.1
  %any = pred[7]{0} reduce(%p0, %f), dimensions={0}, to_apply=%or.2
  %z = s64[] constant(0)
  %s = s64[4]{0} reduce(%p1, %z), dimensions={1}, to_apply=%add.3
  %cv = s64[4,7]{1,0} convert(%p0)
  %m = s64[4,7]{1,0} multiply(%cv, %p1)
  ROOT %tuple = (pred[4]{0}, pred[7]{0}, s64[4]{0}, s64[4,7]{1,0}) tuple(%all, %any, %s, %m)
}"""


@text(f32(3, 5), f32(3, 5))
def compare_totalorder_and_nan_select():
    return """HloModule c
ENTRY main {
  a = f32[3,5] parameter(0)
  b = f32[3,5] parameter(1)
  z = f32[] constant(0)
  zb = f32[3,5] broadcast(z), dimensions={}
  l = f32[3,5] log(a)
  lt = pred[3,5] compare(l, b), direction=LT, type=TOTALORDER
  ne = pred[3,5] compare(l, l), direction=NE
  s = f32[3,5] select(ne, zb, l)
  m = f32[3,5] maximum(l, b)
  ROOT t = (pred[3,5], f32[3,5], f32[3,5]) tuple(lt, s, m)
}"""


@text(f32(3, 0), f32(2, 3))
def zero_size_text_ops():
    return """HloModule z
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  e = f32[3,0] parameter(0)
  x = f32[2,3] parameter(1)
  z = f32[] constant(0)
  r = f32[3] reduce(e, z), dimensions={1}, to_apply=add_f
  d = f32[2,0] dot(x, e), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[2,3] concatenate(d, x), dimensions={1}
  p = f32[3,2] pad(e, z), padding=0_0x1_1
  ROOT t = (f32[3], f32[2,0], f32[2,3], f32[3,2]) tuple(r, d, c, p)
}"""


@text(np.array([-1, 0, 5, -128, 127, 64], np.int8), np.array([1, 7, 8, 3, 0, 200], np.uint8))
def narrow_shift_and_count_text():
    return """HloModule n
ENTRY main {
  a = s8[6] parameter(0)
  k = u8[6] parameter(1)
  ks = s8[6] convert(k)
  l = s8[6] shift-right-logical(a, ks)
  r = s8[6] shift-right-arithmetic(a, ks)
  sl = s8[6] shift-left(a, ks)
  ua = u8[6] shift-right-arithmetic(k, k)
  p = s8[6] popcnt(a)
  c = s8[6] count-leading-zeros(a)
  ROOT t = (s8[6], s8[6], s8[6], u8[6], s8[6], s8[6]) tuple(l, r, sl, ua, p, c)
}"""


# --- model sizes: one layer of real models at their own widths (several 128-partition tiles) -----

SCALE = {}


def scale(*args):
    def deco(fn):
        SCALE[fn.__name__] = (fn, list(args))
        return fn
    return deco


def _ln(x, g, b, eps=1e-12):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) * lax.rsqrt(v + eps) * g + b


@scale(f32(1, 128, 768), f32(768, 2304, scale=0.03), f32(768, 768, scale=0.03), f32(768), f32(768),
       f32(768, 3072, scale=0.03), f32(3072, 768, scale=0.02), (R.rand(1, 128) > 0.1))
def bert_base_layer(x, wqkv, wo, g, b, w1, w2, keep):
    h = x @ wqkv
    q, k, v = [t.reshape(1, 128, 12, 64).transpose(0, 2, 1, 3) for t in jnp.split(h, 3, -1)]
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / 8.0
    s = jnp.where(keep[:, None, None, :], s, -1e4)
    a = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v).transpose(0, 2, 1, 3).reshape(1, 128, 768)
    x = _ln(x + a @ wo, g, b)
    return _ln(x + jax.nn.gelu(x @ w1, approximate=False) @ w2, g, b)


@scale(bf16(256, 1024), bf16(1024, 2816, scale=0.03), bf16(1024, 2816, scale=0.03), bf16(2816, 1024, scale=0.02),
       f32(1024))
def llama_mlp_bf16_rmsnorm(x, wg, wu, wd, w):
    xf = x.astype(jnp.float32)
    h = (xf * lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + 1e-5) * w).astype(jnp.bfloat16)
    return (jax.nn.silu(h @ wg) * (h @ wu)) @ wd


@scale(f32(256, 512, scale=2.0), ints(0, 32000, 256), f32(512, 32000, scale=0.05))
def lm_head_cross_entropy_32k(h, labels, w):
    def loss(w):
        lg = h @ w
        lp = jax.nn.log_softmax(lg, -1)
        return -jnp.mean(jnp.take_along_axis(lp, labels[:, None], 1))
    return jax.value_and_grad(loss)(w)


@scale(f32(32000, 256, scale=0.1), ints(0, 32000, 4, 128), f32(512, 256, scale=0.1))
def embedding_32k_with_positions(table, ids, pos):
    return table[ids] + pos[None, :128]


@scale(f32(2, 64, 28, 28), f32(64, 64, 3, 3, scale=0.05), f32(64), f32(64))
def resnet_conv_bn_relu_nchw(x, w, g, b):
    y = lax.conv_general_dilated(x, w, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"))
    m = y.mean((0, 2, 3), keepdims=True)
    v = y.var((0, 2, 3), keepdims=True)
    y = (y - m) * lax.rsqrt(v + 1e-5) * g[None, :, None, None] + b[None, :, None, None]
    return jax.nn.relu(y + x)


@scale(f32(1, 32, 8, 128), f32(1, 8, 512, 128), f32(1, 8, 512, 128), np.int32(300))
def gqa_decode_attention_kv512(q, k, v, n):
    k = jnp.repeat(k, 4, axis=1)
    v = jnp.repeat(v, 4, axis=1)
    s = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(128.0)
    s = jnp.where(jnp.arange(512)[None, None, None, :] < n, s, -jnp.inf)
    return jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(s, -1), v)


@scale(f32(300, 260), f32(260, 130, scale=0.1))
def ragged_matmul_softmax_topk(x, w):
    y = jax.nn.softmax(x @ w, -1)
    return y, lax.top_k(y, 8), jnp.argsort(y[:, :64], -1)


# --- edge semantics XLA's elementwise / window tests check ------------------------------------

_TINY = np.array([1e-7, -1e-7, 1e-5, -3e-4, 0.0, -0.0, 1e-30, 2e-3, -0.5, 0.7, 30.0, -30.0], np.float32)


@text(_TINY)
def tiny_argument_precision():
    return """HloModule t
ENTRY main {
  x = f32[12] parameter(0)
  a = f32[12] exponential-minus-one(x)
  b = f32[12] log-plus-one(x)
  c = f32[12] tanh(x)
  d = f32[12] sine(x)
  e = f32[12] logistic(x)
  ROOT t = (f32[12], f32[12], f32[12], f32[12], f32[12]) tuple(a, b, c, d, e)
}"""


@text(np.array([0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 3.0], np.float32),
      np.array([0.0, 0.0, -0.0, -0.0, -np.inf, np.inf, np.inf, -np.inf, 1.0, -0.0], np.float32))
def atan2_sign_divide_edges():
    return """HloModule t
ENTRY main {
  y = f32[10] parameter(0)
  x = f32[10] parameter(1)
  a = f32[10] atan2(y, x)
  s = f32[10] sign(y)
  d = f32[10] divide(y, x)
  f = pred[10] is-finite(d)
  fl = f32[10] floor(y)
  ROOT t = (f32[10], f32[10], f32[10], pred[10], f32[10]) tuple(a, s, d, f, fl)
}"""


@text(np.array([-2147483648, -1, 0, 2147483647, 5, -5], np.int32), np.array([3, 0, 2, 2, 1, 31], np.int32))
def int32_wrap_abs_negate_power():
    return """HloModule t
ENTRY main {
  a = s32[6] parameter(0)
  b = s32[6] parameter(1)
  ab = s32[6] abs(a)
  ng = s32[6] negate(a)
  m = s32[6] multiply(a, a)
  ad = s32[6] add(a, a)
  p = s32[6] power(b, b)
  lo = s32[] constant(-3)
  hi = s32[] constant(4)
  lob = s32[6] broadcast(lo), dimensions={}
  hib = s32[6] broadcast(hi), dimensions={}
  c = s32[6] clamp(lob, a, hib)
  ROOT t = (s32[6], s32[6], s32[6], s32[6], s32[6], s32[6]) tuple(ab, ng, m, ad, p, c)
}"""


@text(f32(5, 5), f32(3, 3))
def select_and_scatter_overlapping_windows():
    return """HloModule ss
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
gt_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GT
}
ENTRY main {
  x = f32[5,5] parameter(0)
  g = f32[3,3] parameter(1)
  z = f32[] constant(0)
  ROOT s = f32[5,5] select-and-scatter(x, g, z), window={size=3x3 stride=2x2 pad=1_1x1_1}, select=gt_f, scatter=add_f
}"""


@text(np.array([[1.0, 1.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0]], np.float32), np.ones((1, 2), np.float32))
def select_and_scatter_ties_first_wins():
    return """HloModule ss
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ge_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
ENTRY main {
  x = f32[2,4] parameter(0)
  g = f32[1,2] parameter(1)
  z = f32[] constant(0)
  ROOT s = f32[2,4] select-and-scatter(x, g, z), window={size=2x2 stride=2x2}, select=ge_f, scatter=add_f
}"""


@text(f32(6, 5), np.array([[1, 0], [4, 3], [5, 4], [-1, 0]], np.int32), f32(4, 2, 2))
def scatter_windows_partially_out_of_bounds():
    return """HloModule s
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY main {
  op = f32[6,5] parameter(0)
  idx = s32[4,2] parameter(1)
  up = f32[4,2,2] parameter(2)
  ROOT s = f32[6,5] scatter(op, idx, up), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0,1}, index_vector_dim=1, to_apply=add_f
}"""


@text(f32(4, 6))
def reduce_window_base_and_window_dilation():
    return """HloModule rw
max_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
ENTRY main {
  x = f32[4,6] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[4,2] reduce-window(x, z), window={size=2x2 stride=2x2 pad=1_1x0_0 lhs_dilate=2x1 rhs_dilate=1x2}, to_apply=max_f
}"""


@text(f32(3, 4) * 100, f32(3, 4))
def convert_rounding_to_narrow_floats():
    return """HloModule c
ENTRY main {
  x = f32[3,4] parameter(0)
  y = f32[3,4] parameter(1)
  b = bf16[3,4] convert(x)
  h = f16[3,4] convert(x)
  m = bf16[3,4] multiply(b, b)
  hb = f16[3,4] convert(y)
  s = f16[3,4] add(h, hb)
  ROOT t = (bf16[3,4], f16[3,4], bf16[3,4], f16[3,4]) tuple(b, h, m, s)
}"""


@text(f32(2, 3, 4))
def iota_broadcast_reverse_bf16():
    return """HloModule i
ENTRY main {
  x = f32[2,3,4] parameter(0)
  i = bf16[2,3,4] iota(), iota_dimension=2
  f = f32[2,3,4] convert(i)
  j = s32[3] iota(), iota_dimension=0
  jb = s32[2,3,4] broadcast(j), dimensions={1}
  jf = f32[2,3,4] convert(jb)
  r = f32[2,3,4] reverse(x), dimensions={1,2}
  a = f32[2,3,4] add(f, jf)
  ROOT o = f32[2,3,4] multiply(a, r)
}"""


@text(f32(4, 8))
def while_with_dynamic_slice_accumulate():
    return """HloModule w
cond {
  p = (s32[], f32[4], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(8)
  ROOT c = pred[] compare(i, n), direction=LT
}
body {
  p = (s32[], f32[4], f32[4,8]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  acc = f32[4] get-tuple-element(p), index=1
  x = f32[4,8] get-tuple-element(p), index=2
  z = s32[] constant(0)
  col = f32[4,1] dynamic-slice(x, z, i), dynamic_slice_sizes={4,1}
  c = f32[4] reshape(col)
  t = f32[4] tanh(c)
  a2 = f32[4] add(acc, t)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT r = (s32[], f32[4], f32[4,8]) tuple(i1, a2, x)
}
ENTRY main {
  x = f32[4,8] parameter(0)
  z = s32[] constant(0)
  zf = f32[] constant(0)
  a = f32[4] broadcast(zf), dimensions={}
  t = (s32[], f32[4], f32[4,8]) tuple(z, a, x)
  w = (s32[], f32[4], f32[4,8]) while(t), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
}"""


@scale(f32(2, 32000, scale=3.0))
def topk_sampling_over_vocab_32k(logits):
    v, i = lax.top_k(logits, 50)
    return v, i, jax.nn.softmax(v / 0.7, -1)


@scale(f32(1, 128256, scale=3.0))
def argmax_and_topk_over_vocab_128k(logits):
    return jnp.argmax(logits, -1), lax.top_k(logits, 8)


# --- linear algebra as JAX lowers it off CPU (probe source "offcpu") ----------------------------

OFFCPU = {}


def _spd(*b, n):
    a = R.randn(*b, n, n).astype(np.float32)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)


def offcpu(*args):
    def deco(fn):
        OFFCPU[fn.__name__] = (fn, list(args))
        return fn
    return deco


@offcpu(_spd(n=16), f32(16, 4))
def cholesky_solve_and_logdet(a, b):
    ll = jnp.linalg.cholesky(a)
    return ll, jax.scipy.linalg.cho_solve((ll, True), b), 2 * jnp.sum(jnp.log(jnp.diagonal(ll)))


@offcpu(_spd(3, n=8), f32(3, 5, 8))
def batched_triangular_solves(a, b):
    ll = jnp.linalg.cholesky(a)
    return (jax.scipy.linalg.solve_triangular(ll, jnp.swapaxes(b, -1, -2), lower=True, trans=1),
            jax.vmap(lambda m, v: jax.scipy.linalg.solve_triangular(m, v.T, lower=False, unit_diagonal=True))(a, b))


@offcpu(_spd(n=32), f32(32, 32))
def gaussian_whitening(cov, x):
    ll = jnp.linalg.cholesky(cov)
    return jax.scipy.linalg.solve_triangular(ll, x, lower=True)


# --- more library calls model code makes ------------------------------------------------------

@piece(f32(4, 10), ints(-3, 14, 4, 3))
def take_modes_clip_fill(x, i):
    return (jnp.take(x, i, axis=1, mode="clip"), x.at[:, i[0]].get(mode="fill", fill_value=-1.0),
            jnp.take_along_axis(x, jnp.clip(i, 0, 9), axis=1))


@piece(np.array([0, 7], np.uint32), f32(3, 12))
def random_categorical_and_permutation(key, logits):
    k = jax.random.wrap_key_data(key)
    k1, k2 = jax.random.split(k)
    return jax.random.categorical(k1, logits, axis=-1), jax.random.permutation(k2, 16)


@piece(f32(2, 9, 4, 8), f32(2, 9, 4, 8), f32(2, 9, 4, 8))
def jax_nn_dot_product_attention(q, k, v):
    return jax.nn.dot_product_attention(q, k, v, is_causal=True)


@piece(f32(2, 8, 9, 9), f32(8, 1, 3, 3, scale=0.3))
def depthwise_conv_nchw(x, w):
    return lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (1, 1)), dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                    feature_group_count=8)


@piece(f32(6, 5))
def cumulative_reverse_and_cummax(x):
    return lax.cumsum(x, 0, reverse=True), lax.cummax(x, 1), lax.cummin(x, 0), lax.cumlogsumexp(x, 1)


@piece(ints(0, 10, 40), f32(40))
def bincount_histogram_digitize(i, w):
    return (jnp.bincount(i, length=10), jnp.bincount(i, weights=w, length=10),
            jnp.digitize(w, jnp.linspace(-2, 2, 7)), jnp.histogram(w, bins=5, range=(-2, 2))[0])


@piece(f32(7, 4, 3), f32(3, 3, scale=0.4))
def scan_reverse_unrolled(xs, w):
    def body(h, x):
        h = jnp.tanh(x @ w + h)
        return h, h
    return lax.scan(body, jnp.zeros((4, 3), jnp.float32), xs, reverse=True, unroll=2)


@piece(f32(1, 3, 5, 5))
def resize_cubic_and_lanczos(x):
    return jax.image.resize(x, (1, 3, 8, 8), "cubic"), jax.image.resize(x, (1, 3, 3, 3), "lanczos3")


@piece(f32(3, 6), f32(6))
def normalize_norm_where(x, y):
    return (jax.nn.standardize(x, axis=-1), jnp.linalg.norm(x, axis=-1, keepdims=True),
            jnp.where(jnp.isnan(x / y), 0.0, x / y), jnp.nan_to_num(jnp.log(x)), jnp.clip(x, y[:1]))


@piece(bf16(4, 6), ints(0, 6, 4))
def bf16_one_hot_and_loss(logits, labels):
    oh = jax.nn.one_hot(labels, 6, dtype=jnp.bfloat16)
    lp = jax.nn.log_softmax(logits.astype(jnp.float32), -1)
    return oh, -(oh.astype(jnp.float32) * lp).sum(-1), jnp.argmax(logits, -1)


@piece(f32(5, 8))
def median_quantile_sorting(x):
    return jnp.median(x, axis=1), jnp.quantile(x, 0.9, axis=0), jnp.percentile(x, 25.0)


@scale(f32(5000, 256, scale=0.1), ints(0, 5000, 512), f32(512, 256))
def embedding_grad_scatter_add_5k(table, ids, g):
    return jax.grad(lambda t: jnp.sum(t[ids] * g))(table)


@scale(f32(300, 768), f32(768), f32(768), f32(300, 768))
def layernorm_backward_768(x, gm, bt, dy):
    return jax.vjp(lambda x, gm, bt: _ln(x, gm, bt, 1e-5), x, gm, bt)[1](dy)


@scale(f32(12, 130, 64), f32(12, 64, 260), ints(-100, 100, 260, 300, dtype=np.int8), ints(-100, 100, 300, 200,
                                                                                           dtype=np.int8))
def batched_and_int8_matmuls(a, b, p, q):
    return jnp.einsum("hqd,hdk->hqk", a, b), lax.dot(p, q, preferred_element_type=jnp.int32)


@scale(f32(1000, 300), f32(260, 1000))
def big_reductions_and_transposes(x, y):
    return x.sum(0), x.max(1), jnp.argmax(x, 0), y.T + 1.0, jnp.cumsum(x[:, 0]), jnp.sort(y[:, :700], axis=1)


@scale(f32(8, 2048, 128), f32(8, 1, 128), np.int32(1999))
def kv_cache_write_2048(cache, new, pos):
    c = lax.dynamic_update_slice(cache, new, (0, pos, 0))
    return c, lax.dynamic_slice(c, (0, pos - 3, 0), (8, 4, 128))


@scale(f32(4, 32, 28, 28), f32(64, 32, 3, 3, scale=0.05))
def conv_backprop_input_and_filter(x, w):
    def f(x, w):
        return jnp.sum(jnp.tanh(lax.conv_general_dilated(x, w, (2, 2), ((1, 1), (1, 1)),
                                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))))
    return jax.grad(f, argnums=(0, 1))(x, w)
