"""The flash-attention forward core shared by ``neuronxcc.nki.kernels.attention.flash_fwd`` and
``_private_kernels.attention.attention_isa_kernel``: one head, online softmax over key blocks
(see ``flash_attention_core``)."""
import os
import sys

import neuronxcc.nki.isa as nisa
from neuronxcc.nki import errors
import neuronxcc.nki.language as nl

NEG_INF = -1.0e30          # the masked score: exp(NEG_INF - m) is 0 for any finite row max m
Q_TILE = 128               # queries per tile (the partition dimension)
K_BLOCK = 512              # keys per score block (one 2 KiB PSUM bank of fp32)


def check(cond, msg):
    """A kernel argument the kernels cannot take: err_invalid_argument at the user's line (the innermost
    frame outside the neuronxcc package: where the kernel was called or simulated)."""
    if not cond:
        pkg = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        f = sys._getframe(1)
        while f is not None and os.path.abspath(f.f_code.co_filename).startswith(pkg + os.sep):
            f = f.f_back
        where = "%s:%d" % (f.f_code.co_filename, f.f_lineno) if f is not None else None
        raise errors.err_invalid_argument(msg, location=where)


def causal_blocks(i, n_blocks, window=None):
    """Key blocks of 128 for query tile i (a Python int) under the causal mask (and a sliding window):
    ((lo, hi) the blocks entirely visible, [(j, masks)] the partially visible ones with their
    static masks: "causal" (key <= query) and/or "window" (key > query - window)); blocks no query
    of the tile sees are left out."""
    t = Q_TILE
    full, partial = [], []
    for j in range(min(i + 1, n_blocks)):
        masks = []
        if j == i:
            masks.append("causal")
        if window:
            if j * t + (t - 1) <= i * t - window:          # every key older than the window for every query
                continue
            if j * t <= i * t + (t - 1) - window:           # some key/query pair outside the window
                masks.append("window")
        (partial.append((j, masks)) if masks else full.append(j))
    lo, hi = (full[0], full[-1] + 1) if full else (0, 0)
    assert full == list(range(lo, hi))
    return (lo, hi), partial


def _select(s, masks, q0, k0, ip, jf, window):
    """s [128 q, n k] (fp32) with the static masks applied (q0 / k0: first query / key, Python ints)."""
    if not masks:
        return s
    s = nl.copy(s, dtype=nl.float32)                   # affine_select runs on the GpSimd: SBUF operands
    for mk in masks:
        if mk == "causal":
            pred = (q0 + ip >= k0 + jf)
        else:
            pred = (k0 + jf + window > q0 + ip)
        s = nisa.affine_select(pred=pred, on_true_tile=s[ip, jf], on_false_value=NEG_INF, dtype=nl.float32)
    return s


def dropout_seed_column(seed):
    """The kernel's seed tensor [1] (int32) as a [128, 1] fp32 column of frac(seed * 0.6180339887)."""
    s1 = nl.load(seed.reshape((1, 1)), dtype=nl.float32)                               # [1, 1]
    ones = nl.full((1, Q_TILE), 1.0, nl.float32)
    col = nl.copy(nisa.nc_matmul(ones, s1), dtype=nl.float32)                         # [128, 1]: broadcast
    return nl.mod(nl.multiply(col, 0.6180339887), 1.0, dtype=nl.float32)


def _frac(x):
    return nl.mod(x, 1.0, dtype=nl.float32)


def dropout_scale(dropout, head, q0, k0, kb):
    """The dropout factor of the scores [128 queries q0 + p, kb keys k0 + f] of head ``head`` (an int or a loop /
    program-id expression, unique per (batch, head)): 1 / (1 - prob) where kept, 0 where dropped. A function of
    the seed and of the positions only, so the forward and the backward pass (which tile the keys differently)
    compute the same mask: with x = frac(query * 0.1031), y = frac(key * 0.11369), z = frac(head * 0.13787 +
    seed column), d = x (y + 33.33) + y (z + 33.33) + z (x + 33.33), keep where frac((x + d + y + d) (z + d)) >=
    prob (a multiply-add hash over the positions; every step an fp32 VectorE operation, the same per element
    whatever the tiling)."""
    prob, seed_col = dropout
    ip, jf = nl.arange(Q_TILE)[:, None], nl.arange(kb)[None, :]
    x = _frac(nl.multiply(nisa.iota(q0 + ip, dtype=nl.float32), 0.1031, dtype=nl.float32))          # [128, 1]
    y = _frac(nl.multiply(nisa.iota(k0 + jf + ip * 0, dtype=nl.float32), 0.11369, dtype=nl.float32))  # [128, kb]
    z = _frac(nl.add(nl.multiply(nisa.iota(head + ip * 0, dtype=nl.float32), 0.13787, dtype=nl.float32),
                     seed_col, dtype=nl.float32))                                                     # [128, 1]
    d = nl.add(nl.multiply(nl.add(y, 33.33, dtype=nl.float32), x, dtype=nl.float32),
               nl.multiply(y, nl.add(z, 33.33, dtype=nl.float32), dtype=nl.float32), dtype=nl.float32)
    d = nl.add(d, nl.multiply(z, nl.add(x, 33.33, dtype=nl.float32), dtype=nl.float32), dtype=nl.float32)
    xy = nl.add(nl.add(y, x, dtype=nl.float32), nl.multiply(d, 2.0, dtype=nl.float32), dtype=nl.float32)
    u = _frac(nl.multiply(xy, nl.add(d, z, dtype=nl.float32), dtype=nl.float32))
    return nl.multiply(nl.greater_equal(u, float(prob), dtype=nl.float32), 1.0 / (1.0 - float(prob)),
                       dtype=nl.float32)


def flash_attention_core(q, k, v, o, lse, bias, qi, ki, oi, scale, causal, mm_dtype, v_transposed=False,
                         o_transposed=False, sliding_window=None, k_seq_major=False, dropout=None, bi=None):
    """One head of the forward pass.

    q: HBM [..., d, seq_q], k: [..., d, seq_k] (k_seq_major: [..., seq_k, d], transposed on the TensorE per
    128 keys), v: [..., seq_k, d] (v_transposed: [..., d, seq_k]);
    o: [..., seq_q, d] (o_transposed: [..., d, seq_q]); lse: [..., 128, seq_q // 128] or None;
    bias: [..., seq_q, seq_k] or None. qi / ki / oi: the leading index tuples of the head in q,
    k/v and o/lse/bias (bi: bias's, when it differs from oi: a bias shared by the heads of a batch).
    dropout: None or (prob, seed column, head key), see dropout_scale. Without a mask, the query tiles are an
    affine loop and the key blocks (512 keys when they divide seq_k) a sequential loop; with the causal mask (or a sliding window, which
    needs it) the query tiles are unrolled so every key block's mask is static: blocks wholly
    visible run in a sequential loop, the diagonal (and window-edge) blocks are masked by
    ``affine_select``, blocks no query sees are skipped."""
    d, seq_q = q.shape[-2], q.shape[-1]
    seq_k = k.shape[-2] if k_seq_major else k.shape[-1]
    check(d <= 128, "head dim %d exceeds 128" % d)
    check(seq_q % Q_TILE == 0 and seq_k % Q_TILE == 0,
           "sequence lengths %d / %d must be multiples of 128" % (seq_q, seq_k))
    check(causal or not sliding_window, "a sliding window needs the causal mask")
    ip_d = nl.arange(d)[:, None]
    ip_q = nl.arange(Q_TILE)[:, None]
    jf_q = nl.arange(Q_TILE)[None, :]
    jf_d = nl.arange(d)[None, :]
    n_qt = seq_q // Q_TILE
    bi = oi if bi is None else bi
    for i in (nl.static_range(n_qt) if causal else nl.affine_range(n_qt)):
        q_t = nl.load(q[qi + (ip_d, i * Q_TILE + jf_q)])
        q_t = nl.multiply(q_t, scale, dtype=mm_dtype)                         # [d, 128 q]
        m_run = nl.full((Q_TILE, 1), NEG_INF, nl.float32)
        l_run = nl.zeros((Q_TILE, 1), nl.float32)
        acc = nl.zeros((Q_TILE, d), nl.float32)

        def block(k0, kb, masks=(), kstatic=None):
            """Fold keys k0 .. k0 + kb into the running softmax (k0 an int or a loop expression)."""
            jf_k = nl.arange(kb)[None, :]
            if k_seq_major:
                k_t = nl.ndarray((d, kb), dtype=mm_dtype)
                for c in nl.affine_range(kb // Q_TILE):
                    k_sd = nl.load(k[ki + (k0 + c * Q_TILE + ip_q, jf_d)], dtype=mm_dtype)      # [128 k, d]
                    k_t[ip_d, c * Q_TILE + jf_q] = nl.copy(nisa.nc_transpose(k_sd), dtype=mm_dtype)
            else:
                k_t = nl.load(k[ki + (ip_d, k0 + jf_k)], dtype=mm_dtype)        # [d, kb]
            s = nisa.nc_matmul(q_t, k_t)                                      # [128 q, kb] fp32 PSUM
            if bias is not None:
                s = nl.add(s, nl.load(bias[bi + (i * Q_TILE + ip_q, k0 + jf_k)], dtype=nl.float32))
            s = _select(s, masks, i * Q_TILE if causal else 0, kstatic, ip_q, jf_k, sliding_window)
            m_new = nl.maximum(m_run, nl.max(s, axis=[1], keepdims=True))
            neg_m = nl.negative(m_new)
            row_sum = nl.ndarray((Q_TILE, 1), dtype=nl.float32)
            p = nisa.activation_reduce(op=nl.exp, data=s, reduce_op=nl.add, reduce_res=row_sum, bias=neg_m,
                                       dtype=mm_dtype)                         # [128 q, kb]
            alpha = nisa.activation(op=nl.exp, data=m_run, bias=neg_m, dtype=nl.float32)   # exp(m_old - m_new)
            l_run[...] = nl.add(nl.multiply(l_run, alpha), row_sum)
            if dropout is not None:
                p = nl.multiply(p, dropout_scale(dropout[:2], dropout[2], i * Q_TILE, k0, kb), dtype=mm_dtype)
            pv = nl.zeros((Q_TILE, d), nl.float32, buffer=nl.psum)
            for c in nl.affine_range(kb // Q_TILE):
                p_t = nl.copy(nisa.nc_transpose(p[ip_q, c * Q_TILE + jf_q]), dtype=mm_dtype)   # [128 k, 128 q]
                if v_transposed:
                    v_dk = nl.load(v[ki + (ip_d, k0 + c * Q_TILE + jf_q)], dtype=mm_dtype)       # [d, 128 k]
                    v_t = nl.copy(nisa.nc_transpose(v_dk), dtype=mm_dtype)
                else:
                    v_t = nl.load(v[ki + (k0 + c * Q_TILE + ip_q, jf_d)], dtype=mm_dtype)       # [128 k, d]
                pv += nisa.nc_matmul(p_t, v_t)
            acc[...] = nl.add(nl.multiply(acc, alpha), pv)
            m_run[...] = m_new

        if not causal:
            kb = K_BLOCK if seq_k % K_BLOCK == 0 else Q_TILE
            for j in nl.sequential_range(seq_k // kb):
                block(j * kb, kb)
        else:
            (lo, hi), partial = causal_blocks(i, seq_k // Q_TILE, sliding_window)
            if hi > lo:
                for r in nl.sequential_range(hi - lo):
                    block((lo + r) * Q_TILE, Q_TILE)
            for j, masks in partial:
                block(j * Q_TILE, Q_TILE, masks, kstatic=j * Q_TILE)
        out_t = nl.multiply(acc, nl.reciprocal(l_run), dtype=o.dtype)            # [128 q, d]
        if o_transposed:
            nl.store(o[oi + (ip_d, i * Q_TILE + jf_q)], value=nl.copy(nisa.nc_transpose(out_t), dtype=o.dtype))
        else:
            nl.store(o[oi + (i * Q_TILE + ip_q, jf_d)], value=out_t)
        if lse is not None:
            lse_t = nl.add(m_run, nl.log(l_run), dtype=lse.dtype)
            nl.store(lse[oi + (ip_q, i + nl.arange(1)[None, :])], value=lse_t)
