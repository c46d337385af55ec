"""``neuronxcc.nki._private_kernels``: the kernels the original ships privately, at the import paths
framework code uses (our own implementations, same signatures and call forms): ``attention.attention_isa_kernel``
and ``attention.{ring_attention_fwd, ring_attention_bwd}`` (one-rank rings; ``ring_attention``),
``prefix_caching_attention.prefix_caching_attention_fwd_isa_kernel`` (NxD-Inference 0.4-0.7 import it at load),
``mlp.{mlp_isa_kernel, mlp_fused_add_isa_kernel, quant_mlp_isa_kernel, quant_mlp_fused_add_isa_kernel}``
(the quantized math a documented approximation, see ``mlp``),
``qkv.{rmsnorm_qkv_isa_kernel, rmsnorm_qkv_isa_fused_add_kernel}``, ``rmsnorm.rmsnorm_quant_isa_kernel``,
``cumsum.cumsum``, the blockwise MoE matmuls ``blockwise_mm.{blockwise_mm, blockwise_mm_baseline,
blockwise_mm_baseline_shard_hidden}`` and their backward ``blockwise_mm_bwd.{blockwise_mm_bwd,
blockwise_mm_bwd_baseline_shard_hidden}`` with ``SkipMode``, ``BlockShardStrategy``, ``ExpertAffinityScaleMode``,
``check_blockwise_mm_kernel_compatibility``, and ``collectives.CollectivesConfig`` (NxD's parallel_state needs it
at import). ``ExpertAffinityScaleMode`` and ``ActFnType`` are also package attributes, where NxD and
NxD-Inference look them up. Imported by a JAX caller at load but not built (a call is one NCC_INBY001 line,
see ``not_built``): ``blockwise_mm.blockwise_mm_selective_cp``, ``blockwise_mm_bwd.blockwise_mm_bwd_selective_cp``,
``attention.{attention_isa_kernel_cache, backward_attention_isa_kernel}``."""
from neuronxcc.nki._private_kernels.blockwise_mm import ActFnType, ExpertAffinityScaleMode  # noqa: F401

__all__ = ["ActFnType", "ExpertAffinityScaleMode"]
