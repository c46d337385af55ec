"""``prefix_caching_attention_fwd_isa_kernel``: the prefix-caching attention kernel NxD-Inference's attention module
(releases 0.4 to 0.7) imports at module load and calls through torch's ``nki_jit()`` in out-argument style
(our own implementation, the original's call form)::

    prefix_caching_attention_fwd_isa_kernel(q, k_active, v_active, k_prior, v_prior, attention_mask, scale, out,
                                            kernel_name="V2CausalAttentionMMSoftmaxMMWithoutSwap")

q: [B*H, d, sq] (the caller has already divided it by sqrt(d) and passes scale=1.0); k_active, v_active:
[B*H, sq, d], the new tokens; k_prior, v_prior: [B*H, sp, d], the cached prefix; attention_mask: [B, sp], nonzero
where a prefix position is in use (the caller sums it to get each sequence's prefix length); out: [B*H, d, sq]
(or [B*H, sq, d]). Each query sees the used prefix positions of its sequence and, with "Causal" in kernel_name,
the active tokens up to itself (without it: all of them)::

    out = softmax(scale * q^T [k_prior; k_active]^T + mask) [v_prior; v_active]

The kernel concatenates the prefix and active keys and values into private HBM scratch ([B*H, sp + sq, d]),
writes the additive mask once per sequence into a [B, sq, sp + sq] fp32 scratch (0 visible, -1e30 not: the prefix
columns from attention_mask, the active ones from the causal rule), and runs the flash-attention core of
``flash_core`` over the concatenation (keys in blocks, online softmax, the mask as a logit bias shared by the heads
of a sequence). sp and sq must be multiples of 128 and d <= 128. The matmuls run in q's dtype with fp32
accumulation and an fp32 softmax. A grid ``[n]`` splits the heads of every sequence over the instances when n
divides H (else every instance computes all heads: same values).
"""
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import NEG_INF, Q_TILE, check, flash_attention_core

__all__ = ["prefix_caching_attention_fwd_isa_kernel"]


def _concat(dst, first, second, r, sp, sq, d):
    """dst[r] = [first[r]; second[r]] along the sequence, 128 rows per tile through SBUF."""
    ip, jf = nl.arange(Q_TILE)[:, None], nl.arange(d)[None, :]
    for t in nl.affine_range(sp // Q_TILE):
        nl.store(dst[r, t * Q_TILE + ip, jf], value=nl.load(first[r, t * Q_TILE + ip, jf]))
    for t in nl.affine_range(sq // Q_TILE):
        nl.store(dst[r, sp + t * Q_TILE + ip, jf], value=nl.load(second[r, t * Q_TILE + ip, jf]))


def _mask_bias(bias, attention_mask, b, sp, sq, causal):
    """bias[b] = 0 where visible, NEG_INF where not ([sq, sp + sq] fp32)."""
    ip, jf_p, jf_q = nl.arange(Q_TILE)[:, None], nl.arange(sp)[None, :], nl.arange(sq)[None, :]
    used = nl.load(attention_mask[b + ip * 0, jf_p], dtype=nl.float32)               # [128, sp]: every query row
    prior = nl.multiply(nl.subtract(nl.minimum(used, 1.0), 1.0), -NEG_INF, dtype=nl.float32)
    for i in nl.static_range(sq // Q_TILE):
        nl.store(bias[b, i * Q_TILE + ip, jf_p], value=prior)
        act = nl.zeros((Q_TILE, sq), dtype=nl.float32)
        if causal:
            act = nisa.affine_select(pred=(i * Q_TILE + ip >= jf_q), on_true_tile=act[ip, jf_q],
                                     on_false_value=NEG_INF, dtype=nl.float32)
        nl.store(bias[b, i * Q_TILE + ip, sp + jf_q], value=act)


def prefix_caching_attention_fwd_isa_kernel(q, k_active, v_active, k_prior, v_prior, attention_mask, scale, out,
                                            kernel_name="V2CausalAttentionMMSoftmaxMMWithoutSwap", **kwargs):
    bh, d, sq = q.shape
    sp = k_prior.shape[1]
    for name, t, shape in (("k_active", k_active, (bh, sq, d)), ("v_active", v_active, (bh, sq, d)),
                           ("k_prior", k_prior, (bh, sp, d)), ("v_prior", v_prior, (bh, sp, d))):
        check(tuple(t.shape) == shape, "prefix_caching_attention_fwd_isa_kernel: %s must be %s, got %s"
              % (name, list(shape), tuple(t.shape)))
    check(len(attention_mask.shape) == 2 and attention_mask.shape[1] == sp and bh % attention_mask.shape[0] == 0,
          "prefix_caching_attention_fwd_isa_kernel: attention_mask must be [batch, %d] with batch dividing %d, "
          "got %s" % (sp, bh, tuple(attention_mask.shape)))
    check(sp % Q_TILE == 0 and sq % Q_TILE == 0 and sp > 0,
          "prefix_caching_attention_fwd_isa_kernel: prefix and active lengths %d / %d must be multiples of 128"
          % (sp, sq))
    if tuple(out.shape) == (bh, d, sq):
        o_transposed = True
    else:
        check(tuple(out.shape) == (bh, sq, d), "prefix_caching_attention_fwd_isa_kernel: out must be [%d, %d, %d], "
              "got %s" % (bh, d, sq, tuple(out.shape)))
        o_transposed = False
    causal = "causal" in str(kernel_name).lower()
    B = attention_mask.shape[0]
    H = bh // B
    S = sp + sq
    k_cat = nl.ndarray((bh, S, d), dtype=k_active.dtype, buffer=nl.hbm)
    v_cat = nl.ndarray((bh, S, d), dtype=v_active.dtype, buffer=nl.hbm)
    bias = nl.ndarray((B, sq, S), dtype=nl.float32, buffer=nl.hbm)
    for r in nl.affine_range(bh):
        _concat(k_cat, k_prior, k_active, r, sp, sq, d)
        _concat(v_cat, v_prior, v_active, r, sp, sq, d)
    for b in nl.affine_range(B):
        _mask_bias(bias, attention_mask, b, sp, sq, causal)
    n = nl.num_programs() if nl.program_ndim() else 1
    per = H // n if n > 1 and H % n == 0 else H
    h0 = nl.program_id(0) * per if per != H else 0
    for b in nl.affine_range(B):
        for hh in nl.affine_range(per):
            r = b * H + h0 + hh
            flash_attention_core(q, k_cat, v_cat, out, None, bias, (r,), (r,), (r,), float(scale), False, q.dtype,
                                 o_transposed=o_transposed, k_seq_major=True, bi=(b,))
