"""The private kernels NxD-Inference's model code calls (neuronxcc.nki._private_kernels: cumsum, mlp_isa_kernel,
mlp_fused_add_isa_kernel, rmsnorm_quant_isa_kernel) in the callers' out-argument form, simulated on birsim
against numpy float64 references (tolerances: the compiled row of neuronxcc.common.tolerances for the output
dtype; the fp8 bytes of rmsnorm_quant exactly as numpy rounds x / scale)."""
import ml_dtypes
import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.common.tolerances import mismatch
from neuronxcc.nki._private_kernels import cumsum as cumsum_mod
from neuronxcc.nki._private_kernels.cumsum import cumsum
from neuronxcc.nki._private_kernels.mlp import mlp_fused_add_isa_kernel, mlp_isa_kernel, quant_mlp_isa_kernel
from neuronxcc.nki._private_kernels.rmsnorm import rmsnorm_quant_isa_kernel

RNG = np.random.default_rng(11)


def _check(actual, expected, dtype):
    msg = mismatch(actual, np.asarray(expected, np.float64).astype(np.float32), row="compiled", dtype=dtype)
    assert not msg, msg


def test_cumsum_ragged_rows_fp32():
    x = RNG.standard_normal((130, 300)).astype(np.float32)
    out = np.zeros_like(x)
    nki.jit(cumsum, mode="simulation")(x, out, axis=1)
    _check(out, np.cumsum(x.astype(np.float64), axis=1), np.float32)


def test_cumsum_bf16_chunks_carry(monkeypatch):
    monkeypatch.setattr(cumsum_mod, "CHUNK", 64)           # three chunks: the running total carries
    x = RNG.standard_normal((3, 150)).astype(ml_dtypes.bfloat16)
    out = np.zeros_like(x)
    nki.jit(cumsum, mode="simulation")(x, out, axis=-1)
    assert out.dtype == x.dtype
    _check(out, np.cumsum(x.astype(np.float64), axis=1), ml_dtypes.bfloat16)


def _mlp_ref(x, g, gw, uw, dw, norm, skip, eps=1e-6):
    x = x.astype(np.float64)
    if norm:
        x = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)
        if not skip:
            x = x * g.astype(np.float64)
    a = x @ gw.astype(np.float64)
    return (a / (1 + np.exp(-a)) * (x @ uw.astype(np.float64))) @ dw.astype(np.float64)


def _mlp_args(b, s, h, i, dtype=np.float32):
    x = RNG.standard_normal((b, s, h)).astype(dtype)
    g = RNG.standard_normal((1, h)).astype(dtype)
    gw, uw = [(RNG.standard_normal((h, i)) / 16).astype(dtype) for _ in range(2)]
    dw = (RNG.standard_normal((i, h)) / 16).astype(dtype)
    return x, g, gw, uw, dw


@pytest.mark.parametrize("fused_rmsnorm,skip_gamma", [(False, False), (True, False)])
def test_mlp_isa_kernel(fused_rmsnorm, skip_gamma):
    x, g, gw, uw, dw = _mlp_args(2, 130, 256, 384)
    out = np.zeros_like(x)
    nki.jit(mlp_isa_kernel, mode="simulation")(x, g, gw, uw, dw, out, kernel_name="MLP",
                                               fused_rmsnorm=fused_rmsnorm, skip_gamma=skip_gamma, eps=1e-6)
    _check(out, _mlp_ref(x, g, gw, uw, dw, fused_rmsnorm, skip_gamma), np.float32)


def test_mlp_fused_add_bf16_grid_and_residual():
    bf = ml_dtypes.bfloat16
    x, g, gw, uw, dw = _mlp_args(1, 256, 128, 256, bf)
    attn = RNG.standard_normal(x.shape).astype(bf)
    out = np.zeros((1, 512, 128), bf)
    nki.jit(mlp_fused_add_isa_kernel, mode="simulation")[2](attn, x, g, gw, uw, dw, out, kernel_name="MLP",
                                                            fused_rmsnorm=True, skip_gamma=True, store_add=True)
    res = attn.astype(np.float64) + x.astype(np.float64)
    _check(out[:, 256:], res, bf)
    # the kernel feeds the MLP the fp32 sum; bf16 TensorE operands: one rounding of the normed input
    _check(out[:, :256], _mlp_ref(res, g, gw, uw, dw, True, True), bf)


def _qdq_ref(x, bound):
    amax = np.abs(x).max(-1, keepdims=True)
    if bound:
        amax, x = np.minimum(amax, bound), np.clip(x, -bound, bound)
    s = np.maximum(amax / 240.0, 1e-6)
    return (x / s).astype(np.float32).astype(ml_dtypes.float8_e4m3).astype(np.float64) * s


def test_quant_mlp_fp8_weights_and_the_packed_rmsnorm_quant_input():
    f8 = ml_dtypes.float8_e4m3
    h, i, bound = 128, 256, 3.0
    x = RNG.standard_normal((1, 100, h)).astype(np.float32)
    g = RNG.standard_normal((1, h)).astype(np.float32)
    ws = [(RNG.standard_normal(sh) * 8).astype(f8) for sh in ((h, i), (h, i), (i, h))]
    scales = [np.broadcast_to((RNG.random((1, n)) / 64 + 1e-3).astype(np.float32), (128, n)).copy()
              for n in (i, i, h)]
    (gw, uw, dw), (gs, us, ds) = ws, scales
    deq = [w.astype(np.float64) * s[0] for w, s in zip(ws, scales)]

    def ref(xq):
        a = xq @ deq[0]
        return (a / (1 + np.exp(-a)) * (xq @ deq[1])) @ deq[2]
    out = np.zeros((1, 100, h), np.float32)
    nki.jit(quant_mlp_isa_kernel, mode="simulation")(x, g, gw, gs, uw, us, dw, ds, bound, out, fused_rmsnorm=True,
                                                     eps=1e-6, kernel_name="MLP")
    _check(out, ref(_qdq_ref(_mlp_ref_norm(x, g), bound)), np.float32)
    packed = np.zeros((1, 100, h + 4), np.int8)                  # rmsnorm_quant's output feeds the quantized MLP
    nki.jit(rmsnorm_quant_isa_kernel, mode="simulation")(x, g, bound, packed, kernel_name="QuantOnly")
    out2 = np.zeros_like(out)
    nki.jit(quant_mlp_isa_kernel, mode="simulation")(packed, g, gw, gs, uw, us, dw, ds, bound, out2, kernel_name="MLP")
    _check(out2, ref(_qdq_ref(x.astype(np.float64), bound)), np.float32)


def _mlp_ref_norm(x, g, eps=1e-6):
    x = x.astype(np.float64)
    return x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps) * g


@pytest.mark.parametrize("kernel_name,bound", [("QuantOnly", 0.0), ("RMSNormQuant", 2.0)])
def test_rmsnorm_quant_isa_kernel(kernel_name, bound):
    h = 256
    x = (RNG.standard_normal((2, 70, h)) * 3).astype(np.float32)
    g = RNG.standard_normal((1, h)).astype(np.float32)
    out = np.zeros((2, 70, h + 4), np.int8)
    nki.jit(rmsnorm_quant_isa_kernel, mode="simulation")(x, g, bound, out, kernel_name=kernel_name)
    xr = x.astype(np.float64)
    if "Norm" in kernel_name:
        xr = xr / np.sqrt((xr ** 2).mean(-1, keepdims=True) + 1e-6) * g
    amax = np.abs(xr).max(-1, keepdims=True)
    if bound:
        amax, xr = np.minimum(amax, bound), np.clip(xr, -bound, bound)
    scale = np.maximum(amax / 240.0, 1e-6)
    got_scale = np.ascontiguousarray(out[..., h:]).view(np.float32)
    _check(got_scale, scale, np.float32)
    want_q = (xr / scale).astype(np.float32).astype(ml_dtypes.float8_e4m3)
    got_q = np.ascontiguousarray(out[..., :h]).view(ml_dtypes.float8_e4m3)
    assert (got_q.astype(np.float32) == want_q.astype(np.float32)).mean() > 0.999


def _norm_ref(x, g=None, eps=1e-6):
    x = x.astype(np.float64)
    y = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + eps)
    return y * g if g is not None else y


def test_rmsnorm_qkv_isa_kernel_keywords_bias_wide_output():
    from neuronxcc.nki._private_kernels.qkv import rmsnorm_qkv_isa_kernel
    h = RNG.standard_normal((2, 130, 256)).astype(np.float32)
    w = (RNG.standard_normal((256, 640)) / 16).astype(np.float32)        # 640 outputs: two PSUM blocks
    g, bias = RNG.standard_normal((1, 256)).astype(np.float32), RNG.standard_normal((1, 640)).astype(np.float32)
    out = np.zeros((2, 130, 640), np.float32)
    nki.jit(rmsnorm_qkv_isa_kernel, mode="simulation")(lhs=h, rhs=w, ln_w=g, out=out, kernel_name="QKV", eps=1e-6,
                                                       fused_rmsnorm=True, bias=bias)
    _check(out, _norm_ref(h, g) @ w + bias, np.float32)


def test_rmsnorm_qkv_fused_add_stores_the_residual_into_hidden():
    from neuronxcc.nki._private_kernels.qkv import rmsnorm_qkv_isa_fused_add_kernel
    from neuronxcc.nki.compiler.backends.neuron.dimensions import CCPipeline
    from neuronxcc.nki.language import nc
    h = RNG.standard_normal((1, 256, 128)).astype(np.float32)
    r = RNG.standard_normal(h.shape).astype(np.float32)
    w = (RNG.standard_normal((128, 96)) / 16).astype(np.float32)
    g = RNG.standard_normal((1, 128)).astype(np.float32)
    h_in, out = h.copy(), np.zeros((1, 256, 96), np.float32)
    grid = CCPipeline(2) * nc(1)                                        # NxD-Inference's CTE grid form
    nki.jit(rmsnorm_qkv_isa_fused_add_kernel, mode="simulation")[grid](
        h_in, r, np.zeros_like(r), w, g, out, eps=1e-6, kernel_name="QKV", fused_rmsnorm=True, bias=None,
        skip_gamma=True)
    _check(h_in, h.astype(np.float64) + r, np.float32)
    _check(out, _norm_ref(h.astype(np.float64) + r) @ w, np.float32)
