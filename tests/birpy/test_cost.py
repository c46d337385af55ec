"""The cost model pinned to the public per-instruction formulas (hardware reference §3 cost
column, the §2 rules of thumb, the DMA figures of §1/§2), each number recomputed here from the
formula and the ``neuronxcc.hwm`` constants, plus the constants' own values and citations."""
import dataclasses

import pytest

from neuronxcc import hwm
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birpy.cost import instruction_cost

V2, V3 = hwm.get_target("trn1"), hwm.get_target("trn2")


def AP(t, dt, pat, np_=128, off=0):
    return B.AccessPattern(t, dt, off, [list(p) for p in pat], 0, np_)


def _module():
    m = B.Module("c")
    m.add_tensor("x", "input", "float32", (128, 4096))
    m.add_tensor("h", "output", "float32", (128, 4096))
    for name, mem in (("a", "SBUF"), ("b", "SBUF"), ("c", "SBUF"), ("ps", "PSUM")):
        m.add_memloc(name, mem, 128, 16384 if mem == "SBUF" else 8192)
    return m


def cost(opcode, engine, dsts, srcs, target="trn1", **attrs):
    m = _module()
    return instruction_cost(B.Instruction(opcode, engine, dsts, srcs, attrs), m, target)


def test_public_constants():
    # ref §1/§2 figures, as the reference states them
    assert (V2.pe_hz, V2.dve_hz, V2.act_hz, V2.pool_hz) == (2.8e9, 1.12e9, 1.4e9, 1.4e9)
    assert (V3.pe_hz, V3.dve_hz, V3.act_hz, V3.pool_hz) == (2.4e9, 0.96e9, 1.2e9, 1.2e9)
    assert V2.dma_engines == 16 and V2.dma_bytes_per_sec == pytest.approx(272e9)      # [DMABW] 17 B/ns x 16
    assert V3.dma_bytes_per_sec == pytest.approx(368e9)                                # [DMABW] 23 B/ns x 16
    assert V2.hbm_bytes_per_sec == pytest.approx(820e9 / 2)                            # [ARCH2] per chip / 2
    assert V3.hbm_bytes_per_sec == pytest.approx(2.9e12 / 8)                           # [TRN2] per chip / 8
    assert V2.dma_fixed_latency_s == 1.3e-6 and V2.min_ii == 64 and V2.access_overhead_cycles == 60
    assert V2.pool_startup_cycles == 150 and V2.mm_init_latency == 64 and V2.fp32_matmul_slowdown == 4
    assert V2.peak_flops("bfloat16") == pytest.approx(91.75e12, rel=1e-3)
    # ACT dependency latency reproduces [PERF]'s dependent 1-element II of ~264 cycles
    assert max(V2.min_ii, 1) + V2.access_overhead_cycles + V2.act_dependency_cycles == 264
    # descriptor overhead: a 4 KiB descriptor runs at 90% of the engine's peak ("saturates")
    d = 4096
    assert (d / V2.dma_bytes_per_sec_per_engine) / (d / V2.dma_bytes_per_sec_per_engine
                                                   + V2.dma_descriptor_overhead_s) == pytest.approx(0.9)


def test_every_cost_constant_cites_a_source():
    fields = {f.name for f in dataclasses.fields(hwm.TargetModel)}
    cost_fields = {"hbm_bytes_per_sec", "dma_engines", "dma_partitions_per_engine",
                   "dma_bytes_per_sec_per_engine", "dma_fixed_latency_s",
                   "dma_descriptor_overhead_s", "dma_min_piece_bytes", "pe_hz", "dve_hz", "act_hz", "pool_hz",
                   "mm_init_latency", "fp32_matmul_slowdown", "fp32_transpose_slowdown", "min_ii",
                   "access_overhead_cycles", "pool_startup_cycles", "act_accum_readout_cycles",
                   "act_dependency_cycles", "dve_dependency_cycles", "dve_pool_share_sbuf_port",
                   "dve_act_share_psum_port", "dve_perf_modes", "pe_peak_flops", "sbuf_fast_stride_bytes",
                   "strided_access_slowdown"}
    assert cost_fields <= fields
    for f in cost_fields:
        sec, tag, how = hwm.SOURCES[f]
        assert sec.startswith("§") and tag.startswith("[") and how[0] in "CI", f


@pytest.mark.parametrize("ns,nm,dt,want", [(128, 512, "bfloat16", 512), (128, 8, "bfloat16", 64),
                                          (16, 8, "bfloat16", 16), (128, 256, "float32", 1024)])
def test_matmul_formula(ns, nm, dt, want):
    # [ISA226] nc_matmul: max(min(64, Ns), Nm), x4 for fp32
    c = cost("matmul", "PE", [AP("ps", "float32", [[1, nm]])], [AP("a", dt, [[1, ns]]), AP("b", dt, [[1, nm]])])
    assert c.cycles == want and c.busy_s == pytest.approx(want / V2.pe_hz) and c.kind == "matmul"


def test_pe_transpose_formula():
    # [ISA226] nc_transpose on PE: max(P, min(64, F)); fp32 x4 on v2 (a matmul), x2 on v3 ([ARCH3])
    def t(dt, p, f, target="trn1"):
        return cost("transpose", "PE", [AP("ps", dt, [[1, p]], np_=f)], [AP("a", dt, [[1, f]], np_=p)], target)
    assert t("bfloat16", 128, 128).cycles == 128
    assert t("bfloat16", 32, 16).cycles == 32
    assert t("bfloat16", 16, 128).cycles == 64
    assert t("float32", 128, 128).cycles == 512 and t("float32", 128, 128, "trn2").cycles == 256
    assert t("float32", 128, 128).kind == "pe_transpose"


def test_act_and_dve_formulas():
    n = 1000
    f32 = [[1, n]]
    a = cost("activation", "ACT", [AP("a", "float32", f32)], [AP("b", "float32", f32)], func="exp")
    assert a.cycles == max(64, n) + 60 and a.latency_s == pytest.approx(140 / V2.act_hz)
    r = cost("activation", "ACT", [AP("a", "float32", f32)], [AP("b", "float32", f32)], func="exp", reduce="add")
    assert r.cycles == n + 64 + 60
    tt = cost("tensor_tensor", "DVE", [AP("a", "float32", f32)], [AP("b", "float32", f32), AP("c", "float32", f32)],
              op="add")
    assert tt.cycles == 2 * n + 60 and tt.latency_s == pytest.approx(100 / V2.dve_hz)
    bf = [[1, n]]
    tb = cost("tensor_tensor", "DVE", [AP("a", "bfloat16", bf)], [AP("b", "bfloat16", bf), AP("c", "bfloat16", bf)],
              op="mult")
    assert tb.cycles == n + 60
    tp = cost("tensor_tensor", "DVE", [AP("a", "float32", f32)], [AP("ps", "float32", f32), AP("c", "float32", f32)],
              op="add")
    assert tp.cycles == n + 60
    ts = cost("tensor_scalar", "DVE", [AP("a", "float32", f32)], [AP("b", "float32", f32)], op0="mult", operand0=2.0)
    assert ts.cycles == n + 60
    small = cost("tensor_scalar", "DVE", [AP("a", "float32", [[1, 3]])], [AP("b", "float32", [[1, 3]])],
                 op0="mult", operand0=2.0)
    assert small.cycles == 64 + 60
    ms = cost("memset", "DVE", [AP("a", "bfloat16", bf)], [], value=0.0)
    assert ms.cycles == n // 2 + 60
    red = cost("tensor_reduce", "DVE", [AP("a", "float32", [[1, 1]])], [AP("b", "float32", f32)], op="add", axes=1)
    assert red.cycles == n + 60
    pool = cost("tensor_tensor", "POOL", [AP("a", "float32", f32)], [AP("b", "float32", f32), AP("c", "float32", f32)],
                op="add")
    assert pool.cycles == 150 + n and pool.latency_s == 0


def test_v3_dve_performance_modes():
    n = 1024
    bf = [[1, n]]
    c4 = cost("tensor_copy", "DVE", [AP("a", "bfloat16", bf)], [AP("b", "bfloat16", bf)], target="trn2")
    assert c4.cycles == n // 4 + 60
    c2 = cost("tensor_copy", "DVE", [AP("a", "bfloat16", [[2, n]])], [AP("b", "bfloat16", bf)], target="trn2")
    assert c2.cycles == n // 2 + 60
    f = cost("tensor_copy", "DVE", [AP("a", "float32", bf)], [AP("b", "float32", bf)], target="trn2")
    assert f.cycles == n + 60
    assert cost("tensor_copy", "DVE", [AP("a", "bfloat16", bf)], [AP("b", "bfloat16", bf)]).cycles == n + 60


def test_ports_follow_the_generation():
    f32 = [[1, 256]]
    ev = [AP("a", "float32", f32)], [AP("ps", "float32", f32)]
    assert cost("tensor_copy", "DVE", *ev).ports == ("PORT:SBUF", "PORT:PSUM")
    assert cost("activation", "ACT", *ev, func="copy").ports == ("PORT:PSUM",)
    assert cost("activation", "ACT", *ev, func="copy", target="trn2").ports == ()
    assert cost("tensor_copy", "POOL", [AP("a", "float32", f32)], [AP("b", "float32", f32)]).ports == ("PORT:SBUF",)
    assert cost("activation", "ACT", *ev, func="copy").kind == "psum_eviction"


@pytest.mark.parametrize("step,dt,slow", [(1, "float32", False), (4, "float32", False), (5, "float32", True),
                                          (8, "bfloat16", False), (9, "bfloat16", True), (0, "float32", False)])
def test_strided_innermost_access_halves_the_interface(step, dt, slow):
    # ref §5 / [ARCH2]: a most-minor free stride above 16 bytes halves an SBUF/PSUM interface's
    # bandwidth ("roughly 50% performance hit"): N counts twice, the floor and the overhead stay
    assert V2.sbuf_fast_stride_bytes == 16 and V2.strided_access_slowdown == 2
    n = 256
    src = AP("a", dt, [[step, n]])
    k = 2 if slow else 1
    act = cost("activation", "ACT", [AP("b", dt, [[1, n]])], [src], func="exp")
    assert act.cycles == max(64, k * n) + 60
    tt = cost("tensor_tensor", "DVE", [AP("b", "float32", [[1, n]])], [src, AP("c", "float32", [[1, n]])], op="add")
    assert tt.cycles == max(64, 2 * k * n) + 60
    mm = cost("matmul", "PE", [AP("ps", "float32", [[1, n]])], [AP("c", "bfloat16", [[1, 128]]),
                                                               AP("a", dt, [[step, n]])])
    assert mm.cycles == max(min(64, 128 * k), k * n) * (4 if dt == "float32" else 1)
    # a [P, 1] column and an innermost dimension of one element do not stride
    col = cost("tensor_scalar", "DVE", [AP("b", dt, [[1, n]])], [AP("a", dt, [[64, n], [step * 7, 1]])],
               op0="mult", operand0=2.0)
    assert col.cycles == max(64, (2 if 64 * B.dtypes.itemsize(dt) > 16 else 1) * n) + 60


@pytest.mark.parametrize("mems,k", [(("SBUF", "SBUF", "SBUF"), 3), (("PSUM", "SBUF", "SBUF"), 2),
                                    (("PSUM", "PSUM", "SBUF"), 2), (("PSUM", "PSUM", "PSUM"), 3)])
def test_select_streams_each_input(mems, k):
    # [ARCH2] rule of thumb: one input tensor ~N cycles, two ~2N; [ISA226] tensor_copy_predicated: N with
    # one input in PSUM, 2N with both in SBUF. A select reads pred, on_true, on_false: k N, k the larger
    # of its SBUF and PSUM input counts
    n = 256
    loc = {"SBUF": "a", "PSUM": "ps"}
    c = cost("select", "DVE", [AP("b", "float32", [[1, n]])], [AP(loc[m], "float32", [[1, n]]) for m in mems])
    assert c.cycles == max(64, k * n) + 60
    assert cost("select", "DVE", [AP("b", "float32", [[1, 16]])],
                [AP("a", "float32", [[1, 16]])] * 3).cycles == 64 + 60


def _dma(dst, src, target="trn1"):
    return cost("dma_copy", "SP", [dst], [src], target, queue="q3")


def test_dma_large_contiguous_load():
    # 128 partitions x 32 KiB: 128 descriptors of 32 KiB each, spread over all 16 engines
    n = 8192
    c = _dma(AP("a", "float32", [[1, n]]), B.AccessPattern("x", "float32", 0, [[n, 128], [1, n]]))
    nbytes = 128 * n * 4
    eng = nbytes / V2.dma_bytes_per_sec_per_engine + 128 * V2.dma_descriptor_overhead_s
    assert c.track == "DMA:q3" and c.width == 16 and c.kind == "dma"
    assert c.engine_s == pytest.approx(eng) and c.busy_s == pytest.approx(eng / 16)
    assert c.latency_s == V2.dma_fixed_latency_s
    assert nbytes / c.busy_s == pytest.approx(272e9 * 0.99, rel=0.01)   # near the 272 GB/s peak


@pytest.mark.parametrize("p0,np_,first,shares", [(0, 4, 0, (1.0,)), (0, 128, 0, (1 / 16,) * 16),
                                                  (8, 16, 1, (0.5, 0.5)), (0, 65, 0, (8 / 65,) * 8 + (1 / 65,)),
                                                  (4, 8, 0, (0.5, 0.5))])
def test_dma_runs_on_the_engines_of_its_partitions(p0, np_, first, shares):
    # [DMA] / [PERF]: engine k moves the data of SBUF partitions [8k, 8k + 8): a [4, 4096] load is one
    # engine's work, a [128, F] one is split over all 16; each engine's share is its share of the partitions
    n = 4096
    c = _dma(AP("a", "bfloat16", [[1, n]], np_, off=0), B.AccessPattern("x", "bfloat16", 0, [[n, np_], [1, n]]))
    c2 = _dma(B.AccessPattern("a", "bfloat16", 0, [[1, n]], p0, np_), B.AccessPattern("x", "bfloat16", 0,
                                                                                     [[n, np_], [1, n]]))
    eng = np_ * n * 2 / V2.dma_bytes_per_sec_per_engine + np_ * V2.dma_descriptor_overhead_s
    assert V2.dma_partitions_per_engine == 8
    assert c2.first_engine == first and c2.width == len(shares) and c2.shares == pytest.approx(shares)
    assert c2.engine_s == pytest.approx(eng) and c2.busy_s == pytest.approx(eng * max(shares))
    assert c.first_engine == 0 and c.width == -(-np_ // 8)
    # a store: the on-chip side is the source; an HBM -> HBM copy has none (pieces over free engines)
    st = _dma(B.AccessPattern("h", "bfloat16", 0, [[n, np_], [1, n]]), B.AccessPattern("a", "bfloat16", 0,
                                                                                      [[1, n]], p0, np_))
    assert (st.first_engine, st.shares) == (c2.first_engine, c2.shares)
    hh = _dma(B.AccessPattern("h", "float32", 0, [[1, n]]), B.AccessPattern("x", "float32", 0, [[1, n]]))
    assert hh.first_engine == -1 and hh.width == 4       # 16 KiB in pieces of dma_min_piece_bytes


def test_dma_engines_follow_the_allocated_partition():
    m = _module()
    m.add_memloc("hi", "SBUF", 16, 16384, start_partition=96, byte_offset=0)
    i = B.Instruction("dma_copy", "SP", [B.AccessPattern("hi", "float32", 0, [[1, 64]], 8, 8)],
                      [B.AccessPattern("x", "float32", 0, [[4096, 8], [1, 64]])], {"queue": "q0"})
    c = instruction_cost(i, m, "trn1")
    assert c.first_engine == (96 + 8) // 8 and c.shares == (1.0,)


def test_dma_small_descriptors_are_slow():
    # 128 partitions x 64 B: each descriptor pays the fixed overhead: 12% of peak
    c = _dma(AP("a", "float32", [[1, 16]]), B.AccessPattern("x", "float32", 0, [[4096, 128], [1, 16]]))
    nbytes = 128 * 64
    eff = (nbytes / V2.dma_bytes_per_sec) / c.busy_s
    assert eff == pytest.approx((64 / 17e9) / (64 / 17e9 + V2.dma_descriptor_overhead_s))
    assert 0.1 < eff < 0.15
    # an element-strided (transposing) HBM side makes every element its own descriptor
    t = _dma(AP("a", "float32", [[1, 128]]), B.AccessPattern("x", "float32", 0, [[1, 128], [4096, 128]]))
    assert t.engine_s == pytest.approx(128 * 128 * 4 / 17e9 + 128 * 128 * V2.dma_descriptor_overhead_s)


def test_dma_rate_capped_by_hbm():
    # HBM -> HBM reads and writes HBM: 16 engines may move at most 410/2 GB/s together
    n = 1 << 20
    c = _dma(B.AccessPattern("h", "float32", 0, [[1, 128 * 4096]]), B.AccessPattern("x", "float32", 0,
                                                                                   [[1, 128 * 4096]]))
    assert V2.dma_engine_rate(2) == pytest.approx(410e9 / 32)
    assert c.engine_s == pytest.approx(n * 2 / (410e9 / 32) + V2.dma_descriptor_overhead_s)
    # v3: one HBM side already exceeds the core's HBM share (23 B/ns x 16 > 2.9 TB/s / 8)
    assert V3.dma_engine_rate(1) == pytest.approx(2.9e12 / 8 / 16)
    assert V2.memory_bytes_per_sec == pytest.approx(272e9) and V3.memory_bytes_per_sec == pytest.approx(362.5e9)
