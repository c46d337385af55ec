"""nki_samples.reference.allocated_attention -> neuronxcc.nki.kernels."""
from neuronxcc.nki.kernels import allocated_fused_self_attn_for_SD_small_head_size  # noqa: F401
