"""The ring-attention kernels NxD's context-parallel attention calls (our own implementation, the original's call
form: ``kernel[bs, n_heads](...)``, imported from ``_private_kernels.attention``)::

    o, lse = ring_attention_fwd[bs, heads](q, k, v, seed, rank_id=r, src_tgt_pairs=pairs, use_causal_mask=True,
                                           mixed_precision=True, dropout_p=0.0, softmax_scale=None, config=None)
    dq, dk, dv = ring_attention_bwd[bs, heads](q, k, v, o, dout, lse, seed, rank_id=r, src_tgt_pairs=pairs, ...)

Tensors and values as ``nki.kernels.flash_fwd`` / ``flash_attn_bwd`` (q, k: [bs, heads, d, seq]; v as flash_fwd
takes it, ``config.should_transpose_v`` for [bs, heads, d, seq]); each rank holds one sequence chunk and the ring
(``src_tgt_pairs``, as ``collectives.CollectivesConfig.rank_src_tgt_pairs`` builds it) passes the key/value chunks
around. On a ring of one rank (the pairs connect at most one rank) that is exactly flash attention over the local
chunk, which these kernels compute. A ring of more ranks needs the collective permute between NeuronCores inside
the kernel; birsim runs an NKI kernel on one core, so that form raises NCC_INBY001 (not built) rather than
computing a wrong partial result.
"""
from neuronxcc import nki
from neuronxcc.nki import errors
from neuronxcc.nki._private_kernels.collectives import ring_size
from neuronxcc.nki._private_kernels.flash_attention import flash_attn_bwd, flash_fwd

__all__ = ["ring_attention_fwd", "ring_attention_bwd"]


def _one_rank(src_tgt_pairs, kernel):
    n = ring_size(src_tgt_pairs)
    if n > 1:
        raise errors.NkiNotImplementedError(
            "%s over a ring of %d ranks" % (kernel, n),
            "the key/value exchange between NeuronCores inside an NKI kernel is not simulated; "
            "a ring of one rank (context-parallel degree 1) is")


@nki.jit
def ring_attention_fwd(q, k, v, seed, rank_id=0, src_tgt_pairs=None, use_causal_mask=True, mixed_precision=True,
                       dropout_p=0.0, softmax_scale=None, config=None, **kwargs):
    """Ring attention forward (see the module doc): flash_fwd's (o, lse) on a ring of one rank."""
    _one_rank(src_tgt_pairs, "ring_attention_fwd")
    return flash_fwd.func(q, k, v, seed, use_causal_mask=use_causal_mask, mixed_precision=mixed_precision,
                          dropout_p=dropout_p, softmax_scale=softmax_scale, config=config)


@nki.jit
def ring_attention_bwd(q, k, v, o, dout, lse, seed, rank_id=0, src_tgt_pairs=None, use_causal_mask=True,
                       mixed_precision=True, dropout_p=0.0, softmax_scale=None, **kwargs):
    """Ring attention backward (see the module doc): flash_attn_bwd's (dq, dk, dv) on a ring of one rank."""
    _one_rank(src_tgt_pairs, "ring_attention_bwd")
    return flash_attn_bwd.func(q, k, v, o, dout, lse, seed, use_causal_mask=use_causal_mask,
                               mixed_precision=mixed_precision, dropout_p=dropout_p, softmax_scale=softmax_scale)
