"""``neuronxcc.nki._private_kernels``: the kernels the original ships privately, at the import paths
framework code uses. Built (our own implementations, same signatures): ``attention.attention_isa_kernel``.
Importable so the importing model code loads, but not implemented yet (calling raises
NkiNotImplementedError [NCC_INBY001]): ``mlp.{mlp_isa_kernel, mlp_fused_add_isa_kernel,
quant_mlp_isa_kernel, quant_mlp_fused_add_isa_kernel}``, ``rmsnorm.rmsnorm_quant_isa_kernel``,
``cumsum.cumsum``; configuration only: ``blockwise_mm.BlockShardStrategy``."""
