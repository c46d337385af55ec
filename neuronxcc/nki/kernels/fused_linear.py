"""``allocated_fused_rms_norm_qkv`` of ``neuronxcc.nki.kernels`` (signature and layouts of the original's public
kernel; our own implementation)::

    out = allocated_fused_rms_norm_qkv(hidden, weights, norm_dtype=nl.float32, eps=1e-6)

hidden: [batch, seqlen, dim] (BSH); weights: [dim, head_dim] (the fused QKV weights, already multiplied by the
RMSNorm gamma); returns out [batch, seqlen, head_dim] (hidden's dtype) = ``(hidden * rsqrt(mean(hidden^2) +
eps)) @ weights``. The norm runs in norm_dtype (fp32), the normalised rows are cast to the weights' dtype for
the TensorE. dim must be a multiple of 128 and head_dim <= 512 (one PSUM bank), as in the original. Tokens go
128 per tile (a ragged last tile masked); each tile's normalised rows are transposed on the TensorE into
[128 of dim, tokens] chunks, the stationary operands of the projection accumulated over dim in PSUM. The
original places its buffers by direct allocation; this one leaves that to the allocator (same values). The
body is ``_private_kernels.qkv.norm_matmul``.
"""
from neuronxcc import nki
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check
from neuronxcc.nki._private_kernels.qkv import norm_matmul

__all__ = ["allocated_fused_rms_norm_qkv"]


@nki.jit
def allocated_fused_rms_norm_qkv(hidden, weights, norm_dtype=nl.float32, eps=1e-6):
    """RMSNorm(hidden) @ weights: see the module doc."""
    batch, seqlen, dim = hidden.shape
    _dim, head_dim = weights.shape
    check(_dim == dim, "allocated_fused_rms_norm_qkv: weights must be [%d, head_dim], got %s" % (dim, weights.shape))
    check(head_dim <= 512, "allocated_fused_rms_norm_qkv: head_dim %d exceeds 512" % head_dim)
    out = nl.ndarray((batch, seqlen, head_dim), dtype=hidden.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(batch):
        norm_matmul(hidden[b], weights, out[b], eps, norm=True, norm_dtype=norm_dtype)
    return out
