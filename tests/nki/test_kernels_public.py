"""The documented kernels of neuronxcc.nki.kernels beyond flash attention (SD attention and its allocated form,
allocated_fused_rms_norm_qkv, resize_nearest_fixed_dma_kernel, select_and_scatter_kernel) and flash_fwd's
dropout, legacy output-argument call form and sharded head grid, simulated on birsim against numpy float64
references in the original's layouts and call forms (tolerances: the compiled row of
neuronxcc.common.tolerances for the output dtype, fp32 for bf16 TensorE operands under mixed precision is
judged as bf16)."""
import math

import ml_dtypes
import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.common.tolerances import mismatch
from neuronxcc.nki.kernels import (allocated_fused_rms_norm_qkv, allocated_fused_self_attn_for_SD_small_head_size,
                                   flash_fwd, fused_self_attn_for_SD_small_head_size, resize_nearest_fixed_dma_kernel,
                                   select_and_scatter_kernel)
from neuronxcc.nki.kernels.attention import FlashConfig

from support import nki_attention_refs as R

RNG = np.random.default_rng(21)


def _check(actual, expected, dtype):
    msg = mismatch(actual, np.asarray(expected, np.float64).astype(np.float32), row="compiled", dtype=dtype)
    assert not msg, msg


def _softmax(s):
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True)


@pytest.mark.parametrize("kernel,mixed", [(fused_self_attn_for_SD_small_head_size, False),
                                          (allocated_fused_self_attn_for_SD_small_head_size, True)])
def test_sd_attention_small_head(kernel, mixed):
    """The plain kernel: k [bs, seq, d], out [bs, seq, d]; the allocated one (as nki-samples' own test calls it):
    k [bs, d, seq], out [bs, d, seq]."""
    allocated = kernel is allocated_fused_self_attn_for_SD_small_head_size
    bs, d, s = 2, 64, 256
    q = RNG.random((bs, d, s)).astype(np.float32)
    k, v = RNG.random((bs, s, d)).astype(np.float32), RNG.random((bs, s, d)).astype(np.float32)
    out = nki.simulate_kernel(kernel[bs], q, np.swapaxes(k, 1, 2).copy() if allocated else k, v,
                              mixed_precision=mixed)
    want = _softmax(np.einsum("bdq,bkd->bqk", q.astype(np.float64) * 0.125, k)) @ v
    if allocated:
        want = np.swapaxes(want, 1, 2)
    assert out.shape == want.shape and out.dtype == q.dtype
    _check(out, want, ml_dtypes.bfloat16 if mixed else np.float32)


def test_allocated_fused_rms_norm_qkv_fp16_ragged_rows():
    h = RNG.random((2, 200, 256)).astype(np.float16)
    w = RNG.random((256, 384)).astype(np.float16)
    out = nki.simulate_kernel(allocated_fused_rms_norm_qkv, h, w)
    hf = h.astype(np.float64)
    want = (hf / np.sqrt((hf ** 2).mean(-1, keepdims=True) + 1e-6)).astype(np.float16).astype(np.float64) @ w
    assert out.shape == (2, 200, 384) and out.dtype == np.float16
    _check(out, want, np.float16)


def test_resize_nearest_non_integer_scale():
    x = RNG.random((2, 5, 4, 24)).astype(np.float32)
    out = nki.simulate_kernel(resize_nearest_fixed_dma_kernel[2], x, (2, 9, 7, 24))
    hm = np.floor(np.arange(9, dtype=np.float32) * np.float32(5 / 9)).astype(int)
    wm = np.floor(np.arange(7, dtype=np.float32) * np.float32(4 / 7)).astype(int)
    np.testing.assert_array_equal(out, x[:, hm][:, :, wm])


def _select_and_scatter_ref(op, src):
    n_, c_, h, w = op.shape
    out = np.zeros(op.shape, np.float64)
    for n in range(n_):
        for c in range(c_):
            for i in range(src.shape[2]):
                for j in range(src.shape[3]):
                    best = None
                    for kh in range(3):
                        for kw in range(3):
                            y, x = 2 * i + kh - 1, 2 * j + kw - 1
                            if 0 <= y < h and 0 <= x < w and (best is None or op[n, c, y, x] > op[n, c][best]):
                                best = (y, x)         # the first maximum in row-major window order wins
                    out[n, c][best] += src[n, c, i, j]
    return out


def test_select_and_scatter_max_pool_gradient_with_ties():
    op = RNG.standard_normal((2, 3, 8, 7)).astype(np.float32)
    op[0, 0, :3, :3] = 1.5                                     # a window of equal values
    src = RNG.standard_normal((2, 3, 4, 4)).astype(np.float32)
    out = nki.simulate_kernel(select_and_scatter_kernel, op, src)
    _check(out, _select_and_scatter_ref(op, src), np.float32)


def _p(q, k, scale):
    return _softmax(scale * np.einsum("bhdq,bhdk->bhqk", q.astype(np.float64), k.astype(np.float64)))


def test_flash_fwd_dropout_zeroes_and_rescales_probabilities():
    bs, nh, d, s, rate = 1, 1, 128, 128, 0.25
    q, k = RNG.standard_normal((bs, nh, d, s)).astype(np.float32), RNG.standard_normal((bs, nh, d, s)).astype(np.float32)
    v = np.eye(s, dtype=np.float32)[None, None]               # o = dropout(P) itself
    seed = np.array([7], np.int32)
    run = lambda sd: nki.simulate_kernel(flash_fwd[bs, nh], q, k, v, sd, use_causal_mask=False,  # noqa: E731
                                         mixed_precision=False, dropout_p=rate)
    (o, lse), (o2, _), (o3, _) = run(seed), run(seed), run(np.array([8], np.int32))
    p = _p(q, k, 1 / math.sqrt(d))
    kept = np.abs(o * (1 - rate) - p) <= 1e-5 * p.max()
    dropped = o == 0
    assert (kept | dropped).all()
    assert abs(dropped.mean() - rate) < 0.02                  # 16384 draws: 4.5 sigma
    assert np.array_equal(o, o2) and not np.array_equal(o, o3)
    _check(lse, R.flash_fwd(q, k, v, 1 / math.sqrt(d), False)[1], np.float32)   # lse of the undropped softmax


def test_flash_fwd_legacy_output_arguments_and_sharded_head_grid():
    bs, nh, d, s = 1, 4, 32, 128
    q, k = RNG.standard_normal((bs, nh, d, s)).astype(np.float32), RNG.standard_normal((bs, nh, d, s)).astype(np.float32)
    v = RNG.standard_normal((bs, nh, s, d)).astype(np.float32)
    seed = np.zeros((1,), np.int32)
    want_o, want_lse = R.flash_fwd(q, k, v, 0.1, True)
    o = np.zeros((bs, nh, s, d), np.float32)
    lse = np.zeros((bs, nh, 128, 1), np.float32)
    kern = nki.jit(flash_fwd.func, mode="simulation")
    assert kern[bs, nh](q, k, v, seed, o, lse, softmax_scale=0.1, mixed_precision=False) is None
    _check(o, want_o, np.float32)
    _check(lse, want_lse, np.float32)
    got, _ = nki.simulate_kernel(flash_fwd[bs, 2], q, k, v, seed, softmax_scale=0.1, mixed_precision=False,
                                 config=FlashConfig(training=True))     # [bs, nc(2)]: two heads per instance
    _check(got, want_o, np.float32)
