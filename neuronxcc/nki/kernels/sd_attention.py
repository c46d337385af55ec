"""The Stable Diffusion self-attention kernels of ``neuronxcc.nki.kernels`` (signatures and tensor layouts of the
original's public kernels; our own implementation on the flash-attention core of ``_private_kernels.flash_core``)::

    out = fused_self_attn_for_SD_small_head_size[bs](q_ref, k_ref, v_ref, use_causal_mask=False,
                                                     mixed_precision=True)

q_ref: [bs, d, seq]; k_ref, v_ref: [bs, seq, d]; returns out [bs, seq, d] (q's dtype) =
``softmax(0.125 * q^T k^T) v`` per batch (the scale is fixed at 0.125, as the original's kernel, written for
head dim 64 of SD 2, uses it). k is transposed to [d, keys] on the TensorE per 128 keys. With
mixed_precision the TensorE operands are bfloat16, else q's dtype; softmax in fp32. seq must be a multiple
of 128 and d <= 128.

``allocated_fused_self_attn_for_SD_small_head_size`` has the same signature and math in the layouts of the
original's allocated kernel: k_ref [bs, d, seq] (like q) and out [bs, d, seq], ``(softmax(0.125 q^T k) v)^T``.
The original places its buffers by direct allocation with double buffering, a performance choice this
implementation leaves to the allocator.
"""
from neuronxcc import nki
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check, flash_attention_core

__all__ = ["fused_self_attn_for_SD_small_head_size", "allocated_fused_self_attn_for_SD_small_head_size"]

SD_SCALE = 0.125


def _sd_attention(q_ref, k_ref, v_ref, use_causal_mask, mixed_precision, allocated=False):
    """allocated: the allocated variant's layouts (k [bs, d, seq], out [bs, d, seq])."""
    bs, d, seq = q_ref.shape
    k_shape = (bs, d, seq) if allocated else (bs, seq, d)
    check(tuple(k_ref.shape) == k_shape and tuple(v_ref.shape) == (bs, seq, d),
          "SD attention: k_ref must be %s and v_ref [%d, %d, %d], got %s / %s"
          % (list(k_shape), bs, seq, d, tuple(k_ref.shape), tuple(v_ref.shape)))
    out = nl.ndarray((bs, d, seq) if allocated else (bs, seq, d), dtype=q_ref.dtype, buffer=nl.shared_hbm)
    mm = nl.bfloat16 if mixed_precision else q_ref.dtype

    def batch(b):
        flash_attention_core(q_ref, k_ref, v_ref, out, None, None, (b,), (b,), (b,), SD_SCALE, bool(use_causal_mask),
                             mm, k_seq_major=not allocated, o_transposed=allocated)
    if nl.program_ndim() >= 1 and nl.num_programs(0) == bs:
        batch(nl.program_id(0))
    else:
        for b in nl.affine_range(bs):
            batch(b)
    return out


@nki.jit
def fused_self_attn_for_SD_small_head_size(q_ref, k_ref, v_ref, use_causal_mask=False, mixed_precision=True):
    """Fused self attention for the small head size of Stable Diffusion: see the module doc."""
    return _sd_attention(q_ref, k_ref, v_ref, use_causal_mask, mixed_precision)


@nki.jit
def allocated_fused_self_attn_for_SD_small_head_size(q_ref, k_ref, v_ref, use_causal_mask=False,
                                                      mixed_precision=True):
    """The directly allocated variant of fused_self_attn_for_SD_small_head_size (see the module doc)."""
    return _sd_attention(q_ref, k_ref, v_ref, use_causal_mask, mixed_precision, allocated=True)
