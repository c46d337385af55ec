"""Interpreter handlers for dot (general), convolution and fft.

Accumulation follows XLA:CPU: floating-point products are accumulated in f32
(f64 when an operand or the result is f64) and rounded once to the result
type, so a bf16 x bf16 -> f32 dot (preferred_element_type) is exact f32
accumulation and bf16 -> bf16 is f32 accumulation rounded to bf16. Integer
dots accumulate in the result type, wrapping.

Convolution supports any dim_labels, padding (incl. negative), lhs (base)
and rhs (window) dilation, window reversal, feature_group_count and
batch_group_count. It is evaluated as im2col + batched matmul, or, when
the im2col matrix would exceed IM2COL_MAX_BYTES (large windows, e.g. a weight
gradient's), as a sum of matmuls over kernel positions.

fft (FFT, IFFT, RFFT, IRFFT over the trailing len(fft_length) dimensions) is
numpy's, computed in double precision and rounded to the result type.
"""
import contextlib

import numpy as np

from neuronxcc.errors import HloVerifyError
from neuronxcc.hlo.interp_attrs import bool_attr, conv_dims, dot_dims, int_attr, int_list, str_attr, window
from neuronxcc.hlo.interp_base import cast, dtype_of, handler, is_float
from neuronxcc.hlo.interp_shape import pad

# Largest im2col matrix a convolution builds (bytes); above it, one matmul per kernel position.
IM2COL_MAX_BYTES = 256 << 20


def accumulate_dtype(out_dt, *in_dts):
    """The dtype products are summed in."""
    if is_float(out_dt) or any(is_float(d) for d in in_dts):
        if out_dt == np.float64 or any(d == np.float64 for d in in_dts):
            return np.dtype(np.float64)
        return np.dtype(np.float32)
    if out_dt == np.bool_:
        return np.dtype(np.int64)
    return out_dt


def _finish(r, out_dt):
    if out_dt == np.bool_:
        return np.asarray(r != 0)
    return cast(r, out_dt)


# --auto-cast matmult/all in the goldens: fp32 operands of dot/convolution are rounded by this function
# (fp32 -> fp32 holding the compiled program's PE input values, common.dtypes.round_to) before the
# fp32-accumulated product; None = exact fp32.
MATMUL_CAST = [None]


@contextlib.contextmanager
def matmul_operand_cast(rounding):
    """Within the block, fp32 dot/convolution operands are rounded by ROUNDING (a BIR type name or
    alias such as "bf16"/"tf32", or a function; None: unchanged)."""
    old = MATMUL_CAST[0]
    if isinstance(rounding, str):
        from neuronxcc.common.dtypes import round_to
        rounding = round_to(rounding)
    MATMUL_CAST[0] = rounding
    try:
        yield
    finally:
        MATMUL_CAST[0] = old


def _pe_operands(lhs, rhs):
    c = MATMUL_CAST[0]
    if c is not None and lhs.dtype == np.float32 and rhs.dtype == np.float32:
        return c(lhs), c(rhs)
    return lhs, rhs


@handler("dot")
def h_dot(ev, inst, args):
    lhs, rhs = _pe_operands(np.asarray(args[0]), np.asarray(args[1]))
    d = dot_dims(inst)
    lb, rb, lc, rc = d["lhs_batch_dims"], d["rhs_batch_dims"], d["lhs_contracting_dims"], d["rhs_contracting_dims"]
    if len(lb) != len(rb) or len(lc) != len(rc):
        raise HloVerifyError("dot %s: mismatched batch or contracting dimensions" % inst.name)
    out_dt = dtype_of(inst.shape)
    acc = accumulate_dtype(out_dt, lhs.dtype, rhs.dtype)
    lf = [k for k in range(lhs.ndim) if k not in lb and k not in lc]
    rf = [k for k in range(rhs.ndim) if k not in rb and k not in rc]
    bshape = [lhs.shape[k] for k in lb]
    m = int(np.prod([lhs.shape[k] for k in lf], dtype=np.int64))
    n = int(np.prod([rhs.shape[k] for k in rf], dtype=np.int64))
    kk = int(np.prod([lhs.shape[k] for k in lc], dtype=np.int64))
    bb = int(np.prod(bshape, dtype=np.int64))
    a = np.transpose(lhs, lb + lf + lc).astype(acc, copy=False).reshape(bb, m, kk)
    b = np.transpose(rhs, rb + rc + rf).astype(acc, copy=False).reshape(bb, kk, n)
    r = np.matmul(a, b)
    r = r.reshape(bshape + [lhs.shape[k] for k in lf] + [rhs.shape[k] for k in rf])
    return _finish(r, out_dt)


@handler("convolution")
def h_convolution(ev, inst, args):
    lhs, rhs = _pe_operands(np.asarray(args[0]), np.asarray(args[1]))
    cd = conv_dims(inst, lhs.ndim)
    nsp = len(cd["in_spatial"])
    out_dt = dtype_of(inst.shape)
    acc = accumulate_dtype(out_dt, lhs.dtype, rhs.dtype)
    fgc = int_attr(inst, "feature_group_count", 1) or 1
    bgc = int_attr(inst, "batch_group_count", 1) or 1
    x = np.transpose(lhs, [cd["in_batch"], cd["in_feature"]] + cd["in_spatial"]).astype(acc, copy=False)
    k = np.transpose(rhs, [cd["k_out"], cd["k_in"]] + cd["k_spatial"]).astype(acc, copy=False)
    w = window(inst, nsp)
    rev = tuple(2 + d for d in range(nsp) if w["reversal"][d])
    if rev:
        k = np.flip(k, rev)
    cfg = [(0, 0, 0), (0, 0, 0)] + [(lo, hi, bd - 1) for lo, hi, bd in
                                    zip(w["pad_lo"], w["pad_hi"], w["base_dilation"])]
    x = pad(x, np.zeros((), acc), cfg)
    ksz = k.shape[2:]
    ext = [(s - 1) * wd + 1 for s, wd in zip(ksz, w["window_dilation"])]
    N, C = x.shape[:2]
    O, I = k.shape[:2]
    out_sp = [max((n - e) // st + 1, 0) if n >= e else 0 for n, e, st in zip(x.shape[2:], ext, w["stride"])]
    if any(s == 0 for s in out_sp) or any(e > n for e, n in zip(ext, x.shape[2:])):
        res = np.zeros([N // bgc, O] + out_sp, acc)
        return _layout_out(res, cd, out_dt)
    if nsp:
        v = np.lib.stride_tricks.sliding_window_view(x, ext, axis=tuple(range(2, 2 + nsp)))
        v = v[(slice(None), slice(None)) + tuple(slice(None, None, st) for st in w["stride"])
              + tuple(slice(None, None, wd) for wd in w["window_dilation"])]
    else:
        v = x
    # v: [N, C, out_sp..., ksz...]
    P = int(np.prod(out_sp, dtype=np.int64))
    Kn = int(np.prod(ksz, dtype=np.int64))
    if bgc > 1:
        nb = N // bgc
        ob = O // bgc
        # lhs batch n = g * nb + b; output feature o = g * ob + j
        vg = v.reshape((bgc, nb, C) + tuple(out_sp) + tuple(ksz))
        vg = np.moveaxis(vg, 2, -1 - nsp)                      # [g, nb, out..., C, k...]
        a = vg.reshape(bgc, nb * P, C * Kn)
        kg = k.reshape((bgc, ob, I) + tuple(ksz)).reshape(bgc, ob, I * Kn)
        r = np.matmul(a, np.transpose(kg, (0, 2, 1)))           # [g, nb*P, ob]
        r = r.reshape((bgc, nb) + tuple(out_sp) + (ob,))
        r = np.moveaxis(r, -1, 1)                              # [g, ob, nb, out...]
        r = np.moveaxis(r, 2, 0).reshape((nb, O) + tuple(out_sp))
        return _layout_out(r, cd, out_dt)
    cg = C // fgc
    og = O // fgc
    if N * P * C * Kn * x.dtype.itemsize > IM2COL_MAX_BYTES:
        r = _conv_by_kernel_position(v, k, fgc, out_sp, ksz)
        return _layout_out(r, cd, out_dt)
    vg = v.reshape((N, fgc, cg) + tuple(out_sp) + tuple(ksz))
    vg = np.moveaxis(vg, 1, 0)                                 # [G, N, cg, out..., k...]
    vg = np.moveaxis(vg, 2, 2 + nsp)                           # [G, N, out..., cg, k...]
    a = vg.reshape(fgc, N * P, cg * Kn)
    kg = k.reshape(fgc, og, I * Kn)
    r = np.matmul(a, np.transpose(kg, (0, 2, 1)))               # [G, N*P, og]
    r = r.reshape((fgc, N) + tuple(out_sp) + (og,))
    r = np.moveaxis(r, -1, 1)                                  # [G, og, N, out...]
    r = np.moveaxis(r, 2, 0).reshape((N, O) + tuple(out_sp))
    return _layout_out(r, cd, out_dt)


def _conv_by_kernel_position(v, k, fgc, out_sp, ksz):
    """The grouped convolution as a sum over kernel positions of [N*P, cg] x [cg, og]
    matmuls: working memory of the order of the output instead of im2col's N*P*C*Kn."""
    N, C = v.shape[:2]
    O = k.shape[0]
    cg, og = C // fgc, O // fgc
    P = int(np.prod(out_sp, dtype=np.int64))
    r = np.zeros((fgc, N * P, og), v.dtype)
    for kk in np.ndindex(*ksz):
        vk = v[(Ellipsis,) + kk]                                   # [N, C, out...] (a view)
        a = np.moveaxis(vk.reshape(N, fgc, cg, P), 1, 0)           # [G, N, cg, P]
        a = np.moveaxis(a, 2, 3).reshape(fgc, N * P, cg)           # [G, N*P, cg]
        kg = k[(slice(None), slice(None)) + kk].reshape(fgc, og, cg)
        r += np.matmul(a, np.transpose(kg, (0, 2, 1)))
    r = r.reshape((fgc, N) + tuple(out_sp) + (og,))
    r = np.moveaxis(r, -1, 1)                                      # [G, og, N, out...]
    return np.moveaxis(r, 2, 0).reshape((N, O) + tuple(out_sp))


def _layout_out(r, cd, out_dt):
    """[batch, feature, spatial...] -> the output's dimension order."""
    nd = r.ndim
    src_of = [0] * nd
    src_of[cd["out_batch"]] = 0
    src_of[cd["out_feature"]] = 1
    for s, d in enumerate(cd["out_spatial"]):
        src_of[d] = 2 + s
    return _finish(np.transpose(r, src_of), out_dt)


# numpy.fft's functions by name: numpy.fft is imported on the first fft, not with the interpreter
_FFTS = {"FFT": "fftn", "IFFT": "ifftn", "RFFT": "rfftn", "IRFFT": "irfftn"}


@handler("fft")
def h_fft(ev, inst, args):
    x = np.asarray(args[0])
    kind = (str_attr(inst, "fft_type", "FFT") or "FFT").upper()
    if kind not in _FFTS:
        raise HloVerifyError("fft %s: unknown fft_type %r" % (inst.name, kind))
    lengths = int_list(inst, "fft_length")
    axes = tuple(range(x.ndim - len(lengths), x.ndim))
    fn = getattr(np.fft, _FFTS[kind])
    if kind in ("RFFT", "IRFFT"):
        r = fn(x, s=lengths, axes=axes)
    else:
        r = fn(x, axes=axes)
    return cast(r, dtype_of(inst.shape))


def _compute_dtype(x):
    return np.float64 if x.dtype == np.float64 else np.float32


@handler("cholesky")
def h_cholesky(ev, inst, args):
    """a = l l^T (lower) or u^T u (upper) over the two minor dims, from that triangle of a alone; the
    other triangle of the result is 0; a matrix that is not positive definite gives NaNs."""
    a = np.asarray(args[0])
    out_dt = dtype_of(inst.shape)
    x = a.astype(_compute_dtype(a))
    lower = bool_attr(inst, "lower", False)
    m = np.tril(x) if lower else np.swapaxes(np.triu(x), -1, -2)
    sym = m + np.swapaxes(np.tril(m, -1), -1, -2)
    n = a.shape[-1]
    flat = sym.reshape(-1, n, n)
    res = np.empty_like(flat)
    for b in range(flat.shape[0]):
        try:
            res[b] = np.linalg.cholesky(flat[b])
        except np.linalg.LinAlgError:
            res[b] = np.nan
    res = res.reshape(a.shape)
    if not lower:
        res = np.swapaxes(res, -1, -2)
    return cast(res, out_dt)


@handler("triangular_solve")
def h_triangular_solve(ev, inst, args):
    """x with op(a) x = b (left_side) or x op(a) = b, a triangular (its ``lower`` triangle, the
    diagonal taken as 1 when unit_diagonal), op the transpose_a option (ADJOINT = TRANSPOSE for reals)."""
    a, b = np.asarray(args[0]), np.asarray(args[1])
    out_dt = dtype_of(inst.shape)
    cd = _compute_dtype(a)
    lower = bool_attr(inst, "lower", False)
    m = np.tril(a.astype(cd)) if lower else np.triu(a.astype(cd))
    if bool_attr(inst, "unit_diagonal", False):
        n = a.shape[-1]
        m = m * (1 - np.eye(n, dtype=cd)) + np.eye(n, dtype=cd)
    low = lower
    if (str_attr(inst, "transpose_a") or "NO_TRANSPOSE").upper() in ("TRANSPOSE", "ADJOINT"):
        m, low = np.swapaxes(m, -1, -2), not low
    bb = b.astype(cd)
    left = bool_attr(inst, "left_side", False)
    if not left:                    # x m = b  <=>  m^T x^T = b^T
        m, bb, low = np.swapaxes(m, -1, -2), np.swapaxes(bb, -1, -2), not low
    n = m.shape[-1]
    x = np.zeros_like(bb)
    with np.errstate(all="ignore"):     # substitution, as XLA: a zero pivot gives inf / NaN, no error
        for i in (range(n) if low else range(n - 1, -1, -1)):
            s = np.einsum("...k,...kj->...j", m[..., i, :], x)
            x[..., i, :] = (bb[..., i, :] - s) / m[..., i, i][..., None]
    if not left:
        x = np.swapaxes(x, -1, -2)
    return cast(x, out_dt)
