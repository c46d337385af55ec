"""The scheduler's and print_metrics' estimate hold the shared ports as birsim does (``birpy.cost``:
on v2 VectorE and ScalarE share the PSUM port, VectorE and GpSimd the SBUF port; an instruction
holds its port for its whole II): two independent instructions of different engines that share a
port run one after the other, in birsim, in the estimate and in the list schedule."""
import numpy as np
import pytest

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birpy.cost import instruction_cost
from neuronxcc.starfish.birsim import simulate
from neuronxcc.walrus import _sched
from neuronxcc.walrus.deps import csr
from neuronxcc.walrus.estimate import estimate_time
from neuronxcc.walrus.registry import PassContext

TM = get_target("trn1")


def _two_readers(psum):
    """ACT and DVE each copy a tile of their own, independent of each other: from PSUM (the shared
    PSUM port) or from SBUF (DVE's SBUF port is GpSimd's, not ScalarE's)."""
    m = B.Module("ports")
    mem = "PSUM" if psum else "SBUF"
    m.add_memloc("pa", mem, 128, 2048)
    m.add_memloc("pd", mem, 128, 2048)
    m.add_memloc("a", "SBUF", 128, 2048)
    m.add_memloc("d", "SBUF", 128, 2048)
    b = B.Builder(m)
    b.inst("activation", "ACT", [b.ap("a", free=512)], [b.ap("pa", free=512)], func="identity")
    b.inst("tensor_copy", "DVE", [b.ap("d", free=512)], [b.ap("pd", free=512)])
    return b.finish()


@pytest.mark.parametrize("psum", [True, False])
def test_estimate_is_birsims_time_with_a_shared_port(psum):
    m = _two_readers(psum)
    act, dve = [instruction_cost(i, m, TM) for i in m.instructions()]
    assert ("PORT:PSUM" in act.ports and "PORT:PSUM" in dve.ports) == psum
    res = simulate(m, [], trace=True)
    ends = max(e[3] for e in res.timeline.events)
    est, _ = estimate_time(m, PassContext(TM))
    if psum:      # DVE starts when ACT releases the port
        want = act.busy_s + dve.busy_s
        assert res.total_s == pytest.approx(want + dve.latency_s, rel=1e-12)
    else:         # side by side
        want = max(act.busy_s, dve.busy_s)
    # the estimate is the engines' makespan (it leaves out the last result's latency)
    assert ends == pytest.approx(want, rel=1e-12)
    assert est == pytest.approx(want, rel=1e-12)


def test_list_schedule_and_replay_never_overlap_a_port():
    # four independent instructions on four engines; 0 and 2 share port 0, 1 and 3 port 1, 2 also port 1
    n = 4
    eng = np.arange(n, dtype=np.int64)
    cost = np.array([3.0, 5.0, 2.0, 7.0])
    ptr, idx, _ = csr(n, [], by=1)
    lat = np.zeros(0)
    ports = np.array([[0, -1], [1, -1], [0, 1], [1, -1]], np.int64)
    order, start, makespan = _sched.list_schedule(eng, cost, ptr, idx, lat, np.zeros(n), n, None, ports)
    for a in range(n):
        for b in range(a + 1, n):
            if set(ports[a]) & set(ports[b]) - {-1}:
                assert start[b] >= start[a] + cost[a] - 1e-12 or start[a] >= start[b] + cost[b] - 1e-12
    assert makespan == pytest.approx(max(start + cost))
    assert _sched.replay(eng, cost, ptr, idx, lat, order, n, None, ports) == pytest.approx(makespan)
    # without ports all four start at once
    assert _sched.replay(eng, cost, ptr, idx, lat, order, n) == pytest.approx(cost.max())
