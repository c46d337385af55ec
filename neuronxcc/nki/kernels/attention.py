"""Attention kernels of ``neuronxcc.nki.kernels.attention``, at the import paths callers use:
``flash_fwd``, ``flash_attn_bwd``, ``FlashConfig`` (implemented in ``_private_kernels.flash_attention``),
``attention_isa_kernel`` (NxD-Inference's fallback import path; ``_private_kernels.attention``) and
``fused_self_attn_for_SD_small_head_size`` (the SDK's SD-attention test imports it from here; ``sd_attention``)."""
from neuronxcc.nki._private_kernels.attention import attention_isa_kernel
from neuronxcc.nki._private_kernels.flash_attention import FlashConfig, flash_attn_bwd, flash_fwd
from neuronxcc.nki.kernels.sd_attention import (allocated_fused_self_attn_for_SD_small_head_size,
                                                fused_self_attn_for_SD_small_head_size)

__all__ = ["FlashConfig", "flash_fwd", "flash_attn_bwd", "attention_isa_kernel",
           "fused_self_attn_for_SD_small_head_size", "allocated_fused_self_attn_for_SD_small_head_size"]
