"""birsim entry points: simulate a BIR module or a NEFF.

``simulate`` builds the machine state, loads the inputs, interprets the body
in program order (``executor``) while the ``timeline`` accounts time, and
returns a ``SimResult``: a ``model.Model`` executed once (``model.load_neff``
loads a NEFF to execute it many times). birsim executes BIR only: it never reads HLO,
Penguin IR or goldens.
"""
import contextlib
import gc
import os

import numpy as np

from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birsim.model import Model
from neuronxcc.starfish.birsim.model import inputs_list as _inputs_list

__all__ = ["SimResult", "simulate", "run_module", "run_neff", "simulate_neff"]


class SimResult:
    """outputs (list, flattened result order), timing summary, trace. A result of a loaded
    model's execution (``birsim.model``) keeps that run's timeline; its final memory contents
    (memloc, tensor) are readable until the model executes again."""

    def __init__(self, outputs, timeline, state=None, model=None, run=0):
        self.outputs = outputs
        self.timeline = timeline
        self.state = state
        self._model = model
        self._run = run
        s = timeline.summary()
        self.total_s = s["total_s"]
        self.instructions = s["instructions"]
        self.busy_s = s["busy_s"]
        self.utilisation = s["utilisation"]
        self.races = s["races"]
        self.counts = s["counts"]

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
    model = Model(module, target=target, poison=poison, sync=sync, strict=strict, order=order,
                  custom_op_dir=custom_op_dir, custom_op_libs=custom_op_libs, ranks=ranks, prepare=False)
    try:
        return model.execute(inputs, trace=trace)
    finally:
        model.close()       # the plans refer back to the executor: dropped, the state frees promptly


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
    returned): ``load_neff`` then one execution. Inputs and outputs are in their logical (HLO)
    layouts: io_transposes recorded in the NEFF are applied."""
    from neuronxcc.starfish.birsim.model import load_neff
    model = load_neff(neff, target=target, poison=poison, prepare=False, **kw)
    try:
        return model.execute(inputs, trace=trace)
    finally:
        model.close()


def run_neff(neff_path, inputs, **kw):
    """Outputs of the NEFF's program (inputs in parameter order)."""
    return simulate_neff(os.fspath(neff_path), inputs, **kw).outputs
