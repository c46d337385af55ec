"""The blockwise (MoE) matmul kernels NxD's MoE modules import at module load and call (our own implementation,
the original's call form: keyword arguments, out-argument style)::

    blockwise_mm(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
                 token_position_to_id, block_to_expert, output, skip_dma=SkipMode(False, False),
                 gate_up_proj_scale=None, down_proj_scale=None, is_tensor_update_accumulating=True,
                 compute_type=nl.bfloat16, expert_affinities_scaling_mode=ExpertAffinityScaleMode.POST_SCALE)
    blockwise_mm_baseline(..., output, gate_up_activations_T, down_activations, ...)     # training: also the
    blockwise_mm_baseline_shard_hidden[VNC(n)](...)                                      # activations for bwd

Shapes (T tokens, plus the padding row T when the caller pads; H hidden; I intermediate; E experts; N blocks of
B tokens): hidden_states [T, H]; expert_affinities_masked [T * E, 1] (row-major [T, E] flattened); gate_up_proj_weight
[E, H, 2, I] (gate, then up); down_proj_weight [E, I, H]; token_position_to_id [N * B] int32 (the token of each
block slot; -1 an empty slot); block_to_expert [N] int32; output [T, H].

Per block n with expert e = block_to_expert[n] and tokens t = token_position_to_id[n*B:(n+1)*B]::

    g, u = x @ W[e, :, 0], x @ W[e, :, 1]          x = hidden_states[t] (PRE_SCALE: x * a)
    y = (silu(g) * u) @ Wd[e]                      a = affinity[t, e]
    output[t] += y * a    (POST_SCALE; NO_SCALE: y; is_tensor_update_accumulating=False: output[t] = ...)

``skip_dma.skip_token``: slots with token -1 are not loaded and not stored (without it the caller maps them to
the zero padding row, whose result is zero). A block whose expert id is outside [0, E) (a padded block) adds
nothing (its rows are not stored). ``skip_dma.skip_weight`` only saves weight traffic in the original; values do not change.
Quantized weights (``gate_up_proj_scale`` [2, I] and ``down_proj_scale`` [H], fp8/int8 weights): each output
channel of a projection is multiplied by its scale. The training forms also store ``gate_up_activations_T``
[N, 2, I, B] (g and u, transposed) and ``down_activations`` [N, B, H] (y before the affinity), the inputs of
``blockwise_mm_bwd``.

Layout: a block's tokens go 128 per tile; the rows are gathered by an indirect DMA, transposed on the TensorE into
[128 of H, tokens] chunks; g^T and u^T [128 of I, tokens] accumulate over H in PSUM, silu(g) * u stays transposed
and is the stationary operand of the down projection, whose [tokens, <= 512 of H] tiles are scaled and
scatter-added (an accumulating indirect DMA) into output. The expert's weights are read through a register holding
block_to_expert[n]. TensorE operands in compute_type, accumulation and the activation in fp32. A grid of n
instances (``[VNC(2)]``) splits the hidden columns of the down projection (and of output) between the instances.
Limits (``check_blockwise_mm_kernel_compatibility``): B a multiple of 128, H a multiple of 512 up to 8192, I a
multiple of 128.
"""
import dataclasses
import enum

import numpy as np

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check
from neuronxcc.nki._private_kernels.not_built import not_built

__all__ = ["BlockShardStrategy", "SkipMode", "ExpertAffinityScaleMode", "ActFnType",
           "check_blockwise_mm_kernel_compatibility", "blockwise_mm", "blockwise_mm_baseline",
           "blockwise_mm_baseline_shard_hidden", "blockwise_mm_selective_cp"]

P = 128
N_OUT = 512                 # down-projection columns per PSUM tile (one 2 KiB bank of fp32)
MAX_HIDDEN = 8192


class BlockShardStrategy(enum.Enum):
    """How expert blocks are split between the two cores of an LNC=2 core: ``HI_LO`` halves, ``PING_PONG``
    alternating blocks (a placement choice; one simulated core runs them in order)."""
    HI_LO = 0
    PING_PONG = 1


class ExpertAffinityScaleMode(enum.IntEnum):
    NO_SCALE = 0
    POST_SCALE = 1
    PRE_SCALE = 2


class ActFnType(enum.Enum):
    """Activation selectors the kernels' callers pass (only SiLU is computed by the blockwise kernels)."""
    SiLU = 0
    GELU = 1
    GELU_Tanh_Approx = 2
    Swish = 3
    SIGMOID = 4
    SOFTMAX = 5


@dataclasses.dataclass(frozen=True)
class SkipMode:
    """``SkipMode(skip_token, skip_weight)``: skip the DMA of empty token slots (-1) / of unused weights."""
    skip_token: bool = False
    skip_weight: bool = False


def check_blockwise_mm_kernel_compatibility(hidden_size, block_size, intermediate_size_tp, **kwargs):
    """AssertionError when the kernels cannot take these sizes (NxD catches it and falls back)."""
    assert block_size % P == 0 and block_size > 0, "block_size %d must be a multiple of 128" % block_size
    assert hidden_size % N_OUT == 0, "hidden_size %d must be a multiple of 512" % hidden_size
    assert hidden_size <= MAX_HIDDEN, "hidden_size %d exceeds %d" % (hidden_size, MAX_HIDDEN)
    assert intermediate_size_tp % P == 0, "intermediate_size_tp %d must be a multiple of 128" % intermediate_size_tp


def _mode(m):
    if m is None:
        return ExpertAffinityScaleMode.POST_SCALE
    return ExpertAffinityScaleMode(int(getattr(m, "value", m)))


def check_shapes(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
            token_position_to_id, block_to_expert, output):
    T, H = hidden_states.shape
    check(len(gate_up_proj_weight.shape) == 4 and gate_up_proj_weight.shape[2] == 2,
          "blockwise_mm: gate_up_proj_weight must be [E, H, 2, I], got %s" % (tuple(gate_up_proj_weight.shape),))
    E, _h, _, I = gate_up_proj_weight.shape
    N = block_to_expert.shape[0]
    B = int(block_size)
    check(_h == H and tuple(down_proj_weight.shape) == (E, I, H),
          "blockwise_mm: weights must be [%d, %d, 2, I] / [%d, I, %d], got %s / %s"
          % (E, H, E, H, tuple(gate_up_proj_weight.shape), tuple(down_proj_weight.shape)))
    check(tuple(token_position_to_id.shape) == (N * B,),
          "blockwise_mm: token_position_to_id must be [%d] (blocks x block_size), got %s"
          % (N * B, tuple(token_position_to_id.shape)))
    check(tuple(expert_affinities_masked.shape) in ((T * E, 1), (T * E,), (T, E)),
          "blockwise_mm: expert_affinities_masked must be [%d, 1], got %s" % (T * E,
                                                                            tuple(expert_affinities_masked.shape)))
    check(tuple(output.shape) == (T, H), "blockwise_mm: output must be [%d, %d], got %s" % (T, H, tuple(output.shape)))
    try:
        check_blockwise_mm_kernel_compatibility(H, B, I)
    except AssertionError as e:
        check(False, "blockwise_mm: %s" % e)
    return T, H, E, I, N, B


def split_hidden(H):
    """(first hidden column of this instance, columns per instance, PSUM tile width)."""
    n = nl.num_programs() if nl.program_ndim() else 1
    if n > 1 and H % (n * P) == 0:
        cols = H // n
        return nl.program_id(0) * cols, cols, N_OUT if cols % N_OUT == 0 else P
    return 0, H, N_OUT


def expert_view(w, e):
    """w[e] for a [1, 1] tile e: the expert index as a register (a leading unit dimension keeps the index off
    dimension 0, where a tile index is an indirect row gather)."""
    return w.reshape((1,) + tuple(w.shape))[0, e]


def block_expert(bte, n, E):
    """Block n's expert: (e_reg [1, 1] int32, clamped to [0, E) for the weights' register; valid [128, 1] fp32,
    1 when block_to_expert[n] is in [0, E) else 0 (a padded block); e_safe [128, 1] fp32, the clamped id)."""
    ip, j1 = nl.arange(P)[:, None], nl.arange(1)[None, :]
    e_col = nl.load(bte[ip * 0, n + j1], dtype=nl.float32)                       # [128, 1]: e on every partition
    valid = nl.multiply(nl.greater_equal(e_col, 0.0, dtype=nl.float32),
                        nl.less(e_col, float(E), dtype=nl.float32), dtype=nl.float32)
    e_safe = nl.minimum(nl.maximum(e_col, 0.0), float(E - 1), dtype=nl.float32)
    e_reg = nl.copy(e_safe[nl.arange(1)[:, None], j1], dtype=nl.int32)
    return e_reg, valid, e_safe


def stored_rows(idx, valid):
    """The rows a tile stores: its token ids, or -1 (skipped) in a padded block."""
    return nl.copy(nl.subtract(nl.multiply(nl.add(nl.copy(idx, dtype=nl.float32), 1.0), valid), 1.0),
                   dtype=nl.int32)


def token_affinity(aff, idx, e_safe, valid, E, oob):
    """(a [128, 1] fp32: affinity[idx, e] (0 in a padded block or an empty slot), ai: the flat indices idx*E + e
    of those affinities, -1 where not stored)."""
    j1 = nl.arange(1)[None, :]
    a = nl.zeros((P, 1), dtype=nl.float32)
    ai = nl.copy(nl.add(nl.multiply(nl.copy(idx, dtype=nl.float32), float(E)), e_safe), dtype=nl.int32)
    nisa.dma_copy(dst=a, src=aff[ai, j1], oob_mode=oob)
    return nl.multiply(a, valid, dtype=nl.float32), stored_rows(ai, valid)


def blockwise_core(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
                   token_position_to_id, block_to_expert, output, skip_dma, gate_up_proj_scale, down_proj_scale,
                   accumulate, compute_type, scale_mode, gate_up_activations_T=None, down_activations=None):
    T, H, E, I, N, B = check_shapes(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight,
                               block_size, token_position_to_id, block_to_expert, output)
    mm = compute_type or nl.bfloat16
    skip = bool(getattr(skip_dma, "skip_token", False))
    oob = nisa.oob_mode.skip if skip else nisa.oob_mode.error
    scale_mode = _mode(scale_mode)
    nh, ni = H // P, I // P
    c0, ncols, w = split_hidden(H)
    ip, jf_p, jf_h, jf_w = nl.arange(P)[:, None], nl.arange(P)[None, :], nl.arange(H)[None, :], nl.arange(w)[None, :]
    j1 = nl.arange(1)[None, :]
    tpos = token_position_to_id.reshape((N * B, 1))
    bte = block_to_expert.reshape((1, N))
    aff = expert_affinities_masked.reshape((T * E, 1))
    gu_scale = gate_up_proj_scale.reshape((2 * I, 1)) if gate_up_proj_scale is not None else None
    d_scale = down_proj_scale.reshape((1, H)) if down_proj_scale is not None else None
    for n in nl.sequential_range(N):
        e_reg, valid, e_safe = block_expert(bte, n, E)
        w_gu, w_d = expert_view(gate_up_proj_weight, e_reg), expert_view(down_proj_weight, e_reg)
        for t in nl.affine_range(B // P):
            slot = n * B + t * P
            idx = nl.load(tpos[slot + ip, j1])                                   # [128, 1] int32 token ids
            st_idx = stored_rows(idx, valid)
            x = nl.zeros((P, H), dtype=nl.float32)
            nisa.dma_copy(dst=x, src=hidden_states[idx, jf_h], oob_mode=oob)
            if scale_mode != ExpertAffinityScaleMode.NO_SCALE:
                a = token_affinity(aff, idx, e_safe, valid, E, oob)[0]
                if scale_mode == ExpertAffinityScaleMode.PRE_SCALE:
                    x = nl.multiply(x, a, dtype=nl.float32)
            xm = nl.copy(x, dtype=mm)
            xt = nl.ndarray((nh, nl.par_dim(P), P), dtype=mm)                     # x^T chunks [128 of H, tokens]
            for c in nl.affine_range(nh):
                xt[c] = nl.copy(nisa.nc_transpose(xm[ip, c * P + jf_p]), dtype=mm)
            act_t = nl.ndarray((ni, nl.par_dim(P), P), dtype=mm)                  # act^T [128 of I, tokens]
            for j in nl.affine_range(ni):
                gu = []
                for g in range(2):
                    acc = nl.zeros((P, P), nl.float32, buffer=nl.psum)
                    for c in nl.affine_range(nh):
                        wt = nl.load(w_gu[c * P + ip, g, j * P + jf_p], dtype=mm)
                        acc += nisa.nc_matmul(wt, xt[c])
                    v = nl.copy(acc, dtype=nl.float32)
                    if gu_scale is not None:
                        v = nl.multiply(v, nl.load(gu_scale[g * I + j * P + ip, j1], dtype=nl.float32),
                                        dtype=nl.float32)
                    if gate_up_activations_T is not None:
                        nl.store(gate_up_activations_T[n, g, j * P + ip, t * P + jf_p],
                                 value=nl.copy(v, dtype=gate_up_activations_T.dtype))
                    gu.append(v)
                act_t[j] = nl.multiply(nisa.activation(op=nl.silu, data=gu[0], dtype=nl.float32), gu[1], dtype=mm)
            for k in nl.affine_range(ncols // w):
                cols = c0 + k * w + jf_w
                o = nl.zeros((P, w), nl.float32, buffer=nl.psum)
                for j in nl.affine_range(ni):
                    o += nisa.nc_matmul(act_t[j], nl.load(w_d[j * P + ip, cols], dtype=mm))
                y = nl.copy(o, dtype=nl.float32)
                if d_scale is not None:
                    y = nl.multiply(y, nl.load(d_scale[ip * 0, cols], dtype=nl.float32), dtype=nl.float32)
                if down_activations is not None:
                    nl.store(down_activations[n, t * P + ip, cols], value=nl.copy(y, dtype=down_activations.dtype))
                if scale_mode == ExpertAffinityScaleMode.POST_SCALE:
                    y = nl.multiply(y, a, dtype=nl.float32)
                yo = nl.copy(y, dtype=output.dtype)
                nisa.dma_copy(dst=output[st_idx, cols], src=yo, oob_mode=nisa.oob_mode.skip,
                              dst_rmw_op=np.add if accumulate else None)


def _call(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
          token_position_to_id, block_to_expert, output, kw, gate_up_activations_T=None, down_activations=None):
    blockwise_core(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
                   token_position_to_id, block_to_expert, output, kw.get("skip_dma"),
                   kw.get("gate_up_proj_scale"), kw.get("down_proj_scale"),
                   kw.get("is_tensor_update_accumulating", True),
                   kw.get("compute_type", kw.get("compute_dtype")), kw.get("expert_affinities_scaling_mode"),
                   gate_up_activations_T, down_activations)


def blockwise_mm(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
                 token_position_to_id, block_to_expert, output, **kwargs):
    """The inference forward (see the module doc)."""
    _call(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
          token_position_to_id, block_to_expert, output, kwargs)


def blockwise_mm_baseline(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
                          token_position_to_id, block_to_expert, output, gate_up_activations_T=None,
                          down_activations=None, **kwargs):
    """The training forward: also stores the activations blockwise_mm_bwd reads (see the module doc)."""
    _call(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
          token_position_to_id, block_to_expert, output, kwargs, gate_up_activations_T, down_activations)


def blockwise_mm_baseline_shard_hidden(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight,
                                       block_size, token_position_to_id, block_to_expert, output,
                                       gate_up_activations_T=None, down_activations=None, **kwargs):
    """The LNC=2 form (``[VNC(2)]``): the instances split the hidden columns; same values."""
    _call(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight, block_size,
          token_position_to_id, block_to_expert, output, kwargs, gate_up_activations_T, down_activations)


blockwise_mm_selective_cp = not_built(
    "neuronxcc.nki._private_kernels.blockwise_mm.blockwise_mm_selective_cp",
    "the return-style form JAX callers import; with a VNC(2) grid its zero-filled outputs would need a "
    "per-instance split this package does not have. blockwise_mm_baseline (outputs as arguments) computes "
    "the same values")
