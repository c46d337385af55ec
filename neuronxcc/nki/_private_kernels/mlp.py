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

The quantized variants take the weights quantized (float8_e4m3 or int8, [in, out]) with their per-output-channel
dequantization scales broadcast to [128, out] (NxD-Inference's preprocess_quantized_linear_layer layout)::

    quant_mlp_isa_kernel(hidden, ln_w, gate_w, gate_w_scale, up_w, up_w_scale, down_w, down_w_scale,
                         clamp_bound, out, fused_rmsnorm=False, eps=1e-6, kernel_name="MLP")
    quant_mlp_fused_add_isa_kernel(attn_output, hidden, ln_w, gate_w, gate_w_scale, ..., clamp_bound, out, ...)

Their math is a documented approximation (the original's is private): the (normed) input is quantized per row
to float8_e4m3 exactly as ``rmsnorm.rmsnorm_quant_isa_kernel`` does (clip to +-clamp_bound, scale amax / 240),
or taken as that kernel's packed [.., H + 4] int8 output when hidden has that shape (then no norm); the weights
are dequantized by their scales and the projections run in fp32 on those fp8-rounded values (equal to an fp8
product with fp32 accumulation up to fp32 rounding); the gated activation enters the down projection
unquantized.
"""
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
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


def _qdq(x, bound, live):
    """x quantized per row to float8_e4m3 and back (rmsnorm_quant_isa_kernel's math: clip to +-bound when bound
    > 0, scale max(amax / 240, 1e-6))."""
    amax = nl.max(nl.abs(x, mask=live), axis=[1], keepdims=True, mask=live)
    if bound > 0:
        amax = nl.minimum(amax, bound, mask=live)
        x = nl.maximum(nl.minimum(x, bound, mask=live), -bound, dtype=nl.float32, mask=live)
    sc = nl.maximum(nl.multiply(amax, 1.0 / 240.0, mask=live), 1e-6, dtype=nl.float32, mask=live)
    q = nl.multiply(x, nl.reciprocal(sc, mask=live), dtype=nl.float8_e4m3, mask=live)
    return nl.multiply(q, sc, dtype=nl.float32, mask=live)


def _weight(w, scale, rows, cols, mm):
    """A weight block in mm, or (quantized weights) dequantized in fp32 by its per-column scale ([128, out]: the
    callers broadcast the scale row over 128 partitions)."""
    if scale is None:
        return nl.load(w[rows, cols], dtype=mm)
    return nl.multiply(nl.load(w[rows, cols], dtype=nl.float32), nl.load(scale[nl.arange(P)[:, None], cols],
                                                                          dtype=nl.float32), dtype=nl.float32)


def _mlp(x_in, a_in, ln_w, gate_w, up_w, down_w, out, res_out, fused_rmsnorm, skip_gamma, eps, quant=None):
    """One batch row: x_in, a_in (fused add, or None), out, res_out (or None): [S, H] HBM views. quant: None, or
    (gate_scale, up_scale, down_scale, clamp_bound) for quantized weights; then an x_in of [S, H + 4] bytes is
    rmsnorm_quant_isa_kernel's packed output (fp8 values and the fp32 row scale), used as it is."""
    S, H = out.shape
    inter = gate_w.shape[1]
    mm = nl.float32 if quant is not None else gate_w.dtype
    gsc, usc, dsc, bound = quant if quant is not None else (None, None, None, 0.0)
    packed = quant is not None and x_in.shape[-1] == H + 4
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
        if packed:
            xb = nl.load(x_in[rows, jf_h], mask=live)
            sb = nl.load(x_in[rows, H + nl.arange(4)[None, :]], mask=live)
            x = nl.multiply(nl.copy(xb.view(nl.float8_e4m3), dtype=nl.float32, mask=live), sb.view(nl.float32),
                            dtype=nl.float32, mask=live)
        else:
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
        if quant is not None and not packed:
            x = _qdq(x, bound, live)
        xm = nl.copy(x, dtype=mm, mask=live)
        xt = nl.ndarray((nh, nl.par_dim(P), P), dtype=mm)                 # x^T chunks [128 of H, tokens]
        for c in nl.affine_range(nh):
            xt[c] = nl.copy(nisa.nc_transpose(xm[ip, c * P + jf_p]), dtype=mm)
        act_t = nl.ndarray((ni, nl.par_dim(P), P), dtype=mm)              # act^T chunks [128 of I, tokens]
        for j in nl.affine_range(ni):
            g = nl.zeros((P, P), nl.float32, buffer=nl.psum)
            u = nl.zeros((P, P), nl.float32, buffer=nl.psum)
            for c in nl.affine_range(nh):
                g += nisa.nc_matmul(_weight(gate_w, gsc, c * P + ip, j * P + jf_p, mm), xt[c])
                u += nisa.nc_matmul(_weight(up_w, usc, c * P + ip, j * P + jf_p, mm), xt[c])
            gs = nisa.activation(op=nl.silu, data=g, dtype=nl.float32)
            act_t[j] = nl.multiply(gs, u, dtype=mm)
        for k in nl.affine_range(H // w):
            o = nl.zeros((P, w), nl.float32, buffer=nl.psum)
            for j in nl.affine_range(ni):
                o += nisa.nc_matmul(act_t[j], _weight(down_w, dsc, j * P + ip, k * w + jf_o, mm))
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


def quant_mlp_isa_kernel(hidden, ln_w, gate_w, gate_w_scale, up_w, up_w_scale, down_w, down_w_scale, clamp_bound,
                         out, fused_rmsnorm=False, eps=1e-6, kernel_name="MLP", skip_gamma=False, **kwargs):
    _act(kwargs)
    B, S, H = out.shape
    _check_weights(out, gate_w, up_w, down_w)
    check(tuple(hidden.shape) in ((B, S, H), (B, S, H + 4)),
          "quant_mlp_isa_kernel: hidden must be [%d, %d, %d] (or [.., %d] packed), got %s"
          % (B, S, H, H + 4, tuple(hidden.shape)))
    q = (gate_w_scale, up_w_scale, down_w_scale, float(clamp_bound or 0.0))
    for b in nl.affine_range(B):
        _mlp(hidden[b], None, ln_w, gate_w, up_w, down_w, out[b], None, fused_rmsnorm and hidden.shape[-1] == H,
             skip_gamma, eps, quant=q)


def quant_mlp_fused_add_isa_kernel(attn_output, hidden, ln_w, gate_w, gate_w_scale, up_w, up_w_scale, down_w,
                                   down_w_scale, clamp_bound, out, fused_rmsnorm=False, eps=1e-6, kernel_name="MLP",
                                   store_add=True, skip_gamma=False, **kwargs):
    _act(kwargs)
    _check_weights(hidden, gate_w, up_w, down_w)
    B, S, H = hidden.shape
    check(tuple(attn_output.shape) == (B, S, H), "quant_mlp_fused_add_isa_kernel: attn_output must have hidden's shape")
    check(tuple(out.shape) == (B, 2 * S, H),
          "quant_mlp_fused_add_isa_kernel: out must be [%d, %d, %d], got %s" % (B, 2 * S, H, tuple(out.shape)))
    q = (gate_w_scale, up_w_scale, down_w_scale, float(clamp_bound or 0.0))
    for b in nl.affine_range(B):
        ob = out[b]
        _mlp(hidden[b], attn_output[b], ln_w, gate_w, up_w, down_w, ob[0:S, :], ob[S:2 * S, :] if store_add else None,
             fused_rmsnorm, skip_gamma, eps, quant=q)
