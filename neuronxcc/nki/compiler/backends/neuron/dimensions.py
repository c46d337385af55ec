"""Grid axes: ``VNC`` (virtual NeuronCores, same meaning as ``nl.nc``) and ``CCPipeline``."""
from neuronxcc.nki.language.buffers import nc, spmd_dim


class VNC(nc):
    pass


class CCPipeline(spmd_dim):
    """``CCPipeline(n)``: a grid factor NxD-Inference multiplies into its kernel grids
    (``CCPipeline(t) * nc(lnc)``) to pipeline collectives with compute; on one simulated core the instances
    run serially, so only the size matters."""

    def __init__(self, n):
        super().__init__(int(n))
        self.stages = int(n)

    def __repr__(self):
        return "CCPipeline(%d)" % self.stages
