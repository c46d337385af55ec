"""The dependence graph (walrus/depgraph.py): linear in the accesses, shared between passes.

* every pair of conflicting accesses (the all-pairs sweep ``_sched.conflicts``,
  kept here as the slow obvious reference) is ordered by a path of graph edges;
* on a program whose "layers" reuse the same buffers (as allocated programs
  reuse SBUF addresses in every layer), the edges kept per instruction do not
  grow with the number of layers, while the conflicting pairs do;
* one pipeline computes the graph once per program state.
"""
import numpy as np
import pytest

from neuronxcc import pelican
from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.walrus import _sched, deps as D, depgraph
from neuronxcc.walrus.program import Program
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_programs import F, random_op, random_program


def _reach(n, edges):
    succ = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
    r = [set() for _ in range(n)]
    for v in range(n - 1, -1, -1):
        for w in succ.get(v, ()):
            r[v] |= {w} | r[w]
    return r


def _all_pairs(prog, physical):
    mem, write, site, plo, phi, blo, bhi = D.accesses(prog, physical)
    ia, ib = _sched.conflicts(mem, write, site, plo, phi, blo, bhi)
    return {(min(x, y), max(x, y)) for x, y in zip(site[ia].tolist(), site[ib].tolist())}


@pytest.mark.parametrize("control", [False, True])
@pytest.mark.parametrize("seed", range(5))
def test_every_conflicting_pair_is_ordered_by_a_path(seed, control):
    m = random_program(seed, control=control)
    m.ensure_ids()
    prog = Program(m)
    g = depgraph.DepGraph(prog, physical=False)
    r = _reach(len(prog.sites), zip(g.src.tolist(), g.dst.tolist()))
    pairs = _all_pairs(prog, False)
    assert pairs
    missing = [(a, b) for a, b in pairs if b not in r[a]]
    assert not missing, missing[:5]
    assert all(a < b for a, b in zip(g.src.tolist(), g.dst.tolist()))


def layered(layers, seed=0, per_layer=24, nbuf=4):
    """Straight-line program: ``layers`` copies of one random op sequence over the same buffers."""
    m = B.Module("layers%d" % layers)
    m.add_tensor("x", "input", "float32", (128, F))
    m.add_tensor("y", "output", "float32", (128, F))
    bufs = ["b%d" % k for k in range(nbuf)]
    for b in bufs:
        m.add_memloc(b, "SBUF", 128, F * 4)
    bld = B.Builder(m)
    for b in bufs:
        bld.inst("memset", "DVE", [B.AccessPattern(b, "float32", 0, [[1, F]], 0, 128)], value=1.0)
    for _ in range(layers):
        rng = np.random.default_rng(seed)        # the same ops in every layer
        for _ in range(per_layer):
            random_op(bld, rng, bufs, pelican.const(0), F, ("load", "unary", "binary", "act", "copy",
                                                              "store_fixed"), ("q0", "q1"))
    bld.finish()
    return m


def _counts(layers):
    m = layered(layers)
    m.ensure_ids()
    prog = Program(m)
    g = depgraph.DepGraph(prog, physical=False)
    deps = D.find_deps(prog, physical=False, graph=g)
    return len(prog.sites), len(g), len(deps), len(_all_pairs(prog, False))


def test_edges_per_instruction_bounded_as_layers_grow():
    n2, e2, d2, p2 = _counts(2)
    n16, e16, d16, p16 = _counts(16)
    assert n16 > 7 * n2
    # the conflicting pairs grow with the layers (each access meets its twin in every layer) ...
    assert p16 / n16 > 4 * (p2 / n2)
    # ... the graph and the dependences kept per instruction do not
    assert e16 / n16 <= 1.1 * (e2 / n2) + 0.5
    assert d16 / n16 <= 1.1 * (d2 / n2) + 0.5


def test_one_graph_per_program_state(monkeypatch):
    built = []
    orig = depgraph.DepGraph.__init__

    def counting(self, prog, physical):
        built.append(physical)
        orig(self, prog, physical)
    monkeypatch.setattr(depgraph.DepGraph, "__init__", counting)
    m = random_program(3)
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["lsa", "coloring_allocator", "anti_dependency_analyzer", "post_sched", "dep_reduction",
                   "print_metrics", "print_metrics"], ctx)
    reordered = ctx.metrics["scheduling"]["post_sched"]["blocks_reordered"]
    # anti_dependency_analyzer: the instrumented program, whose graph is also the synchronised
    # program's (only waits and signals differ), so post_sched schedules on it; post_sched, when it
    # reordered, the new order (dep_reduction reuses those dependences); dep_reduction inserts
    # nothing here (no If / While), so the graph stored with the dependences it reuses is the
    # reduced program's too, and print_metrics reads it, in both runs
    assert len(built) == 1 + (1 if reordered else 0)
    assert ctx.analysis_runs["sync_deps"] == 1 + (1 if reordered else 0)
    assert ctx.analysis_runs["deps"] == 1 + (1 if reordered else 0)


PIPE = ["lsa", "coloring_allocator", "anti_dependency_analyzer", "post_sched", "dep_reduction", "print_metrics"]


@pytest.mark.parametrize("seed,control", [(3, False), (5, False), (2, True), (4, True)])
def test_shared_graph_gives_the_program_a_fresh_graph_gives(seed, control, monkeypatch):
    """post_sched scheduling on the graph anti_dependency_analyzer stored, and print_metrics, give
    the same program (order, waits, signals, metrics) as with every graph built afresh."""
    from neuronxcc.starfish.birpy import serde

    built = []
    orig = depgraph.DepGraph.__init__

    def counting(self, prog, physical):
        built.append(physical)
        orig(self, prog, physical)
    monkeypatch.setattr(depgraph.DepGraph, "__init__", counting)

    def run():
        del built[:]
        m = random_program(seed, control=control)
        ctx = PassContext(get_target("trn1"))
        run_passes(m, PIPE, ctx)
        return serde.module_to_json(m), {k: ctx.metrics[k] for k in ("estimated_time_s", "semaphore_waits")}, \
            len(built)
    shared = run()
    monkeypatch.setattr(D, "depgraph_store", lambda ctx, graph: None)
    fresh = run()
    assert shared[:2] == fresh[:2]
    assert control or shared[2] < fresh[2]


def test_graph_of_a_program_with_counted_while_is_not_shared(monkeypatch):
    """With a While body counted in registers the synchronised program's waits read them (more
    accesses than the instrumented program had), so post_sched builds its own graph."""
    built = []
    orig = depgraph.DepGraph.__init__

    def counting(self, prog, physical):
        built.append(physical)
        orig(self, prog, physical)
    monkeypatch.setattr(depgraph.DepGraph, "__init__", counting)
    m = random_program(2, control=True)
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["lsa", "coloring_allocator", "anti_dependency_analyzer", "post_sched"], ctx)
    assert ctx.metrics["counted_regions"] >= 1
    assert len(built) == 2 + (1 if ctx.metrics["scheduling"]["post_sched"]["blocks_reordered"] else 0)


def test_a_stored_graph_is_not_used_after_the_instructions_move():
    m = random_program(3)
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["lsa", "coloring_allocator", "anti_dependency_analyzer"], ctx)
    g = ctx.cached(("deps", True))
    assert g is not None and g.prog.module is m
    body = m.body
    i = next(k for k in range(len(body) - 1) if body[k].kind == "inst" and body[k + 1].kind == "inst")
    body[i], body[i + 1] = body[i + 1], body[i]
    g2 = depgraph.analysis(ctx, m, True)
    assert g2 is not g and [id(s.instr) for s in g2.prog.sites] == [id(x) for x in m.instructions()]
