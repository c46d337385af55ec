"""numpy (float64) references of the attention kernels, in the kernels' own tensor layouts."""
import numpy as np


def _softmax_parts(s):
    m = s.max(axis=-1, keepdims=True)
    e = np.exp(s - m)
    l_ = e.sum(axis=-1, keepdims=True)
    return e / l_, (m + np.log(l_))[..., 0]


def scores(q, k, scale, causal, bias=None, window=None):
    """q [.., d, sq], k [.., d, sk] -> scale * q^T k (+ bias), masked: [.., sq, sk]."""
    s = scale * np.einsum("...dq,...dk->...qk", q.astype(np.float64), k.astype(np.float64))
    if bias is not None:
        s = s + bias
    sq, sk = s.shape[-2:]
    qi = np.arange(sq)[:, None]
    ki = np.arange(sk)[None, :]
    keep = np.ones((sq, sk), bool)
    if causal:
        keep &= qi >= ki
    if window:
        keep &= ki + window > qi
    return np.where(keep, s, -np.inf)


def flash_fwd(q, k, v, scale, causal, bias=None, v_transposed=False):
    """o [bs, nh, sq, d] and lse [bs, nh, 128, sq // 128] as flash_fwd lays them out (GQA by repeat)."""
    bs, nh, d, sq = q.shape
    g = nh // k.shape[1]
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    if v_transposed:
        v = np.swapaxes(v, -1, -2)
    p, lse = _softmax_parts(scores(q, k, scale, causal, bias))
    o = p @ v.astype(np.float64)
    lse_l = lse.reshape(bs, nh, sq // 128, 128).transpose(0, 1, 3, 2)
    return o, lse_l


def flash_bwd(q, k, v, dy, scale, causal, keep=None):
    """dq, dk, dv in [bs, nh, d, seq] for q, k, v, dy [bs, nh, d, seq] (o = softmax(s) v^T layout); keep: the
    forward's dropout factors [.., sq, sk] (0 dropped, 1 / (1 - rate) kept) or None."""
    q, k, v, dy = (x.astype(np.float64) for x in (q, k, v, dy))
    p, _ = _softmax_parts(scores(q, k, scale, causal))          # [.., sq, sk]
    pd = p if keep is None else p * keep
    dyq = np.swapaxes(dy, -1, -2)                                 # [.., sq, d]
    vk = np.swapaxes(v, -1, -2)                                   # [.., sk, d]
    dv = np.swapaxes(pd, -1, -2) @ dyq                            # [.., sk, d]
    dp = dyq @ np.swapaxes(vk, -1, -2)                            # [.., sq, sk]
    if keep is not None:
        dp = dp * keep
    o = pd @ vk
    dsum = (dyq * o).sum(axis=-1, keepdims=True)
    ds = p * (dp - dsum)
    dq = scale * ds @ np.swapaxes(k, -1, -2)                      # [.., sq, d]
    dk = scale * np.swapaxes(ds, -1, -2) @ np.swapaxes(q, -1, -2)  # [.., sk, d]
    return tuple(np.swapaxes(x, -1, -2) for x in (dq, dk, dv))


def fwd_outputs_for_bwd(q, k, v, scale, causal, keep=None):
    """o and lse in flash_attn_bwd's layouts (o [bs, nh, d, seq]) for its inputs (keep: as flash_bwd's)."""
    if keep is None:
        o, lse = flash_fwd(q, k, np.swapaxes(v, -1, -2), scale, causal)
        return np.swapaxes(o, -1, -2), lse
    p, _ = _softmax_parts(scores(q, k, scale, causal))
    _, lse = flash_fwd(q, k, np.swapaxes(v, -1, -2), scale, causal)
    return np.swapaxes((p * keep) @ np.swapaxes(v.astype(np.float64), -1, -2), -1, -2), lse
