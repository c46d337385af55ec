"""``neuronxcc.nki.kernels.cumsum.cumsum``: the import path older NxD-Inference releases fall back to for
``_private_kernels.cumsum.cumsum`` (the same kernel)."""
from neuronxcc.nki._private_kernels.cumsum import cumsum

__all__ = ["cumsum"]
