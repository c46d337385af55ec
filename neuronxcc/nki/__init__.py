"""``neuronxcc.nki``: the Neuron Kernel Interface, traced to BIR and run on birsim.

Entry points (the original's): ``jit`` (modes simulation / baremetal / benchmark / trace / jax /
torchxla / auto), ``baremetal``, ``benchmark``, ``profile``, ``simulate_kernel``; classes ``tensor``
and ``FrameworkKernel``. A kernel is traced once (loop bodies once, symbolic iterators), lowered to
BIR and run on birsim; ``kernel[g0, g1](...)`` runs an SPMD grid. On this machine there is no
Neuron device: "baremetal" compiles through walrus to a NEFF and runs it on birsim, and
``benchmark`` reports birsim's simulated latency.
"""
import numpy as np

from neuronxcc.nki import errors  # noqa: F401
from neuronxcc.nki import isa, language, typing  # noqa: F401
from neuronxcc.nki._trace.tensor import Tensor as tensor  # noqa: F401

__all__ = ["jit", "trace", "baremetal", "benchmark", "profile", "simulate_kernel", "tensor", "FrameworkKernel",
           "language", "isa", "typing", "compiler"]

MODES = ("auto", "simulation", "baremetal", "benchmark", "profile", "trace", "jax", "torchxla")


def __getattr__(name):
    if name == "compiler":
        import importlib
        return importlib.import_module("neuronxcc.nki.compiler")
    raise AttributeError(name)


def _is_jax(a):
    return type(a).__module__.startswith("jax") or type(a).__name__ in ("ArrayImpl", "Tracer", "DynamicJaxprTracer")


class _LatencyStats:
    """``benchmark_result.nc_latency``: simulated latencies in microseconds (birsim's timeline)."""

    PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)

    def __init__(self, samples_us):
        self.samples_us = list(samples_us)

    def get_latency_percentile(self, p):
        if int(p) not in self.PERCENTILES:
            raise ValueError("available percentiles: %s" % (list(self.PERCENTILES),))
        return float(np.percentile(np.asarray(self.samples_us, dtype=np.float64), int(p)))


class _BenchmarkResult:
    def __init__(self, samples_us):
        self.nc_latency = _LatencyStats(samples_us)


class JitKernel:
    """A kernel function with a mode, an optional grid and options."""

    # a kernel named test_* in a test module is not a pytest test (pytest would unwrap __wrapped__ and try
    # to call it with its tensor parameters as fixtures), as with the original's kernel objects
    __test__ = False

    def __init__(self, func, mode="auto", grid=(), **options):
        if mode not in MODES:
            raise errors.err_invalid_argument("unknown nki.jit mode %r (known: %s)" % (mode, ", ".join(MODES)))
        self.func = func
        self.mode = mode
        self.grid = tuple(grid)
        self.options = options
        self.benchmark_result = None
        self.__name__ = getattr(func, "__name__", "kernel")
        self.__doc__ = getattr(func, "__doc__", None)
        self.__wrapped__ = func

    def __getitem__(self, grid):
        if not isinstance(grid, tuple):
            grid = (grid,)
        return JitKernel(self.func, self.mode, grid, **self.options)

    def trace(self, *args, **kwargs):
        from neuronxcc.nki._trace import trace_kernel
        return trace_kernel(self.func, args, kwargs, grid=self.grid,
                            target=self.options.get("platform_target", "trn1") or "trn1")

    def __call__(self, *args, **kwargs):
        try:
            return self._call(*args, **kwargs)
        except errors.NkiError as e:
            # the message names the kernel's own line; no frames of the tracer below this call
            raise e.with_traceback(None) from None

    def _call(self, *args, **kwargs):
        from neuronxcc.nki._trace.context import current_or_none
        if current_or_none() is not None:
            if self.grid:
                raise errors.err_nested_kernel_with_spmd_grid(
                    "Calling kernel with spmd grid (%s%s) inside another kernel is not supported"
                    % (self.__name__, list(self.grid)))
            from neuronxcc.nki._trace.rewrite import rewritten
            return rewritten(self.func)(*args, **kwargs)
        mode = self.mode
        if mode in ("auto", "jax") and any(_is_jax(a) for a in list(args) + list(kwargs.values())):
            return _framework_call(self, args, kwargs)
        if mode in ("auto", "torchxla"):
            from neuronxcc.nki import _torch
            if mode == "torchxla" or _torch.has_torch_args(args, kwargs):
                return _torch.torch_call(self, args, kwargs)
        if mode == "trace":
            return self.trace(*args, **kwargs)
        if mode in ("auto", "jax"):
            mode = "simulation"
        return _run(self, mode, args, kwargs)


def _framework_call(k, args, kwargs):
    from neuronxcc.nki._framework import jax_call
    return jax_call(k, args, kwargs)


def _split(func, args, kwargs):
    """(tensor arrays in order, trace args with placeholders) for a call with numpy arrays."""
    from neuronxcc.nki._trace.trace import is_tensor_arg
    from neuronxcc.nki.typing import TensorType
    arrays = []
    for a in list(args) + list(kwargs.values()):
        if isinstance(a, TensorType):
            from neuronxcc.nki._trace.dtypes import is_float
            rng = np.random.default_rng(0)
            if is_float(a.dtype):
                arr = rng.standard_normal(a.shape).astype(np.float32).astype(a.dtype)
            else:
                arr = rng.integers(0, 8, a.shape).astype(a.dtype)
            arrays.append(arr)
        elif is_tensor_arg(a):
            arrays.append(a)
    return arrays


def _run(k, mode, args, kwargs):
    from neuronxcc.nki._trace import trace_kernel
    from neuronxcc.nki._trace.run import results, run_traced
    target = k.options.get("platform_target", "trn1") or "trn1"
    tk = trace_kernel(k.func, args, kwargs, grid=k.grid, target=target)
    arrays = _split(k.func, args, kwargs)
    if mode == "simulation":
        outs, _ = run_traced(tk, arrays, "simulation", target=target)
        return results(tk, outs, arrays)
    if mode == "baremetal":
        import os
        workdir = k.options.get("artifacts_dir")
        save = k.options.get("save_neff_name")
        if save:
            workdir = os.path.dirname(os.path.abspath(save))
        outs, _ = run_traced(tk, arrays, "baremetal", target=target, workdir=workdir,
                             neff_name=os.path.basename(save) if save else "file.neff",
                             trace_path=k.options.get("save_trace_name"))
        return results(tk, outs, arrays)
    if mode == "benchmark":
        import os
        warmup = int(k.options.get("warmup", 10))
        iters = int(k.options.get("iters", 100))
        save = k.options.get("save_neff_name")
        workdir = os.path.dirname(os.path.abspath(save)) if save else None
        outs, res = run_traced(tk, arrays, "benchmark", target=target, workdir=workdir,
                               neff_name=os.path.basename(save) if save else "file.neff",
                               trace_path=k.options.get("save_trace_name"))
        del warmup
        # birsim's timeline is deterministic: every iteration simulates to the same device latency
        k.benchmark_result = _BenchmarkResult([res.total_s * 1e6] * max(1, iters))
        return results(tk, outs, arrays)
    if mode == "profile":
        import os
        wd = k.options.get("working_directory")
        if not wd or not os.path.isabs(wd):
            raise errors.err_invalid_argument("nki.profile needs an absolute working_directory", location="<call>")
        neff = k.options.get("save_neff_name", "file.neff")
        trace = k.options.get("save_trace_name", "profile.json")
        outs, res = run_traced(tk, arrays, "profile", target=target, workdir=wd, neff_name=neff,
                               trace_path=os.path.join(wd, trace))
        k.benchmark_result = _BenchmarkResult([res.total_s * 1e6])
        return results(tk, outs, arrays)
    raise errors.err_invalid_argument("unknown mode %r" % mode, location="<call>")


def jit(func=None, mode="auto", **kwargs):
    """Decorate a kernel function (``@nki.jit`` or ``@nki.jit(mode=...)``)."""
    if func is None:
        return lambda f: JitKernel(f, mode, **kwargs)
    if isinstance(func, JitKernel):
        return JitKernel(func.func, mode, func.grid, **dict(func.options, **kwargs))
    return JitKernel(func, mode, **kwargs)


def trace(func=None, **kwargs):
    """A sub-kernel: traced inline when called from another kernel."""
    return jit(func, mode="trace", **kwargs)


def baremetal(kernel=None, **kwargs):
    return jit(kernel, mode="baremetal", **kwargs)


def benchmark(kernel=None, **kwargs):
    return jit(kernel, mode="benchmark", **kwargs)


def profile(func=None, **kwargs):
    return jit(func, mode="profile", **kwargs)


def simulate_kernel(kernel, *args, **kwargs):
    """Run KERNEL (an nki.jit / baremetal kernel or a plain function, optionally [grid]) on birsim with
    numpy inputs; returns the kernel's return value as numpy arrays (bf16/fp8 as ml_dtypes)."""
    if isinstance(kernel, JitKernel):
        k = JitKernel(kernel.func, "simulation", kernel.grid, **kernel.options)
    else:
        k = JitKernel(kernel, "simulation")
    try:
        return _run(k, "simulation", args, kwargs)
    except errors.NkiError as e:
        raise e.with_traceback(None) from None


from neuronxcc.nki._framework import FrameworkKernel  # noqa: E402  (framework integrations' base; see there)
