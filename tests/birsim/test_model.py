"""A loaded model (birsim.model: load once, execute many times) against fresh simulations:
every execution gives the outputs, simulated times and trace events that ``simulate`` gives
on the same inputs, whatever ran before it on the model (poisoned memory, const tensors and
registers come back as a fresh state has them); errors of instructions that never run stay
silent; a result's memory is readable only until the model runs again."""
import gzip
import json
import os
import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from neuronxcc.errors import BirSimError
from neuronxcc.pelican import var
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birpy import serde
from neuronxcc.starfish.birsim import simulate, simulate_neff
from neuronxcc.starfish.birsim.model import Model, load_neff
from birsim.test_control import _tiled_exp_module
from birsim.test_plans import programs
from birsim.test_timeline_pins import _inputs
from neuronxcc.common.tolerances import assert_close

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def _events(res):
    return [(track, instr.id, s, e) for track, instr, s, e, _, _ in res.timeline.events]


def _same(a, b, trace=False):
    assert len(a.outputs) == len(b.outputs)
    for x, y in zip(a.outputs, b.outputs):
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()
    assert a.summary() == b.summary()
    if trace:
        assert _events(a) == _events(b)


@settings(max_examples=25, deadline=None)
@given(programs(), st.integers(0, 99))
def test_every_execution_is_a_fresh_simulation(prog, seed):
    m, x = prog
    x2 = np.random.default_rng(seed).uniform(-4, 4, x.shape).astype(np.float32)
    model = Model(m)
    for inp, trace in ((x, False), (x2, True), (x, True), (x2, False)):
        _same(model.execute([inp], trace=trace), simulate(m, [inp], trace=trace), trace)


@pytest.mark.parametrize("name", ["layernorm", "conditional", "int_zoo"])
def test_compiled_programs_repeat_exactly(name):
    with gzip.open(os.path.join(DATA, name + ".bir.json.gz"), "rt") as f:
        m = serde.module_from_json(json.load(f))
    model = Model(m)
    ins = [_inputs(m, 0), _inputs(m, 1)]
    first = [model.execute(i, trace=True) for i in ins]
    again = [model.execute(i, trace=True) for i in ins]
    for k, i in enumerate(ins):
        ref = simulate(m, i, trace=True)
        _same(first[k], ref, True)
        _same(again[k], ref, True)


def _stale_module():
    """out0 = SBUF a before anything writes it (poison), out1 = const c; then a = x, c = x:
    a second execution that skipped the reset would read the first one's values."""
    m = B.Module("stale")
    m.add_tensor("x", "input", "float32", (4, 8))
    m.add_tensor("c", "const", "float32", (4, 8), data=np.arange(32, dtype=np.float32).reshape(4, 8))
    m.add_tensor("y", "output", "float32", (4, 8))
    m.add_tensor("z", "output", "float32", (4, 8))
    m.add_memloc("a", "SBUF", 4, 32)
    m.memlocs["a"].start_partition = 0
    m.memlocs["a"].byte_offset = 64
    m.add_memloc("u", "SBUF", 4, 32)
    b = B.Builder(m)
    a = B.AccessPattern("a", "float32", 0, [[1, 8]], 0, 4)
    u = B.AccessPattern("u", "float32", 0, [[1, 8]], 0, 4)
    b.inst("dma_copy", "SP", [b.ap("y")], [a])
    b.inst("dma_copy", "SP", [u], [b.ap("c")])
    b.inst("dma_copy", "SP", [b.ap("z")], [u])
    b.inst("dma_copy", "SP", [a], [b.ap("x")])
    b.inst("dma_copy", "SP", [b.ap("c")], [a])
    b.inst("register_load", "SP", [], [B.AccessPattern("a", "int32", 0, [[1, 1]], 0, 1)], register="r")
    return b.finish()


@pytest.mark.parametrize("poison", [True, False])
def test_poison_consts_and_registers_come_back(poison):
    m = _stale_module()
    model = Model(m, poison=poison)
    x = np.full((4, 8), 7.0, np.float32)
    for _ in range(3):
        res = model.execute([x])
        y, z = res.outputs
        if poison:
            assert np.isnan(y).all()
        else:
            assert (y == 0).all()
        np.testing.assert_array_equal(z, np.arange(32, dtype=np.float32).reshape(4, 8))
        assert model.executor.regs["r"] == int(np.float32(7).view(np.int32))     # loaded in this run


def test_registers_of_an_earlier_execution_are_gone():
    """The register is read (as an offset) before this program loads it: every execution fails
    the same way, the second is not helped by the first's register."""
    m = B.Module("reg")
    m.add_tensor("x", "input", "int32", (1,))
    m.add_tensor("y", "output", "int32", (1,))
    m.add_memloc("s", "SBUF", 1, 64)
    b = B.Builder(m)
    s0 = B.AccessPattern("s", "int32", 0, [[1, 1]], 0, 1)
    b.inst("dma_copy", "SP", [s0], [b.ap("x")])
    with b.if_("r"):
        b.inst("memset", "POOL", [s0], [], value=5)
    b.inst("register_load", "SP", [], [s0], register="r", min=0, max=1)
    b.inst("dma_copy", "SP", [b.ap("y")], [s0])
    b.finish()
    model = Model(m)
    for _ in range(2):
        with pytest.raises(BirSimError, match="before any register_load"):
            model.execute([np.array([1], np.int32)])


def test_unexecuted_errors_stay_silent_and_executed_ones_match_simulate():
    m = B.Module("dead")
    m.add_tensor("x", "input", "int32", (1,))
    m.add_tensor("y", "output", "int32", (1,))
    m.add_memloc("s", "SBUF", 1, 16)
    b = B.Builder(m)
    s0 = B.AccessPattern("s", "int32", 0, [[1, 1]], 0, 1)
    b.inst("dma_copy", "SP", [s0], [b.ap("x")])
    b.inst("register_load", "SP", [], [s0], register="go", min=0, max=1)
    with b.if_("go"):
        # partitions 0..2 of a one-partition memloc: an error when (only when) it runs
        b.inst("memset", "POOL", [B.AccessPattern("s", "int32", 0, [[1, 1]], 0, 3)], [], value=1)
    b.inst("dma_copy", "SP", [b.ap("y")], [s0])
    b.finish()
    model = Model(m)            # prepares everything; the bad memset's error is kept for its execution
    assert model.execute([np.array([0], np.int32)]).outputs[0].tolist() == [0]
    with pytest.raises(BirSimError) as e1:
        model.execute([np.array([1], np.int32)])
    with pytest.raises(BirSimError) as e2:
        simulate(m, [np.array([1], np.int32)])
    assert e1.value.message == e2.value.message
    assert model.execute([np.array([0], np.int32)]).outputs[0].tolist() == [0]


def test_result_memory_is_readable_until_the_next_execution():
    m = _stale_module()
    model = Model(m)
    r1 = model.execute([np.ones((4, 8), np.float32)])
    np.testing.assert_array_equal(r1.memloc("a"), np.ones((4, 8), np.float32))
    r2 = model.execute([np.zeros((4, 8), np.float32)])
    assert r1.total_s == r2.total_s and r1.summary() == r2.summary()
    with pytest.raises(BirSimError, match="executed again"):
        r1.memloc("a")
    np.testing.assert_array_equal(r2.tensor("x"), np.zeros((4, 8), np.float32))


def test_threads_share_a_model_one_execution_at_a_time():
    m = _tiled_exp_module()
    model = Model(m)
    xs = [np.random.default_rng(k).uniform(-4, 4, (256, 96)).astype(np.float32) for k in range(6)]
    want = [simulate(m, [v]).outputs for v in xs]
    got = [None] * len(xs)

    def run(k):
        got[k] = model.execute([xs[k]]).outputs
    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g, w in zip(got, want):
        for a, b in zip(g, w):
            assert a.tobytes() == b.tobytes()


def test_load_neff_applies_io_transposes_like_simulate_neff(tmp_path):
    from neuronxcc.neff import write_neff
    m = B.Module("t")
    m.add_tensor("x", "input", "float32", (8, 4))       # stored transposed: logical [4, 8]
    m.add_tensor("y", "output", "float32", (8, 4))
    m.add_memloc("a", "SBUF", 8, 16)
    b = B.Builder(m)
    a = B.AccessPattern("a", "float32", 0, [[1, 4]], 0, 8)
    b.inst("dma_copy", "SP", [a], [b.ap("x")])
    b.inst("activation", "ACT", [a], [a], func="exp")
    b.inst("dma_copy", "SP", [b.ap("y")], [a])
    b.finish()
    tr = {"version": 1, "transposes": [{"name": "x", "kind": "input", "shape": [4, 8], "permutation": [1, 0]},
                                       {"name": "y", "kind": "output", "shape": [4, 8], "permutation": [1, 0]}]}
    path = str(tmp_path / "t.neff")
    write_neff(path, m, io_transposes=tr)
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    model = load_neff(path)
    for _ in range(2):
        res = model.execute([x])
        ref = simulate_neff(path, [x])
        _same(res, ref)
        assert_close(res.outputs[0], np.exp(x), row="compiled")
