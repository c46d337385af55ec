"""nki_samples.reference.attention -> neuronxcc.nki.kernels.attention."""
from neuronxcc.nki.kernels.attention import (FlashConfig, flash_attn_bwd, flash_fwd,  # noqa: F401
                                             fused_self_attn_for_SD_small_head_size)
