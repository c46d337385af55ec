"""The blockwise MoE matmul kernels of neuronxcc.nki._private_kernels.blockwise_mm (NxD's call form: keyword
arguments, output as an argument) simulated on birsim against a numpy float64 loop over the blocks, and the
import-time names NxD's MoE modules need (SkipMode, BlockShardStrategy, ExpertAffinityScaleMode, the compatibility
check). Tolerances: fp32 TensorE operands 2e-5 of the output scale, bf16 3e-2."""
import ml_dtypes
import numpy as np
import pytest

from neuronxcc import nki
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels import blockwise_mm as bw
from neuronxcc.nki._private_kernels.blockwise_mm import ExpertAffinityScaleMode as Mode, SkipMode
from neuronxcc.nki.compiler.backends.neuron.dimensions import VNC
from neuronxcc.common.tolerances import assert_close

T, H, I, E, B = 24, 512, 256, 3, 128


def _silu(a):
    return a / (1.0 + np.exp(-a))


def _problem(rng, skip, bte, dtype=np.float32, filled=(7, 9, 2), blk=B):
    """Inputs in NxD's layout; without skip the caller's zero padding row T takes the empty slots."""
    tp_rows = T if skip else T + 1
    x = rng.standard_normal((tp_rows, H)).astype(dtype)
    if not skip:
        x[T] = 0
    tpos = np.full(len(bte) * blk, -1 if skip else T, np.int32)
    for n, m in enumerate(filled):
        tpos[n * blk:n * blk + m] = rng.choice(T, m, replace=False)
    af = rng.random((tp_rows, E)).astype(dtype)
    if not skip:
        af[T] = 0
    gu = (rng.standard_normal((E, H, 2, I)) / 16).astype(dtype)
    dw = (rng.standard_normal((E, I, H)) / 16).astype(dtype)
    return dict(hidden_states=x, expert_affinities_masked=af.reshape(-1, 1), gate_up_proj_weight=gu,
                down_proj_weight=dw, block_size=blk, token_position_to_id=tpos,
                block_to_expert=np.asarray(bte, np.int32), output=np.zeros((tp_rows, H), dtype))


def _reference(a, mode=Mode.POST_SCALE, accumulate=True, gu_scale=None, d_scale=None):
    f = lambda k: np.asarray(a[k], np.float64)                                            # noqa: E731
    x, gu, dw, tpos, bte = f("hidden_states"), f("gate_up_proj_weight"), f("down_proj_weight"), \
        a["token_position_to_id"], a["block_to_expert"]
    B = a["block_size"]
    af = f("expert_affinities_masked").reshape(x.shape[0], E)
    out = np.zeros(x.shape, np.float64)
    acts, downs = np.zeros((len(bte), 2, I, B)), np.zeros((len(bte), B, H))
    for n, e in enumerate(bte):
        if not 0 <= e < E:
            continue
        for s, t in enumerate(tpos[n * B:(n + 1) * B]):
            if t < 0:
                continue
            xx = x[t] * (af[t, e] if mode == Mode.PRE_SCALE else 1.0)
            g, u = xx @ gu[e, :, 0], xx @ gu[e, :, 1]
            if gu_scale is not None:
                g, u = g * gu_scale[0], u * gu_scale[1]
            y = (_silu(g) * u) @ dw[e]
            if d_scale is not None:
                y = y * d_scale
            acts[n, 0, :, s], acts[n, 1, :, s], downs[n, s] = g, u, y
            y = y * (af[t, e] if mode == Mode.POST_SCALE else 1.0)
            out[t] = out[t] + y if accumulate else y
    return out, acts, downs


@pytest.mark.parametrize("skip", [False, True])
def test_blockwise_mm_top2_accumulates_over_blocks(skip):
    """Tokens in two blocks (two experts) add up; empty slots are the padding row or skipped (-1)."""
    rng = np.random.default_rng(0)
    a = _problem(rng, skip, [2, 0, 1])
    a["token_position_to_id"][2 * B:2 * B + 2] = a["token_position_to_id"][:2]         # tokens seen twice
    nki.jit(bw.blockwise_mm, mode="simulation")(**a, skip_dma=SkipMode(skip, False), compute_type=nl.float32)
    assert_close(a["output"], _reference(a)[0], row="compiled")


@pytest.mark.parametrize("mode", [Mode.PRE_SCALE, Mode.NO_SCALE])
def test_blockwise_mm_scale_modes_top1_padded_block_overwrites(mode):
    """PRE/NO scaling; top-1 (is_tensor_update_accumulating=False: rows overwritten); block 1 is a padded block
    (expert -1) and must add nothing; two 128-token tiles per block."""
    rng = np.random.default_rng(1)
    a = _problem(rng, True, [1, -1], filled=(0, 5), blk=256)
    perm = rng.permutation(T).astype(np.int32)
    a["token_position_to_id"][:12], a["token_position_to_id"][128:140] = perm[:12], perm[12:]
    a["output"][:] = 7.0                                                            # every row overwritten
    nki.jit(bw.blockwise_mm, mode="simulation")(**a, skip_dma=SkipMode(True, True), compute_type=nl.float32,
                                                is_tensor_update_accumulating=False,
                                                expert_affinities_scaling_mode=mode)
    want, _, _ = _reference(a, mode=mode, accumulate=False)
    assert_close(a["output"], want, row="compiled")


def test_blockwise_mm_bf16_quantized_scales():
    rng = np.random.default_rng(2)
    a = _problem(rng, False, [0, 2], dtype=ml_dtypes.bfloat16, filled=(11, 4))
    a["gate_up_proj_weight"] = a["gate_up_proj_weight"].astype(ml_dtypes.float8_e4m3)
    a["down_proj_weight"] = a["down_proj_weight"].astype(ml_dtypes.float8_e4m3)
    gs = (rng.random((2, I)) + 0.5).astype(np.float32)
    ds = (rng.random((H,)) + 0.5).astype(np.float32)
    nki.jit(bw.blockwise_mm, mode="simulation")(**a, gate_up_proj_scale=gs, down_proj_scale=ds)
    assert a["output"].dtype == ml_dtypes.bfloat16
    assert_close(a["output"], _reference(a, gu_scale=gs, d_scale=ds)[0], dtype="bf16", row="compiled")


def test_blockwise_mm_baseline_training_activations_and_vnc2_shard_hidden():
    rng = np.random.default_rng(3)
    a = _problem(rng, False, [1, 2], filled=(6, 3))
    want, acts, downs = _reference(a)
    for kern in (nki.jit(bw.blockwise_mm_baseline, mode="simulation"),
                 nki.jit(bw.blockwise_mm_baseline_shard_hidden, mode="simulation")[VNC(2)]):
        b = dict(a, output=np.zeros_like(a["output"]))
        gu_t = np.zeros((2, 2, I, B), np.float32)
        down = np.zeros((2, B, H), np.float32)
        kern(**b, gate_up_activations_T=gu_t, down_activations=down, compute_type=nl.float32)
        assert_close(b["output"], want, row="compiled")       # the two instances split H: not added twice
        live = a["token_position_to_id"].reshape(2, B) != T
        assert_close(gu_t.transpose(0, 3, 1, 2)[live], acts.transpose(0, 3, 1, 2)[live], row="compiled")
        assert_close(down[live], downs[live], row="compiled")


def test_import_names_and_compatibility_check():
    from neuronxcc.nki._private_kernels import ActFnType, ExpertAffinityScaleMode
    from neuronxcc.nki._private_kernels.blockwise_mm import BlockShardStrategy
    assert ExpertAffinityScaleMode is Mode and ActFnType.SiLU.name == "SiLU"
    assert Mode(1) == Mode.POST_SCALE and BlockShardStrategy.HI_LO != BlockShardStrategy.PING_PONG
    s = SkipMode(True, False)
    assert s.skip_token and not s.skip_weight and SkipMode() == SkipMode(False, False)
    bw.check_blockwise_mm_kernel_compatibility(hidden_size=4096, block_size=512, intermediate_size_tp=2048)
    for h, blk, i in ((4096, 16, 2048), (10240, 512, 2048), (5122, 512, 2048), (4096, 512, 100)):
        with pytest.raises(AssertionError):
            bw.check_blockwise_mm_kernel_compatibility(hidden_size=h, block_size=blk, intermediate_size_tp=i)


def test_blockwise_mm_bad_shapes_one_line_error():
    from neuronxcc.nki import errors
    rng = np.random.default_rng(4)
    a = _problem(rng, False, [0], filled=(7,))
    a["down_proj_weight"] = a["down_proj_weight"][:, :128]
    with pytest.raises(errors.err_invalid_argument, match="weights must be"):
        nki.jit(bw.blockwise_mm, mode="simulation")(**a)


def test_blockwise_mm_baremetal_walrus_orders_the_scatter_adds():
    """Through walrus (allocation, scheduling, semaphores, verifier; the register bounded by the expert count)
    and the NEFF: the blocks' scatter-adds into the same output rows stay ordered."""
    rng = np.random.default_rng(5)
    a = _problem(rng, True, [2, 0, 1])
    a["token_position_to_id"][2 * B:2 * B + 2] = a["token_position_to_id"][:2]
    nki.jit(bw.blockwise_mm, mode="baremetal")(**a, skip_dma=SkipMode(True, False), compute_type=nl.float32)
    assert_close(a["output"], _reference(a)[0], row="compiled")


def _jax_grads(a, dy):
    """jax.grad of sum(output * dy) through a jax forward of the blockwise MoE (POST_SCALE, accumulating; fp32 on
    XLA:CPU)."""
    import jax
    import jax.numpy as jnp
    tpos = np.asarray(a["token_position_to_id"]).reshape(len(a["block_to_expert"]), -1)
    bte = a["block_to_expert"]
    rows = a["hidden_states"].shape[0]

    def fwd(x, af, gu, dw):
        out = jnp.zeros(x.shape, x.dtype)
        for n, e in enumerate(bte):
            t = tpos[n][tpos[n] >= 0]
            xx = x[t]
            g, u = xx @ gu[e, :, 0], xx @ gu[e, :, 1]
            y = (jax.nn.silu(g) * u) @ dw[e]
            out = out.at[t].add(y * af[t, e][:, None])
        return jnp.sum(out * dy)
    args = (a["hidden_states"], a["expert_affinities_masked"].reshape(rows, E), a["gate_up_proj_weight"],
            a["down_proj_weight"])
    grad = jax.jit(jax.grad(fwd, argnums=(0, 1, 2, 3)))
    return [np.asarray(g, np.float64) for g in grad(*(np.asarray(x, np.float32) for x in args))]


@pytest.mark.parametrize("grid", [None, 2])
def test_blockwise_mm_bwd_matches_jax_grad_of_the_forward(grid):
    """blockwise_mm_baseline's activations feed blockwise_mm_bwd (NxD's positional call, zero-filled gradient
    outputs); every gradient against jax.grad of a jax forward; grid [VNC(2)] splits the hidden columns."""
    from neuronxcc.nki._private_kernels import blockwise_mm_bwd as bwd
    rng = np.random.default_rng(6)
    a = _problem(rng, True, [2, 0, 2], filled=(7, 9, 3))
    a["token_position_to_id"][2 * B:2 * B + 3] = a["token_position_to_id"][B:B + 3]     # tokens in two experts
    gu_t, down = np.zeros((3, 2, I, B), np.float32), np.zeros((3, B, H), np.float32)
    nki.jit(bw.blockwise_mm_baseline, mode="simulation")(**a, gate_up_activations_T=gu_t, down_activations=down,
                                                         skip_dma=SkipMode(True, False), compute_type=nl.float32)
    dy = rng.standard_normal(a["output"].shape).astype(np.float32)
    grads = [np.zeros_like(a["hidden_states"]), np.zeros_like(a["expert_affinities_masked"]),
             np.zeros_like(a["gate_up_proj_weight"]), np.zeros_like(a["down_proj_weight"])]
    kern = nki.jit(bwd.blockwise_mm_bwd_baseline_shard_hidden if grid else bwd.blockwise_mm_bwd, mode="simulation")
    (kern[VNC(grid)] if grid else kern)(
        a["hidden_states"], grads[0], a["expert_affinities_masked"], grads[1], a["gate_up_proj_weight"], grads[2],
        gu_t, a["down_proj_weight"], grads[3], down, a["token_position_to_id"], a["block_to_expert"], dy,
        block_size=B, is_tensor_update_accumulating=True, compute_type=nl.float32)
    want = _jax_grads(a, dy)
    for got, exp in zip(grads, want):
        assert_close(got.reshape(exp.shape), exp, row="compiled")
