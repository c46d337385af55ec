"""The gated MLP kernels NxD-Inference's Llama / Qwen model code calls (our own implementation, the original's
call form, out-argument style through ``nki_jit()(kernel)[grid](...)``)::

    mlp_isa_kernel(hidden, ln_w, gate_w, up_w, down_w, out, kernel_name="MLP",
                   fused_rmsnorm=False, skip_gamma=False, eps=1e-6)
    mlp_fused_add_isa_kernel(attn_output, hidden, ln_w, gate_w, up_w, down_w, out, kernel_name="MLP",
                             fused_rmsnorm=False, skip_gamma=False, eps=1e-6, store_add=True)

hidden / attn_output: [B, S, H]; ln_w: [1, H] (RMSNorm gamma); gate_w, up_w: [H, I] and down_w: [I, H] (the
callers transpose the linear layers' [out, in] weights to [in, out]). ``out = (act(x @ gate_w) * (x @ up_w))
@ down_w`` with act = SiLU, where x = hidden, or with ``fused_rmsnorm`` ``x = hidden * rsqrt(mean(hidden^2) +
eps) * ln_w`` (``skip_gamma``: without ln_w). The fused-add form first computes ``r = attn_output + hidden``
and uses r as hidden; out is [B, 2S, H]: the MLP result in ``out[:, :S]`` and, with ``store_add``, r in
``out[:, S:]`` (the residual the caller slices off). H and I must be multiples of 128.

Layout: tokens go 128 per tile; x^T chunks [128 of H, tokens] come from TensorE transposes, so
``gate^T = gate_w^T x^T`` lands [128 of I, tokens] in PSUM (contracting H in 128-row chunks), the gated
activation stays transposed and is directly the stationary operand of the down projection (contracting I),
whose result [tokens, 512 of H] is stored. TensorE operands in the inputs' dtype, accumulation and the
norm in fp32. A grid ``[n]`` splits the token tiles over the instances when n divides their count (else
every instance computes all: same values).

The quantized variants ``quant_mlp_isa_kernel`` / ``quant_mlp_fused_add_isa_kernel`` are not implemented:
calling one raises NkiNotImplementedError ([NCC_INBY001]).
"""
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels._unbuilt import unbuilt
from neuronxcc.nki._private_kernels.flash_core import check

__all__ = ["mlp_isa_kernel", "mlp_fused_add_isa_kernel", "quant_mlp_isa_kernel", "quant_mlp_fused_add_isa_kernel"]

P = 128
N_OUT = 512        # down-projection output columns per PSUM tile (one 2 KiB bank of fp32)


def _act(kwargs):
    act = kwargs.get("act_fn", kwargs.get("act_fn_type"))
    name = str(getattr(act, "name", act) or "silu").lower()
    check("silu" in name or "swish" in name, "mlp kernel: only the SiLU-gated MLP is supported, got act %r" % (act,))


def _token_tiles(n_tiles):
    """(instances' tile loop start, tiles per instance)."""
    n = nl.num_programs() if nl.program_ndim() else 1
    if n > 1 and n_tiles % n == 0:
        return nl.program_id(0) * (n_tiles // n), n_tiles // n
    return 0, n_tiles


def _mlp(x_in, a_in, ln_w, gate_w, up_w, down_w, out, res_out, fused_rmsnorm, skip_gamma, eps):
    """One batch row: x_in, a_in (fused add, or None), out, res_out (or None): [S, H] HBM views."""
    S, H = x_in.shape
    inter = gate_w.shape[1]
    mm = gate_w.dtype
    nh, ni = H // P, inter // P
    w = N_OUT if H % N_OUT == 0 else P
    ip, jf_p, jf_h, jf_o = nl.arange(P)[:, None], nl.arange(P)[None, :], nl.arange(H)[None, :], nl.arange(w)[None, :]
    start, count = _token_tiles((S + P - 1) // P)
    gamma = None
    if fused_rmsnorm and not skip_gamma:
        gamma = nl.load(ln_w.reshape((1, H)), dtype=nl.float32).broadcast_to((P, H))
    for r in nl.affine_range(count):
        rows = (start + r) * P + ip
        live = rows < S
        x = nl.load(x_in[rows, jf_h], mask=live, dtype=nl.float32)
        if a_in is not None:
            x = nl.add(x, nl.load(a_in[rows, jf_h], mask=live, dtype=nl.float32), dtype=nl.float32, mask=live)
            if res_out is not None:
                nl.store(res_out[rows, jf_h], value=nl.copy(x, dtype=res_out.dtype, mask=live), mask=live)
        if fused_rmsnorm:
            ss = nl.ndarray((P, 1), dtype=nl.float32)
            nisa.activation_reduce(op=nl.square, data=x, reduce_op=nl.add, reduce_res=ss, mask=live,
                                   dtype=nl.float32)
            inv = nl.rsqrt(nl.add(nl.multiply(ss, 1.0 / H, mask=live), eps, mask=live), mask=live)
            x = nl.multiply(x, inv, dtype=nl.float32, mask=live)
            if gamma is not None:
                x = nl.multiply(x, gamma, dtype=nl.float32, mask=live)
        xm = nl.copy(x, dtype=mm, mask=live)
        xt = nl.ndarray((nh, nl.par_dim(P), P), dtype=mm)                 # x^T chunks [128 of H, tokens]
        for c in nl.affine_range(nh):
            xt[c] = nl.copy(nisa.nc_transpose(xm[ip, c * P + jf_p]), dtype=mm)
        act_t = nl.ndarray((ni, nl.par_dim(P), P), dtype=mm)              # act^T chunks [128 of I, tokens]
        for j in nl.affine_range(ni):
            g = nl.zeros((P, P), nl.float32, buffer=nl.psum)
            u = nl.zeros((P, P), nl.float32, buffer=nl.psum)
            for c in nl.affine_range(nh):
                g += nisa.nc_matmul(nl.load(gate_w[c * P + ip, j * P + jf_p], dtype=mm), xt[c])
                u += nisa.nc_matmul(nl.load(up_w[c * P + ip, j * P + jf_p], dtype=mm), xt[c])
            gs = nisa.activation(op=nl.silu, data=g, dtype=nl.float32)
            act_t[j] = nl.multiply(gs, u, dtype=mm)
        for k in nl.affine_range(H // w):
            o = nl.zeros((P, w), nl.float32, buffer=nl.psum)
            for j in nl.affine_range(ni):
                o += nisa.nc_matmul(act_t[j], nl.load(down_w[j * P + ip, k * w + jf_o], dtype=mm))
            nl.store(out[rows, k * w + jf_o], value=nl.copy(o, dtype=out.dtype, mask=live), mask=live)


def _check_weights(hidden, gate_w, up_w, down_w):
    H = hidden.shape[-1]
    inter = gate_w.shape[1]
    check(H % P == 0 and inter % P == 0, "mlp kernel: H=%d and I=%d must be multiples of 128" % (H, inter))
    check(tuple(gate_w.shape) == (H, inter) and tuple(up_w.shape) == (H, inter) and tuple(down_w.shape) == (inter, H),
          "mlp kernel: gate_w/up_w must be [H, I] and down_w [I, H], got %s / %s / %s"
          % (tuple(gate_w.shape), tuple(up_w.shape), tuple(down_w.shape)))


def mlp_isa_kernel(hidden, ln_w, gate_w, up_w, down_w, out, kernel_name="MLP", fused_rmsnorm=False,
                   skip_gamma=False, eps=1e-6, **kwargs):
    _act(kwargs)
    _check_weights(hidden, gate_w, up_w, down_w)
    B, S, H = hidden.shape
    check(tuple(out.shape) == (B, S, H), "mlp kernel: out must be [%d, %d, %d], got %s" % (B, S, H, tuple(out.shape)))
    for b in nl.affine_range(B):
        _mlp(hidden[b], None, ln_w, gate_w, up_w, down_w, out[b], None, fused_rmsnorm, skip_gamma, eps)


def mlp_fused_add_isa_kernel(attn_output, hidden, ln_w, gate_w, up_w, down_w, out, kernel_name="MLP",
                             fused_rmsnorm=False, skip_gamma=False, eps=1e-6, store_add=True, **kwargs):
    _act(kwargs)
    _check_weights(hidden, gate_w, up_w, down_w)
    B, S, H = hidden.shape
    check(tuple(attn_output.shape) == (B, S, H), "mlp_fused_add_isa_kernel: attn_output must have hidden's shape")
    check(tuple(out.shape) == (B, 2 * S, H),
          "mlp_fused_add_isa_kernel: out must be [%d, %d, %d], got %s" % (B, 2 * S, H, tuple(out.shape)))
    for b in nl.affine_range(B):
        ob = out[b]
        _mlp(hidden[b], attn_output[b], ln_w, gate_w, up_w, down_w, ob[0:S, :], ob[S:2 * S, :] if store_add else None,
             fused_rmsnorm, skip_gamma, eps)


quant_mlp_isa_kernel = unbuilt("mlp", "quant_mlp_isa_kernel")
quant_mlp_fused_add_isa_kernel = unbuilt("mlp", "quant_mlp_fused_add_isa_kernel")
