"""nki_samples.reference.vision -> neuronxcc.nki.kernels.vision."""
from neuronxcc.nki.kernels.vision import resize_nearest_fixed_dma_kernel, select_and_scatter_kernel  # noqa: F401
