"""The backward pass of the blockwise (MoE) matmul, as NxD's ``BlockwiseMatmulNKIFunc.backward`` calls it (our own
implementation, the original's call form: positional arguments, every gradient an output argument the caller
zero-fills)::

    blockwise_mm_bwd(hidden_states, hidden_states_grad, expert_affinities_masked, expert_affinities_masked_grad,
                     gate_up_proj_weight, gate_up_proj_weight_grad, gate_up_activations_T, down_proj_weight,
                     down_proj_weight_grad, down_activations, token_position_to_id, block_to_expert,
                     output_hidden_states_grad, block_size=..., is_tensor_update_accumulating=True)
    blockwise_mm_bwd_baseline_shard_hidden[VNC(n)](...)        # the instances split the hidden columns

Shapes as ``blockwise_mm`` (hidden_states and output_hidden_states_grad [T, H], the affinities [T * E, 1], weights
[E, H, 2, I] / [E, I, H]) and its training outputs gate_up_activations_T [N, 2, I, B] (g, u) and down_activations
[N, B, H] (y before the affinity). The forward is the POST_SCALE one: ``out[t] += a * y``, ``y = (silu(g) * u) @
Wd[e]``, ``g, u = x @ Wg[e], x @ Wu[e]``. Per block, with dy = output_hidden_states_grad[t]::

    da[t, e] += sum_h dy * y            dd = a * dy
    dWd[e]   += act^T dd                dact = dd Wd[e]^T          act = silu(g) * u
    dg = dact * u * sig(g) * (1 + g (1 - sig(g)))                  du = dact * silu(g)
    dWg[e]   += x^T dg,  dWu[e] += x^T du                          dx[t] += dg Wg[e]^T + du Wu[e]^T

(dx added when is_tensor_update_accumulating, else stored). Empty slots (-1) and padded blocks (expert id outside
[0, E)) contribute nothing. Layout: 128 tokens per tile; g^T, u^T and dact^T [128 of I, tokens] (dact^T on the
TensorE from Wd[e]^T chunks, read transposed by strided DMA, and dd^T); dWd[e] and dW{g,u}[e] read-modify-write
their [128, <= 512] blocks in HBM through the expert register, so blocks and token tiles run in order; dx and
da are scatter-added by indirect DMA. TensorE operands in compute_type (default: the weights' dtype),
accumulation and the element-wise math in fp32.
"""
import numpy as np

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.blockwise_mm import (N_OUT, P, block_expert, check_blockwise_mm_kernel_compatibility,
                                                         check_shapes, expert_view, split_hidden, stored_rows,
                                                         token_affinity)
from neuronxcc.nki._private_kernels.flash_core import check
from neuronxcc.nki._private_kernels.not_built import not_built

__all__ = ["blockwise_mm_bwd", "blockwise_mm_bwd_baseline_shard_hidden", "blockwise_mm_bwd_selective_cp",
           "check_blockwise_mm_bwd_kernel_compatibility"]


def check_blockwise_mm_bwd_kernel_compatibility(hidden_size, block_size, intermediate_size_tp, **kwargs):
    """AssertionError when the backward kernel cannot take these sizes (the forward's limits)."""
    check_blockwise_mm_kernel_compatibility(hidden_size, block_size, intermediate_size_tp)


def _rmw(dst, block, ip, cols):
    """dst[ip, cols] += block (fp32), dst an HBM view through the expert register."""
    cur = nl.load(dst[ip, cols], dtype=nl.float32)
    nl.store(dst[ip, cols], value=nl.add(cur, block, dtype=dst.dtype))


def blockwise_bwd_core(hidden_states, hidden_states_grad, expert_affinities_masked, expert_affinities_masked_grad,
                       gate_up_proj_weight, gate_up_proj_weight_grad, gate_up_activations_T, down_proj_weight,
                       down_proj_weight_grad, down_activations, token_position_to_id, block_to_expert,
                       output_hidden_states_grad, block_size, accumulate, compute_type):
    T, H, E, I, N, B = check_shapes(hidden_states, expert_affinities_masked, gate_up_proj_weight, down_proj_weight,
                                    block_size, token_position_to_id, block_to_expert, output_hidden_states_grad)
    for name, t, shape in (("hidden_states_grad", hidden_states_grad, (T, H)),
                           ("gate_up_proj_weight_grad", gate_up_proj_weight_grad, (E, H, 2, I)),
                           ("down_proj_weight_grad", down_proj_weight_grad, (E, I, H)),
                           ("gate_up_activations_T", gate_up_activations_T, (N, 2, I, B)),
                           ("down_activations", down_activations, (N, B, H))):
        check(tuple(t.shape) == shape, "blockwise_mm_bwd: %s must be %s, got %s" % (name, list(shape), tuple(t.shape)))
    check(expert_affinities_masked_grad.shape[0] * (expert_affinities_masked_grad.shape[1]
                                                    if len(expert_affinities_masked_grad.shape) > 1 else 1) == T * E,
          "blockwise_mm_bwd: expert_affinities_masked_grad must be [%d, 1], got %s"
          % (T * E, tuple(expert_affinities_masked_grad.shape)))
    mm = compute_type or gate_up_proj_weight.dtype
    skip = nisa.oob_mode.skip
    nh, ni = H // P, I // P
    c0, ncols, w = split_hidden(H)
    wi = N_OUT if I % N_OUT == 0 else P                       # dW{g,u} column block
    ip, jf_p, jf_h = nl.arange(P)[:, None], nl.arange(P)[None, :], nl.arange(H)[None, :]
    jf_w, jf_i, j1 = nl.arange(w)[None, :], nl.arange(wi)[None, :], nl.arange(1)[None, :]
    tpos = token_position_to_id.reshape((N * B, 1))
    bte = block_to_expert.reshape((1, N))
    aff = expert_affinities_masked.reshape((T * E, 1))
    daff = expert_affinities_masked_grad.reshape((T * E, 1))
    for n in nl.sequential_range(N):
        e_reg, valid, e_safe = block_expert(bte, n, E)
        w_gu, w_d = expert_view(gate_up_proj_weight, e_reg), expert_view(down_proj_weight, e_reg)
        g_gu, g_d = expert_view(gate_up_proj_weight_grad, e_reg), expert_view(down_proj_weight_grad, e_reg)
        for t in nl.sequential_range(B // P):
            idx = nl.load(tpos[n * B + t * P + ip, j1])                          # [128, 1] token ids
            st_idx = stored_rows(idx, valid)
            dy = nl.zeros((P, H), dtype=nl.float32)
            nisa.dma_copy(dst=dy, src=output_hidden_states_grad[idx, jf_h], oob_mode=skip)
            x = nl.zeros((P, H), dtype=nl.float32)
            nisa.dma_copy(dst=x, src=hidden_states[idx, jf_h], oob_mode=skip)
            a, ai = token_affinity(aff, idx, e_safe, valid, E, skip)
            y = nl.load(down_activations[n, t * P + ip, c0 + nl.arange(ncols)[None, :]], dtype=nl.float32)
            da = nl.sum(nl.multiply(dy[ip, c0 + nl.arange(ncols)[None, :]], y, dtype=nl.float32), axis=[1],
                        keepdims=True)                                           # this instance's columns
            nisa.dma_copy(dst=daff[ai, j1], src=nl.copy(da, dtype=daff.dtype), oob_mode=skip, dst_rmw_op=np.add)
            dd = nl.multiply(dy, a, dtype=nl.float32)                            # [tokens, H]
            ddm = nl.copy(dd, dtype=mm)
            xm = nl.copy(x, dtype=mm)
            dd_t = nl.ndarray((nh, nl.par_dim(P), P), dtype=mm)                  # dd^T chunks [128 of H, tokens]
            for c in nl.affine_range(nh):
                dd_t[c] = nl.copy(nisa.nc_transpose(ddm[ip, c * P + jf_p]), dtype=mm)
            dg_t = nl.ndarray((ni, nl.par_dim(P), P), dtype=mm)                  # [128 of I, tokens]
            du_t = nl.ndarray((ni, nl.par_dim(P), P), dtype=mm)
            dgu = nl.ndarray((2, nl.par_dim(P), I), dtype=mm)                     # dg, du [tokens, I]
            for j in nl.affine_range(ni):
                g = nl.load(gate_up_activations_T[n, 0, j * P + ip, t * P + jf_p], dtype=nl.float32)
                u = nl.load(gate_up_activations_T[n, 1, j * P + ip, t * P + jf_p], dtype=nl.float32)
                dact = nl.zeros((P, P), nl.float32, buffer=nl.psum)
                for c in nl.affine_range(nh):
                    dact += nisa.nc_matmul(nl.load(w_d[j * P + jf_p, c * P + ip], dtype=mm), dd_t[c])
                sig = nisa.activation(op=nl.sigmoid, data=g, dtype=nl.float32)
                silu = nl.multiply(g, sig, dtype=nl.float32)
                act = nl.multiply(silu, u, dtype=mm)                             # act^T [128 of I, tokens]
                one_minus = nl.add(nl.multiply(sig, -1.0, dtype=nl.float32), 1.0, dtype=nl.float32)
                dsilu = nl.add(nl.multiply(g, one_minus, dtype=nl.float32), 1.0, dtype=nl.float32)   # 1 + g (1 - sig)
                du_j = nl.multiply(dact, silu, dtype=nl.float32)
                dg_j = nl.multiply(nl.multiply(nl.multiply(dact, u, dtype=nl.float32), sig, dtype=nl.float32),
                                   dsilu, dtype=nl.float32)
                dg_t[j] = nl.copy(dg_j, dtype=mm)
                du_t[j] = nl.copy(du_j, dtype=mm)
                dgu[0, ip, j * P + jf_p] = nl.copy(nisa.nc_transpose(dg_t[j]), dtype=mm)
                dgu[1, ip, j * P + jf_p] = nl.copy(nisa.nc_transpose(du_t[j]), dtype=mm)
                act_tok = nl.copy(nisa.nc_transpose(act), dtype=mm)             # [tokens, 128 of I]
                for k in nl.affine_range(ncols // w):
                    cols = c0 + k * w + jf_w
                    _rmw(g_d, nisa.nc_matmul(act_tok, ddm[ip, cols]), j * P + ip, cols)
            for c in nl.affine_range(ncols // P):                                # dW{g,u}[e] rows of this instance
                h0 = c0 + c * P
                for gi in range(2):
                    for k in nl.affine_range(I // wi):
                        blk = nisa.nc_matmul(xm[ip, h0 + jf_p], dgu[gi, ip, k * wi + jf_i])   # [128 of H, wi]
                        _rmw(g_gu[:, gi, :], blk, h0 + ip, k * wi + jf_i)
            for k in nl.affine_range(ncols // w):
                cols = c0 + k * w + jf_w
                dx = nl.zeros((P, w), nl.float32, buffer=nl.psum)
                for j in nl.affine_range(ni):
                    dx += nisa.nc_matmul(dg_t[j], nl.load(w_gu[cols, 0, j * P + ip], dtype=mm))
                    dx += nisa.nc_matmul(du_t[j], nl.load(w_gu[cols, 1, j * P + ip], dtype=mm))
                nisa.dma_copy(dst=hidden_states_grad[st_idx, cols], src=nl.copy(dx, dtype=hidden_states_grad.dtype),
                              oob_mode=skip, dst_rmw_op=np.add if accumulate else None)


def blockwise_mm_bwd(hidden_states, hidden_states_grad, expert_affinities_masked, expert_affinities_masked_grad,
                     gate_up_proj_weight, gate_up_proj_weight_grad, gate_up_activations_T, down_proj_weight,
                     down_proj_weight_grad, down_activations, token_position_to_id, block_to_expert,
                     output_hidden_states_grad, block_size=512, is_tensor_update_accumulating=True, **kwargs):
    """The backward pass (see the module doc)."""
    blockwise_bwd_core(hidden_states, hidden_states_grad, expert_affinities_masked, expert_affinities_masked_grad,
                       gate_up_proj_weight, gate_up_proj_weight_grad, gate_up_activations_T, down_proj_weight,
                       down_proj_weight_grad, down_activations, token_position_to_id, block_to_expert,
                       output_hidden_states_grad, block_size, is_tensor_update_accumulating,
                       kwargs.get("compute_type", kwargs.get("compute_dtype")))


def blockwise_mm_bwd_baseline_shard_hidden(*args, **kwargs):
    """The LNC=2 form (``[VNC(2)]``): the instances split the hidden columns; same values."""
    blockwise_mm_bwd(*args, **kwargs)


blockwise_mm_bwd_selective_cp = not_built(
    "neuronxcc.nki._private_kernels.blockwise_mm_bwd.blockwise_mm_bwd_selective_cp",
    "the return-style form JAX callers import (see blockwise_mm.blockwise_mm_selective_cp); blockwise_mm_bwd "
    "(gradients as arguments) computes the same values")
