"""``neuronxcc.nki.kernels``: the kernels the original's public docs list in this namespace (our own
implementations with the original's signatures and tensor layouts): ``flash_fwd``, ``flash_attn_bwd`` and
``attention.FlashConfig`` (see ``attention``), ``fused_self_attn_for_SD_small_head_size`` and
``allocated_fused_self_attn_for_SD_small_head_size`` (``sd_attention``), ``allocated_fused_rms_norm_qkv``
(``fused_linear``), ``resize_nearest_fixed_dma_kernel`` and ``select_and_scatter_kernel`` (``vision``)."""
from neuronxcc.nki.kernels.attention import FlashConfig, flash_attn_bwd, flash_fwd
from neuronxcc.nki.kernels.fused_linear import allocated_fused_rms_norm_qkv
from neuronxcc.nki.kernels.sd_attention import (allocated_fused_self_attn_for_SD_small_head_size,
                                                fused_self_attn_for_SD_small_head_size)
from neuronxcc.nki.kernels.vision import resize_nearest_fixed_dma_kernel, select_and_scatter_kernel

__all__ = ["FlashConfig", "flash_attn_bwd", "flash_fwd", "allocated_fused_rms_norm_qkv",
           "fused_self_attn_for_SD_small_head_size", "allocated_fused_self_attn_for_SD_small_head_size",
           "resize_nearest_fixed_dma_kernel", "select_and_scatter_kernel"]
