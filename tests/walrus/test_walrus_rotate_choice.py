"""vn_splitter's choice of what to rotate: part of the candidates when not all of them fit
(values a DMA loads first, then the smaller ones), and nothing when the program's transfers
outweigh all its compute (rotation lets loads issue early; with the DMA engines the bound that
only reorders their work). Each variant also runs in adversarial interleavings that honour only
the semaphores and must match program order.
"""
import dataclasses

import numpy as np

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_module
from neuronxcc.walrus.carried import ROTATIONS
from neuronxcc.walrus.passes import rotate
from neuronxcc.walrus.program import Program
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_checks import raw_equal, run_interleaved

T = 4
PASSES = ["lsa", "vn_splitter", "coloring", "coloring_allocator", "anti_dependency_analyzer", "post_sched",
          "dep_reduction", "birverifier"]


def _program(ft, fu, acts):
    """loop i: t <- x[:, i] (SP DMA, ft floats); u <- act(t[:fu]) then ``acts - 1`` more activations
    of u in place (ACT); y[:, i] <- u (POOL DMA). t and u are private to each iteration."""
    m = B.Module("partial")
    m.add_tensor("x", "input", "float32", (128, T * ft))
    m.add_tensor("y", "output", "float32", (128, T * fu))
    m.add_memloc("t", "SBUF", 128, ft * 4)
    m.add_memloc("u", "SBUF", 128, fu * 4)
    bld = B.Builder(m)

    def chip(name, n):
        return B.AccessPattern(name, "float32", 0, [[1, n]], 0, 128)
    with bld.loop("i", 0, T) as i:
        bld.inst("dma_copy", "SP", [chip("t", ft)], [B.AccessPattern("x", "float32", i * ft, [[T * ft, 128], [1, ft]])],
                 queue="q0")
        bld.inst("activation", "ACT", [chip("u", fu)], [chip("t", fu)], func="identity", scale=0.5, bias=1.0)
        for _ in range(acts - 1):
            bld.inst("activation", "ACT", [chip("u", fu)], [chip("u", fu)], func="identity", scale=0.5, bias=1.0)
        bld.inst("dma_copy", "POOL", [B.AccessPattern("y", "float32", i * fu, [[T * fu, 128], [1, fu]])],
                 [chip("u", fu)], queue="q1")
    bld.finish()
    return m


def _small_sbuf():
    # 16 KiB usable per partition, so that a 6 KiB and a 4 KiB value cannot both double
    tm = get_target("trn1")
    return dataclasses.replace(tm, sbuf_partition_bytes=tm.sbuf_reserved_bytes + 16 * 1024)


def _run(m, target):
    ft = m.tensors["x"].shape[1] // T
    x = [(np.arange(128 * T * ft, dtype=np.float32).reshape(128, T * ft) % 89) / 8]
    ref = run_module(B.from_json(B.to_json(m)), x)
    run_passes(m, PASSES, PassContext(target))
    B.verify(m, "trn1")
    for k in range(3):
        got = run_interleaved(m, x, k)
        assert all(raw_equal(a, b) for a, b in zip(ref, got)), "interleaving %d differs from program order" % k
    return m


def test_program_is_compute_bound_as_built():
    # the premise of the next tests: with 8 activations the compute outweighs the transfers
    tm = _small_sbuf()
    for acts, bound in ((8, False), (1, True)):
        m = _program(1536, 1024, acts)
        dma_s, compute_s = rotate._engine_times(Program(m), m, PassContext(tm))
        assert (dma_s >= compute_s) is bound


def test_rotates_the_loaded_value_when_both_do_not_fit():
    tm = _small_sbuf()
    cap = tm.sbuf_usable_bytes
    # t (loaded): 6 KiB, u: 4 KiB; both doubled need 20 KiB > 16 KiB, t alone doubled 16 KiB fits
    assert 2 * 6144 + 2 * 4096 > cap >= 2 * 6144 + 4096
    m = _run(_program(1536, 1024, 8), tm)
    rot = m.attrs.get(ROTATIONS) or {}
    assert set(rot) == {"t"}
    assert m.memlocs["t"].bytes_per_partition == 2 * 6144 and m.memlocs["u"].bytes_per_partition == 4096
    top = max(ml.byte_offset + ml.bytes_per_partition for ml in m.memlocs.values())
    assert top <= cap


def test_rotates_all_when_all_fit():
    m = _run(_program(1536, 1024, 8), get_target("trn1"))
    assert set(m.attrs.get(ROTATIONS) or {}) == {"t", "u"}


def test_transfer_bound_program_rotates_nothing():
    m = _run(_program(1536, 1024, 1), get_target("trn1"))
    assert not m.attrs.get(ROTATIONS)
    assert m.memlocs["t"].bytes_per_partition == 6144


def test_largest_fitting_prefix_checks_what_it_returns():
    # a fit check that only accepts prefixes of at most 3 values: the search returns 3
    class Check:
        def __init__(self):
            self.asked = []

        def fits(self, sizes):
            self.asked.append(len(sizes))
            return len(sizes) <= 3
    mc = [(type("V", (), {"name": "v%d" % k})(), None, None, 8) for k in range(10)]
    c = Check()
    assert rotate._largest_fitting_prefix(c, mc, 2) == 3
    assert len(c.asked) <= 1 + 4       # all, then a binary search over 10
    c = Check()
    assert rotate._largest_fitting_prefix(c, mc[:2], 2) == 2


def test_prices_kept_for_pre_sched_equal_fresh_ones():
    # vn_splitter prices one instruction per shape and keeps the prices (the ``costs`` analysis)
    # for pre_sched: every kept price equals the instruction's own price, after the rotation too
    from neuronxcc.starfish.birpy import cost as C
    m = _program(1536, 1024, 8)
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["lsa", "vn_splitter"], ctx)
    assert m.attrs.get(ROTATIONS)
    kept = ctx.analyses["costs"]
    n = 0
    for ins in m.instructions():
        assert kept.cache[id(ins)] == C.instruction_cost(ins, m, ctx.target)
        n += 1
    assert n >= 10
