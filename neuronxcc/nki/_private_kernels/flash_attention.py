"""The flash-attention kernels ``neuronxcc.nki.kernels.attention`` exports: ``flash_fwd``, ``flash_attn_bwd``,
``FlashConfig`` (signatures and tensor layouts of the original's public kernels; our own implementation). They
live here so that ``_private_kernels`` (ring attention) can build on them without importing ``nki.kernels``. The
forward core (``flash_core``) is shared with ``_private_kernels.attention.attention_isa_kernel``.

The forward pass is the online-softmax flash algorithm on one (batch, head) per SPMD instance:
for every 128-query tile, the key/value sequence is walked in blocks of up to 512 keys
(``sequential_range``: the running row max ``m``, row sum ``l`` and output accumulator carry
across blocks); scores ``q^T k`` come from the TensorE into PSUM, the causal mask is an
``affine_select`` on the key/query positions, ``exp(s - m)`` and its row sum one ScalarE
``activation_reduce``; the probabilities are transposed 128 x 128 on the TensorE and multiplied with
``v`` into a PSUM accumulator; ``o = acc / l`` is stored, and with ``config.training``
``lse = m + log(l)`` as well, laid out ``[bs, heads, 128, seq_q // 128]`` (query ``t*128+p`` at
``[.., p, t]``).

The backward pass recomputes the probabilities from ``lse`` per (query tile, key tile), in the
layout of the original (every tensor ``[bs, heads, d, seq]``): ``D = rowsum(dO * O)``,
``dV += P^T dO``, ``dP = dO^T V``, ``dS = P * (dP - D)``, ``dQ += scale * K dS^T``,
``dK += scale * Q dS``.

Precision: with ``mixed_precision`` the TensorE operands are bfloat16 and everything else fp32;
without it they keep the input dtype.

Dropout (``dropout_p > 0``): each softmax probability is zeroed with probability dropout_p and the kept ones
scaled by 1 / (1 - dropout_p) before the ``P @ V`` product (the row sums and ``lse`` are those of the undropped
softmax, as in the original). The original draws the mask from the device's random number generator seeded by
``seed``; that stream is not public, so ours is an approximation with the same statistics: a hash of the seed,
the (batch, head) and the query and key positions (``flash_core.dropout_scale``). The same seed gives the same
mask in ``flash_fwd`` and ``flash_attn_bwd`` (which regenerates it: ``dV = (P * M)^T dO``, ``dP = (dO^T V) * M``
with M the scaled keep mask), another seed another mask.

Legacy call form: kernels written for the SDK before 2.21 call ``flash_fwd[bs, heads](q, k, v, seed, o,
lse=None, softmax_scale=..., ...)`` with the outputs as arguments; ``flash_fwd`` recognises it (``o`` /
``lse`` given by keyword, a tensor where softmax_scale goes, or a fifth argument shaped like o,
[bs, heads, seq_q, d], and not like a logit bias [bs, heads, seq_q, seq_k]), stores into o (and lse when
given) and returns None.

Grids: ``[bs, heads]`` runs one (batch, head) per instance; ``[bs, n]`` with n dividing the heads (the
sharded call form ``[bs, nl.nc(2)]``) gives each instance heads // n consecutive heads; ``[bs]`` or no grid
loops over the rest.
"""
import math
from dataclasses import dataclass

import numpy as np

from neuronxcc import nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import (NEG_INF, Q_TILE, dropout_scale, dropout_seed_column,
                                                       flash_attention_core)
from neuronxcc.nki._private_kernels.flash_core import check as _check

__all__ = ["FlashConfig", "flash_fwd", "flash_attn_bwd"]


@dataclass(frozen=True)
class FlashConfig:
    """Performance knobs of the original's flash kernels (defaults as documented there).

    seq_tile_size: key/value tile of the softmax reduction; attn_core_tile_size: query tile of
    the attention core; training: also return the log-sum-exp; should_transpose_v: v is given
    as [bs, heads, d, seq_v] instead of [bs, heads, seq_v, d]; lse_dtype: dtype name of lse
    ("" = float32). Tile sizes only steer scheduling; the values are the same for any."""
    seq_tile_size: int = 2048
    attn_core_tile_size: int = 256
    training: bool = True
    should_transpose_v: bool = False
    lse_dtype: str = ""


def _heads(n_heads, nk_heads):
    _check(n_heads % nk_heads == 0, "n_heads %d must be a multiple of the k/v heads %d" % (n_heads, nk_heads))
    return n_heads // nk_heads


def _instances(bs, n_heads, body):
    """Run body(b, h) for this SPMD instance's (batch, head) when launched as kernel[bs, n_heads] (its share of
    the heads under kernel[bs, n], n dividing n_heads), else for every (batch, head) in loops."""
    if nl.program_ndim() >= 2:
        n1 = nl.num_programs(1)
        if n1 == n_heads:
            body(nl.program_id(0), nl.program_id(1))
        else:
            _check(n_heads % n1 == 0, "a grid of %d on the head axis must divide the %d heads" % (n1, n_heads))
            per = n_heads // n1
            for r in nl.affine_range(per):
                body(nl.program_id(0), nl.program_id(1) * per + r)
    elif nl.program_ndim() == 1:
        b = nl.program_id(0)
        for h in nl.affine_range(n_heads):
            body(b, h)
    else:
        for b in nl.affine_range(bs):
            for h in nl.affine_range(n_heads):
                body(b, h)


def _is_tensor(x):
    return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, (int, float))


_FWD_ARGS = (("logit_bias", None), ("softmax_scale", None), ("use_causal_mask", True), ("mixed_precision", True),
             ("dropout_p", 0.0), ("config", None), ("sliding_window", -1))
_LEGACY_ARGS = (("o", None), ("lse", None)) + _FWD_ARGS[1:]


def _bind_fwd(q, k, args, kwargs):
    """(legacy?, {name: value}) for flash_fwd's arguments after seed, in the current or the legacy call form."""
    bs, n_heads, d, seq_q = q.shape
    seq_k = k.shape[-1]
    legacy = "o" in kwargs or "lse" in kwargs or (len(args) >= 2 and _is_tensor(args[1])) or \
        (len(args) >= 1 and _is_tensor(args[0]) and tuple(args[0].shape) == (bs, n_heads, seq_q, d)
         and tuple(args[0].shape) != (bs, n_heads, seq_q, seq_k))
    names = _LEGACY_ARGS if legacy else _FWD_ARGS
    _check(len(args) <= len(names), "flash_fwd takes at most %d arguments after seed, got %d" % (len(names), len(args)))
    vals = dict(names)
    for (name, _), a in zip(names, args):
        vals[name] = a
    for name, a in kwargs.items():
        _check(name in vals, "flash_fwd got an unexpected keyword argument %r" % name)
        vals[name] = a
    return legacy, vals


@nki.jit
def flash_fwd(q, k, v, seed, *args, **kwargs):
    """Flash attention forward, launched as ``flash_fwd[bs, n_heads](q, k, v, seed, logit_bias=None,
    softmax_scale=None, use_causal_mask=True, mixed_precision=True, dropout_p=0.0, config=None,
    sliding_window=-1)`` (or the legacy
    ``(q, k, v, seed, o, lse=None, softmax_scale=None, ...)``, see the module doc).

    q: [bs, n_heads, d, seq_q]; k: [bs, nk_heads, d, seq_k]; v: [bs, nv_heads, seq_v, d]
    ([bs, nv_heads, d, seq_v] with config.should_transpose_v); seed: [1] int32 (the dropout seed);
    logit_bias: [bs, n_heads, seq_q, seq_k] or None. Returns o [bs, n_heads, seq_q, d] (q's dtype),
    and with config.training also lse [bs, n_heads, 128, seq_q // 128]. softmax_scale defaults
    to d ** -0.5. k/v heads are shared by n_heads // nk_heads query heads (GQA). sliding_window w > 0 (with the
    causal mask): a query at position i sees keys i - w + 1 .. i."""
    legacy, a = _bind_fwd(q, k, args, kwargs)
    logit_bias, softmax_scale, dropout_p = a["logit_bias"] if not legacy else None, a["softmax_scale"], a["dropout_p"]
    use_causal_mask, mixed_precision = a["use_causal_mask"], a["mixed_precision"]
    window = int(a["sliding_window"]) if a["sliding_window"] is not None and int(a["sliding_window"]) > 0 else None
    _check(window is None or use_causal_mask, "a sliding_window needs use_causal_mask=True")
    config = a["config"] or FlashConfig()
    _check(0.0 <= float(dropout_p) < 1.0, "dropout_p must be in [0, 1), got %r" % (dropout_p,))
    bs, n_heads, d, seq_q = q.shape
    nk_heads = k.shape[1]
    group = _heads(n_heads, nk_heads)
    _check(k.shape[-1] == (v.shape[-1] if config.should_transpose_v else v.shape[-2]), "seq_k must equal seq_v")
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(d)
    mm_dtype = nl.bfloat16 if mixed_precision else q.dtype
    if legacy:
        o, lse = a["o"], a["lse"]
        _check(tuple(o.shape) == (bs, n_heads, seq_q, d), "o must be [%d, %d, %d, %d], got %s"
               % (bs, n_heads, seq_q, d, tuple(o.shape)))
        if not config.training:
            lse = None
    else:
        o = nl.ndarray((bs, n_heads, seq_q, d), dtype=q.dtype, buffer=nl.shared_hbm)
        lse = None
        if config.training:
            lse_dtype = np.dtype(config.lse_dtype) if config.lse_dtype else nl.float32
            lse = nl.ndarray((bs, n_heads, Q_TILE, seq_q // Q_TILE), dtype=lse_dtype, buffer=nl.shared_hbm)
    seed_col = dropout_seed_column(seed) if dropout_p else None

    def head(b, h):
        kh = h if group == 1 else h // group
        dropout = (float(dropout_p), seed_col, b * n_heads + h) if dropout_p else None
        flash_attention_core(q, k, v, o, lse, logit_bias, (b, h), (b, kh), (b, h), scale, use_causal_mask,
                             mm_dtype, v_transposed=config.should_transpose_v, dropout=dropout,
                             sliding_window=window)
    _instances(bs, n_heads, head)
    if legacy:
        return None
    if config.training:
        return o, lse
    return o


@nki.jit
def flash_attn_bwd(q_ref, k_ref, v_ref, o_ref, dy_ref, lse_ref, seed_ref, logit_bias_ref=None,
                   use_causal_mask=False, mixed_precision=False, dropout_p=0.0, softmax_scale=None):
    """Flash attention backward, launched as ``flash_attn_bwd[bs, nheads](...)``.

    q_ref, k_ref, v_ref, o_ref, dy_ref: [bs, nheads, d, seq]; lse_ref: [bs, nheads, 128, seq // 128]
    (flash_fwd's lse); seed_ref: [1] (flash_fwd's dropout seed); logit_bias_ref: [bs, nheads, seq, seq] or None.
    Returns (dq, dk, dv), each [bs, nheads, d, seq] in q's dtype. With dropout_p > 0 the forward's mask is
    regenerated from seed_ref (see the module doc)."""
    _check(0.0 <= float(dropout_p) < 1.0, "dropout_p must be in [0, 1), got %r" % (dropout_p,))
    bs, nh, d, seq = q_ref.shape
    _check(d <= 128 and seq % Q_TILE == 0, "needs d <= 128 and seq a multiple of 128, got d=%d seq=%d" % (d, seq))
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(d)
    mm_dtype = nl.bfloat16 if mixed_precision else q_ref.dtype
    dq = nl.ndarray((bs, nh, d, seq), dtype=q_ref.dtype, buffer=nl.shared_hbm)
    dk = nl.ndarray((bs, nh, d, seq), dtype=q_ref.dtype, buffer=nl.shared_hbm)
    dv = nl.ndarray((bs, nh, d, seq), dtype=q_ref.dtype, buffer=nl.shared_hbm)

    seed_col = dropout_seed_column(seed_ref) if dropout_p else None

    def head(b, h):
        dropout = (float(dropout_p), seed_col, b * nh + h) if dropout_p else None
        _attention_bwd_head(q_ref, k_ref, v_ref, o_ref, dy_ref, lse_ref, logit_bias_ref, dq, dk, dv, (b, h),
                            scale, use_causal_mask, mm_dtype, dropout)
    _instances(bs, nh, head)
    return dq, dk, dv


def _attention_bwd_head(q, k, v, o, dy, lse, bias, dq, dk, dv, hi, scale, causal, mm_dtype, dropout=None):
    """One head of the backward pass: key tiles outer (dK, dV accumulate in PSUM over the query tiles),
    dQ accumulated in an SBUF [d, seq] fp32 buffer. With the causal mask the key tiles are unrolled:
    the diagonal query tile is masked statically, later ones are wholly visible, earlier ones skipped."""
    d, seq = q.shape[-2], q.shape[-1]
    t = Q_TILE
    nt = seq // t
    ip_d = nl.arange(d)[:, None]
    ip_t = nl.arange(t)[:, None]
    jf_t = nl.arange(t)[None, :]
    # D[q] = sum_d dO[d, q] * O[d, q], one [128, 1] column per query tile
    ones = nl.full((d, 1), 1.0, nl.float32)
    d_all = nl.ndarray((t, nt), dtype=nl.float32)
    for i in nl.affine_range(nt):
        prod = nl.multiply(nl.load(dy[hi + (ip_d, i * t + jf_t)]), nl.load(o[hi + (ip_d, i * t + jf_t)]),
                           dtype=nl.float32)
        d_all[ip_t, i + nl.arange(1)[None, :]] = nl.copy(nisa.nc_matmul(prod, ones))
    dq_acc = nl.zeros((d, seq), nl.float32)
    for j in (nl.static_range(nt) if causal else nl.sequential_range(nt)):
        k_t = nl.load(k[hi + (ip_d, j * t + jf_t)], dtype=mm_dtype)                 # [d, 128 k]
        v_t = nl.load(v[hi + (ip_d, j * t + jf_t)], dtype=mm_dtype)
        k_tr = nl.copy(nisa.nc_transpose(k_t), dtype=mm_dtype)                      # [128 k, d]
        dk_acc = nl.zeros((d, t), nl.float32, buffer=nl.psum)
        dv_acc = nl.zeros((d, t), nl.float32, buffer=nl.psum)

        def block(i, masked):
            nonlocal dk_acc, dv_acc
            q_t = nl.load(q[hi + (ip_d, i * t + jf_t)], dtype=mm_dtype)             # [d, 128 q]
            dy_t = nl.load(dy[hi + (ip_d, i * t + jf_t)], dtype=mm_dtype)
            s = nl.multiply(nisa.nc_matmul(q_t, k_t), scale, dtype=nl.float32)       # [128 q, 128 k]
            if bias is not None:
                s = nl.add(s, nl.load(bias[hi + (i * t + ip_t, j * t + jf_t)], dtype=nl.float32))
            if masked:
                s = nisa.affine_select(pred=(ip_t >= jf_t), on_true_tile=s[ip_t, jf_t], on_false_value=NEG_INF,
                                       dtype=nl.float32)
            neg_lse = nl.negative(nl.load(lse[hi + (ip_t, i + nl.arange(1)[None, :])], dtype=nl.float32))
            p = nisa.activation(op=nl.exp, data=s, bias=neg_lse, dtype=nl.float32)  # [128 q, 128 k]
            dy_tr = nl.copy(nisa.nc_transpose(dy_t), dtype=mm_dtype)                 # [128 q, d]
            keep = dropout_scale(dropout[:2], dropout[2], i * t, j * t, t) if dropout is not None else None
            pd = nl.multiply(p, keep, dtype=nl.float32) if keep is not None else p   # the dropped P of the forward
            dv_acc += nisa.nc_matmul(dy_tr, nl.copy(pd, dtype=mm_dtype))            # [d, 128 k]
            dp = nisa.nc_matmul(dy_t, v_t)                                           # [128 q, 128 k]
            if keep is not None:
                dp = nl.multiply(dp, keep, dtype=nl.float32)
            ds = nl.multiply(nl.subtract(dp, d_all[ip_t, i + nl.arange(1)[None, :]]), p, dtype=nl.float32)
            q_tr = nl.copy(nisa.nc_transpose(q_t), dtype=mm_dtype)                  # [128 q, d]
            dk_acc += nisa.nc_matmul(q_tr, nl.copy(ds, dtype=mm_dtype))             # [d, 128 k]
            ds_tr = nl.copy(nisa.nc_transpose(nl.copy(ds, dtype=mm_dtype)), dtype=mm_dtype)   # [128 k, 128 q]
            dq_part = nisa.nc_matmul(k_tr, ds_tr)                                   # [d, 128 q]
            dq_acc[ip_d, i * t + jf_t] = nl.add(dq_acc[ip_d, i * t + jf_t], dq_part)

        if causal:
            block(j, True)
            if nt - j - 1 > 0:
                for r in nl.affine_range(nt - j - 1):
                    block(j + 1 + r, False)
        else:
            for i in nl.affine_range(nt):
                block(i, False)
        nl.store(dk[hi + (ip_d, j * t + jf_t)], value=nl.multiply(dk_acc, scale, dtype=dk.dtype))
        nl.store(dv[hi + (ip_d, j * t + jf_t)], value=nl.copy(dv_acc, dtype=dv.dtype))
    for i in nl.affine_range(nt):
        nl.store(dq[hi + (ip_d, i * t + jf_t)], value=nl.multiply(dq_acc[ip_d, i * t + jf_t], scale, dtype=dq.dtype))
