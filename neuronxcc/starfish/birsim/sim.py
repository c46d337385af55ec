"""birsim entry points: simulate a BIR module or a NEFF.

``simulate`` builds the machine state, loads the inputs, interprets the body
in program order (``executor``) while the ``timeline`` accounts time, and
returns a ``SimResult``. birsim executes BIR only: it never reads HLO,
Penguin IR or goldens.
"""
import contextlib
import gc
import os

import numpy as np

from neuronxcc.errors import BirSimError
from neuronxcc.hwm import get_target
from neuronxcc.starfish.birsim.executor import Executor
from neuronxcc.starfish.birsim.state import MachineState
from neuronxcc.starfish.birsim.timeline import Timeline

__all__ = ["SimResult", "simulate", "run_module", "run_neff", "simulate_neff"]


class SimResult:
    """outputs (list, flattened result order), timing summary, trace."""

    def __init__(self, outputs, timeline, state=None):
        self.outputs = outputs
        self.timeline = timeline
        self.state = state
        s = timeline.summary()
        self.total_s = s["total_s"]
        self.instructions = s["instructions"]
        self.busy_s = s["busy_s"]
        self.utilisation = s["utilisation"]
        self.races = s["races"]
        self.counts = s["counts"]

    def summary(self):
        return self.timeline.summary()

    def memloc(self, name, dtype="float32"):
        """Final contents of memloc NAME as [partitions, bytes_per_partition / itemsize] (debugging)."""
        from neuronxcc.starfish.birpy import dtypes as _dt
        t = self.state.targets[name]
        rows = t.buf.reshape(-1, t.row_bytes)[t.row0:t.row0 + t.nrows, t.byte0:t.byte0 + t.nbytes]
        return np.ascontiguousarray(rows).view(_dt.np_dtype(dtype)).copy()

    def tensor(self, name):
        """Final contents of HBM tensor NAME (inputs, scratch and consts included)."""
        return self.state.get_tensor(name)

    def trace_json(self):
        return self.timeline.trace_json()

    def write_trace(self, path):
        self.timeline.write_trace(path)


def _inputs_list(module, inputs):
    if isinstance(inputs, dict):
        missing = [n for n in module.inputs if n not in inputs]
        if missing:
            raise BirSimError("missing inputs: %s" % ", ".join(missing))
        return [inputs[n] for n in module.inputs]
    inputs = list(inputs)
    if len(inputs) != len(module.inputs):
        raise BirSimError("the program takes %d inputs, got %d" % (len(module.inputs), len(inputs)))
    return inputs


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector paused (reference counting still frees everything without
    cycles): building a NEFF's BIR allocates many small containers, and the collector's passes
    over them cost 20-40% of reading a large program. Not used around the simulation itself:
    there the collector frees the machine states of earlier runs, whose buffers the next
    run reuses. Switched back on at the end when it was on (in a multi-rank run one rank's
    thread may switch it back on early; that only costs time)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def simulate(module, inputs, target=None, trace=False, poison=True, custom_op_dir=None, custom_op_libs=None,
             sync="auto", strict=False, order="program", ranks=None):
    """Run MODULE on INPUTS (list in module.inputs order, or dict by name).

    sync/strict: see ``timeline`` (semaphore races are recorded, or raised
    with strict=True; "dependencies" orders by memory conflicts instead).
    order: "program" executes the body in program order (the default; needs
    body order to be a valid sequential order, which every layer keeps);
    "streams" runs each engine's stream on its own, interleaved by time, so
    data moves only as the semaphores allow (see ``streams``).
    ranks: the ``collective.RankContext`` of one rank of a multi-rank run
    (``birsim.ranks.simulate_ranks`` passes it); None = one core."""
    if ranks is None and (getattr(module, "attrs", None) or {}).get("lnc") == 2:
        from neuronxcc.starfish.birsim.lnc import simulate_lnc       # both physical cores of the pair
        return simulate_lnc(simulate, module, inputs, target=target, trace=trace, poison=poison, custom_op_dir=custom_op_dir,
                            custom_op_libs=custom_op_libs, sync=sync, strict=strict, order=order)
    tm = target if hasattr(target, "pe_hz") else get_target(target or module.target or "trn1")
    module.ensure_ids()
    state = MachineState(module, tm, poison=poison)
    for name, value in zip(module.inputs, _inputs_list(module, inputs)):
        state.set_input(name, value)
    tl = Timeline(module, tm, trace=trace, sync=sync, strict=strict)
    libs = custom_op_libs
    if libs is None:
        cache = []

        def libs():
            if not cache:
                from neuronxcc.starfish.birsim.customop import load_libraries
                cache.extend(load_libraries(custom_op_dir))
            return cache
    ex = Executor(module, state, tl, libs)
    if ranks is not None:
        ex.ranks = ranks
        ranks.load(state, module)
    try:
        if order == "streams":
            import numpy as _np

            from neuronxcc.starfish.birsim.blas import single_threaded
            from neuronxcc.starfish.birsim.streams import run_streams
            with _np.errstate(all="ignore"), single_threaded():
                run_streams(ex, module)
        elif order == "program":
            ex.run()
        else:
            raise ValueError("order must be 'program' or 'streams'")
    finally:
        ex.close()
    outs = [state.get_tensor(n) for n in module.outputs]
    return SimResult(outs, tl, state)


def run_module(module, inputs, target=None, **kw):
    """Outputs (numpy arrays, flattened result order) of MODULE on INPUTS."""
    return simulate(module, inputs, target=target, **kw).outputs


def io_permutations(neff):
    """{(kind, tensor name): permutation} of I/O variables stored transposed
    (sg00/io_transposes.json: stored = logical.transpose(permutation)); empty when none."""
    doc = getattr(neff, "io_transposes", None) or {}
    out = {}
    for t in doc.get("transposes", []) if isinstance(doc, dict) else []:
        out[(t.get("kind"), t.get("name"))] = [int(k) for k in t.get("permutation", [])]
    return out


def to_stored_layout(module, inputs, perms):
    if not perms:
        return inputs
    vals = _inputs_list(module, inputs)
    return [np.transpose(np.asarray(v), perms[("input", n)]) if ("input", n) in perms else v
            for n, v in zip(module.inputs, vals)]


def to_logical_layout(module, res, perms):
    if perms:
        res.outputs = [np.transpose(o, np.argsort(perms[("output", n)])) if ("output", n) in perms else o
                       for n, o in zip(module.outputs, res.outputs)]
    return res


def simulate_neff(neff, inputs, target=None, trace=False, poison=True, **kw):
    """SimResult of the BIR program inside NEFF (a path, or what ``neuronxcc.neff.read_neff``
    returned). Inputs and outputs are in their logical (HLO) layouts: io_transposes recorded in
    the NEFF are applied."""
    with gc_paused():
        if isinstance(neff, (str, bytes, os.PathLike)):
            from neuronxcc.neff import read_neff
            neff = read_neff(neff)
        module = neff.module
    perms = io_permutations(neff)
    inputs = to_stored_layout(module, inputs, perms)
    if getattr(neff, "ucode_lib", None):
        import tempfile     # only with custom ops: tempfile's imports would cost every walrus start-up
        with tempfile.TemporaryDirectory(prefix="birsim-customop-") as d:
            paths = neff.extract_custom_op_libraries(d)
            from neuronxcc.starfish.birsim.customop import load_libraries
            libs = load_libraries(paths=paths)
            res = simulate(module, inputs, target=target, trace=trace, poison=poison, custom_op_libs=libs, **kw)
            return to_logical_layout(module, res, perms)
    return to_logical_layout(module, simulate(module, inputs, target=target, trace=trace, poison=poison, **kw), perms)


def run_neff(neff_path, inputs, **kw):
    """Outputs of the NEFF's program (inputs in parameter order)."""
    return simulate_neff(os.fspath(neff_path), inputs, **kw).outputs
