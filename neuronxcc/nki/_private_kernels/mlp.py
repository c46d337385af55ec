"""MLP kernels NxD-Inference imports at module load (not implemented yet: calling one raises
NkiNotImplementedError; see ``_unbuilt``)."""
from neuronxcc.nki._private_kernels._unbuilt import unbuilt

mlp_isa_kernel = unbuilt("mlp", "mlp_isa_kernel")
mlp_fused_add_isa_kernel = unbuilt("mlp", "mlp_fused_add_isa_kernel")
quant_mlp_isa_kernel = unbuilt("mlp", "quant_mlp_isa_kernel")
quant_mlp_fused_add_isa_kernel = unbuilt("mlp", "quant_mlp_fused_add_isa_kernel")
