"""Allocators on real BIR modules, checked independently of their bookkeeping.

The checker walks every executed instruction in program order with the
memlocs' final addresses and the access patterns only: no on-chip read may
find bytes that another memloc wrote since its own memloc wrote them, and a
matmul's PSUM output stays in one bank. Results are compared with birsim on
the unallocated module (private storage per memloc).
"""
import numpy as np
import pytest

from neuronxcc import errors
from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_module, simulate
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_checks import check_no_clobber, check_placement, raw_equal
from support.walrus_programs import inputs_for, random_program


@pytest.mark.parametrize("allocator", ["coloring_allocator", "linear_scan_allocator"])
@pytest.mark.parametrize("seed", range(8))
def test_random_modules_no_clobber_and_same_results(allocator, seed):
    m = random_program(seed, nbuf=6)
    x = inputs_for(m, seed)
    ref = run_module(B.from_json(B.to_json(m)), x)
    run_passes(m, ["lsa", "coloring", allocator], PassContext(get_target("trn1")))
    assert all(ml.allocated for ml in m.memlocs.values())
    assert check_no_clobber(m) == []
    got = run_module(m, x)
    assert all(raw_equal(a, b) for a, b in zip(ref, got))


@pytest.mark.parametrize("seed", range(4))
def test_reuse_distance_costs_no_peak(seed):
    """The reuse-distance placement keeps the lowest-offset placement's peak on every memory."""
    peaks = {}
    for reuse in (False, True):
        m = random_program(seed, nbuf=6)
        ctx = PassContext(get_target("trn1"), options={"reuse_distance": reuse})
        run_passes(m, ["lsa", "coloring", "coloring_allocator"], ctx)
        assert check_no_clobber(m) == []
        st = ctx.metrics["allocation"]["coloring"]
        peaks[reuse] = {mem: st[mem]["peak_bytes_per_partition"] for mem in ("SBUF", "PSUM") if mem in st}
    assert peaks[True] == peaks[False]


def test_values_in_different_loops_share_bytes():
    # two loops, each with its own private tiles: the allocator reuses addresses
    m = B.Module("two_loops")
    m.add_tensor("x", "input", "float32", (128, 64))
    m.add_tensor("y", "output", "float32", (128, 64))
    b = B.Builder(m)
    for k in range(2):
        m.add_memloc("t%d" % k, "SBUF", 128, 128)
        m.add_memloc("u%d" % k, "SBUF", 128, 128)
        with b.loop("i%d" % k, 0, 2) as i:
            b.inst("dma_copy", "SP", [b.ap("t%d" % k, free=32)],
                   [B.AccessPattern("x", "float32", i * 32, [[64, 128], [1, 32]])], queue="q0")
            b.inst("tensor_scalar", "DVE", [b.ap("u%d" % k, free=32)], [b.ap("t%d" % k, free=32)],
                   op0="add", operand0=float(k + 1))
            b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * 32, [[64, 128], [1, 32]])],
                   [b.ap("u%d" % k, free=32)], queue="q1")
    b.finish()
    x = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)
    ref = run_module(B.from_json(B.to_json(m)), [x])
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["coloring_allocator", "anti_dependency_analyzer"], ctx)
    st = ctx.metrics["allocation"]["coloring"]["SBUF"]
    assert st["peak_bytes_per_partition"] == 256 == st["max_live_lower_bound"]
    assert check_no_clobber(m) == []
    assert all(raw_equal(a, b) for a, b in zip(ref, run_module(m, [x])))


@pytest.mark.parametrize("seed", range(4))
def test_placement_rules_hold_on_modules(seed):
    # per value: legal start partition, inside the memory, aligned, PSUM bank rule
    m = random_program(seed, nbuf=5)
    t = get_target("trn1")
    run_passes(m, ["lsa", "coloring", "coloring_allocator"], PassContext(t))
    for ml in m.memlocs.values():
        v = dict(start=0, end=0, nparts=ml.partitions, size=ml.bytes_per_partition,
                 pstart=ml.start_partition, offset=ml.byte_offset)
        if ml.memory == "PSUM":
            assert check_placement([v], t.psum_partition_bytes, 128, 4, t.psum_bank_bytes) == []
        else:
            assert check_placement([v], t.sbuf_usable_bytes, 128) == []


def _pressure_module(big_bytes, psum=False):
    m = B.Module("pressure")
    m.add_tensor("x", "input", "float32", (128, 64))
    m.add_tensor("y", "output", "float32", (128, 64))
    m.add_memloc("big", "SBUF", 128, big_bytes)
    m.add_memloc("big2", "SBUF", 128, big_bytes)
    m.add_memloc("a", "SBUF", 128, 256)
    m.add_memloc("c", "SBUF", 128, 256)
    if psum:
        for k in range(9):
            m.add_memloc("p%d" % k, "PSUM", 128, 2048)
    b = B.Builder(m)
    b.inst("memset", "DVE", [b.ap("big", free=64)], value=2.0)
    b.inst("memset", "POOL", [b.ap("big2", free=64)], value=-1.0)
    with b.loop("i", 0, 2):
        b.inst("dma_copy", "SP", [b.ap("a", free=64)], [B.AccessPattern("x", "float32", 0, [[64, 128], [1, 64]])])
        b.inst("tensor_tensor", "DVE", [b.ap("c", free=64)], [b.ap("a", free=64), b.ap("big", free=64)], op="mult")
        b.inst("tensor_tensor", "POOL", [b.ap("c", free=64)], [b.ap("c", free=64), b.ap("big2", free=64)], op="add")
        if psum:
            for k in range(9):
                b.inst("tensor_copy", "DVE", [b.ap("p%d" % k, free=64)], [b.ap("c", free=64)])
            for k in range(9):
                b.inst("tensor_tensor", "DVE", [b.ap("c", free=64)], [b.ap("c", free=64), b.ap("p%d" % k, free=64)], op="add")
    b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", 0, [[64, 128], [1, 64]])], [b.ap("c", free=64)])
    b.finish()
    return m


@pytest.mark.parametrize("allocator", ["coloring_allocator", "linear_scan_allocator"])
def test_sbuf_short_spills_to_hbm_and_stays_correct(allocator):
    t = get_target("trn1")
    m = _pressure_module(t.sbuf_usable_bytes // 2 + 1000)
    x = np.random.default_rng(0).standard_normal((128, 64)).astype(np.float32)
    ref = run_module(B.from_json(B.to_json(m)), [x])
    ctx = PassContext(t)
    run_passes(m, ["lsa", allocator, "anti_dependency_analyzer", "birverifier"], ctx)
    st = list(ctx.metrics["allocation"].values())[0]
    assert st["spilled"]
    assert any(tn.kind == "scratch" for tn in m.tensors.values())
    assert check_no_clobber(m) == []
    assert all(raw_equal(a, b) for a, b in zip(ref, run_module(m, [x])))


def test_no_spill_raises_out_of_memory():
    t = get_target("trn1")
    m = _pressure_module(t.sbuf_usable_bytes // 2 + 1000)
    with pytest.raises(errors.OutOfMemoryError, match="SBUF exhausted on trn1"):
        run_passes(m, ["coloring_allocator"], PassContext(t, options={"allocator_spill": False}))


def test_psum_overflow_is_a_clear_error():
    m = _pressure_module(1024, psum=True)
    with pytest.raises(errors.OutOfMemoryError) as ei:
        run_passes(m, ["coloring_allocator"], PassContext(get_target("trn1")))
    assert "PSUM exhausted" in str(ei.value) and "cannot be spilled" in str(ei.value)
    assert ei.value.one_line().startswith("[NCC_EOOM002]")


def test_one_value_larger_than_sbuf_is_out_of_memory():
    t = get_target("trn1")
    m = _pressure_module(t.sbuf_usable_bytes - 400)
    with pytest.raises(errors.OutOfMemoryError, match="cannot help"):
        run_passes(m, ["linear_scan_allocator"], PassContext(t))


def test_small_values_share_bytes_in_other_quadrants():
    # four 32-partition tiles live at once: legal starts 0/32/64/96, one byte range
    m = B.Module("quadrants")
    m.add_tensor("x", "input", "float32", (32, 64))
    m.add_tensor("y", "output", "float32", (32, 64))
    for k in range(4):
        m.add_memloc("t%d" % k, "SBUF", 32, 256)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("t0")], [B.AccessPattern("x", "float32", 0, [[64, 32], [1, 64]])])
    for k in range(1, 4):
        b.inst("tensor_scalar", ["DVE", "ACT", "POOL"][k - 1], [b.ap("t%d" % k)], [b.ap("t%d" % (k - 1))],
               op0="add", operand0=float(k))
    for k, eng in ((0, "DVE"), (1, "POOL"), (2, "DVE")):
        b.inst("tensor_tensor", eng, [b.ap("t3")], [b.ap("t3"), b.ap("t%d" % k)], op="add")
    b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", 0, [[64, 32], [1, 64]])], [b.ap("t3")])
    b.finish()
    x = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    ref = run_module(B.from_json(B.to_json(m)), [x])
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["coloring_allocator", "anti_dependency_analyzer", "birverifier"], ctx)
    assert sorted(ml.start_partition for ml in m.memlocs.values()) == [0, 32, 64, 96]
    assert ctx.metrics["allocation"]["coloring"]["SBUF"]["peak_bytes_per_partition"] == 256
    assert check_no_clobber(m) == []
    assert all(raw_equal(a, b) for a, b in zip(ref, run_module(m, [x])))


def _two_kernels():
    """Kernel 1 loads x, adds 1 on DVE, stores to scratch; kernel 2 loads a weight w and kernel 1's
    result and multiplies them. Every memloc is 128 x 256 B; at most three are live at once."""
    m = B.Module("two_kernels")
    m.add_tensor("x", "input", "float32", (128, 64))
    m.add_tensor("w", "input", "float32", (128, 64))
    m.add_tensor("s", "scratch", "float32", (128, 64))
    m.add_tensor("y", "output", "float32", (128, 64))
    b = B.Builder(m)
    for n in ("t", "u", "r", "q", "v"):
        m.add_memloc(n, "SBUF", 128, 256)
    b.inst("dma_copy", "SP", [b.ap("t", free=64)], [B.AccessPattern("x", "float32", 0, [[64, 128], [1, 64]])],
           queue="q0")
    b.inst("tensor_scalar", "DVE", [b.ap("u", free=64)], [b.ap("t", free=64)], op0="add", operand0=1.0)
    b.inst("dma_copy", "SP", [B.AccessPattern("s", "float32", 0, [[64, 128], [1, 64]])], [b.ap("u", free=64)],
           queue="q1")
    # the second kernel: a weight (input) and the first kernel's result (scratch)
    # triggered from ACT: SP's in-order stream holds kernel 1's store until the add is done
    b.inst("dma_copy", "ACT", [b.ap("r", free=64)], [B.AccessPattern("w", "float32", 0, [[64, 128], [1, 64]])],
           queue="q2")
    b.inst("dma_copy", "SP", [b.ap("q", free=64)], [B.AccessPattern("s", "float32", 0, [[64, 128], [1, 64]])],
           queue="q3")
    b.inst("tensor_tensor", "DVE", [b.ap("v", free=64)], [b.ap("r", free=64), b.ap("q", free=64)], op="mult")
    b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", 0, [[64, 128], [1, 64]])], [b.ap("v", free=64)],
           queue="q4")
    b.finish()
    return m


def _span(m, n):
    ml = m.memlocs[n]
    return ml.byte_offset, ml.byte_offset + ml.bytes_per_partition


def _overlap(m, a, b):
    (a0, a1), (b0, b1) = _span(m, a), _span(m, b)
    return a0 < b1 and b0 < a1


@pytest.mark.parametrize("reuse", [True, False])
def test_reuse_distance_removes_a_false_wait_at_a_kernel_boundary(reuse):
    """The second kernel's weight load (r, from a program input) can start at once. Placed in the
    lowest free bytes it takes t's, freed by kernel 1's DVE add just before, and its DMA waits for
    that add (a write-after-read through the address only). Placed by reuse distance it takes
    bytes idle longer, at the same peak: the dependence analysis gives it no wait and in birsim's
    timeline it runs while the add computes. q, loaded from kernel 1's result, waits for kernel 1
    either way, so reusing t's bytes costs it nothing."""
    m = _two_kernels()
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(2))
    ref = run_module(B.from_json(B.to_json(m)), [x, w])
    ctx = PassContext(get_target("trn1"), options={"reuse_distance": reuse})
    run_passes(m, ["coloring_allocator", "anti_dependency_analyzer"], ctx)
    assert check_no_clobber(m) == []
    assert all(raw_equal(a, c) for a, c in zip(ref, run_module(m, [x, w])))
    st = ctx.metrics["allocation"]["coloring"]["SBUF"]
    assert st["peak_bytes_per_partition"] == 3 * 256     # the same peak either way
    load_w = next(i for i in m.instructions() if i.opcode == "dma_copy" and i.srcs[0].target == "w")
    add = next(i for i in m.instructions() if i.engine == "DVE")
    res = simulate(m, [x, w], trace=True)
    start = {ins.id: (t0, t1) for _, ins, t0, t1, _, _ in res.timeline.events}
    if reuse:
        assert not _overlap(m, "r", "t") and not _overlap(m, "r", "u")
        assert st["reuse_distance_moved"] >= 1
        assert [s for s, _ in load_w.waits if s.endswith("DVE")] == []
        assert start[load_w.id][0] < start[add.id][1]      # the load runs while the add computes
    else:
        assert _overlap(m, "r", "t")
        assert [s for s, _ in load_w.waits if s.endswith("DVE")]
        assert start[load_w.id][0] >= start[add.id][1]
