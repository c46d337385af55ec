"""``neuronxcc.nki._private_kernels``: the kernels the original ships privately, at the import paths
framework code uses (our own implementations, same signatures and call forms): ``attention.attention_isa_kernel``,
``mlp.{mlp_isa_kernel, mlp_fused_add_isa_kernel}``,
``qkv.{rmsnorm_qkv_isa_kernel, rmsnorm_qkv_isa_fused_add_kernel}``, ``rmsnorm.rmsnorm_quant_isa_kernel``, ``cumsum.cumsum``.
Importable so the importing model code loads, but not implemented yet (calling raises
NkiNotImplementedError [NCC_INBY001]): ``mlp.{quant_mlp_isa_kernel, quant_mlp_fused_add_isa_kernel}``;
configuration only: ``blockwise_mm.BlockShardStrategy``."""
