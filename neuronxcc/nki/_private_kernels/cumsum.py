"""``cumsum`` as NxD-Inference's sampling code imports it (not implemented yet: calling it raises
NkiNotImplementedError; see ``_unbuilt``)."""
from neuronxcc.nki._private_kernels._unbuilt import unbuilt

cumsum = unbuilt("cumsum", "cumsum")
