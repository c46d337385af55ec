"""Loop-carried distances of isomorphic pairs are solved once (carried.PairMemo).

A model's unrolled layers repeat the same loops over other buffers; the analysis must solve each
distinct pair problem once, so its cost stops growing with the repeats, and must give exactly the
distances it gives when it solves every pair on its own (the brute-force reference here).
"""
import numpy as np
import pytest

from neuronxcc import pelican
from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.walrus import carried as CA, deps as D
from neuronxcc.walrus.depgraph import DepGraph
from neuronxcc.walrus.program import REPEATING, Program
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_programs import F, random_op, random_program


def _layers(n, seed=7, nbuf=3, trip=4):
    """``n`` copies of one random loop nest ("layers"), each over its own SBUF buffers and its own
    slice of x / y, as an unrolled model repeats a layer."""
    m = B.Module("layers%d" % n)
    row = n * trip * F
    m.add_tensor("x", "input", "float32", (128, row))
    m.add_tensor("y", "output", "float32", (128, row))
    m.add_memloc("ps", "PSUM", 128, F * 4)
    m.add_memloc("ident", "SBUF", 128, 128 * 4)
    bld = B.Builder(m)
    bld.inst("memset", "POOL", [B.AccessPattern("ident", "float32", 0, [[1, 128]], 0, 128)], value=1.0)
    for layer in range(n):
        bufs = ["l%d_b%d" % (layer, k) for k in range(nbuf)]
        for b in bufs:
            m.add_memloc(b, "SBUF", 128, F * 4)
            bld.inst("memset", "DVE", [B.AccessPattern(b, "float32", 0, [[1, F]], 0, 128)], value=1.0)
        rng = np.random.default_rng(seed)          # the same ops in every layer
        with bld.loop("i%d" % layer, 0, trip) as i:
            for _ in range(8):
                random_op(bld, rng, bufs, i + layer * trip, row, ("load", "unary", "binary", "act", "copy",
                                                                  "store", "store_fixed", "pe"), ("q0", "q1"))
    bld.finish()
    return m


def _reference(prog, graph, physical):
    """Every loop-carried dependence solved pair by pair (no memo)."""
    rot = CA.rotations(prog.module)
    out = set()
    for (a, b), ops in graph.loop_pairs().items():
        sa, sb = prog.sites[a], prog.sites[b]
        common = [li for li in D._common_loops(sa, sb) if li.kind in REPEATING]
        if common and (common[-1].kind == "while" or (common[-1].trip or 0) > 1):
            d = CA.carried_distance(prog, sa, sb, ops, common[-1], physical, rot)
            if d is not None:
                out.add((b, a, prog.loops.index(common[-1]), d))
    return out


def _analyse(m, physical, monkeypatch):
    memos = []
    real = CA.PairMemo

    def spy(*a):
        memos.append(real(*a))
        return memos[-1]
    monkeypatch.setattr(CA, "PairMemo", spy)
    m.ensure_ids()
    prog = Program(m)
    g = DepGraph(prog, physical)
    deps = D.find_deps(prog, physical=physical, graph=g)
    got = {(d.src, d.dst, prog.loops.index(d.carried), d.distance) for d in deps if d.carried is not None}
    return got, _reference(prog, g, physical), memos[0]


@pytest.mark.parametrize("physical", [False, True])
def test_repeated_layers_solve_each_pair_problem_once(physical, monkeypatch):
    solved = {}
    for n in (2, 6):
        m = _layers(n)
        if physical:
            run_passes(m, ["lsa", "coloring", "coloring_allocator"], PassContext(get_target("trn1")))
        got, ref, memo = _analyse(m, physical, monkeypatch)
        assert got == ref
        assert memo.reused > 0
        solved[n] = memo.solved
    assert solved[6] == solved[2], solved       # three times the layers, no new problem


@pytest.mark.parametrize("seed", range(12))
def test_memo_distances_equal_the_pair_by_pair_solution(seed, monkeypatch):
    m = random_program(seed, nested=bool(seed % 2), control=seed % 3 == 0)
    got, ref, _ = _analyse(m, False, monkeypatch)
    assert got == ref
    m = random_program(seed, nested=bool(seed % 2))
    run_passes(m, ["lsa", "coloring", "coloring_allocator"], PassContext(get_target("trn1")))
    got, ref, _ = _analyse(m, True, monkeypatch)
    assert got == ref


def test_bases_are_part_of_the_problem(monkeypatch):
    """Two pairs alike but for how far apart their buffers lie get their own answers: iteration i
    loads slot i of a and reads slot i of b; with b on a's bytes no earlier read meets a later
    load, with b one slot above a the load of iteration i meets the read of iteration i - 1."""
    m = B.Module("bases")
    m.add_tensor("x", "input", "float32", (128, 4 * F))
    m.add_tensor("y", "output", "float32", (128, 4 * F))
    for k in range(2):
        m.add_memloc("a%d" % k, "SBUF", 128, 4 * F * 4)
        m.add_memloc("b%d" % k, "SBUF", 128, 4 * F * 4)
        m.add_memloc("c%d" % k, "SBUF", 128, F * 4)
    bld = B.Builder(m)
    for k in range(2):
        with bld.loop("i%d" % k, 0, 4) as i:
            bld.inst("dma_copy", "SP", [B.AccessPattern("a%d" % k, "float32", i * F, [[1, F]], 0, 128)],
                     [B.AccessPattern("x", "float32", i * F, [[4 * F, 128], [1, F]])], queue="q0")
            bld.inst("activation", "ACT", [B.AccessPattern("c%d" % k, "float32", 0 * i, [[1, F]], 0, 128)],
                     [B.AccessPattern("b%d" % k, "float32", i * F, [[1, F]], 0, 128)], func="identity")
            bld.inst("dma_copy", "POOL", [B.AccessPattern("y", "float32", i * F, [[4 * F, 128], [1, F]])],
                     [B.AccessPattern("c%d" % k, "float32", 0 * i, [[1, F]], 0, 128)], queue="q1")
    bld.finish()
    slot = F * 4
    place = {"a0": 0, "b0": 0, "c0": 5 * slot, "a1": 8 * slot, "b1": 9 * slot, "c1": 14 * slot}
    for name, off in place.items():
        m.memlocs[name].start_partition = 0
        m.memlocs[name].byte_offset = off
    got, ref, memo = _analyse(m, True, monkeypatch)
    assert got == ref
    per_loop = {}
    for src, dst, loop, d in got:
        per_loop.setdefault(loop, set()).add((src - 3 * loop, dst - 3 * loop, d))
    assert per_loop.get(0) != per_loop.get(1), per_loop


def test_one_dependence_graph_from_anti_dependency_analyzer_to_print_metrics(monkeypatch):
    """Without If/While (nothing inserted) the graph anti_dependency_analyzer builds is the graph
    of every later state until the passes reorder: post_sched, dep_reduction and print_metrics use
    it, none builds another."""
    from neuronxcc.walrus import depgraph
    m = _layers(3)
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["lsa", "coloring", "coloring_allocator"], ctx)
    built = []
    real = depgraph.DepGraph.__init__

    def counting(self, *a, **k):
        built.append(1)
        real(self, *a, **k)
    monkeypatch.setattr(depgraph.DepGraph, "__init__", counting)
    run_passes(m, ["anti_dependency_analyzer", "dep_reduction", "print_metrics"], ctx)
    assert len(built) == 1
    assert ctx.metrics["estimated_time_s"] > 0
