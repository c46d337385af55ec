"""DMA queues share each DMA engine round-robin ([DMA]: 16 queues per engine, order kept within a
queue, queues served round-robin), one descriptor -- a contiguous run, at most
``dma_queue_chunk_bytes`` -- per turn (birsim._timecore ``Core._serve``). Expected times are computed
here from that rule and the trn1 constants; ``dma_queue_chunk_bytes=0`` is the first-come-first-served
booking the rule replaced, used as the reference a single queue must match."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import simulate

TM = get_target("trn1")
FCFS = dataclasses.replace(TM, dma_queue_chunk_bytes=0)
LAT = TM.dma_fixed_latency_s
OVH = TM.dma_descriptor_overhead_s
RATE = TM.dma_engine_rate(1)            # one HBM side


def _engine_s(parts, run_bytes):
    """Engine-seconds of a load of PARTS partitions x RUN_BYTES (one descriptor per partition)."""
    return parts * run_bytes / RATE + parts * OVH


def _chunk_s(parts, run_bytes):
    """One round-robin chunk of that load: a descriptor, at most dma_queue_chunk_bytes."""
    return _engine_s(parts, run_bytes) * min(run_bytes, TM.dma_queue_chunk_bytes) / (parts * run_bytes)


BIG_F = 8192                            # fp32 per partition: a 32 KiB run, one chunk per descriptor
SMALL_F = 64                            # 256 B


def _loads(spec):
    """SPEC = [(queue, first partition, partitions, free fp32)], all from SP at time 0, each with its
    own SBUF destination and a signal on its queue."""
    m = B.Module("rr")
    m.add_tensor("x", "input", "float32", (128, BIG_F))
    b = B.Builder(m)
    for k, (q, p0, n, f) in enumerate(spec):
        m.add_memloc("t%d" % k, "SBUF", 128, BIG_F * 4)
        b.inst("dma_copy", "SP", [b.ap("t%d" % k, start_partition=p0, num_partitions=n, free=f)],
               [B.AccessPattern("x", "float32", p0 * BIG_F, [[BIG_F, n], [1, f]])], queue=q, signals=[(q, 1)])
    return b.finish()


def _run(spec, target=TM):
    res = simulate(_loads(spec), [np.zeros((128, BIG_F), np.float32)], target=target, trace=True)
    return res, [(tr, s, e) for tr, _, s, e, _, _ in res.timeline.events]


def test_a_small_transfer_on_another_queue_overtakes_a_big_one():
    # q0 moves 8 partitions x 32 KiB on engine 0 (8 descriptors); q1 then moves one 256 B descriptor
    # on the same engine. In turn, q1 waits for one descriptor of q0, not for all eight.
    big = _engine_s(8, BIG_F * 4)
    small = _engine_s(1, SMALL_F * 4)
    res, ev = _run([("q0", 0, 8, BIG_F), ("q1", 0, 1, SMALL_F)])
    assert ev[0] == ("DMA:q0", pytest.approx(LAT, rel=1e-12), pytest.approx(LAT + big, rel=1e-12))
    assert ev[1][0] == "DMA:q1"
    assert ev[1][2] == pytest.approx(LAT + small + _chunk_s(8, BIG_F * 4), rel=1e-12)
    assert ev[1][2] - LAT < (big + small) / 4
    # first come first served, q1 waited for the whole of q0's transfer
    _, old = _run([("q0", 0, 8, BIG_F), ("q1", 0, 1, SMALL_F)], FCFS)
    assert old[1][2] == pytest.approx(LAT + big + small, rel=1e-12)
    # the engine did the same work either way
    assert res.busy_s["DMA"] == pytest.approx(big + small, rel=1e-12)


def test_what_a_queue_was_overtaken_by_delays_its_next_transfer():
    # the time q1 took on engine 0 while q0's big transfer was in flight is q0's: its next transfer
    # there starts after the big one plus q1's piece (the engine never moves more than its rate)
    big = _engine_s(8, BIG_F * 4)
    small = _engine_s(1, SMALL_F * 4)
    _, ev = _run([("q0", 0, 8, BIG_F), ("q1", 0, 1, SMALL_F), ("q0", 0, 1, SMALL_F)])
    assert ev[2][0] == "DMA:q0"
    assert ev[2][1] == pytest.approx(LAT + big + small, rel=1e-12)
    assert ev[2][2] == pytest.approx(LAT + big + 2 * small, rel=1e-12)


def test_two_transfers_of_one_queue_stay_in_order():
    # q0: big then small on engine 0; the small one never overtakes its own queue's big one, though
    # a transfer of q1 issued after both does (waiting one descriptor of q0's work)
    big = _engine_s(8, BIG_F * 4)
    small = _engine_s(1, SMALL_F * 4)
    _, ev = _run([("q0", 0, 8, BIG_F), ("q0", 0, 1, SMALL_F), ("q1", 0, 1, SMALL_F)])
    assert [e[0] for e in ev] == ["DMA:q0", "DMA:q0", "DMA:q1"]
    assert ev[0][2] == pytest.approx(LAT + big, rel=1e-12)
    assert ev[1][1] == pytest.approx(LAT + big, rel=1e-12)
    assert ev[1][2] == pytest.approx(LAT + big + small, rel=1e-12)
    assert ev[1][2] > ev[0][2]
    assert ev[2][2] == pytest.approx(LAT + small + _chunk_s(8, BIG_F * 4), rel=1e-12)


def test_two_big_transfers_on_two_queues_share_the_engine():
    # two equal transfers, chunk for chunk: the second ends when the engine has done both (work
    # conserving), never earlier than its own time after the first one's last chunk would allow
    big = _engine_s(8, BIG_F * 4)
    _, ev = _run([("q0", 0, 8, BIG_F), ("q1", 0, 8, BIG_F)])
    assert ev[0][2] == pytest.approx(LAT + big, rel=1e-12)
    assert ev[1][2] == pytest.approx(LAT + 2 * big, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 8, 64, 120]), st.sampled_from([1, 8, 16]),
                          st.sampled_from([SMALL_F, 1024, BIG_F])), min_size=1, max_size=5))
def test_one_queue_times_are_first_come_first_served(loads):
    # a single queue has nobody to share with: every transfer's times and the totals are the
    # first-come-first-served booking's
    spec = [("q0", min(p0, 128 - n), n, f) for p0, n, f in loads]
    res, ev = _run(spec)
    old, oev = _run(spec, FCFS)
    assert ev == [(tr, pytest.approx(s, rel=1e-12), pytest.approx(e, rel=1e-12)) for tr, s, e in oev]
    assert res.total_s == pytest.approx(old.total_s, rel=1e-12)
    assert res.busy_s == pytest.approx(old.busy_s, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["q0", "q1", "q2"]), st.sampled_from([0, 8, 64]),
                          st.sampled_from([1, 8, 16]), st.sampled_from([SMALL_F, 1024, BIG_F])),
                min_size=1, max_size=5))
def test_queues_share_the_engines_never_beyond_their_rate(loads):
    # any mix of queues: the engines do the same work as first come first served; a transfer ends no
    # earlier than its own time after its latency, and each queue's work on an engine is in order, so
    # the queue's last transfer ends no earlier than all its pieces there allow. (What a transfer took
    # from another queue's transfers already booked delays that queue's next one, not those.)
    spec = [(q, p0, n, f) for q, p0, n, f in loads]
    res, ev = _run(spec)
    old, _ = _run(spec, FCFS)
    assert res.busy_s["DMA"] == pytest.approx(old.busy_s["DMA"], rel=1e-12)
    work = {}
    for (q, p0, n, f), (tr, s, e) in zip(spec, ev):
        assert tr == "DMA:" + q
        mine = 0.0
        for k in range(p0 // 8, (p0 + n - 1) // 8 + 1):
            piece = _engine_s(min(p0 + n, 8 * k + 8) - max(p0, 8 * k), f * 4)
            work[q, k] = work.get((q, k), 0.0) + piece
            mine = max(mine, piece)
            assert e >= LAT + work[q, k] * (1 - 1e-12)
        assert e >= LAT + mine * (1 - 1e-12)
    # no engine does more work than its rate allows: the program is not done before every engine has
    # served all its pieces (end times handed out to overtaken transfers are not revised; the total is)
    for k in {k for _, k in work}:
        assert res.total_s >= LAT + sum(w for (_, kk), w in work.items() if kk == k) * (1 - 1e-12)
