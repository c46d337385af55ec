"""A loaded program: load once, execute many times (as the Neuron runtime's
nrt_load / nrt_execute).

``load_neff(path)`` (or ``Model(module)``) reads the NEFF, parses its BIR,
builds the machine state and prepares every instruction once: its execution
plan (``plans``), its operands' access-pattern infos (``_apinfo``) and its
timeline record (cost, typed waits; ``timeline``). ``Model.execute(inputs)``
then only runs: it puts the machine state back to what a fresh one holds
(poison where a fresh state has poison, the const tensors' data), sets the
inputs, starts the timeline at zero and interprets the body.

Invariants: every execution of a model gives the outputs and the simulated
times a fresh ``simulate`` of the same module and inputs gives (tests/birsim/
test_model.py runs programs several times and against ``simulate``); a model
runs one execution at a time (a lock; executions from several threads queue);
an instruction whose preparation fails at load (say an access outside its
memloc in a branch that never runs) is prepared again when it first executes,
so the error is raised only if it does, as ``simulate`` raises it.
"""
import contextlib
import copy
import gc
import os
import threading

import numpy as np

from neuronxcc.errors import BirSimError
from neuronxcc.hwm import get_target
from neuronxcc.starfish.birsim.executor import Executor
from neuronxcc.starfish.birsim.state import MachineState
from neuronxcc.starfish.birsim.timeline import Timeline

__all__ = ["Model", "load_neff", "SimResult", "execute_once", "gc_paused", "io_permutations", "to_stored_layout",
           "to_logical_layout"]


class SimResult:
    """outputs (list, flattened result order), timing summary, trace. A result of a loaded
    model's execution (``birsim.model``) keeps that run's timeline; its final memory contents
    (memloc, tensor) are readable until the model executes again. The summary figures
    (total_s, instructions, busy_s, utilisation, races, counts) are read from the timeline
    when first asked for."""

    _SUMMARY = ("total_s", "instructions", "busy_s", "utilisation", "races", "counts")

    def __init__(self, outputs, timeline, state=None, model=None, run=0):
        self.outputs = outputs
        self.timeline = timeline
        self.state = state
        self._model = model
        self._run = run

    def __getattr__(self, name):
        # only reached for attributes not set yet: the summary figures, from one summary()
        if name in SimResult._SUMMARY:
            s = self.timeline.summary()
            d = self.__dict__
            for k in SimResult._SUMMARY:
                d.setdefault(k, s[k])          # a figure set by the caller (lnc: total_s) stays
            return d[name]
        raise AttributeError(name)

    def summary(self):
        return self.timeline.summary()

    def _state(self):
        if self._model is not None and self._model.runs != self._run:
            raise BirSimError("the model executed again after this result: its memory holds run %d, this "
                              "result is of run %d" % (self._model.runs, self._run))
        return self.state

    def memloc(self, name, dtype="float32"):
        """Final contents of memloc NAME as [partitions, bytes_per_partition / itemsize] (debugging)."""
        from neuronxcc.starfish.birpy import dtypes as _dt
        t = self._state().targets[name]
        rows = t.buf.reshape(-1, t.row_bytes)[t.row0:t.row0 + t.nrows, t.byte0:t.byte0 + t.nbytes]
        return np.ascontiguousarray(rows).view(_dt.np_dtype(dtype)).copy()

    def tensor(self, name):
        """Final contents of HBM tensor NAME (inputs, scratch and consts included)."""
        return self._state().get_tensor(name)

    def trace_json(self):
        return self.timeline.trace_json()

    def write_trace(self, path):
        self.timeline.write_trace(path)


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


def inputs_list(module, inputs):
    if isinstance(inputs, dict):
        missing = [n for n in module.inputs if n not in inputs]
        if missing:
            raise BirSimError("missing inputs: %s" % ", ".join(missing))
        return [inputs[n] for n in module.inputs]
    inputs = list(inputs)
    if len(inputs) != len(module.inputs):
        raise BirSimError("the program takes %d inputs, got %d" % (len(module.inputs), len(inputs)))
    return inputs


class Model:
    """MODULE loaded for execution on one NeuronCore (arguments as ``simulate``'s).

    prepare=True prepares every instruction now (load); False leaves it to the first
    execution (``simulate`` runs a model once). ranks: one rank's ``collective.RankContext``
    (``simulate_ranks``); its rank ids are written into the state before each execution."""

    def __init__(self, module, target=None, poison=True, sync="auto", strict=False, order="program",
                 custom_op_dir=None, custom_op_libs=None, ranks=None, prepare=True):
        if order not in ("program", "streams"):
            raise ValueError("order must be 'program' or 'streams'")
        self.module = module
        self.order = order
        self.ranks = ranks
        self.tm = target if hasattr(target, "pe_hz") else get_target(target or module.target or "trn1")
        module.ensure_ids()
        self.state = MachineState(module, self.tm, poison=poison)
        self.timeline = Timeline(module, self.tm, trace=False, sync=sync, strict=strict)
        libs = custom_op_libs
        if libs is None:
            cache = []

            def libs():
                if not cache:
                    from neuronxcc.starfish.birsim.customop import load_libraries
                    cache.extend(load_libraries(custom_op_dir))
                return cache
        self.executor = Executor(module, self.state, self.timeline, libs)
        if ranks is not None:
            self.executor.ranks = ranks
        self.runs = 0                   # executions so far (a result's memory is that of the last one)
        self._lock = threading.Lock()
        if prepare:
            self.prepare()

    def prepare(self):
        """Prepare every instruction's plan, access infos and timeline record now."""
        ex, tl = self.executor, self.timeline
        for n in self.module.walk():
            if n.kind != "inst":
                continue
            try:
                ex._prepare(n)
                tl.rec(n)
            except BirSimError:
                # raised again when (if) the instruction executes, as a fresh simulation does
                ex._plans.pop(id(n), None)

    def execute(self, inputs, trace=False):
        """SimResult of one execution on INPUTS (a list in module.inputs order, or a dict by name)."""
        vals = inputs_list(self.module, inputs)
        # the collector paused: an execution makes no cyclic garbage worth its passes (it builds
        # no machine state; the per-step tuples and the output arrays go by reference counting)
        with self._lock, gc_paused():
            st, tl, ex = self.state, self.timeline, self.executor
            if self.runs:
                st.reset()
                tl.reset(trace)
                ex.env = {}
                ex.regs = ex.env
            else:
                tl.trace = trace
            for name, value in zip(self.module.inputs, vals):
                st.set_input(name, value)
            if self.ranks is not None:
                self.ranks.load(st, self.module)
            self.runs += 1
            if self.order == "streams":
                from neuronxcc.starfish.birsim.streams import run_streams
                with np.errstate(all="ignore"):
                    run_streams(ex, self.module)
            else:
                ex.run()
            outs = [st.get_tensor(n) for n in self.module.outputs]
            # the result keeps this run's timeline (the next run starts a fresh core, tracker, events)
            return SimResult(outs, copy.copy(tl), st, model=self, run=self.runs)

    def close(self):
        """Drop the prepared plans (the machine state's buffers go back to birsim's pool)."""
        self.executor.close()


class _LncModel:
    """An LNC=2 program (two physical cores in two threads, ``birsim.lnc``): not prepared
    ahead; each execution is a fresh ``simulate``."""

    def __init__(self, module, kw):
        kw.pop("prepare", None)
        self.module = module
        self.kw = kw
        self.runs = 0

    def execute(self, inputs, trace=False):
        from neuronxcc.starfish.birsim.lnc import simulate_lnc       # both physical cores of the pair
        self.runs += 1
        return simulate_lnc(execute_once, self.module, inputs, trace=trace, **self.kw)

    def close(self):
        pass


class NeffModel:
    """A NEFF's program loaded (``load_neff``): execute() takes and returns the logical (HLO)
    layouts, applying the NEFF's io_transposes."""

    def __init__(self, neff, model, perms):
        self.neff = neff
        self.model = model
        self.module = model.module
        self.perms = perms

    def execute(self, inputs, trace=False):
        res = self.model.execute(to_stored_layout(self.module, inputs, self.perms), trace=trace)
        return to_logical_layout(self.module, res, self.perms)

    def close(self):
        self.model.close()


def execute_once(module, inputs, trace=False, **kw):
    """SimResult of one execution of MODULE on a Model built for it (KW: Model's), not prepared ahead."""
    model = Model(module, prepare=False, **kw)
    try:
        return model.execute(inputs, trace=trace)
    finally:
        model.close()       # the plans refer back to the executor: dropped, the state frees promptly


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
    vals = inputs_list(module, inputs)
    return [np.transpose(np.asarray(v), perms[("input", n)]) if ("input", n) in perms else v
            for n, v in zip(module.inputs, vals)]


def to_logical_layout(module, res, perms):
    if perms:
        res.outputs = [np.transpose(o, np.argsort(perms[("output", n)])) if ("output", n) in perms else o
                       for n, o in zip(module.outputs, res.outputs)]
    return res


def load_neff(neff, target=None, poison=True, **kw):
    """The BIR program inside NEFF (a path, or what ``neuronxcc.neff.read_neff`` returned)
    loaded for execution: a NeffModel whose execute(inputs) -> SimResult. Custom-op
    libraries staged in the NEFF are loaded here (their temporary files removed at once)."""
    with gc_paused():
        if isinstance(neff, (str, bytes, os.PathLike)):
            from neuronxcc.neff import read_neff
            neff = read_neff(neff)
        module = neff.module
        libs = kw.pop("custom_op_libs", None)
        if libs is None and getattr(neff, "ucode_lib", None):
            import tempfile     # only with custom ops: tempfile's imports would cost every walrus start-up
            with tempfile.TemporaryDirectory(prefix="birsim-customop-") as d:
                from neuronxcc.starfish.birsim.customop import load_libraries
                libs = load_libraries(paths=neff.extract_custom_op_libraries(d))
        if (getattr(module, "attrs", None) or {}).get("lnc") == 2:
            model = _LncModel(module, dict(kw, target=target, poison=poison, custom_op_libs=libs))
        else:
            model = Model(module, target=target, poison=poison, custom_op_libs=libs, **kw)
    return NeffModel(neff, model, io_permutations(neff))
