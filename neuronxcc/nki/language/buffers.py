"""``nl.sbuf`` / ``nl.psum`` / ``nl.hbm`` ... and ``nl.par_dim`` / ``nl.nc`` / ``nl.spmd_dim``: the tracer's
(``neuronxcc.nki._trace.buffers``, which ``Tensor.buffer`` reads), re-exported under their old path."""
from neuronxcc.nki._trace.buffers import *  # noqa: F401,F403
from neuronxcc.nki._trace.buffers import __all__  # noqa: F401
