"""``attention_isa_kernel``: the attention kernel NxD-Inference and its model code import at module load
(``from neuronxcc.nki._private_kernels.attention import attention_isa_kernel``) and call through torch's
``nki_jit()(attention_isa_kernel)`` in out-argument style::

    attention_isa_kernel(q, k, v, scale, out, kernel_name="CausalAttentionMMSoftmaxMMWithoutSwap")

q: [B*H, d, seq_q], k: [B*H, d, seq_k], v: [B*H, seq_k, d]; the kernel stores
softmax(scale * q^T k [+ causal mask]) v into out, [B*H, seq_q, d] (or [B*H, d, seq_q], stored
transposed, when out has that shape and d != seq_q). ``kernel_name``: a name containing "Causal"
masks keys after the query; the "WithoutSwap"/"WithSwap" suffix names the original's operand order
and does not change the values. Keyword arguments: ``sliding_window`` (keys older than the window are
masked), ``use_dma_transpose`` (accepted; a scheduling choice). A grid ``[n]`` splits the B*H heads
over the n instances when it divides them (else every instance computes all heads: same values).
The matmuls run in the inputs' dtype with fp32 accumulation and fp32 softmax.
Our own implementation on the flash-attention core of ``flash_core``. This module also gives NxD's import
path of the ring-attention kernels (``ring_attention_fwd`` / ``ring_attention_bwd``, see ``ring_attention``).
"""
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check, flash_attention_core
from neuronxcc.nki._private_kernels.not_built import not_built
from neuronxcc.nki._private_kernels.ring_attention import ring_attention_bwd, ring_attention_fwd  # noqa: F401

__all__ = ["attention_isa_kernel", "ring_attention_fwd", "ring_attention_bwd", "attention_isa_kernel_cache",
           "backward_attention_isa_kernel"]

# imported at module load by a JAX training wrapper; their signatures and math are not public
attention_isa_kernel_cache = not_built("neuronxcc.nki._private_kernels.attention.attention_isa_kernel_cache",
                                       "its signature and semantics are not public; use nki.kernels.flash_fwd")
backward_attention_isa_kernel = not_built("neuronxcc.nki._private_kernels.attention.backward_attention_isa_kernel",
                                          "its signature and semantics are not public; use "
                                          "nki.kernels.flash_attn_bwd")


def attention_isa_kernel(q, k, v, scale, out, kernel_name="AttentionMMSoftmaxMMWithoutSwap", **kwargs):
    bh, d, seq_q = q.shape
    _, _, seq_k = k.shape
    check(tuple(v.shape) == (bh, seq_k, d),
          "attention_isa_kernel: v must be [%d, %d, %d], got %s" % (bh, seq_k, d, tuple(v.shape)))
    if tuple(out.shape) == (bh, seq_q, d):
        o_transposed = False
    elif tuple(out.shape) == (bh, d, seq_q):
        o_transposed = True
    else:
        check(False, "attention_isa_kernel: out must be [%d, %d, %d], got %s" % (bh, seq_q, d, tuple(out.shape)))
    causal = "causal" in str(kernel_name).lower()
    window = kwargs.get("sliding_window")
    n = nl.num_programs() if nl.program_ndim() else 1
    per = bh // n if n > 1 and bh % n == 0 else bh

    def head(idx):
        flash_attention_core(q, k, v, out, None, None, (idx,), (idx,), (idx,), float(scale), causal, q.dtype,
                             o_transposed=o_transposed, sliding_window=window)
    if per != bh:
        pid = nl.program_id(0)
        for r in nl.affine_range(per):
            head(pid * per + r)
    else:
        for r in nl.affine_range(bh):
            head(r)
