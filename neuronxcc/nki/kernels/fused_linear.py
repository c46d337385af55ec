"""``allocated_fused_rms_norm_qkv`` of ``neuronxcc.nki.kernels`` (signature and layouts of the original's public
kernel; our own implementation)::

    out = allocated_fused_rms_norm_qkv(hidden, weights, norm_dtype=nl.float32, eps=1e-6)

hidden: [batch, seqlen, dim] (BSH); weights: [dim, head_dim] (the fused QKV weights, already multiplied by the
RMSNorm gamma); returns out [batch, seqlen, head_dim] (hidden's dtype) = ``(hidden * rsqrt(mean(hidden^2) +
eps)) @ weights``. The norm runs in norm_dtype (fp32), the normalised rows are cast to the weights' dtype for
the TensorE. dim must be a multiple of 128 and head_dim <= 512 (one PSUM bank), as in the original. Tokens go
128 per tile (a ragged last tile masked); each tile's normalised rows are transposed on the TensorE into
[128 of dim, tokens] chunks, the stationary operands of the projection accumulated over dim in PSUM. The
original places its buffers by direct allocation; this one leaves that to the allocator (same values).
"""
from neuronxcc import nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check

__all__ = ["allocated_fused_rms_norm_qkv"]

P = 128


@nki.jit
def allocated_fused_rms_norm_qkv(hidden, weights, norm_dtype=nl.float32, eps=1e-6):
    """RMSNorm(hidden) @ weights: see the module doc."""
    batch, seqlen, dim = hidden.shape
    _dim, head_dim = weights.shape
    check(dim % P == 0, "allocated_fused_rms_norm_qkv: dim %d must be a multiple of 128" % dim)
    check(_dim == dim, "allocated_fused_rms_norm_qkv: weights must be [%d, head_dim], got %s" % (dim, weights.shape))
    check(head_dim <= 512, "allocated_fused_rms_norm_qkv: head_dim %d exceeds 512" % head_dim)
    out = nl.ndarray((batch, seqlen, head_dim), dtype=hidden.dtype, buffer=nl.shared_hbm)
    mm = weights.dtype
    nd = dim // P
    ip, jf_p, jf_d, jf_h = nl.arange(P)[:, None], nl.arange(P)[None, :], nl.arange(dim)[None, :], \
        nl.arange(head_dim)[None, :]
    w = nl.ndarray((nd, nl.par_dim(P), head_dim), dtype=mm)              # the weights, resident
    for m in nl.affine_range(nd):
        w[m] = nl.load(weights[m * P + ip, jf_h])
    for b in nl.affine_range(batch):
        for t in nl.affine_range((seqlen + P - 1) // P):
            rows = t * P + ip
            live = rows < seqlen
            x = nl.load(hidden[b, rows, jf_d], mask=live, dtype=norm_dtype)
            ss = nl.ndarray((P, 1), dtype=norm_dtype)
            nisa.activation_reduce(op=nl.square, data=x, reduce_op=nl.add, reduce_res=ss, mask=live,
                                   dtype=norm_dtype)
            inv = nl.rsqrt(nl.add(nl.multiply(ss, 1.0 / dim, mask=live), float(eps), mask=live), mask=live)
            xn = nl.multiply(x, inv, dtype=mm, mask=live)
            acc = nl.zeros((P, head_dim), nl.float32, buffer=nl.psum)
            for m in nl.affine_range(nd):
                xt = nl.copy(nisa.nc_transpose(xn[ip, m * P + jf_p]), dtype=mm)     # [128 of dim, tokens]
                acc += nisa.nc_matmul(xt, w[m])
            nl.store(out[b, rows, jf_h], value=nl.copy(acc, dtype=out.dtype, mask=live), mask=live)
    return out
