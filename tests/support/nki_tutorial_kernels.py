"""The NKI tutorials' kernels (tensor addition, transpose, average pooling, RMSNorm, LayerNorm, softmax,
matmul variants, single-head attention), written here against the public legacy API
(``neuronxcc.nki.language`` / ``.isa``) in the styles the tutorials teach: arange/mgrid index tiles,
``nl.ds`` slices, masks for ragged tails, affine loops with PSUM accumulation, returned shared_hbm
outputs and out-argument stores. Each has a numpy reference in ``REFERENCES`` (float64 math)."""
import math

import numpy as np

from neuronxcc import nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


# -- tensor addition ------------------------------------------------------------------------------
@nki.jit
def tensor_add(a_input, b_input):
    """c = a + b over [M, N], 128 x 512 tiles, masked ragged tails on both axes."""
    rows, cols = a_input.shape
    c_output = nl.ndarray((rows, cols), dtype=a_input.dtype, buffer=nl.shared_hbm)
    tp, tf = nl.tile_size.pmax, 512
    ip = nl.arange(tp)[:, None]
    jf = nl.arange(tf)[None, :]
    for m in nl.affine_range(math.ceil(rows / tp)):
        for n in nl.affine_range(math.ceil(cols / tf)):
            r = m * tp + ip
            c = n * tf + jf
            inside = (r < rows) & (c < cols)
            a = nl.load(a_input[r, c], mask=inside)
            b = nl.load(b_input[r, c], mask=inside)
            nl.store(c_output[r, c], value=nl.add(a, b, mask=inside), mask=inside)
    return c_output


def tensor_add_out(a_input, b_input, c_output):
    """Out-argument style (as torch callers use it): one SPMD instance per 128-row block."""
    i = nl.program_id(0)
    cols = a_input.shape[1]
    rows = nl.ds(i * 128, 128)
    a = nl.load(a_input[rows, 0:cols])
    b = nl.load(b_input[rows, 0:cols])
    nl.store(c_output[rows, 0:cols], value=a + b)


# -- transpose --------------------------------------------------------------------------------------
@nki.jit
def transpose_2d(in_tensor):
    """out = in.T for [P<=128, F<=128] through the TensorE (nisa.nc_transpose into PSUM)."""
    p, f = in_tensor.shape
    out = nl.ndarray((f, p), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    t = nl.load(in_tensor)
    tt = nisa.nc_transpose(t)
    nl.store(out, value=nl.copy(tt, dtype=in_tensor.dtype))
    return out


@nki.jit
def transpose_blocks(in_tensor):
    """[A, B] -> [B, A] for A, B multiples of 128, tile by tile with nl.transpose."""
    a_dim, b_dim = in_tensor.shape
    out = nl.ndarray((b_dim, a_dim), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a_dim // 128):
        for j in nl.affine_range(b_dim // 128):
            t = nl.load(in_tensor[nl.ds(i * 128, 128), nl.ds(j * 128, 128)])
            nl.store(out[nl.ds(j * 128, 128), nl.ds(i * 128, 128)], value=nl.transpose(t))
    return out


@nki.jit
def load_transposed(in_tensor):
    """out = in.T with the DMA doing the transpose (nl.load_transpose2d)."""
    p, f = in_tensor.shape
    out = nl.ndarray((f, p), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.load_transpose2d(in_tensor))
    return out


# -- average pooling ---------------------------------------------------------------------------------
@nki.jit
def avg_pool2d(in_tensor, pool_size):
    """[C<=128, H, W] -> [C, H/k, W/k], the mean of each k x k window, by 5-D mgrid indexing."""
    c, h, w = in_tensor.shape
    ho, wo = h // pool_size, w // pool_size
    out = nl.ndarray((c, ho, wo), dtype=in_tensor.dtype, buffer=nl.shared_hbm)
    g = nl.mgrid[0:c, 0:ho, 0:pool_size, 0:wo, 0:pool_size]
    x = nl.load(in_tensor)
    windows = x[g[0], g[1] * pool_size + g[2], g[3] * pool_size + g[4]]
    s = nl.sum(windows, axis=[2, 4])
    nl.store(out, value=nl.multiply(s, 1.0 / (pool_size * pool_size), dtype=in_tensor.dtype))
    return out


# -- RMSNorm / LayerNorm --------------------------------------------------------------------------------
@nki.jit
def rmsnorm(a_tensor, g_tensor, eps=1e-6):
    """out[i] = a[i] / sqrt(mean(a[i]^2) + eps) * g over rows of [N, D], masked last row block."""
    n, d = a_tensor.shape
    out = nl.ndarray((n, d), dtype=a_tensor.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(128)[:, None]
    jf = nl.arange(d)[None, :]
    g = nl.load(g_tensor.reshape((1, d))[nl.arange(1)[:, None], jf])
    for i in nl.affine_range(math.ceil(n / 128)):
        live = i * 128 + ip < n
        a = nl.load(a_tensor[i * 128 + ip, jf], mask=live)
        ms = nl.mean(nl.square(a, mask=live), axis=[1], keepdims=True, mask=live)
        r = nl.rsqrt(nl.add(ms, eps, mask=live), mask=live)
        y = nl.multiply(nl.multiply(a, r, mask=live), g.broadcast_to((128, d)), mask=live)
        nl.store(out[i * 128 + ip, jf], value=y, mask=live)
    return out


@nki.jit
def layernorm(x_tensor, gamma, beta, eps=1e-5):
    """out = (x - mean) / sqrt(var + eps) * gamma + beta per row of [N, D] (N a multiple of 128)."""
    n, d = x_tensor.shape
    out = nl.ndarray((n, d), dtype=x_tensor.dtype, buffer=nl.shared_hbm)
    gm = nl.load(gamma.reshape((1, d)))
    bt = nl.load(beta.reshape((1, d)))
    for i in nl.affine_range(n // 128):
        x = nl.load(x_tensor[nl.ds(i * 128, 128), :], dtype=nl.float32)
        mu = nl.mean(x, axis=[1], keepdims=True)
        xc = nl.subtract(x, mu)
        var = nl.mean(nl.multiply(xc, xc), axis=[1], keepdims=True)
        inv = nl.rsqrt(nl.add(var, eps))
        y = nl.add(nl.multiply(nl.multiply(xc, inv), gm.broadcast_to((128, d))), bt.broadcast_to((128, d)))
        nl.store(out[nl.ds(i * 128, 128), :], value=y)
    return out


@nki.jit
def layernorm_bn_stats(x_tensor, eps=1e-5):
    """(x - mean) / sqrt(var + eps) with the statistics from nisa.bn_stats / bn_aggr (D <= 512)."""
    n, d = x_tensor.shape
    out = nl.ndarray((n, d), dtype=x_tensor.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        x = nl.load(x_tensor[nl.ds(i * 128, 128), :])
        stats = nisa.bn_stats(x, dtype=nl.float32)
        mv = nisa.bn_aggr(stats, dtype=nl.float32)
        mean = mv[:, 0:1]
        var = mv[:, 1:2]
        inv = nl.rsqrt(nl.add(var, eps))
        y = nisa.tensor_scalar(x, np.subtract, mean, op1=np.multiply, operand1=inv)
        nl.store(out[nl.ds(i * 128, 128), :], value=y)
    return out


# -- softmax ------------------------------------------------------------------------------------------
@nki.jit
def softmax_rows(x_tensor):
    """Row softmax of [N, D] (N a multiple of 128): max, exp(x - max) with its row sum on the ScalarE
    (nisa.activation_reduce), reciprocal, scale."""
    n, d = x_tensor.shape
    out = nl.ndarray((n, d), dtype=x_tensor.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(n // 128):
        x = nl.load(x_tensor[nl.ds(i * 128, 128), :])
        neg_max = nl.negative(nl.max(x, axis=[1], keepdims=True))
        e, s = _exp_and_sum(x, neg_max)
        nl.store(out[nl.ds(i * 128, 128), :], value=nl.multiply(e, nl.reciprocal(s)))
    return out


def _exp_and_sum(x, bias):
    s = nl.ndarray((x.shape[0], 1), dtype=nl.float32)
    e = nisa.activation_reduce(op=nl.exp, data=x, reduce_op=nl.add, reduce_res=s, bias=bias)
    return e, s


@nki.jit
def softmax_builtin(x_tensor):
    n, d = x_tensor.shape
    out = nl.ndarray((n, d), dtype=x_tensor.dtype, buffer=nl.shared_hbm)
    x = nl.load(x_tensor)
    nl.store(out, value=nl.softmax(x, axis=1))
    return out


# -- matmul variants ------------------------------------------------------------------------------------
@nki.jit
def matmul_basic(lhsT, rhs):
    """[K=128, M=64]^T @ [K=128, N=512] -> [64, 512]: one TensorE matmul into PSUM."""
    k, m = lhsT.shape
    _, n = rhs.shape
    out = nl.ndarray((m, n), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    a = nl.load(lhsT)
    b = nl.load(rhs)
    res = nisa.nc_matmul(a, b)
    nl.store(out, value=nl.copy(res, dtype=out.dtype))
    return out


@nki.jit
def matmul_tiled(lhsT, rhs):
    """[K, M]^T @ [K, N] in 128 x 128 x 512 tiles, K accumulated in one PSUM tile (affine += )."""
    k_dim, m_dim = lhsT.shape
    _, n_dim = rhs.shape
    tk, tm, tn = 128, 128, 512
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_dim // tm):
        for n in nl.affine_range(n_dim // tn):
            acc = nl.zeros((tm, tn), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_dim // tk):
                a = nl.load(lhsT[k * tk:(k + 1) * tk, m * tm:(m + 1) * tm])
                b = nl.load(rhs[k * tk:(k + 1) * tk, n * tn:(n + 1) * tn])
                acc += nl.matmul(a, b, transpose_x=True)
            nl.store(out[m * tm:(m + 1) * tm, n * tn:(n + 1) * tn], value=nl.copy(acc, dtype=out.dtype))
    return out


@nki.jit
def matmul_hoisted(lhsT, rhs):
    """As matmul_tiled, with every K tile of the lhsT column block loaded once per m (hoisted loads)."""
    k_dim, m_dim = lhsT.shape
    _, n_dim = rhs.shape
    tk, tm, tn = 128, 128, 512
    nk = k_dim // tk
    out = nl.ndarray((m_dim, n_dim), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    ip = nl.arange(tk)[:, None]
    for m in nl.affine_range(m_dim // tm):
        a_all = nl.ndarray((tk, nk, tm), dtype=lhsT.dtype, buffer=nl.sbuf)
        for k in nl.affine_range(nk):
            a_all[ip, k, nl.arange(tm)[None, :]] = nl.load(lhsT[k * tk + ip, m * tm + nl.arange(tm)[None, :]])
        for n in nl.affine_range(n_dim // tn):
            acc = nl.zeros((tm, tn), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(nk):
                b = nl.load(rhs[k * tk + ip, n * tn + nl.arange(tn)[None, :]])
                acc += nisa.nc_matmul(a_all[ip, k, nl.arange(tm)[None, :]], b)
            nl.store(out[m * tm + ip, n * tn + nl.arange(tn)[None, :]], value=nl.copy(acc, dtype=out.dtype))
    return out


@nki.jit
def matmul_plain(x, y):
    """x @ y with x in [M, K] layout: nl.matmul transposes x itself (transpose_x=False)."""
    m, k = x.shape
    _, n = y.shape
    out = nl.ndarray((m, n), dtype=x.dtype, buffer=nl.shared_hbm)
    res = nl.matmul(nl.load(x), nl.load(y))
    nl.store(out, value=nl.copy(res, dtype=x.dtype))
    return out


# -- single-head attention --------------------------------------------------------------------------------
@nki.jit
def attention_head(q_ref, k_ref, v_ref):
    """softmax(q^T k * d^-0.5) v for q, k [d<=128, S] and v [S, d], S <= 512 (a multiple of 128)."""
    d, s = q_ref.shape
    out = nl.ndarray((s, d), dtype=q_ref.dtype, buffer=nl.shared_hbm)
    k = nl.load(k_ref)
    for i in nl.affine_range(s // 128):
        q = nl.load(q_ref[:, nl.ds(i * 128, 128)])
        q = nl.multiply(q, 1.0 / math.sqrt(d))
        sc = nisa.nc_matmul(q, k)                                     # [128 q, S] fp32 PSUM
        neg_max = nl.negative(nl.max(sc, axis=[1], keepdims=True))
        p, rs = _exp_and_sum(sc, neg_max)
        acc = nl.zeros((128, d), nl.float32, buffer=nl.psum)
        for j in nl.affine_range(s // 128):
            pt = nl.copy(nisa.nc_transpose(p[:, nl.ds(j * 128, 128)]))  # [128 k, 128 q]
            v = nl.load(v_ref[nl.ds(j * 128, 128), :])
            acc += nisa.nc_matmul(pt, v)
        nl.store(out[nl.ds(i * 128, 128), :], value=nl.multiply(acc, nl.reciprocal(rs), dtype=out.dtype))
    return out


# -- numpy references (float64) ---------------------------------------------------------------------------
def _f(x):
    return np.asarray(x, dtype=np.float64)


def ref_avg_pool2d(x, k):
    c, h, w = x.shape
    return _f(x)[:, :h // k * k, :w // k * k].reshape(c, h // k, k, w // k, k).mean(axis=(2, 4))


def ref_rmsnorm(a, g, eps=1e-6):
    a = _f(a)
    return a / np.sqrt(np.mean(a * a, axis=1, keepdims=True) + eps) * _f(g)[None, :]


def ref_layernorm(x, gamma=None, beta=None, eps=1e-5):
    x = _f(x)
    y = (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + eps)
    if gamma is not None:
        y = y * _f(gamma)[None, :] + _f(beta)[None, :]
    return y


def ref_softmax(x):
    x = _f(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def ref_attention_head(q, k, v):
    d = q.shape[0]
    return ref_softmax(_f(q).T @ _f(k) / math.sqrt(d)) @ _f(v)
