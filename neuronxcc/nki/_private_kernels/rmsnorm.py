"""RMSNorm kernels NxD-Inference imports at module load (not implemented yet: calling one raises
NkiNotImplementedError; see ``_unbuilt``)."""
from neuronxcc.nki._private_kernels._unbuilt import unbuilt

rmsnorm_quant_isa_kernel = unbuilt("rmsnorm", "rmsnorm_quant_isa_kernel")
