"""The attention kernels of neuronxcc.nki.kernels / _private_kernels (flash_fwd, flash_attn_bwd, FlashConfig,
attention_isa_kernel) simulated on birsim against numpy float64 references, in the original's layouts
and call forms (SPMD grid [bs, heads], out-argument style for attention_isa_kernel).
Tolerances: fp32 matmuls 2e-5 of the output scale; bf16 TensorE operands (mixed_precision) 3e-2."""
import math

import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.nki.kernels.attention import FlashConfig, flash_attn_bwd, flash_fwd

from support import nki_attention_refs as R
from neuronxcc.common.tolerances import assert_close, mismatch


def _rand(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


def test_import_paths_real_callers_use():
    from neuronxcc.nki._private_kernels.attention import attention_isa_kernel
    from neuronxcc.nki.kernels import FlashConfig as FC, flash_attn_bwd as b, flash_fwd as f
    from neuronxcc.nki.kernels.attention import attention_isa_kernel as fallback
    assert fallback is attention_isa_kernel and FC is FlashConfig and f is flash_fwd and b is flash_attn_bwd
    cfg = FlashConfig(seq_tile_size=1024, training=False)
    assert cfg.attn_core_tile_size == 256 and not cfg.should_transpose_v and cfg.lse_dtype == ""


@pytest.mark.parametrize("causal", [True, False])
def test_flash_fwd_fp32_training(causal):
    rng = np.random.default_rng(0)
    bs, nh, d, s = 1, 2, 64, 256
    q, k = _rand(rng, bs, nh, d, s), _rand(rng, bs, nh, d, s)
    v = _rand(rng, bs, nh, s, d)
    seed = np.zeros((1,), np.int32)
    o, lse = nki.simulate_kernel(flash_fwd[bs, nh], q, k, v, seed, use_causal_mask=causal, mixed_precision=False)
    eo, e_lse = R.flash_fwd(q, k, v, 1.0 / math.sqrt(d), causal)
    assert o.shape == (bs, nh, s, d) and lse.shape == (bs, nh, 128, s // 128)
    assert_close(o, eo, row="compiled")
    assert_close(lse, e_lse, row="compiled")


def test_flash_fwd_gqa_bias_inference_mixed_precision_bf16():
    import ml_dtypes
    rng = np.random.default_rng(1)
    bs, nh, nkh, d, s = 1, 2, 1, 32, 128
    bf = ml_dtypes.bfloat16
    q, k = _rand(rng, bs, nh, d, s, dtype=bf), _rand(rng, bs, nkh, d, s, dtype=bf)
    v = _rand(rng, bs, nkh, d, s, dtype=bf)                      # should_transpose_v: [bs, h, d, seq]
    bias = _rand(rng, bs, nh, s, s)
    cfg = FlashConfig(training=False, should_transpose_v=True)
    o = nki.simulate_kernel(flash_fwd[bs, nh], q, k, v, np.zeros((1,), np.int32), logit_bias=bias.astype(bf),
                            softmax_scale=0.25, use_causal_mask=True, config=cfg)
    eo, _ = R.flash_fwd(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), 0.25, True,
                        bias=bias.astype(bf).astype(np.float64), v_transposed=True)
    assert o.dtype == bf and o.shape == (bs, nh, s, d)
    assert_close(o, eo, dtype="bf16", row="compiled")


def test_flash_fwd_long_keys_several_blocks():
    rng = np.random.default_rng(2)
    q = _rand(rng, 1, 1, 16, 128)
    k = _rand(rng, 1, 1, 16, 1024)                              # two 512-key blocks: the running max/sum carry
    v = _rand(rng, 1, 1, 1024, 16)
    o, lse = nki.simulate_kernel(flash_fwd[1, 1], q, k, v, np.zeros((1,), np.int32), use_causal_mask=False,
                                 mixed_precision=False)
    eo, e_lse = R.flash_fwd(q, k, v, 0.25, False)
    assert_close(o, eo, row="compiled")
    assert_close(lse, e_lse, row="compiled")


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_bwd_matches_numpy_gradients(causal):
    rng = np.random.default_rng(3)
    bs, nh, d, s = 1, 1, 32, 256
    q, k, v, dy = (_rand(rng, bs, nh, d, s) for _ in range(4))
    scale = 1.0 / math.sqrt(d)
    o, lse = R.fwd_outputs_for_bwd(q, k, v, scale, causal)
    dq, dk, dv = nki.simulate_kernel(flash_attn_bwd[bs, nh], q, k, v, o.astype(np.float32), dy,
                                     lse.astype(np.float32), np.zeros((1,), np.int32), use_causal_mask=causal)
    for got, want in zip((dq, dk, dv), R.flash_bwd(q, k, v, dy, scale, causal)):
        assert got.shape == (bs, nh, d, s)
        assert_close(got, want, row="compiled")


def test_flash_fwd_then_bwd_round_trip_lse():
    """flash_fwd's own lse feeds flash_attn_bwd (layout agreement between the two kernels)."""
    rng = np.random.default_rng(4)
    d, s = 32, 128
    q, k, v, dy = (_rand(rng, 1, 1, d, s) for _ in range(4))
    o, lse = nki.simulate_kernel(flash_fwd[1, 1], q, k, np.swapaxes(v, -1, -2).copy(), np.zeros((1,), np.int32),
                                 use_causal_mask=True, mixed_precision=False)
    grads = nki.simulate_kernel(flash_attn_bwd[1, 1], q, k, v, np.swapaxes(o, -1, -2).copy(), dy, lse,
                                np.zeros((1,), np.int32), use_causal_mask=True)
    for got, want in zip(grads, R.flash_bwd(q, k, v, dy, 1.0 / math.sqrt(d), True)):
        assert_close(got, want, row="compiled")


@pytest.mark.parametrize("kernel_name,grid", [("CausalAttentionMMSoftmaxMMWithoutSwap", None),
                                              ("AttentionMMSoftmaxMMWithoutSwap", 2)])
def test_attention_isa_kernel_out_argument(kernel_name, grid):
    from neuronxcc.nki._private_kernels.attention import attention_isa_kernel
    rng = np.random.default_rng(5)
    bh, d, s = 2, 64, 256
    q, k = _rand(rng, bh, d, s), _rand(rng, bh, d, s)
    v = _rand(rng, bh, s, d)
    out = np.zeros((bh, s, d), np.float32)
    kern = nki.jit(attention_isa_kernel, mode="simulation")
    if grid:
        kern = kern[grid]
    kern(q, k, v, 0.125, out, kernel_name=kernel_name)
    causal = kernel_name.startswith("Causal")
    p = np.exp(R.scores(q, k, 0.125, causal) - R.scores(q, k, 0.125, causal).max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    assert_close(out, want, row="compiled")


def _dropout_factors(seed, rate, bs, nh, s, causal):
    """flash_fwd's dropout factors [bs, nh, s, s] (0 or 1 / (1 - rate)) read off its output: with v the 128 columns
    of the identity for keys j*128 .. j*128+127, o is that slab of the dropped probabilities."""
    rng = np.random.default_rng(9)
    q, k = _rand(rng, bs, nh, 128, s), _rand(rng, bs, nh, 128, s)
    slabs = []
    for j in range(s // 128):
        v = np.zeros((bs, nh, s, 128), np.float32)
        v[:, :, j * 128:(j + 1) * 128] = np.eye(128, dtype=np.float32)
        o, _ = nki.simulate_kernel(flash_fwd[bs, nh], q, k, v, seed, use_causal_mask=causal,
                                   mixed_precision=False, dropout_p=rate)
        slabs.append(o)
    return np.where(np.concatenate(slabs, axis=-1) != 0, 1.0 / (1.0 - rate), 0.0)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attn_bwd_dropout_regenerates_the_forward_mask(causal):
    """flash_attn_bwd with the forward's seed and rate matches numpy's gradients of the dropped attention, the
    mask taken from flash_fwd itself (keys tiled 512 wide in the forward, 128 in the backward); another seed
    gives another mask, so the gradients differ."""
    bs, nh, d, s, rate = 1, 2, 32, 512, 0.2
    seed = np.array([5], np.int32)
    keep = _dropout_factors(seed, rate, bs, nh, s, causal)
    vis = np.tril(np.ones((s, s), bool)) if causal else np.ones((s, s), bool)
    assert abs((keep[..., vis] == 0).mean() - rate) < 0.02           # >= 2 x 131k draws
    assert not np.array_equal(keep[0, 0], keep[0, 1])                # each head its own mask
    rng = np.random.default_rng(10)
    q, k, v, dy = (_rand(rng, bs, nh, d, s) for _ in range(4))
    scale = 1.0 / math.sqrt(d)
    o, lse = R.fwd_outputs_for_bwd(q, k, v, scale, causal, keep=keep)
    run = lambda sd: nki.simulate_kernel(flash_attn_bwd[bs, nh], q, k, v, o.astype(np.float32), dy,  # noqa: E731
                                         lse.astype(np.float32), sd, use_causal_mask=causal, dropout_p=rate)
    grads = run(seed)
    for got, want in zip(grads, R.flash_bwd(q, k, v, dy, scale, causal, keep=keep)):
        assert_close(got, want, row="compiled")
    other = run(np.array([6], np.int32))
    assert mismatch(other[2], grads[2], what="dq with another seed"), "the dropout seed changed nothing"


def test_attention_isa_kernel_sliding_window_and_transposed_out():
    from neuronxcc.nki._private_kernels.attention import attention_isa_kernel
    rng = np.random.default_rng(6)
    bh, d, s, w = 1, 32, 384, 200
    q, k = _rand(rng, bh, d, s), _rand(rng, bh, d, s)
    v = _rand(rng, bh, s, d)
    out = np.zeros((bh, d, s), np.float32)                       # [B*H, d, seq]: stored transposed
    nki.simulate_kernel(nki.jit(attention_isa_kernel), q, k, v, 0.2, out,
                        kernel_name="CausalAttentionMMSoftmaxMMWithoutSwap", sliding_window=w)
    sc = R.scores(q, k, 0.2, True, window=w)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    assert_close(out, np.swapaxes(want, -1, -2), row="compiled")


def test_private_kernel_names_model_code_imports_load():
    from neuronxcc.nki._private_kernels.blockwise_mm import BlockShardStrategy
    from neuronxcc.nki._private_kernels.cumsum import cumsum  # noqa: F401
    from neuronxcc.nki._private_kernels.mlp import (mlp_fused_add_isa_kernel, mlp_isa_kernel,  # noqa: F401
                                                     quant_mlp_fused_add_isa_kernel, quant_mlp_isa_kernel)
    from neuronxcc.nki._private_kernels.qkv import rmsnorm_qkv_isa_fused_add_kernel, rmsnorm_qkv_isa_kernel  # noqa
    from neuronxcc.nki._private_kernels.rmsnorm import rmsnorm_quant_isa_kernel  # noqa: F401
    assert {s.name for s in BlockShardStrategy} == {"HI_LO", "PING_PONG"}


def test_bad_shapes_are_kernel_errors_at_the_callers_line():
    from neuronxcc.errors import CompilerError
    z = np.zeros((1, 1, 16, 100), np.float32)                   # seq 100: not a multiple of 128
    with pytest.raises(CompilerError) as ei:
        nki.simulate_kernel(flash_fwd[1, 1], z, z, np.zeros((1, 1, 100, 16), np.float32), np.zeros((1,), np.int32))
    line = ei.value.one_line()
    assert line.startswith("[NCC_ENKI") and "multiples of 128" in line and "test_kernels_attention.py:" in line


def _prefix_reference(q, kp, vp, ka, va, mask, causal):
    """out [BH, d, sq]: softmax over the used prefix positions of each sequence and the (causal) active tokens."""
    bh, d, sq = q.shape
    sp = kp.shape[1]
    heads = bh // mask.shape[0]
    out = np.zeros((bh, d, sq))
    for r in range(bh):
        k = np.concatenate([kp[r], ka[r]]).astype(np.float64)
        v = np.concatenate([vp[r], va[r]]).astype(np.float64)
        s = q[r].T.astype(np.float64) @ k.T
        active = np.tril(np.ones((sq, sq), bool)) if causal else np.ones((sq, sq), bool)
        vis = np.concatenate([np.broadcast_to(mask[r // heads] > 0, (sq, sp)), active], axis=1)
        p = np.exp(np.where(vis, s, -np.inf) - np.where(vis, s, -np.inf).max(-1, keepdims=True))
        out[r] = (p / p.sum(-1, keepdims=True) @ v).T
    return out


@pytest.mark.parametrize("kernel_name,grid", [("V2CausalAttentionMMSoftmaxMMWithoutSwap", 2),
                                              ("V2AttentionMMSoftmaxMMWithoutSwap", None)])
def test_prefix_caching_attention_prefix_mask_and_causal_active(kernel_name, grid):
    """NxD-Inference's call: q pre-scaled, scale 1.0, out [B*H, d, sq]; each sequence uses its own prefix length
    (the mask), the active tokens causally; the grid [2] splits every sequence's 2 heads."""
    from neuronxcc.nki._private_kernels.prefix_caching_attention import prefix_caching_attention_fwd_isa_kernel
    rng = np.random.default_rng(8)
    b, h, d, sq, sp = 2, 2, 32, 128, 256
    q = _rand(rng, b * h, d, sq) / math.sqrt(d)
    ka, va = _rand(rng, b * h, sq, d), _rand(rng, b * h, sq, d)
    kp, vp = _rand(rng, b * h, sp, d), _rand(rng, b * h, sp, d)
    mask = np.zeros((b, sp), np.int32)
    mask[0, :200], mask[1, :37] = 1, 1
    out = np.zeros((b * h, d, sq), np.float32)
    kern = nki.jit(prefix_caching_attention_fwd_isa_kernel, mode="simulation")
    (kern[grid] if grid else kern)(q, ka, va, kp, vp, mask, 1.0, out, kernel_name=kernel_name)
    assert_close(out, _prefix_reference(q, kp, vp, ka, va, mask, "Causal" in kernel_name), row="compiled")


def test_flash_fwd_sliding_window_gqa_grid_on_kv_heads():
    """flash_fwd(..., sliding_window=w) (a query at i sees keys i-w+1 .. i), launched [bs, kv_heads] with two query
    heads per k/v head, as nki-samples' later tests call it; w <= 0 means no window."""
    rng = np.random.default_rng(11)
    bs, nh, nkh, d, s, w = 1, 4, 2, 32, 512, 200
    q, k = _rand(rng, bs, nh, d, s), _rand(rng, bs, nkh, d, s)
    v = _rand(rng, bs, nkh, s, d)
    scale = 1.0 / math.sqrt(d)
    for window in (w, -1):
        o = nki.simulate_kernel(flash_fwd[bs, nkh], q, k, v, None, use_causal_mask=True, mixed_precision=False,
                                sliding_window=window, config=FlashConfig(training=False))
        sc = R.scores(q, np.repeat(k, 2, axis=1), scale, True, window=window if window > 0 else None)
        p = np.exp(sc - sc.max(-1, keepdims=True))
        assert_close(o, (p / p.sum(-1, keepdims=True)) @ np.repeat(v, 2, axis=1).astype(np.float64), row="compiled")
