"""The scheduler's and print_metrics' time estimate time DMAs by birsim's rules (one source of
truth, ``birpy.cost`` + ``birsim.timeline``): all queues share the 16 DMA engines, a transfer with
an on-chip side runs on its partitions' engines, and a DMA trigger holds its issuing engine's
in-order stream. On straight-line programs the estimate is birsim's simulated time, and both are
the formula's."""
import numpy as np
import pytest

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import simulate
from neuronxcc.walrus.estimate import estimate_time
from neuronxcc.walrus.registry import PassContext, run_passes

TM = get_target("trn1")
LAT = TM.dma_fixed_latency_s
# a 128 x 64 fp32 load: 128 descriptors of 256 B, one sixteenth on each engine
PIECE = (128 * 64 * 4 / 17e9 + 128 * TM.dma_descriptor_overhead_s) / 16
ACT_LONG = (4096 + 60) / 1.4e9 + 140 / 1.4e9         # a 4096-element activation and its result latency


def _module(store_first=True):
    """ACT computes a long tile; SP stores it (after ACT) and loads an independent tile on another
    queue; DVE copies the loaded tile."""
    m = B.Module("dmas")
    m.add_tensor("x", "input", "float32", (128, 64))
    m.add_tensor("y", "output", "float32", (128, 64))
    m.add_tensor("z", "output", "float32", (128, 64))
    m.add_memloc("a", "SBUF", 128, 4096 * 4)
    m.add_memloc("c", "SBUF", 128, 256)
    m.add_memloc("d", "SBUF", 128, 256)
    b = B.Builder(m)
    b.inst("activation", "ACT", [b.ap("a", free=4096)], [b.ap("a", free=4096)], func="exp", name="act")
    store = lambda: b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("a", free=64)], queue="q0", name="store")
    load = lambda: b.inst("dma_copy", "SP", [b.ap("c")], [b.ap("x")], queue="q1", name="load")
    (store if store_first else load)()
    (load if store_first else store)()
    b.inst("tensor_copy", "DVE", [b.ap("d")], [b.ap("c")], name="copy")
    b.inst("dma_copy", "POOL", [b.ap("z")], [b.ap("d")], queue="q2", name="out")
    return b.finish()


def _loads(parts):
    m = B.Module("loads")
    m.add_tensor("x", "input", "float32", (128, 64))
    for k, (p0, n) in enumerate(parts):
        m.add_memloc("t%d" % k, "SBUF", 128, 256)
    b = B.Builder(m)
    for k, (p0, n) in enumerate(parts):
        b.inst("dma_copy", "SP", [b.ap("t%d" % k, start_partition=p0, num_partitions=n)],
               [B.AccessPattern("x", "float32", 0, [[64, n], [1, 64]])], queue="q%d" % k)
    return b.finish()


def _inputs(m):
    return [np.zeros(m.tensors[n].shape, np.float32) for n in m.inputs]


@pytest.mark.parametrize("parts,rounds", [
    ([(0, 128), (0, 128)], 2),        # two queues, the same 16 engines: one after the other
    ([(0, 8), (8, 8)], 1),            # partitions 0-7 and 8-15: engines 0 and 1, side by side
    ([(0, 8), (0, 8)], 2),            # both on engine 0, in turn
])
def test_estimate_is_birsims_time_for_shared_dma_engines(parts, rounds):
    m = _loads(parts)
    n = parts[0][1]
    per_engine = (n * 64 * 4 / 17e9 + n * TM.dma_descriptor_overhead_s) * min(8, n) / n
    want = LAT + rounds * per_engine
    sim = simulate(m, _inputs(m)).total_s
    est, _ = estimate_time(m, PassContext(TM))
    assert sim == pytest.approx(want, rel=1e-12)
    assert est == pytest.approx(want, rel=1e-12)


def test_estimate_is_birsims_time_when_a_trigger_holds_its_engine():
    m = _module(store_first=True)
    sim = simulate(m, _inputs(m)).total_s
    est, per_engine = estimate_time(m, PassContext(TM))
    # the load is triggered when the store is (after ACT); the engines move the store's piece,
    # then the load's; DVE copies; POOL stores
    dve = (64 + 60) / 1.12e9 + 100 / 1.12e9
    want = ACT_LONG + LAT + 2 * PIECE + dve + LAT + PIECE
    assert sim == pytest.approx(want, rel=1e-12)
    assert est == pytest.approx(want, rel=1e-12)
    # per-stream busy time of a DMA is its transfer, not its latency
    assert per_engine["Q_SP_q1"] == pytest.approx(PIECE, rel=1e-12)


def test_scheduler_moves_a_load_ahead_of_a_trigger_that_waits():
    # the store waits for ACT; on SP's in-order stream it holds the load behind it. The scheduler
    # sees it (birsim's rule) and triggers the load first, and birsim agrees it is faster
    m = _module(store_first=True)
    before = simulate(m, _inputs(m)).total_s
    ctx = PassContext(TM)
    run_passes(m, ["pre_sched"], ctx)
    names = [i.name for i in m.instructions()]
    assert names.index("load") < names.index("store")
    after = simulate(m, _inputs(m)).total_s
    est, _ = estimate_time(m, ctx)
    assert after < before and est == pytest.approx(after, rel=1e-12)
    assert ctx.metrics["scheduling"]["pre_sched"]["estimated_gain_s"] == pytest.approx(before - after, rel=1e-9)


def test_a_queue_is_one_ring_whichever_engine_triggers():
    # SP loads partitions 0-7 (engine 0, 4096 elements), POOL loads partitions 8-15 (engine 1, 64) on
    # the same queue: the short one moves its data at once but completes when the long one does
    # (in order per queue; birsim.timeline), so DVE's copy of it starts then, in birsim and in the estimate
    m = B.Module("ring")
    m.add_tensor("x", "input", "float32", (8, 4096))
    m.add_tensor("y", "output", "float32", (8, 64))
    m.add_memloc("a", "SBUF", 16, 4096 * 4)
    m.add_memloc("d", "SBUF", 16, 256)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("a", start_partition=0, num_partitions=8)], [b.ap("x")], queue="q0")
    b.inst("dma_copy", "POOL", [b.ap("a", start_partition=8, num_partitions=8, free=64)],
           [B.AccessPattern("x", "float32", 0, [[4096, 8], [1, 64]])], queue="q0")
    b.inst("tensor_copy", "DVE", [b.ap("d", start_partition=8, num_partitions=8, free=64)],
           [b.ap("a", start_partition=8, num_partitions=8, free=64)])
    b.inst("dma_copy", "POOL", [B.AccessPattern("y", "float32", 0, [[64, 8], [1, 64]])],
           [b.ap("d", start_partition=8, num_partitions=8, free=64)], queue="q1")
    b.finish()
    big = 8 * 4096 * 4 / 17e9 + 8 * TM.dma_descriptor_overhead_s
    small = 8 * 64 * 4 / 17e9 + 8 * TM.dma_descriptor_overhead_s
    want = LAT + big + (64 + 60) / 1.12e9 + 100 / 1.12e9 + LAT + small
    sim = simulate(m, _inputs(m)).total_s
    est, _ = estimate_time(m, PassContext(TM))
    assert sim == pytest.approx(want, rel=1e-12)
    assert est == pytest.approx(want, rel=1e-12)
