"""The timeline on tiny programs whose numbers are computed by hand (trn1:
DVE 1.12 GHz, ACT 1.4 GHz; DMA: 16 engines x 17 GB/s shared by all queues, a
per-descriptor overhead, 1.3 us fixed latency that overlaps; ACT/DVE result
latency; v2 shared ports), the trace JSON shape, races and deadlocks."""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from neuronxcc.errors import BirSimError
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import simulate
from birsim.birsim_helpers import rand

from neuronxcc.hwm import get_target

TM = get_target("trn1")
LAT = 1.3e-6
# a 128 x 64 fp32 load: 128 descriptors of 256 B over the 16 engines
DMA_ENGINE_S = 128 * 64 * 4 / 17e9 + 128 * TM.dma_descriptor_overhead_s
PIECE = DMA_ENGINE_S / 16
DMA = LAT + PIECE
DVE = (max(64, 64) + 60) / 1.12e9
ACT = (max(64, 64) + 60) / 1.4e9
DVE_LAT = 100 / 1.12e9
ACT_LAT = 140 / 1.4e9


def _chain(with_sems=True, drop_wait=False, loop=False):
    m = B.Module("chain")
    m.add_tensor("x", "input", "float32", (128, 64))
    m.add_tensor("y", "output", "float32", (128, 64))
    for n in "abc":
        m.add_memloc(n, "SBUF", 128, 256)
    b = B.Builder(m)
    s = (lambda *a: list(a)) if with_sems else (lambda *a: [])
    b.inst("dma_copy", "SP", [b.ap("a")], [b.ap("x")], queue="q0", signals=s(("q0", 1)))
    b.inst("tensor_copy", "DVE", [b.ap("b")], [b.ap("a")], waits=[] if drop_wait else s(("q0", 1)),
           signals=s(("DVE", 1)))
    b.inst("activation", "ACT", [b.ap("c")], [b.ap("b")], func="exp", waits=s(("DVE", 1)), signals=s(("ACT", 1)))
    b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("c")], queue="q1", waits=s(("ACT", 1)))
    return b.finish()


def test_chain_numbers_by_hand():
    x = rand((128, 64), 1)
    res = simulate(_chain(), [x], trace=True)
    np.testing.assert_array_equal(res.outputs[0], np.exp(x))
    total = 2 * DMA + DVE + DVE_LAT + ACT + ACT_LAT
    assert res.total_s == pytest.approx(total, rel=1e-12)
    assert res.busy_s == pytest.approx({"DMA:q0": PIECE, "DMA:q1": PIECE, "DVE": DVE, "ACT": ACT,
                                        "DMA": 2 * DMA_ENGINE_S}, rel=1e-12)
    assert res.utilisation["DMA"] == pytest.approx(2 * DMA_ENGINE_S / (16 * total), rel=1e-12)
    assert res.counts == {"dma_transfers": 2, "dma_bytes": 2 * 128 * 64 * 4, "matmuls": 0, "pe_transposes": 0,
                          "psum_evictions": 0}
    assert res.utilisation["DVE"] == pytest.approx(DVE / total, rel=1e-12)
    assert res.instructions == 4 and res.races == []


def test_dependencies_mode_orders_unsynchronised_bir_by_memory():
    res = simulate(_chain(with_sems=False), [rand((128, 64), 1)])
    assert res.summary()["sync"] == "dependencies"
    assert res.total_s == pytest.approx(2 * DMA + DVE + DVE_LAT + ACT + ACT_LAT, rel=1e-12)


def test_v2_dve_and_pool_share_the_sbuf_port():
    m = B.Module("par")
    for n in "abcd":
        m.add_memloc(n, "SBUF", 128, 256)
    b = B.Builder(m)
    b.inst("memset", "DVE", [b.ap("a")], [], value=1.0, signals=[("DVE", 1)])
    b.inst("memset", "POOL", [b.ap("b")], [], value=2.0, signals=[("POOL", 1)])
    b.inst("activation", "ACT", [b.ap("c")], [b.ap("a")], func="copy", waits=[("DVE", 1)])
    b.finish()
    res = simulate(m, [])
    dve = (64 + 60) / 1.12e9
    pool = (150 + 64) / 1.4e9
    # POOL waits for DVE to release the SBUF port ([ARCH2] v2 port conflicts); ACT waits for DVE's result
    assert res.total_s == pytest.approx(max(dve + DVE_LAT + ACT + ACT_LAT, dve + pool), rel=1e-12)
    assert res.busy_s["POOL"] == pytest.approx(pool, rel=1e-12)


def _psum_readers():
    m = B.Module("ps")
    m.add_memloc("ps", "PSUM", 128, 2048)
    m.add_memloc("a", "SBUF", 128, 2048)
    m.add_memloc("b", "SBUF", 128, 2048)
    b = B.Builder(m)
    b.inst("memset", "DVE", [b.ap("ps", free=256)], [], value=1.0, signals=[("DVE", 1)])
    b.inst("activation", "ACT", [b.ap("a", free=256)], [b.ap("ps", free=256)], func="copy", waits=[("DVE", 1)])
    b.inst("tensor_copy", "DVE", [b.ap("b", free=256)], [b.ap("ps", free=256, offset=256)])
    return b.finish()


def test_psum_port_shared_on_v2_not_on_v3():
    v2 = simulate(_psum_readers(), [])
    v3 = simulate(_psum_readers(), [], target="trn2")
    for res, tm, shared in ((v2, TM, True), (v3, get_target("trn2"), False)):
        ms = (256 + 60) / tm.dve_hz
        act = (256 + 60) / tm.act_hz
        start_act = ms + tm.dve_dependency_cycles / tm.dve_hz
        dve2 = max(ms, start_act + act) if shared else ms      # the copy waits for ACT's PSUM access on v2
        assert res.total_s == pytest.approx(max(start_act + act + tm.act_dependency_cycles / tm.act_hz,
                                                dve2 + ms + tm.dve_dependency_cycles / tm.dve_hz), rel=1e-12)
        assert res.counts["psum_evictions"] == 2


def test_dependent_act_instructions_run_at_the_public_ii():
    # [PERF]: back-to-back dependent 1-element ScalarE instructions have II ~264 cycles; independent
    # ones pipeline at the 64-cycle floor + 60-cycle access overhead
    def chain(dependent, n=10):
        m = B.Module("acts")
        m.add_memloc("a", "SBUF", 1, 256)
        b = B.Builder(m)
        for k in range(n):
            src = b.ap("a", free=1, offset=0 if dependent else k)
            dst = b.ap("a", free=1, offset=0 if dependent else k + 16)
            b.inst("activation", "ACT", [dst], [src], func="exp")
        return b.finish()
    dep = simulate(chain(True), [], sync="semaphores")
    ind = simulate(chain(False), [], sync="semaphores")
    assert dep.total_s == pytest.approx(10 * 264 / 1.4e9, rel=1e-12)
    assert ind.total_s == pytest.approx(10 * 124 / 1.4e9 + 140 / 1.4e9, rel=1e-12)


def test_missing_wait_is_a_race():
    res = simulate(_chain(drop_wait=True), [rand((128, 64), 1)])
    assert len(res.races) == 1 and "#1 tensor_copy@DVE" in res.races[0] and "#0" in res.races[0]
    with pytest.raises(BirSimError, match="race"):
        simulate(_chain(drop_wait=True), [rand((128, 64), 1)], strict=True)


def test_wait_value_expr_in_loop_and_deadlock():
    m = B.Module("loopsem")
    m.add_tensor("x", "input", "float32", (4, 128, 8))
    m.add_tensor("y", "output", "float32", (4, 128, 8))
    m.add_memloc("a", "SBUF", 128, 4 * 32)
    b = B.Builder(m)
    with b.loop("i", 0, 4) as i:
        t = b.ap("a", free=8, offset=i * 8)
        b.inst("dma_copy", "SP", [t], [B.AccessPattern("x", "float32", i * 1024, [[8, 128], [1, 8]])],
               queue="q0", signals=[("q0", 1)])
        b.inst("activation", "ACT", [t], [t], func="square", waits=[("q0", i + 1)], signals=[("ACT", 1)])
        b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * 1024, [[8, 128], [1, 8]])], [t],
               queue="q1", waits=[("ACT", i + 1)])
    b.finish()
    B.verify(m)
    x = rand((4, 128, 8), 2)
    res = simulate(m, [x], strict=True)
    np.testing.assert_array_equal(res.outputs[0], x * x)
    m.instructions()[1].waits = [("q0", 9)]
    with pytest.raises(BirSimError, match="deadlock"):
        simulate(m, [x])


def test_trace_json_shape(tmp_path):
    res = simulate(_chain(), [rand((128, 64), 1)], trace=True)
    path = tmp_path / "trace.json"
    res.write_trace(str(path))
    doc = json.loads(path.read_text())
    evs = doc["traceEvents"]
    names = {e["tid"]: e["args"]["name"] for e in evs if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"PE", "ACT", "DVE", "POOL", "SP", "DMA:q0", "DMA:q1"} <= set(names.values())
    xs = [e for e in evs if e["ph"] == "X"]
    assert [e["args"]["opcode"] for e in xs] == ["dma_copy", "tensor_copy", "activation", "dma_copy"]
    assert [names[e["tid"]] for e in xs] == ["DMA:q0", "DVE", "ACT", "DMA:q1"]
    for e in xs:
        assert {"opcode", "engine", "partitions", "free"} <= set(e["args"])
        assert e["args"]["partitions"] == 128 and e["args"]["free"] == 64
        assert e["dur"] > 0 and e["ts"] >= 0 and e["pid"] == 1
    assert xs[0]["ts"] == pytest.approx(LAT * 1e6) and xs[0]["dur"] == pytest.approx(PIECE * 1e6)
    assert xs[1]["ts"] == pytest.approx(DMA * 1e6) and xs[1]["dur"] == pytest.approx(DVE * 1e6)
    assert doc["otherData"]["total_s"] == pytest.approx(res.total_s)


def test_streams_order_matches_program_order_when_synchronised():
    x = rand((128, 64), 3)
    a = simulate(_chain(), [x])
    b = simulate(_chain(), [x], order="streams")
    np.testing.assert_array_equal(b.outputs[0], np.exp(x))
    assert b.total_s == pytest.approx(a.total_s, rel=1e-12) and b.races == []


def test_streams_order_runs_a_body_that_is_not_sequential():
    m = _chain()
    ins = m.instructions()
    m.body = [ins[0], ins[3], ins[1], ins[2]]      # the store first: program order cannot run it
    x = rand((128, 64), 4)
    with pytest.raises(BirSimError, match="deadlock"):
        simulate(m, [x])
    np.testing.assert_array_equal(simulate(m, [x], order="streams").outputs[0], np.exp(x))


def test_streams_order_missing_wait_reads_stale_data():
    x = rand((128, 64), 5)
    y = simulate(_chain(drop_wait=True), [x], order="streams").outputs[0]
    assert np.isnan(y).all()                       # DVE copied the poisoned tile before the DMA landed
    m = _chain()
    m.instructions()[2].waits = []                 # ACT no longer waits for DVE
    with pytest.raises(BirSimError, match="deadlock: no engine"):
        m.instructions()[3].waits = [("ACT", 2)]   # and the store waits for a signal that never comes
        simulate(m, [x], order="streams")


def test_streams_order_loops_and_registers():
    m = B.Module("loopreg")
    m.add_tensor("x", "input", "float32", (4, 128, 8))
    m.add_tensor("sel", "input", "int32", (1,))
    m.add_tensor("y", "output", "float32", (128, 8))
    m.add_memloc("a", "SBUF", 128, 4 * 32)
    m.add_memloc("r", "SBUF", 1, 4)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("r", dtype="int32")], [b.ap("sel")], queue="q1", signals=[("q1", 1)])
    b.inst("register_load", "ACT", [], [b.ap("r", dtype="int32")], register="k", min=0, max=3,
           waits=[("q1", 1)], signals=[("R", 1)])
    with b.loop("i", 0, 4) as i:
        t = b.ap("a", free=8, offset=i * 8)
        b.inst("dma_copy", "SP", [t], [B.AccessPattern("x", "float32", i * 1024, [[8, 128], [1, 8]])],
               queue="q0", signals=[("q0", 1)])
        b.inst("activation", "ACT", [t], [t], func="square", waits=[("q0", i + 1)], signals=[("ACT", 1)])
    from neuronxcc.pelican import var
    b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("a", free=8, offset=var("k") * 8)], queue="q1",
           waits=[("ACT", 4), ("R", 1)])
    b.finish()
    B.verify(m)
    x = rand((4, 128, 8), 6)
    for k in (0, 2, 3):
        y = simulate(m, [x, np.array([k], np.int32)], order="streams", strict=True).outputs[0]
        np.testing.assert_array_equal(y, x[k] * x[k])


def test_dma_queues_serialise_and_overlap():
    def module(queues):
        m = B.Module("q")
        m.add_tensor("x", "input", "float32", (128, 64))
        for k in range(3):
            m.add_memloc("t%d" % k, "SBUF", 128, 256)
        b = B.Builder(m)
        for k, q in enumerate(queues):
            b.inst("dma_copy", "SP", [b.ap("t%d" % k)], [b.ap("x")], queue=q, signals=[(q, 1)])
        return b.finish()
    x = rand((128, 64), 7)
    # one queue: in order, but the fixed latency of transfers issued back to back overlaps
    same = simulate(module(["q0", "q0", "q0"]), [x])
    assert same.total_s == pytest.approx(LAT + 3 * PIECE, rel=1e-12)
    assert same.busy_s["DMA:q0"] == pytest.approx(3 * PIECE)
    # three queues share the same 16 engines: no faster in total than one queue
    spread = simulate(module(["q0", "q1", "q2"]), [x])
    assert spread.total_s == pytest.approx(LAT + 3 * PIECE, rel=1e-12)
    assert set(spread.busy_s) == {"DMA:q0", "DMA:q1", "DMA:q2", "DMA"}


def test_aggregate_dma_rate_is_the_engines_peak():
    # 8 large loads over 4 queues: the bytes move at (nearly) 272 GB/s in total, never more
    m = B.Module("big")
    m.add_tensor("x", "input", "float32", (128, 8192))
    for k in range(8):
        m.add_memloc("t%d" % k, "SBUF", 128, 8192 * 4 // 2)
    b = B.Builder(m)
    for k in range(8):
        b.inst("dma_copy", "SP", [b.ap("t%d" % k)], [B.AccessPattern("x", "float32", (k % 2) * 4096,
                                                                     [[8192, 128], [1, 4096]])],
               queue="q%d" % (k % 4))
    b.finish()
    res = simulate(m, [np.zeros((128, 8192), np.float32)])
    nbytes = 8 * 128 * 4096 * 4
    rate = nbytes / (res.total_s - LAT)
    assert 0.95 * 272e9 < rate <= 272e9
    assert res.utilisation["DMA"] > 0.9


def test_many_gapped_transfers_keep_the_engines_accounting():
    # DMAs separated by dependent compute leave gaps on the engines: more intervals than the engines
    # remember (128); every transfer's engine time is still accounted exactly once
    m = B.Module("gaps")
    m.add_tensor("x", "input", "float32", (300, 128, 8))
    m.add_memloc("a", "SBUF", 128, 32)
    b = B.Builder(m)
    with b.loop("i", 0, 300) as i:
        b.inst("dma_copy", "SP", [b.ap("a")], [B.AccessPattern("x", "float32", i * 1024, [[8, 128], [1, 8]])],
               queue="q%d" % 0, signals=[("q0", 1)])
        b.inst("activation", "ACT", [b.ap("a")], [b.ap("a")], func="exp", waits=[("q0", i + 1)],
               signals=[("ACT", 1)])
        b.inst("nop", "SP", [], [], waits=[("ACT", i + 1)])
    b.finish()
    res = simulate(m, [rand((300, 128, 8), 9)], strict=True)
    one = 128 * 32 / 17e9 + 128 * TM.dma_descriptor_overhead_s
    assert res.busy_s["DMA"] == pytest.approx(300 * one, rel=1e-9)
    per = LAT + one / 16 + ACT + ACT_LAT
    assert res.total_s == pytest.approx(300 * per, rel=1e-9)


def test_compiled_wait_values_and_offsets_in_a_long_loop():
    # wait values and offsets evaluated in a loop are compiled after a few trips (birsim._apinfo):
    # a max(0, ...) wait with a register in it, an i % 2 offset; the results, and a deadlock in a
    # late trip (after the compile), are what pelican's evaluation gives
    from neuronxcc.pelican import max_, var
    n = 12
    m = B.Module("longloop")
    m.add_tensor("x", "input", "float32", (n, 128, 8))
    m.add_tensor("y", "output", "float32", (n, 128, 8))
    m.add_tensor("late", "input", "int32", (1,))
    m.add_memloc("a", "SBUF", 128, 2 * 32)
    m.add_memloc("r", "SBUF", 1, 4)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("r", dtype="int32")], [b.ap("late")], queue="q2", signals=[("q2", 1)])
    b.inst("register_load", "ACT", [], [b.ap("r", dtype="int32")], register="k", min=0, max=99,
           waits=[("q2", 1)], signals=[("R", 1)])
    with b.loop("i", 0, n) as i:
        t = b.ap("a", free=8, offset=(i % 2) * 8)
        b.inst("dma_copy", "SP", [t], [B.AccessPattern("x", "float32", i * 1024, [[8, 128], [1, 8]])],
               queue="q0", waits=[("Y", max_(0, i - 1))], signals=[("q0", 1)])
        # i + 1, plus one more than was issued from trip k on
        b.inst("activation", "ACT", [t], [t], func="square",
               waits=[("q0", i + 1 + max_(0, i - var("k") + 1) - max_(0, i - var("k"))), ("R", 1)],
               signals=[("ACT", 1)])
        b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * 1024, [[8, 128], [1, 8]])], [t],
               queue="q1", waits=[("ACT", i + 1)], signals=[("Y", 1)])
    b.finish()        # (not verified: the verifier cannot bound a wait value holding a register)
    x = rand((n, 128, 8), 11)
    res = simulate(m, [x, np.array([99], np.int32)], strict=True)
    np.testing.assert_array_equal(res.outputs[0], x * x)
    act = m.instructions()[3]
    with pytest.raises(BirSimError, match="deadlock: instruction #%s activation@ACT waits for q0 >= 10 but only 9"
                       % act.id):
        simulate(m, [x, np.array([8], np.int32)])      # trip 8 waits for q0 >= 10 with 9 loads issued


def test_typed_affine_waits_time_as_the_general_path():
    """Wait values A and max(0, A) with A affine in loop variables and a register are evaluated
    from the instruction's variables read once (``Rec``'s typed waits); an instruction with more
    waits than the typed form holds goes through pelican for each. The same program with every
    instruction padded by met waits (value 0) past that limit must give the same trace."""
    from neuronxcc.pelican import max_, var
    from neuronxcc.starfish.birsim._timecore import MAXW_PUBLIC

    def build(pad):
        extra = [("Z", 0)] * (MAXW_PUBLIC + 1 if pad else 0)
        m = B.Module("typed_waits")
        m.add_tensor("x", "input", "float32", (6, 4, 8))
        m.add_tensor("y", "output", "float32", (6, 4, 8))
        m.add_tensor("k", "input", "int32", (1,))
        m.add_memloc("a", "SBUF", 4, 2 * 32)
        m.add_memloc("r", "SBUF", 1, 4)
        b = B.Builder(m)
        b.inst("dma_copy", "SP", [b.ap("r", dtype="int32")], [b.ap("k")], queue="q2", signals=[("q2", 1)])
        b.inst("register_load", "ACT", [], [b.ap("r", dtype="int32")], register="kk", min=0, max=9,
               waits=[("q2", 1)] + extra, signals=[("R", 1)])
        with b.loop("j", 0, 2) as j:
            with b.loop("i", 0, 3) as i:
                n = j * 3 + i
                t = b.ap("a", free=8, offset=(n % 2) * 8)
                b.inst("dma_copy", "SP", [t], [B.AccessPattern("x", "float32", n * 32, [[8, 4], [1, 8]])],
                       queue="q0", waits=[("Y", max_(0, 3 * j + i - 1))] + extra, signals=[("q0", 1)])
                b.inst("activation", "ACT", [t], [t], func="exp",
                       waits=[("q0", 3 * j + i + 1), ("R", max_(0, var("kk") - 8)), ("R", 1)] + extra,
                       signals=[("ACT", 1)])
                b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", n * 32, [[8, 4], [1, 8]])], [t],
                       queue="q1", waits=[("ACT", max_(0, 3 * j + i + 1))] + extra, signals=[("Y", 1)])
        b.finish()
        return m

    x = rand((6, 4, 8), 5)
    for k in (0, 9):
        got = simulate(build(False), [x, np.array([k], np.int32)], trace=True)
        want = simulate(build(True), [x, np.array([k], np.int32)], trace=True)
        assert [(tr, s, e) for tr, _, s, e, _, _ in got.timeline.events] == \
            [(tr, s, e) for tr, _, s, e, _, _ in want.timeline.events]
        assert got.total_s == want.total_s and got.busy_s == want.busy_s
        np.testing.assert_array_equal(got.outputs[0], want.outputs[0])
    # k = 9 asks for R >= 1 twice and kk - 8 = 1: met; a register that is never loaded is pelican's error
    m = build(False)
    m.body = m.body[2:]
    m.renumber()
    with pytest.raises(Exception, match="kk"):
        simulate(m, [x, np.array([0], np.int32)])


def _trigger_stream(second_engine):
    """SP triggers a store that waits for a long ACT instruction, then a load that waits for nothing
    (on SP, or on SECOND_ENGINE)."""
    m = B.Module("trig")
    m.add_tensor("x", "input", "float32", (128, 64))
    m.add_tensor("y", "output", "float32", (128, 64))
    m.add_memloc("a", "SBUF", 128, 4096 * 4)
    m.add_memloc("c", "SBUF", 128, 256)
    b = B.Builder(m)
    b.inst("activation", "ACT", [b.ap("a", free=4096)], [b.ap("a", free=4096)], func="exp", signals=[("ACT", 1)])
    b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("a", free=64)], queue="q0", waits=[("ACT", 1)])
    b.inst("dma_copy", second_engine, [b.ap("c")], [b.ap("x")], queue="q1")
    return b.finish()


def test_a_dma_trigger_that_waits_holds_its_engine_stream():
    # [DMA]: a transfer starts with a trigger instruction of an engine's sequencer, which may wait on a
    # semaphore; a sequencer issues in order, so the load behind the waiting store on SP is triggered
    # only when the store is. Triggered from POOL, the same load starts at once.
    act = (4096 + 60) / 1.4e9
    issue = act + ACT_LAT
    held = simulate(_trigger_stream("SP"), [rand((128, 64), 1)], trace=True)
    ev = {tr: (s, e) for tr, _, s, e, _, _ in held.timeline.events}
    assert ev["DMA:q0"] == pytest.approx((issue + LAT, issue + LAT + PIECE), rel=1e-12)
    # same 16 engines, ready at the same time: each engine moves the store's piece, then the load's
    assert ev["DMA:q1"] == pytest.approx((issue + LAT + PIECE, issue + LAT + 2 * PIECE), rel=1e-12)
    assert held.total_s == pytest.approx(issue + LAT + 2 * PIECE, rel=1e-12)
    free = simulate(_trigger_stream("POOL"), [rand((128, 64), 1)], trace=True)
    ev = {tr: (s, e) for tr, _, s, e, _, _ in free.timeline.events}
    assert ev["DMA:q1"] == pytest.approx((LAT, LAT + PIECE), rel=1e-12)
    assert free.total_s == pytest.approx(issue + LAT + PIECE, rel=1e-12)


def _partition_loads(starts, queues, target="trn2"):
    m = B.Module("parts")
    m.add_tensor("x", "input", "bfloat16", (4, 4096))
    m.add_memloc("a", "SBUF", 128, 4096 * 2)
    b = B.Builder(m)
    for k, (p0, q) in enumerate(zip(starts, queues)):
        b.inst("dma_copy", "SP", [b.ap("a", dtype="bfloat16", start_partition=p0, num_partitions=4)],
               [b.ap("x")], queue=q, signals=[(q, 1)])
    return b.finish()


def test_a_dma_runs_on_the_engines_of_its_partitions():
    # [DMA] Example 1: a [4, 4096] bf16 load (32 KiB) runs on one engine, the one serving partitions
    # 0-7 (measured there: 1416 ns on trn2; 32 KiB / 23 B/ns = 1425 ns; here at one engine's rate,
    # 23 B/ns capped at its sixteenth of the core's HBM bandwidth, plus 4 descriptors)
    tm = get_target("trn2")
    one = 4 * 4096 * 2 / min(23e9, 2.9e12 / 8 / 16) + 4 * tm.dma_descriptor_overhead_s
    x = np.zeros((4, 4096), np.float32)
    res = simulate(_partition_loads([0], ["q0"]), [x], target="trn2")
    assert res.total_s == pytest.approx(LAT + one, rel=1e-12)
    # partitions 0-3 and 4-7 share engine 0 (in turn, even from two queues); 0-3 and 8-11 do not
    same = simulate(_partition_loads([0, 4], ["q0", "q1"]), [x], target="trn2")
    assert same.total_s == pytest.approx(LAT + 2 * one, rel=1e-12)
    apart = simulate(_partition_loads([0, 8], ["q0", "q1"]), [x], target="trn2")
    assert apart.total_s == pytest.approx(LAT + one, rel=1e-12)
    assert apart.busy_s["DMA"] == pytest.approx(2 * one, rel=1e-12)


def test_a_queue_is_in_order_per_engine_and_done_when_every_engine_passed_it():
    # [DMA]: transfers of one queue run in order on each engine; every engine writes the completion
    # semaphore. A transfer behind a longer one of the same queue moves its data at once on engines
    # the longer one does not use, and completes (signals) when the longer one has
    m = B.Module("ring")
    m.add_tensor("x", "input", "float32", (8, 4096))
    m.add_memloc("a", "SBUF", 16, 4096 * 4)
    m.add_memloc("d", "SBUF", 16, 256)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("a", start_partition=0, num_partitions=8)], [b.ap("x")], queue="q0",
           signals=[("q0", 1)])
    b.inst("dma_copy", "SP", [b.ap("a", start_partition=8, num_partitions=8, free=64)],
           [B.AccessPattern("x", "float32", 0, [[4096, 8], [1, 64]])], queue="q0", signals=[("q0", 1)])
    b.inst("memset", "DVE", [b.ap("d", free=64)], [], value=0.0, waits=[("q0", 2)])
    b.finish()
    res = simulate(m, [np.zeros((8, 4096), np.float32)], trace=True)
    big = 8 * 4096 * 4 / 17e9 + 8 * TM.dma_descriptor_overhead_s
    small = 8 * 64 * 4 / 17e9 + 8 * TM.dma_descriptor_overhead_s
    ev = [(tr, s, e) for tr, _, s, e, _, _ in res.timeline.events]
    assert ev[0] == ("DMA:q0", pytest.approx(LAT, rel=1e-12), pytest.approx(LAT + big, rel=1e-12))
    assert ev[1] == ("DMA:q0", pytest.approx(LAT, rel=1e-12), pytest.approx(LAT + big, rel=1e-12))
    assert small < big
    assert ev[2][1] == pytest.approx(LAT + big, rel=1e-12)


def test_hbm_bandwidth_caps_all_engines_together():
    # the 16 engines together never move more than the core's HBM bandwidth (reads and writes counted
    # together; [ARCH2]/[TRN2] per chip over its cores): on trn2 16 x 23 B/ns exceeds 2.9 TB/s / 8, and
    # an HBM -> HBM copy on trn1 reads and writes each byte
    for target, src_hbm_to_hbm in (("trn2", False), ("trn1", True)):
        tm = get_target(target)
        m = B.Module("bw")
        n = 128 * 2048
        m.add_tensor("x", "input", "float32", (8, n))
        m.add_tensor("h", "output", "float32", (8, n))
        for k in range(8):
            m.add_memloc("a%d" % k, "SBUF", 128, 2048 * 4)
        b = B.Builder(m)
        for k in range(8):
            src = B.AccessPattern("x", "float32", k * n, [[1, n]])
            dst = B.AccessPattern("h", "float32", k * n, [[1, n]]) if src_hbm_to_hbm else b.ap("a%d" % k)
            b.inst("dma_copy", "SP", [dst], [src], queue="q%d" % (k % 4))
        b.finish()
        res = simulate(m, [np.zeros((8, n), np.float32)], target=target)
        hbm_bytes = 8 * n * 4 * (2 if src_hbm_to_hbm else 1)
        rate = hbm_bytes / (res.total_s - tm.dma_fixed_latency_s)
        assert 0.9 * tm.hbm_bytes_per_sec < rate <= tm.hbm_bytes_per_sec * (1 + 1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10 ** 6), st.integers(1, 200))
def test_access_tracker_matches_a_plain_scan_of_its_last_64_accesses(seed, count):
    """The tracker (which skips blocks of its ring that ended before the asking time) gives what a plain
    scan of the last 64 accesses of a storage gives: the latest conflicting end of another track, the
    id of the first access in ring order reaching it, the same track's latest overlapping end."""
    from neuronxcc.starfish.birsim._tracker import AccessTracker
    rng = np.random.default_rng(seed)
    acc = AccessTracker()
    ring = []                       # (slot order) [(r0, r1, b0, b1, write, end, track, iid)]
    head = 0
    for iid in range(count):
        r0 = int(rng.integers(0, 8))
        b0 = int(rng.integers(0, 64))
        reg = ("s", r0, r0 + int(rng.integers(1, 4)), b0, b0 + int(rng.integers(1, 16)), bool(rng.integers(0, 2)))
        track = int(rng.integers(0, 3))
        floor = float(iid // 4 + rng.integers(0, 10))         # the asking time, as a timeline's rises
        dep = acc.conflict_time(track, [reg], floor)
        want, who = floor, -1
        for (a0, a1, c0, c1, w, e, tr, i) in ring:
            if tr != track and (w or reg[5]) and e > want and reg[1] < a1 and a0 < reg[2] and reg[3] < c1 \
                    and c0 < reg[4]:
                want, who = e, i
        assert dep == want and acc.last_conflict_id == who
        end = floor + float(rng.integers(1, 30))
        acc.record(track, [reg], end, iid)
        entry = (reg[1], reg[2], reg[3], reg[4], reg[5], end, track, iid)
        if len(ring) < 64:
            ring.append(entry)
        else:
            ring[head] = entry
        head = (head + 1) % 64
