"""``VNC``: a grid axis over virtual NeuronCores (same meaning as ``nl.nc``)."""
from neuronxcc.nki.language.buffers import nc


class VNC(nc):
    pass
