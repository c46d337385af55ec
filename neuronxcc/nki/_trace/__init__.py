"""NKI tracing internals: trace a kernel function into a BIR module, run it on birsim.

See ``trace.trace_kernel`` / ``TracedKernel`` (the API the framework path and the kernels build on)
and ``run`` (simulate / baremetal / benchmark / profile).

Layers, bottom up (each imports only those below it; nothing here imports ``nki.language`` /
``nki.isa``, which are built on these modules and re-export their public functions):
``dtypes``, ``active``, ``guards``, ``index`` -> ``context``, ``buffers``, ``engines``, ``lower``
(BIR from the trace), ``run`` -> ``view`` (what a traced value is) -> ``rewrite`` -> ``ops``
(emission) -> ``elementwise``, ``indirect`` -> ``movement`` -> ``registers`` -> ``tensor``
(``nki.tensor``: a view with operators) -> ``trace``.
"""
from neuronxcc.nki._trace.trace import TensorSpec, TracedKernel, trace_kernel  # noqa: F401
from neuronxcc.nki._trace.run import run_traced  # noqa: F401
