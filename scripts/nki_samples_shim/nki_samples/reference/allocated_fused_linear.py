"""nki_samples.reference.allocated_fused_linear -> neuronxcc.nki.kernels.fused_linear."""
from neuronxcc.nki.kernels.fused_linear import allocated_fused_rms_norm_qkv  # noqa: F401
