"""``neuronxcc.nki._private_kernels``: the kernels the original ships privately, at the import paths
framework code uses (our own implementations, same signatures and call forms): ``attention.attention_isa_kernel``,
``mlp.{mlp_isa_kernel, mlp_fused_add_isa_kernel, quant_mlp_isa_kernel, quant_mlp_fused_add_isa_kernel}``
(the quantized math a documented approximation, see ``mlp``),
``qkv.{rmsnorm_qkv_isa_kernel, rmsnorm_qkv_isa_fused_add_kernel}``, ``rmsnorm.rmsnorm_quant_isa_kernel``, ``cumsum.cumsum``.
Configuration only: ``blockwise_mm.BlockShardStrategy`` (the blockwise MoE matmul kernels are not built)."""
