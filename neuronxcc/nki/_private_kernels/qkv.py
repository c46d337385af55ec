"""The fused RMSNorm + QKV projection kernels NxD-Inference's attention module imports at load and calls
(our own implementation, the original's call form, out-argument style)::

    rmsnorm_qkv_isa_kernel(hidden, w_qkv, ln_w, out, kernel_name="QKV", eps=1e-6, fused_rmsnorm=False,
                           bias=None, skip_gamma=False)                 # also lhs=, rhs= as keywords
    rmsnorm_qkv_isa_fused_add_kernel(hidden, residual, attn_out, w_qkv, ln_w, out, kernel_name="QKV", eps=1e-6,
                                     fused_rmsnorm=False, bias=None, skip_gamma=False)

hidden: [B, S, H]; w_qkv: [H, N] (the fused Q/K/V weights, [in, out]); ln_w: [1, H]; bias: [1, N] or None;
out: [B, S, N] = ``x @ w_qkv (+ bias)`` with x = hidden, or with fused_rmsnorm ``x = hidden * rsqrt(mean(
hidden^2) + eps) * ln_w`` (skip_gamma: without ln_w). The fused-add form first sums ``r = hidden + residual +
attn_out``, stores r back into hidden (the caller reads it there as the next residual) and uses r as hidden.
H must be a multiple of 128.

``norm_matmul`` is the shared body (also behind ``nki.kernels.allocated_fused_rms_norm_qkv``): tokens go
128 per tile, the norm in fp32, the normalised rows cast to the weights' dtype and transposed on the TensorE
into [128 of H, tokens] chunks, the stationary operands of the projection, accumulated over H in PSUM per
512 output columns. A grid ``[n]`` splits the token tiles over the instances when n divides their count.
"""
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check

__all__ = ["rmsnorm_qkv_isa_kernel", "rmsnorm_qkv_isa_fused_add_kernel", "norm_matmul"]

P = 128
N_OUT = 512


def _tiles(n_tiles):
    n = nl.num_programs() if nl.program_ndim() else 1
    if n > 1 and n_tiles % n == 0:
        return nl.program_id(0) * (n_tiles // n), n_tiles // n
    return 0, n_tiles


def norm_matmul(x_in, w, out, eps, norm=True, gamma=None, bias=None, adds=(), res_out=None, norm_dtype=nl.float32):
    """out[S, N] = norm(x_in[S, H] + sum(adds)) @ w[H, N] (+ bias [1, N]); HBM views of one batch row.
    gamma: ln_w [1, H] or None; res_out: where the summed input is stored (or None)."""
    S, H = x_in.shape
    N = w.shape[1]
    check(H % P == 0, "norm_matmul: the hidden size %d must be a multiple of 128" % H)
    check(tuple(w.shape) == (H, N), "the weights must be [%d, N], got %s" % (H, tuple(w.shape)))
    mm = w.dtype
    nh = H // P
    ip, jf_p, jf_h = nl.arange(P)[:, None], nl.arange(P)[None, :], nl.arange(H)[None, :]
    g = nl.load(gamma.reshape((1, H)), dtype=nl.float32).broadcast_to((P, H)) if gamma is not None else None
    start, count = _tiles((S + P - 1) // P)
    for r in nl.affine_range(count):
        rows = (start + r) * P + ip
        live = rows < S
        x = nl.load(x_in[rows, jf_h], mask=live, dtype=norm_dtype)
        for a in adds:
            x = nl.add(x, nl.load(a[rows, jf_h], mask=live, dtype=norm_dtype), dtype=norm_dtype, mask=live)
        if res_out is not None:
            nl.store(res_out[rows, jf_h], value=nl.copy(x, dtype=res_out.dtype, mask=live), mask=live)
        if norm:
            ss = nl.ndarray((P, 1), dtype=nl.float32)
            nisa.activation_reduce(op=nl.square, data=x, reduce_op=nl.add, reduce_res=ss, mask=live,
                                   dtype=nl.float32)
            inv = nl.rsqrt(nl.add(nl.multiply(ss, 1.0 / H, mask=live), float(eps), mask=live), mask=live)
            x = nl.multiply(x, inv, dtype=nl.float32, mask=live)
            if g is not None:
                x = nl.multiply(x, g, dtype=nl.float32, mask=live)
        xm = nl.copy(x, dtype=mm, mask=live)
        xt = nl.ndarray((nh, nl.par_dim(P), P), dtype=mm)                 # x^T chunks [128 of H, tokens]
        for c in nl.affine_range(nh):
            xt[c] = nl.copy(nisa.nc_transpose(xm[ip, c * P + jf_p]), dtype=mm)
        for n0 in range(0, N, N_OUT):
            nw = min(N_OUT, N - n0)
            jf_n = nl.arange(nw)[None, :]
            acc = nl.zeros((P, nw), nl.float32, buffer=nl.psum)
            for c in nl.affine_range(nh):
                acc += nisa.nc_matmul(xt[c], nl.load(w[c * P + ip, n0 + jf_n]))
            res = acc
            if bias is not None:
                bt = nl.load(bias.reshape((1, N))[nl.arange(1)[:, None], n0 + jf_n], dtype=nl.float32)
                res = nl.add(acc, bt.broadcast_to((P, nw)), dtype=nl.float32)
            nl.store(out[rows, n0 + jf_n], value=nl.copy(res, dtype=out.dtype, mask=live), mask=live)


def _check_out(out, b, s, n, name):
    check(tuple(out.shape) == (b, s, n), "%s: out must be [%d, %d, %d], got %s" % (name, b, s, n, tuple(out.shape)))


def rmsnorm_qkv_isa_kernel(lhs, rhs, ln_w, out, kernel_name="QKV", eps=1e-6, fused_rmsnorm=False, bias=None,
                           skip_gamma=False, **kwargs):
    B, S, H = lhs.shape
    _check_out(out, B, S, rhs.shape[1], "rmsnorm_qkv_isa_kernel")
    gamma = ln_w if fused_rmsnorm and not skip_gamma else None
    for b in nl.affine_range(B):
        norm_matmul(lhs[b], rhs, out[b], eps, norm=bool(fused_rmsnorm), gamma=gamma, bias=bias)


def rmsnorm_qkv_isa_fused_add_kernel(hidden, residual, attn_out, w_qkv, ln_w, out, kernel_name="QKV", eps=1e-6,
                                     fused_rmsnorm=False, bias=None, skip_gamma=False, **kwargs):
    B, S, H = hidden.shape
    check(tuple(residual.shape) == (B, S, H) and tuple(attn_out.shape) == (B, S, H),
          "rmsnorm_qkv_isa_fused_add_kernel: residual and attn_out must have hidden's shape")
    _check_out(out, B, S, w_qkv.shape[1], "rmsnorm_qkv_isa_fused_add_kernel")
    gamma = ln_w if fused_rmsnorm and not skip_gamma else None
    for b in nl.affine_range(B):
        norm_matmul(hidden[b], w_qkv, out[b], eps, norm=bool(fused_rmsnorm), gamma=gamma, bias=bias,
                    adds=(residual[b], attn_out[b]), res_out=hidden[b])
