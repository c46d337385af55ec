"""Running a traced kernel: simulation (birsim on the traced BIR), baremetal (walrus, NEFF, birsim on
the NEFF), benchmark (baremetal + birsim's simulated latency) and profile (NEFF + Perfetto trace).

Values are exactly what birsim computes; latencies are birsim's simulated device time. Nothing
here reports a number that was not simulated.
"""
import os
import tempfile

import numpy as np

from neuronxcc.errors import BirSimError
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import dtypes as D

__all__ = ["run_traced", "compile_traced", "WALRUS_PASSES", "arrays_for"]

# the walrus pipeline of a kernel (the -O1 list; allocation unless the kernel allocated directly)
WALRUS_PASSES = ["lsa", "lower_ac", "bir_splitter", "partitioner", "pre_sched", "linear_scan_allocator",
                 "dma_optimization", "anti_dependency_analyzer", "post_sched", "dep_reduction", "birverifier"]


def arrays_for(tk, arrays):
    """Inputs in module.inputs order, cast to the traced dtypes."""
    if len(arrays) != len(tk.inputs):
        raise E.err_invalid_argument("kernel %s takes %d tensors, got %d" % (tk.func_name, len(tk.inputs),
                                                                              len(arrays)), location="<call>")
    out = []
    for (name, shape, dt), a in zip(tk.inputs, arrays):
        a = np.asarray(a)
        if tuple(a.shape) != tuple(shape):
            raise E.err_invalid_argument("tensor %s has shape %s, traced with %s" % (name, a.shape, shape),
                                         location="<call>")
        out.append(np.ascontiguousarray(a.astype(dt, copy=False)) if a.dtype != dt else np.ascontiguousarray(a))
    return out


def _typed(tk, outs):
    res = []
    for (name, shape, dt), o in zip(tk.output_specs, outs):
        o = np.asarray(o)
        if o.dtype != dt and o.dtype.kind == "V":
            o = o.view(dt)
        res.append(o.reshape(shape))
    return res


def compile_traced(tk, workdir, target=None, neff_name="file.neff"):
    """walrus passes over a copy of the traced module, then a NEFF in WORKDIR. Returns (module, neff path)."""
    from neuronxcc.neff import write_neff
    from neuronxcc.starfish import birpy
    from neuronxcc.walrus.cli import get_target
    from neuronxcc.walrus.registry import PassContext, run_passes
    m = birpy.from_json(birpy.to_json(tk.module))
    tname = target or m.target or "trn1"
    passes = list(WALRUS_PASSES)
    if all(ml.allocated for ml in m.memlocs.values()) and m.memlocs:
        passes = [p for p in passes if p != "linear_scan_allocator"]
    ctx = PassContext(get_target(tname, "nki"))
    ctx.target_name = tname
    run_passes(m, passes, ctx)
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, neff_name)
    write_neff(path, m, name=tk.func_name)
    return m, path


def run_traced(tk, arrays, mode="simulation", target=None, trace_path=None, workdir=None, neff_name="file.neff"):
    """(outputs as typed numpy arrays in tk.output_specs order, SimResult)."""
    from neuronxcc.starfish.birsim import simulate, simulate_neff
    ins = arrays_for(tk, arrays)
    want_trace = trace_path is not None
    try:
        return _run(tk, ins, mode, target, trace_path, workdir, neff_name)
    except BirSimError as e:
        if "is out of bounds for axis" in e.message:
            # what the original simulator raises for an indirect index outside the tensor (oob_mode=error)
            raise IndexError(e.message.rsplit(": ", 1)[-1]) from None
        raise


def _run(tk, ins, mode, target, trace_path, workdir, neff_name):
    from neuronxcc.starfish.birsim import simulate, simulate_neff
    want_trace = trace_path is not None
    if mode == "simulation":
        res = simulate(tk.module, ins, target=target, trace=want_trace)
    elif mode in ("baremetal", "benchmark", "profile"):
        tmp = None
        if workdir is None:
            tmp = tempfile.TemporaryDirectory(prefix="nki-")
            workdir = tmp.name
        try:
            _, path = compile_traced(tk, workdir, target, neff_name)
            res = simulate_neff(path, ins, target=target, trace=want_trace)
        finally:
            if tmp is not None:
                tmp.cleanup()
    else:
        raise E.err_invalid_argument("unknown run mode %r" % (mode,), location="<call>")
    if want_trace:
        res.write_trace(trace_path)
    return _typed(tk, res.outputs), res


def results(tk, outs, arrays):
    """The kernel's Python return value from the outputs; mutated arrays updated in place."""
    by_name = {spec[0]: o for spec, o in zip(tk.output_specs, outs)}
    names = [n for n, _, _ in tk.inputs]
    for out_name, in_name in tk.aliases.items():
        k = names.index(in_name)
        a = arrays[k]
        if isinstance(a, np.ndarray) and a.flags.writeable:
            src = by_name[out_name]
            if a.dtype != src.dtype:
                src = src.astype(a.dtype)
            np.copyto(a, src.reshape(a.shape))
    kind, ret_names = tk.returns
    vals = [by_name[n] for n in ret_names]
    if kind == "none":
        return None
    if kind == "single":
        return vals[0]
    return tuple(vals)


def dtype_of(x):
    return D.np_dtype(x)
