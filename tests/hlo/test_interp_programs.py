"""Whole programs users bring, beyond the corpus's model families: a GPT-style
decode step with a KV cache, a ResNet basic block with training-mode batchnorm
and its gradients, an Adam update, vmap, scan, plain-HLO linear algebra, mixed
f32/bf16/int8/f8, one_hot, take_along_axis, argsort, cumulative ops, where with
broadcasting, integer division of negatives, out-of-range float->int
conversions. Each is lowered by JAX (proto and text) and run through the reader
and the interpreter against XLA:CPU (support.corpus.interpreter_mismatches,
tolerances from neuronxcc.common.tolerances).

Kept out of support.corpus so the compiler's end-to-end tests do not take them
on; shapes are small (the whole module runs in a few seconds).
"""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import lax

import ml_dtypes

from support.corpus import interpreter_mismatches

R = np.random.RandomState(0)


def f32(*shape):
    return R.randn(*shape).astype(np.float32)


PROGRAMS = {}


def program(*args):
    def deco(fn):
        PROGRAMS[fn.__name__] = (fn, list(args))
        return fn
    return deco


@program(f32(1, 16), f32(16, 48), f32(16, 16), f32(1, 8, 2, 8), f32(1, 8, 2, 8), np.int32(3))
def gpt_decode_step(x, wqkv, wo, k_cache, v_cache, pos):
    # one token: project, write K/V at the traced position, attend over the filled prefix
    q, k, v = jnp.split(x @ wqkv, 3, axis=-1)
    k_cache = lax.dynamic_update_slice(k_cache, k.reshape(1, 1, 2, 8), (0, pos, 0, 0))
    v_cache = lax.dynamic_update_slice(v_cache, v.reshape(1, 1, 2, 8), (0, pos, 0, 0))
    s = jnp.einsum("hd,khd->hk", q.reshape(2, 8), k_cache[0]) / jnp.sqrt(8.0)
    s = jnp.where((jnp.arange(8) <= pos)[None, :], s, -1e9)
    o = jnp.einsum("hk,khd->hd", jax.nn.softmax(s, axis=-1), v_cache[0]).reshape(1, 16)
    return o @ wo, k_cache, v_cache


@program(f32(2, 6, 6, 4), f32(3, 3, 4, 4), f32(3, 3, 4, 4), f32(4), f32(4), f32(4), f32(4))
def resnet_block_train(x, w1, w2, g1, b1, g2, b2):
    def bn(h, g, b):
        m, v = h.mean(axis=(0, 1, 2)), h.var(axis=(0, 1, 2))
        return (h - m) * lax.rsqrt(v + 1e-5) * g + b, m, v

    def conv(h, w):
        return lax.conv_general_dilated(h, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def loss(params, x):
        w1, w2, g1, b1, g2, b2 = params
        h, m1, v1 = bn(conv(x, w1), g1, b1)
        h, m2, v2 = bn(conv(jax.nn.relu(h), w2), g2, b2)
        return jnp.sum(jax.nn.relu(h + x) ** 2), (m1, v1, m2, v2)
    return jax.value_and_grad(loss, has_aux=True)((w1, w2, g1, b1, g2, b2), x)


@program(f32(8, 4), f32(8, 4), f32(8, 4), np.abs(f32(8, 4)), np.int32(5))
def adam_update(p, g, m, v, t):
    b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    tf = t.astype(jnp.float32)
    return p - lr * (m / (1 - b1 ** tf)) / (jnp.sqrt(v / (1 - b2 ** tf)) + eps), m, v


@program(f32(5, 3, 4), f32(5, 4, 2), np.arange(5, dtype=np.int32) % 3)
def vmapped_ops(a, b, i):
    return jax.vmap(lambda a, b, i: (a @ b, jnp.take(a, i, axis=0), jnp.roll(a, 1, axis=1),
                                     jnp.linalg.norm(a)))(a, b, i)


@program(f32(7, 3), f32(3, 4), f32(4, 4), f32(4))
def scan_rnn(xs, wx, wh, h0):
    def step(h, x):
        h = jnp.tanh(x @ wx + h @ wh)
        return h, h.sum()
    return lax.scan(step, h0, xs)


@program(f32(4, 4), f32(4, 2), f32(3, 4))
def plain_hlo_linalg(a, b, c):
    return (jnp.linalg.norm(c, axis=1), jnp.trace(a), jnp.linalg.norm(a, ord="fro"), jnp.linalg.norm(c, ord=jnp.inf),
            jnp.outer(b[:, 0], c[0]), jnp.kron(a[:2, :2], b[:2]), jnp.linalg.matrix_power(a / 4, 3),
            jnp.vdot(a, a), jnp.tensordot(a, c, axes=([1], [1])), jnp.diagonal(a), jnp.triu(a, 1))


@program(f32(4, 8), R.randint(-128, 127, (4, 8)).astype(np.int8), R.randint(-128, 127, (8, 5)).astype(np.int8))
def mixed_f32_bf16_int8_f8(x, q, w8):
    xb = x.astype(jnp.bfloat16)
    qq = jnp.clip(jnp.round(x / 0.05), -128, 127).astype(jnp.int8)
    return (xb * xb + 1, q.astype(jnp.float32) * 0.05 + x, qq, (q.astype(jnp.int32) * 3).astype(jnp.int8),
            jnp.dot(q, w8, preferred_element_type=jnp.int32), x.astype(jnp.float16) * 2,
            x.astype(jnp.float8_e4m3fn), (x * 1000).astype(jnp.float8_e5m2))


@program(np.array([0, 3, 1, 5, -1, 2], np.int32), f32(6, 5),
         np.array([[0, 4], [1, 1], [2, 3], [4, 0], [3, 3], [0, 0]], np.int32))
def one_hot_take_argsort(ids, x, idx):
    return (jax.nn.one_hot(ids, 6), jnp.take_along_axis(x, idx, axis=1), jnp.argsort(x, axis=1),
            jnp.argsort(-x[:, 0], stable=True), jnp.take_along_axis(x, jnp.argsort(x, axis=0), axis=0))


@program(f32(4, 6) * 0.5 + 1, R.randint(-5, 5, (4, 6)).astype(np.int32))
def cumulative_ops(x, i):
    return (jnp.cumprod(x, axis=1), lax.cummax(x, axis=0), lax.cummin(i, axis=1), jnp.cumsum(i, axis=0),
            lax.cumlogsumexp(x, axis=1), lax.cumsum(x, axis=1, reverse=True))


@program(f32(4, 1), f32(1, 5), f32(4, 5))
def where_broadcasting(a, b, c):
    return jnp.where(a > 0, b, c), jnp.where(c > b, 1.0, a), jnp.maximum(a, b), jnp.where(a > b, a, 0)


@program(np.array([7, -7, 7, -7, 0, -1, 13, -13], np.int32), np.array([2, 2, -2, -2, 3, 5, -4, 4], np.int32))
def integer_division_of_negatives(a, b):
    return (a // b, a % b, jnp.fmod(a, b), lax.div(a, b), lax.rem(a, b),
            jnp.floor_divide(a.astype(jnp.int8), b.astype(jnp.int8)),
            jnp.remainder(a.astype(jnp.float32), b.astype(jnp.float32)))


@program(np.array([3e9, -3e9, 1e20, -1e20, np.nan, np.inf, -np.inf, 2.5, -2.5, 127.9, 128.0, -129.0, 255.5,
                   65536.0], np.float32))
def float_to_int_out_of_range(x):
    return (x.astype(jnp.int32), x.astype(jnp.int8), x.astype(jnp.uint8), x.astype(jnp.uint32),
            x.astype(jnp.int16), x.astype(jnp.bfloat16).astype(jnp.int32), x.astype(jnp.float16),
            x.astype(jnp.float16).astype(jnp.int16))


@program(np.array([3, np.nan, -1, 0.0, -0.0, np.inf, -np.inf, 2, np.nan, 1], np.float32))
def sorting_with_nans(x):
    return jnp.sort(x), jnp.argsort(x), jnp.argmax(x), jnp.argmin(x), jnp.nanmax(x), jnp.max(x)


@program(f32(5, 3), np.array([0, 2, 2, 7, -1], np.int32), f32(5, 3))
def scatter_gather_modes(a, i, u):
    return (a.at[i].add(u), a.at[i].max(u), a.at[i].set(u, mode="drop"), a.at[i].get(mode="fill", fill_value=-1),
            a.at[i].mul(u, mode="clip"))


@program(f32(6, 4), f32(2, 4), np.int32(5), np.int32(-3))
def dynamic_slices_out_of_range(a, u, i, j):
    return (lax.dynamic_update_slice(a, u, (i, 0)), lax.dynamic_update_slice(a, u, (j, j)),
            lax.dynamic_slice(a, (i, j), (3, 2)), a.at[i].set(1.0), a.at[j, 1].add(5.0))


@program(f32(2, 5, 5, 4), f32(3, 3, 4, 6), f32(3, 3, 1, 4))
def conv_transpose_depthwise_dilated(x, w, dw):
    nhwc = ("NHWC", "HWIO", "NHWC")
    return (lax.conv_transpose(x, w, (2, 2), "SAME", dimension_numbers=nhwc),
            lax.conv_general_dilated(x, dw, (1, 1), "VALID", rhs_dilation=(2, 2), dimension_numbers=nhwc,
                                     feature_group_count=4),
            lax.conv_general_dilated(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), (2, 1), ((1, 0), (2, 2)),
                                     lhs_dilation=(1, 2)))


@program(np.sort(f32(10)), f32(6), f32(1, 5, 6, 2))
def searchsorted_interp_resize(a, v, img):
    return (jnp.searchsorted(a, v), jnp.searchsorted(a, v, side="right"), jnp.interp(v, a, jnp.arange(10.0)),
            jax.image.resize(img, (1, 10, 3, 2), "bilinear"), jax.image.resize(img, (1, 7, 9, 2), "nearest"),
            jnp.pad(img[0, :, :, 0], 2, mode="reflect"), jnp.pad(img[0, :, :, 0], 1, mode="wrap"))


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_program_matches_xla(name):
    fn, args = PROGRAMS[name]
    problems = interpreter_mismatches(fn, args)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ["conv_relu_maxpool", "conv_variants", "conv_grads"])
def test_convolution_by_kernel_position_matches_xla(name, monkeypatch):
    # the path a convolution takes when its im2col matrix would be too large (forced here)
    from neuronxcc.hlo import interp_linalg
    from support import corpus
    monkeypatch.setattr(interp_linalg, "IM2COL_MAX_BYTES", 0)
    program = corpus.get(name)
    problems = interpreter_mismatches(program.fn, program.make_args(0, "small"))
    assert not problems, "\n".join(problems)


def test_transposed_depthwise_dilated_conv_by_kernel_position(monkeypatch):
    from neuronxcc.hlo import interp_linalg
    monkeypatch.setattr(interp_linalg, "IM2COL_MAX_BYTES", 0)
    fn, args = PROGRAMS["conv_transpose_depthwise_dilated"]
    problems = interpreter_mismatches(fn, args)
    assert not problems, "\n".join(problems)
