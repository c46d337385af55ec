"""``rmsnorm_quant_isa_kernel``: the RMSNorm + fp8 quantization kernel NxD-Inference's quantized MLP path calls
(our own implementation of the math the public NKI library documents for its RMSNorm-Quant kernel; the call
form of the original's private kernel, out-argument style)::

    rmsnorm_quant_isa_kernel(hidden, ln_w, clamp_bound, out, kernel_name="QuantOnly", eps=1e-6)

hidden: [..., H] (any rank >= 2; rows are all leading dims); ln_w: [1, H] or [H]; out: int8 [..., H + 4].
Per row: with a kernel_name naming RMSNorm (``"RMSNormQuant"``...) ``x = x * rsqrt(mean(x^2) + eps) * ln_w``,
else (``"QuantOnly"``) x as given. ``amax = max|x|``; with ``clamp_bound > 0`` amax is clipped to it and x to
[-clamp_bound, clamp_bound]. The dequantization scale ``s = max(amax / 240, 1e-6)`` (240: the largest
float8_e4m3 value); ``out[..., :H]`` holds the float8_e4m3 bytes of ``x / s`` and ``out[..., H:H + 4]`` the
fp32 bytes of s (little endian), so ``out[..., :H].view(float8_e4m3) * out[..., H:].view(float32)`` dequantizes.
Rows go 128 per tile on partitions; the math runs in fp32.
"""
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check

__all__ = ["rmsnorm_quant_isa_kernel"]

P = 128
FP8_MAX = 240.0
MIN_SCALE = 1e-6


def rmsnorm_quant_isa_kernel(hidden, ln_w, clamp_bound, out, kernel_name="QuantOnly", eps=1e-6, **kwargs):
    check(len(hidden.shape) >= 2, "rmsnorm_quant_isa_kernel: hidden needs rank >= 2, got %s" % (tuple(hidden.shape),))
    H = hidden.shape[-1]
    lead = tuple(hidden.shape[:-1])
    check(tuple(out.shape) == lead + (H + 4,),
          "rmsnorm_quant_isa_kernel: out must be %s, got %s" % (lead + (H + 4,), tuple(out.shape)))
    check(out.dtype.itemsize == 1, "rmsnorm_quant_isa_kernel: out must be a 1-byte (int8) tensor, got %s" % out.dtype)
    norm = "norm" in str(kernel_name).lower()
    bound = float(clamp_bound) if clamp_bound is not None else 0.0
    n = 1
    for d in lead:
        n *= d
    x_in = hidden.reshape((n, H))
    o_bytes = out.reshape((n, H + 4)).view(nl.int8)
    ip, jf, jf4 = nl.arange(P)[:, None], nl.arange(H)[None, :], nl.arange(4)[None, :]
    gamma = None
    if norm:
        check(ln_w.shape[-1] == H, "rmsnorm_quant_isa_kernel: ln_w must have %d elements, got %s" % (H, ln_w.shape))
        gamma = nl.load(ln_w.reshape((1, H)), dtype=nl.float32).broadcast_to((P, H))
    for i in nl.affine_range((n + P - 1) // P):
        rows = i * P + ip
        live = rows < n
        x = nl.load(x_in[rows, jf], mask=live, dtype=nl.float32)
        if norm:
            ms = nl.mean(nl.square(x, mask=live), axis=[1], keepdims=True, mask=live)
            inv = nl.rsqrt(nl.add(ms, float(eps), mask=live), mask=live)
            x = nl.multiply(nl.multiply(x, inv, mask=live), gamma, dtype=nl.float32, mask=live)
        amax = nl.max(nl.abs(x, mask=live), axis=[1], keepdims=True, mask=live)
        if bound > 0:
            amax = nl.minimum(amax, bound, mask=live)
            x = nl.maximum(nl.minimum(x, bound, mask=live), -bound, dtype=nl.float32, mask=live)
        scale = nl.maximum(nl.multiply(amax, 1.0 / FP8_MAX, mask=live), MIN_SCALE, dtype=nl.float32, mask=live)
        q = nl.multiply(x, nl.reciprocal(scale, mask=live), dtype=nl.float8_e4m3, mask=live)
        nl.store(o_bytes[rows, jf], value=q.view(nl.int8), mask=live)
        nl.store(o_bytes[rows, H + jf4], value=scale.view(nl.int8), mask=live)
