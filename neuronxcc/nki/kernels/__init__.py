"""``neuronxcc.nki.kernels``: kernels framework code imports from the compiler package (our own
implementations with the original's signatures and tensor layouts): ``flash_fwd``, ``flash_attn_bwd``
and ``attention.FlashConfig`` (see ``attention``)."""
from neuronxcc.nki.kernels.attention import FlashConfig, flash_attn_bwd, flash_fwd

__all__ = ["FlashConfig", "flash_attn_bwd", "flash_fwd"]
