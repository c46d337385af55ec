"""NKI tracing internals: trace a kernel function into a BIR module, run it on birsim.

See ``trace.trace_kernel`` / ``TracedKernel`` (the API the framework path and the kernels build on)
and ``run`` (simulate / baremetal / benchmark / profile).
"""
from neuronxcc.nki._trace.trace import TensorSpec, TracedKernel, trace_kernel  # noqa: F401
from neuronxcc.nki._trace.run import run_traced  # noqa: F401
