"""A corpus of JAX programs: the interpreter's tests and, later, the end-to-end
compiler tests run every entry.

Each ``Program`` has a name, a function, an argument builder
``make_args(seed, size)`` and the dtypes it exercises. ``size`` is
``"small"`` (a few dozen elements per axis; interpreter tests) or ``"tiled"``
(the feature, sequence, batch-of-rows and matmul axes need several
128-partition tiles, mostly sizes that are not multiples of 128 such as 260,
300, 130; head counts, conv spatial dims and kernel sizes stay small so a
tiled program still compiles and simulates in seconds). Argument builders return numpy arrays; index arguments
hold valid indices.

Helpers: ``lower(program, args)`` -> (HloModuleProto bytes, HLO text) as
``jax.jit(f).lower(...).compiler_ir('hlo')`` gives them; ``reference(program,
args)`` -> XLA:CPU's results flattened in result order.
"""
import collections

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax

import ml_dtypes

Program = collections.namedtuple("Program", "name fn make_args dtypes")

SIZES = ("small", "tiled")


def _rng(seed):
    return np.random.RandomState(seed)


def _f32(r, *shape, scale=1.0):
    return (r.randn(*shape) * scale).astype(np.float32)


def _pick(size, small, tiled):
    if size not in SIZES:
        raise ValueError("size must be one of %s, got %r" % (SIZES, size))
    return small if size == "small" else tiled


# --- model families -------------------------------------------------------------


def mlp_gelu_softmax(x, w1, b1, w2, b2):
    h = jax.nn.gelu(x @ w1 + b1)
    return jax.nn.softmax(h @ w2 + b2, axis=-1)


def _mlp_args(seed, size):
    B, D, H, C = _pick(size, (8, 16, 32, 10), (260, 300, 384, 130))
    r = _rng(seed)
    return [_f32(r, B, D), _f32(r, D, H, scale=D ** -0.5), _f32(r, H, scale=0.1),
            _f32(r, H, C, scale=H ** -0.5), _f32(r, C, scale=0.1)]


def layernorm(x, gamma, beta):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta


def _ln_args(seed, size):
    B, D = _pick(size, (8, 32), (260, 300))
    r = _rng(seed)
    return [_f32(r, B, D, scale=2.0) + 0.5, _f32(r, D) + 1.0, _f32(r, D, scale=0.1)]


def _rotary(x, positions):
    # x: [S, H, Dh]; rotate pairs (first half, second half) by position-dependent angles
    dh = x.shape[-1]
    half = dh // 2
    inv_freq = 1.0 / (10000.0 ** (jnp.arange(half, dtype=jnp.float32) / half))
    ang = positions.astype(jnp.float32)[:, None] * inv_freq[None, :]
    cos, sin = jnp.cos(ang)[:, None, :], jnp.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return jnp.concatenate([x1 * cos - x2 * sin, x1 * sin + x2 * cos], axis=-1)


def rmsnorm_rotary(x, weight, positions):
    ms = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
    y = x * lax.rsqrt(ms + 1e-6) * weight
    return _rotary(y, positions)


def _rms_args(seed, size):
    S, H, Dh = _pick(size, (8, 2, 16), (260, 3, 130))
    r = _rng(seed)
    return [_f32(r, S, H, Dh), _f32(r, Dh) + 1.0, np.arange(S, dtype=np.int32)]


def causal_attention(q, k, v):
    # q, k, v: [H, S, D]
    s = q.shape[1]
    scores = jnp.einsum("hqd,hkd->hqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
    mask = jnp.tril(jnp.ones((s, s), jnp.bool_))
    scores = jnp.where(mask[None], scores, -1e30)
    p = jax.nn.softmax(scores, axis=-1)
    return jnp.einsum("hqk,hkd->hqd", p, v)


def _attn_args(seed, size):
    H, S, D = _pick(size, (2, 8, 16), (2, 260, 130))
    r = _rng(seed)
    return [_f32(r, H, S, D), _f32(r, H, S, D), _f32(r, H, S, D)]


def transformer_block(x, ln1, wqkv, wo, ln2, w1, w2):
    s, d = x.shape
    nh = 2
    hd = d // nh
    h = layernorm(x, ln1, 0.0)
    qkv = h @ wqkv                                             # [S, 3D]
    q, k, v = jnp.split(qkv, 3, axis=-1)
    q, k, v = (t.reshape(s, nh, hd).transpose(1, 0, 2) for t in (q, k, v))
    a = causal_attention(q, k, v).transpose(1, 0, 2).reshape(s, d)
    x = x + a @ wo
    h = layernorm(x, ln2, 0.0)
    return x + jax.nn.gelu(h @ w1) @ w2


def _block_args(seed, size):
    S, D, F = _pick(size, (8, 16, 32), (260, 256, 384))
    r = _rng(seed)
    return [_f32(r, S, D), _f32(r, D) + 1.0, _f32(r, D, 3 * D, scale=D ** -0.5), _f32(r, D, D, scale=D ** -0.5),
            _f32(r, D) + 1.0, _f32(r, D, F, scale=D ** -0.5), _f32(r, F, D, scale=F ** -0.5)]


def conv_relu_maxpool(x, w, b):
    # NHWC input, HWIO kernel, SAME padding, 2x2 max-pool stride 2
    y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")) + b
    y = jax.nn.relu(y)
    return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _conv_args(seed, size):
    N, HW, C, O = _pick(size, (2, 8, 3, 4), (2, 16, 130, 136))
    r = _rng(seed)
    return [_f32(r, N, HW, HW, C), _f32(r, 3, 3, C, O, scale=(9 * C) ** -0.5), _f32(r, O, scale=0.1)]


def conv_variants(x, wd, wg):
    # depthwise (feature groups), strided + dilated + padded, transposed (lhs dilation), 1-d
    c = x.shape[1]
    depth = lax.conv_general_dilated(x, wd, (1, 1), ((1, 1), (1, 1)), feature_group_count=c)
    strided = lax.conv_general_dilated(x, wg, (2, 1), ((2, 0), (1, 1)), rhs_dilation=(2, 1))
    transposed = lax.conv_general_dilated(x, wg, (1, 1), ((1, 1), (1, 1)), lhs_dilation=(2, 2))
    return depth, strided, transposed


def _convv_args(seed, size):
    N, C, HW = _pick(size, (2, 4, 9), (2, 130, 12))
    r = _rng(seed)
    return [_f32(r, N, C, HW, HW), _f32(r, C, 1, 3, 3), _f32(r, 6, C, 3, 3, scale=0.2)]


def conv_grads(x, w):
    # gradients of a depthwise conv and of a max-pool: batch_group_count convolutions and
    # select-and-scatter
    c = x.shape[-1]

    def loss(x, w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                     feature_group_count=c)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.sum(y * y)
    return jax.grad(loss, argnums=(0, 1))(x, w)


def _convg_args(seed, size):
    N, HW, C = _pick(size, (2, 6, 3), (2, 10, 130))
    r = _rng(seed)
    return [_f32(r, N, HW, HW, C), _f32(r, 3, 3, 1, C, scale=0.3)]


def embedding_lookup(table, ids, pos_table):
    e = table[ids] + pos_table[jnp.arange(ids.shape[1])][None]
    return e, jnp.sum(e, axis=1)


def _emb_args(seed, size):
    V, D, B, S = _pick(size, (50, 16, 2, 8), (1000, 260, 2, 260))
    r = _rng(seed)
    return [_f32(r, V, D), r.randint(0, V, size=(B, S)).astype(np.int32), _f32(r, S, D, scale=0.1)]


def top_k(x):
    v, i = lax.top_k(x, 5)
    return v, i


def _topk_args(seed, size):
    B, N = _pick(size, (4, 32), (260, 300))
    r = _rng(seed)
    x = _f32(r, B, N)
    x[:, 3] = x[:, 7]  # a tie: the lower index comes first
    return [x]


def argmax_argmin(x):
    return jnp.argmax(x, axis=-1), jnp.argmin(x, axis=0), jnp.max(x, axis=-1)


def _argmax_args(seed, size):
    B, N = _pick(size, (6, 20), (260, 300))
    r = _rng(seed)
    x = np.round(_f32(r, B, N) * 4) / 4  # many ties
    return [x.astype(np.float32)]


def int_zoo(a, b, m):
    bs = jnp.abs(b) % 31
    nz = jnp.where(b == 0, 1, b)
    return (a + b, a - b, a * b, a // nz, a % nz, lax.div(a, nz), lax.rem(a, nz),
            a & b, a | b, a ^ b, ~a, lax.shift_left(a, bs), lax.shift_right_logical(a, bs),
            lax.shift_right_arithmetic(a, bs), jnp.maximum(a, b), jnp.minimum(a, b), jnp.abs(a), -a,
            jnp.sign(a), lax.population_count(a), lax.clz(a), a < b, a == b, a >= b,
            m & (a > 0), m | (b > 0), m ^ (a > b), ~m, jnp.where(m, a, b), lax.clamp(-5, a, 7),
            (a.astype(jnp.float32) * 0.37).astype(jnp.int32), m.astype(jnp.int32), (a % 3).astype(jnp.bool_),
            a.astype(jnp.uint32) >> 3, jnp.sum(a, axis=0), jnp.max(b, axis=1), jnp.any(m, axis=1),
            jnp.all(m, axis=0))


def _int_args(seed, size):
    B, N = _pick(size, (6, 10), (260, 300))
    r = _rng(seed)
    a = r.randint(-1000, 1000, size=(B, N)).astype(np.int32)
    b = r.randint(-50, 50, size=(B, N)).astype(np.int32)
    a[0, :3] = [np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0]
    return [a, b, r.rand(B, N) > 0.5]


def float_zoo(x, y):
    yp = jnp.abs(y) + 0.5
    return (jnp.exp(x), jnp.log(yp), jnp.log1p(yp), jnp.expm1(x), jnp.tanh(x), jax.nn.sigmoid(x),
            lax.erf(x), jnp.sin(x), jnp.cos(x), jnp.tan(x * 0.3), jnp.arctan2(x, y), jnp.power(yp, x),
            lax.rsqrt(yp), jnp.cbrt(x), jnp.sqrt(yp), lax.round(x * 3, lax.RoundingMethod.AWAY_FROM_ZERO),
            lax.round(x * 3, lax.RoundingMethod.TO_NEAREST_EVEN), jnp.floor(x * 3), jnp.ceil(x * 3),
            jnp.sign(x), jnp.isfinite(x / y), lax.clamp(-0.5, x, 0.5), jnp.fmod(x, yp), x / y,
            jnp.maximum(x, y), jnp.minimum(x, y), lax.reduce_precision(x, 5, 10), lax.erf_inv(jnp.tanh(x) * 0.9),
            x > y, jnp.abs(x), -x, x.astype(jnp.bfloat16), x.astype(jnp.float16))


def _float_args(seed, size):
    B, N = _pick(size, (6, 10), (260, 300))
    r = _rng(seed)
    x = _f32(r, B, N)
    y = _f32(r, B, N)
    x[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    y[0, 4:7] = [0.0, -0.0, np.nan]
    return [x, y]


def bf16_ops(x, w, b):
    h = jnp.dot(x, w, preferred_element_type=jnp.float32)    # bf16 x bf16 -> f32 accumulate
    hb = jnp.dot(x, w)                                         # bf16 result
    g = jax.nn.gelu(h.astype(jnp.bfloat16) + b)
    return h, hb, g, jax.nn.softmax(g.astype(jnp.float32), axis=-1).astype(jnp.bfloat16), jnp.sum(g, axis=0)


def _bf16_args(seed, size):
    M, K, N = _pick(size, (8, 32, 16), (260, 384, 300))
    r = _rng(seed)
    return [_f32(r, M, K).astype(ml_dtypes.bfloat16), _f32(r, K, N, scale=K ** -0.5).astype(ml_dtypes.bfloat16),
            _f32(r, N, scale=0.1).astype(ml_dtypes.bfloat16)]


def shape_ops(x, y):
    t = x.T
    r = x.reshape(-1, 2, x.shape[1] // 2).transpose(2, 0, 1).reshape(x.shape[1], -1)
    s = x[1:-1:2, ::3]
    c = jnp.concatenate([x, y, x[:, :2]], axis=1)
    p = lax.pad(x, 0.5, ((1, -1, 1), (-2, 3, 0)))
    return t, r, s, c, p, jnp.flip(x, axis=(0, 1)), jnp.roll(y, 3, axis=1), jnp.tile(x[:2], (2, 1)), \
        jnp.broadcast_to(y[:, None, :2], (y.shape[0], 3, 2)), jnp.expand_dims(x, 0).squeeze(0)[None, 2]


def _shape_args(seed, size):
    B, N = _pick(size, (6, 10), (260, 300))
    r = _rng(seed)
    return [_f32(r, B, N), _f32(r, B, N)]


def loops(x, n):
    def body(i, c):
        return c * 0.9 + jnp.sin(c) * i.astype(jnp.float32) * 0.01
    a = lax.fori_loop(0, 6, body, x)

    def cond(s):
        return (s[0] < n) & (jnp.max(s[1]) < 1e6)

    def wbody(s):
        return s[0] + 1, s[1] * 1.5 + 1.0
    k, b = lax.while_loop(cond, wbody, (jnp.int32(0), x))
    return a, k, b


def _loop_args(seed, size):
    B, N = _pick(size, (4, 8), (260, 300))
    r = _rng(seed)
    return [_f32(r, B, N), np.int32(5)]


def conditional(x, flag, which):
    a = lax.cond(flag, lambda v: jnp.sin(v) * 2.0, lambda v: jnp.cos(v) - 1.0, x)
    b = lax.switch(which, [lambda v: v + 1.0, lambda v: v * v, lambda v: -v], x)
    c = lax.cond(jnp.sum(x) > 0, lambda v: v.sum(axis=0), lambda v: v.max(axis=0), x)
    return a, b, c


def _cond_args(seed, size):
    B, N = _pick(size, (4, 8), (260, 300))
    r = _rng(seed)
    return [_f32(r, B, N), np.bool_(seed % 2 == 0), np.int32(seed % 4)]  # 3 clamps to the last branch


def kv_cache_update(cache, new, pos):
    # cache: [L, H, D]; write new [T, H, D] at pos, read back a window
    c = lax.dynamic_update_slice(cache, new, (pos, 0, 0))
    win = lax.dynamic_slice(c, (pos - 1, 0, 0), (new.shape[0] + 2, c.shape[1], c.shape[2]))
    return c, win


def _kv_args(seed, size):
    L, H, D, T = _pick(size, (16, 2, 8, 2), (300, 2, 130, 3))
    r = _rng(seed)
    return [_f32(r, L, H, D), _f32(r, T, H, D), np.int32(L - 1)]  # pos near the end: clamped


def batched_einsum(a, b, c):
    return jnp.einsum("bhqd,bhkd->bhqk", a, b), jnp.einsum("bij,bjk->bik", c, jnp.swapaxes(c, 1, 2)), \
        jnp.einsum("bhqd,bhkd->bqk", a, b)


def _einsum_args(seed, size):
    B, H, Q, D = _pick(size, (2, 2, 8, 16), (2, 2, 260, 130))
    r = _rng(seed)
    return [_f32(r, B, H, Q, D), _f32(r, B, H, Q, D), _f32(r, B, Q, D)]


def _mlp2(params, x):
    w1, b1, w2, b2 = params
    return jnp.tanh(x @ w1 + b1) @ w2 + b2


def mlp_train_step(w1, b1, w2, b2, x, y):
    params = (w1, b1, w2, b2)

    def loss_fn(p):
        return jnp.mean(jnp.square(_mlp2(p, x) - y))
    loss, grads = jax.value_and_grad(loss_fn)(params)
    new = tuple(p - 0.1 * g for p, g in zip(params, grads))
    return (loss,) + new


def _train_args(seed, size):
    B, D, H, O = _pick(size, (8, 16, 32, 4), (260, 300, 384, 130))
    r = _rng(seed)
    return [_f32(r, D, H, scale=D ** -0.5), _f32(r, H, scale=0.1), _f32(r, H, O, scale=H ** -0.5),
            _f32(r, O, scale=0.1), _f32(r, B, D), _f32(r, B, O)]


def cumulative(x):
    return jnp.cumsum(x, axis=1), lax.cumsum(x, axis=0, reverse=True), lax.cummax(x, axis=1), \
        jnp.cumsum(x.astype(jnp.int32), axis=1)


def _cum_args(seed, size):
    B, N = _pick(size, (4, 16), (260, 300))
    r = _rng(seed)
    return [_f32(r, B, N) * 3]


def sorting(x, keys, vals):
    k2, v2 = lax.sort((keys, vals), num_keys=1)
    return jnp.sort(x, axis=-1), jnp.argsort(x, axis=0), k2, v2, jnp.sort(keys[::-1], axis=0), \
        lax.sort((keys, -x), num_keys=2)[1]


def _sort_args(seed, size):
    B, N = _pick(size, (5, 16), (260, 300))
    r = _rng(seed)
    x = np.round(_f32(r, B, N) * 2) / 2
    x[0, :3] = [np.nan, -0.0, 0.0]
    return [x.astype(np.float32), r.randint(-4, 4, size=(B, N)).astype(np.int32), _f32(r, B, N)]


def gather_scatter(x, idx, upd):
    a = x.at[idx].add(upd)                # duplicates in idx accumulate
    b = x.at[idx].set(upd)
    c = x.at[idx].max(upd)
    d = x[idx]
    e = jnp.take_along_axis(x, jnp.argsort(x, axis=1)[:, :3], axis=1)
    f = x.at[:, idx[:2]].multiply(2.0)
    return a, b, c, d, e, f


def _gs_args(seed, size):
    B, N, K = _pick(size, (10, 6, 7), (300, 260, 140))
    r = _rng(seed)
    idx = r.randint(0, B, size=(K,)).astype(np.int32)
    idx[1] = idx[0]
    return [_f32(r, B, N), idx, _f32(r, K, N)]


def tuple_outputs(x, y):
    return {"sum": x + y, "i": (x > y).astype(jnp.int32), "flag": jnp.any(x > 2.0),
            "pair": (jnp.mean(x), y.astype(jnp.bfloat16))}


def _tuple_args(seed, size):
    B, N = _pick(size, (4, 8), (260, 300))
    r = _rng(seed)
    return [_f32(r, B, N), _f32(r, B, N)]


def random_normal(key, x):
    k1, k2 = jax.random.split(key)
    return jax.random.normal(k1, x.shape) + x, jax.random.uniform(k2, (x.shape[0],)), \
        jax.random.randint(k2, (7,), 0, 10), jax.random.bernoulli(k1, 0.3, (5,))


def _random_args(seed, size):
    B, N = _pick(size, (4, 8), (260, 300))
    r = _rng(seed)
    return [np.array([0, seed], np.uint32), _f32(r, B, N)]


def matmul_grad(x, w, dy):
    """Forward and backward of y = x @ w: three dots and two transposes."""
    return x @ w, dy @ w.T, x.T @ dy


def matmul_grad_args(n, seed=0):
    """Arguments of ``matmul_grad`` at size ``n`` (x, w, dy all [n, n])."""
    r = _rng(seed)
    return [_f32(r, n, n), _f32(r, n, n, scale=n ** -0.5), _f32(r, n, n)]


def _mmg_args(seed, size):
    return matmul_grad_args(_pick(size, 16, 300), seed)


CORPUS = [
    Program("mlp_gelu_softmax", mlp_gelu_softmax, _mlp_args, ("f32",)),
    Program("layernorm", layernorm, _ln_args, ("f32",)),
    Program("rmsnorm_rotary", rmsnorm_rotary, _rms_args, ("f32", "s32")),
    Program("causal_attention", causal_attention, _attn_args, ("f32", "pred")),
    Program("transformer_block", transformer_block, _block_args, ("f32",)),
    Program("conv_relu_maxpool", conv_relu_maxpool, _conv_args, ("f32",)),
    Program("conv_variants", conv_variants, _convv_args, ("f32",)),
    Program("conv_grads", conv_grads, _convg_args, ("f32",)),
    Program("embedding_lookup", embedding_lookup, _emb_args, ("f32", "s32")),
    Program("top_k", top_k, _topk_args, ("f32", "s32")),
    Program("argmax", argmax_argmin, _argmax_args, ("f32", "s32")),
    Program("int_zoo", int_zoo, _int_args, ("s32", "u32", "pred")),
    Program("float_zoo", float_zoo, _float_args, ("f32", "bf16", "f16", "pred")),
    Program("bf16_matmul", bf16_ops, _bf16_args, ("bf16", "f32")),
    Program("shape_ops", shape_ops, _shape_args, ("f32",)),
    Program("loops", loops, _loop_args, ("f32", "s32")),
    Program("conditional", conditional, _cond_args, ("f32", "pred", "s32")),
    Program("kv_cache_update", kv_cache_update, _kv_args, ("f32", "s32")),
    Program("batched_einsum", batched_einsum, _einsum_args, ("f32",)),
    Program("mlp_train_step", mlp_train_step, _train_args, ("f32",)),
    Program("cumsum", cumulative, _cum_args, ("f32", "s32")),
    Program("sort", sorting, _sort_args, ("f32", "s32")),
    Program("gather_scatter", gather_scatter, _gs_args, ("f32", "s32")),
    Program("tuple_outputs", tuple_outputs, _tuple_args, ("f32", "s32", "pred", "bf16")),
    Program("random_normal", random_normal, _random_args, ("u32", "f32", "s32", "pred")),
    Program("matmul_grad", matmul_grad, _mmg_args, ("f32",)),
]

BY_NAME = {p.name: p for p in CORPUS}


def get(name):
    return BY_NAME[name]


def lower(program, args):
    """(serialized HloModuleProto, HLO text) of ``program`` on ``args``."""
    comp = jax.jit(program.fn).lower(*args).compiler_ir("hlo")
    return comp.as_serialized_hlo_module_proto(), comp.as_hlo_text(print_large_constants=True)


def reference(program, args):
    """XLA:CPU's results of ``program`` on ``args``, flattened in result order, as numpy arrays."""
    out = jax.jit(program.fn)(*args)
    return [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]


def interpreter_mismatches(fn, args, evaluate=None):
    """Lower ``fn`` on ``args``, run the proto and the text form through the reference
    interpreter and compare with XLA:CPU; returns a list of problems (empty when all match)."""
    from neuronxcc.hlo import load_module
    from neuronxcc.hlo.interpreter import evaluate as _evaluate
    from neuronxcc.common.tolerances import mismatch
    evaluate = evaluate or _evaluate
    prog = Program(getattr(fn, "__name__", "fn"), fn, None, ())
    pb, text = lower(prog, args)
    ref = reference(prog, args)
    problems = []
    results = {}
    for form, src in (("proto", pb), ("text", text)):
        outs = evaluate(load_module(src), list(args), check=True)
        results[form] = outs
        if len(outs) != len(ref):
            problems.append("%s: %d outputs, XLA gives %d" % (form, len(outs), len(ref)))
            continue
        for k, (a, b) in enumerate(zip(outs, ref)):
            why = mismatch(a, b)
            if why:
                problems.append("%s output%d: %s" % (form, k, why))
    for k, (a, b) in enumerate(zip(results["proto"], results["text"])):
        a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
        if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
            problems.append("output%d: proto and text forms give different results" % k)
    return problems


def xla_run(hlo_module, inputs):
    """XLA:CPU's results of an HLO module given as HloModuleProto bytes or HLO text
    (not necessarily produced by JAX: hand-written or torch-xla style), flattened.

    Uses jaxlib internals (HLO -> StableHLO, the CPU client); raises
    ``NotImplementedError`` when this jaxlib lacks them, so callers can skip."""
    try:
        from jax._src import xla_bridge
        from jax._src.lib import _jax, xla_client
        from jax._src.lib import hlo as _hlo
        to_stablehlo = _jax.mlir.hlo_to_stablehlo
    except (ImportError, AttributeError) as e:
        raise NotImplementedError("this jaxlib cannot run HLO modules directly: %s" % e)
    if isinstance(hlo_module, str):
        hlo_module = _hlo.hlo_module_from_text(hlo_module).as_serialized_hlo_module_proto()
    client = xla_bridge.get_backend("cpu")
    devs = client.devices()[:1]
    exe = client.compile_and_load(to_stablehlo(hlo_module), xla_client.DeviceList(tuple(devs)),
                                  xla_client.CompileOptions())
    outs = exe.execute([jax.device_put(np.asarray(a), devs[0]) for a in inputs])
    return [np.asarray(o) for o in outs]
