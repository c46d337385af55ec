"""The timeline's simulated times are pinned: compiled corpus programs (their BIR, stored
in tests/birsim/data as gzipped BIR JSON) and a synchronised tile loop must give exactly
the per-instruction (start, end) times, totals, busy times and counts recorded when the
pins were made. A speed change to birsim must not change the cost model's numbers; a
deliberate cost-model change regenerates the pins (``python tests/birsim/test_timeline_pins.py``)
and says so in its commit message."""
import gzip
import hashlib
import json
import os
import sys

import numpy as np
import pytest

from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birpy import serde
from neuronxcc.starfish.birsim import simulate

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
PINS = os.path.join(DATA, "timeline_pins.json")
CORPUS = ("layernorm", "causal_attention", "conditional", "int_zoo", "transformer_block", "conv_relu_maxpool")


def _inputs(m, seed):
    from neuronxcc.starfish.birpy import dtypes as _dt
    rng = np.random.default_rng(seed)
    out = []
    for name in m.inputs:
        t = m.tensors[name]
        dt = _dt.np_dtype(t.dtype)
        if t.dtype == "bool":
            out.append(rng.integers(0, 2, t.shape).astype(bool))
        elif np.issubdtype(dt, np.integer):
            out.append(rng.integers(0, 8, t.shape).astype(dt))
        else:
            out.append(rng.standard_normal(t.shape).astype(np.float32).astype(dt))
    return out


def _tile_loop(iters=24):
    m = B.Module("loop")
    m.add_tensor("x", "input", "float32", (iters, 128, 32))
    m.add_tensor("y", "output", "float32", (iters, 128, 32))
    m.add_memloc("a", "SBUF", 128, 2 * 32 * 4)
    m.add_memloc("b", "SBUF", 128, 32 * 4)
    b = B.Builder(m)
    with b.loop("i", 0, iters) as i:
        t = B.AccessPattern("a", "float32", (i % 2) * 32, [[1, 32]], 0, 128)
        b.inst("dma_copy", "SP", [t], [B.AccessPattern("x", "float32", i * 4096, [[32, 128], [1, 32]])],
               queue="q%d" % 0, signals=[("q0", 1)])
        b.inst("activation", "ACT", [b.ap("b")], [t], func="exp", waits=[("q0", i + 1)], signals=[("A", 1)])
        b.inst("tensor_scalar", "DVE", [t], [b.ap("b")], op0="mult", operand0=2.0, waits=[("A", i + 1)],
               signals=[("D", 1)])
        b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * 4096, [[32, 128], [1, 32]])], [t],
               queue="q1", waits=[("D", i + 1)], signals=[("S", 1)])
    return b.finish()


def _module(name):
    if name == "tile_loop":
        return _tile_loop()
    with gzip.open(os.path.join(DATA, name + ".bir.json.gz"), "rt") as f:
        return serde.module_from_json(json.load(f))


def _measure(m, target):
    res = simulate(m, _inputs(m, 0), target=target, trace=True)
    events = [(track, instr.id, repr(s), repr(e)) for track, instr, s, e, _, _ in res.timeline.events]
    digest = hashlib.sha256(json.dumps(events).encode()).hexdigest()
    plain = simulate(m, _inputs(m, 0), target=target)       # the untraced path gives the same numbers
    return {"total_s": repr(res.total_s), "plain_total_s": repr(plain.total_s), "instructions": res.instructions,
            "busy_s": {k: repr(v) for k, v in sorted(res.busy_s.items())}, "counts": res.counts,
            "events": len(events), "digest": digest, "first": events[:40]}


CASES = [(n, "trn1") for n in CORPUS] + [("tile_loop", "trn1"), ("tile_loop", "trn2"), ("transformer_block", "trn2")]


@pytest.mark.parametrize("name,target", CASES)
def test_simulated_times_are_pinned(name, target):
    with open(PINS) as f:
        want = json.load(f)["%s@%s" % (name, target)]
    got = _measure(_module(name), target)
    assert [list(e) for e in got["first"]] == want["first"]
    for k in ("total_s", "plain_total_s", "instructions", "busy_s", "counts", "events", "digest"):
        assert got[k] == want[k], k


def _regenerate(neff_dir):
    """Write the BIR fixtures from NEFFs (neff_dir/<name>.neff) and the pins from the current timeline."""
    from neuronxcc.neff import read_neff
    for n in CORPUS:
        path = os.path.join(neff_dir, n + ".neff")
        if os.path.exists(path):
            m = read_neff(path).module
            with gzip.open(os.path.join(DATA, n + ".bir.json.gz"), "wt") as f:
                json.dump(serde.module_to_json(m), f)
    pins = {"%s@%s" % (n, t): _measure(_module(n), t) for n, t in CASES}
    with open(PINS, "w") as f:
        json.dump(pins, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    _regenerate(sys.argv[1] if len(sys.argv) > 1 else DATA)
