"""Dependence analysis -> semaphores, checked by execution.

For random small BIR programs with loops, the per-engine streams executed in
adversarial interleavings that honour only the semaphores (the engine order,
the DMA queue order and the waits) must produce bit-for-bit the outputs of
program order (birsim's own run). The same programs without waits do not,
which shows the interleaver bites.
"""
import pytest
from hypothesis import given, settings, strategies as st

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_module
from neuronxcc.walrus import deps as D
from neuronxcc.walrus.program import Program
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_checks import raw_equal, run_interleaved
from support.walrus_programs import inputs_for, random_program

PIPELINES = {
    "deps": ["lsa", "anti_dependency_analyzer"],
    "reduced": ["lsa", "anti_dependency_analyzer", "dep_reduction"],
    "full": ["lsa", "pre_sched", "coloring", "coloring_allocator", "dma_optimization",
             "anti_dependency_analyzer", "post_sched", "dep_reduction", "birverifier"],
    "rotated": ["lsa", "vn_splitter", "pre_sched", "coloring", "coloring_allocator", "anti_dependency_analyzer",
                "post_sched", "dep_reduction", "birverifier"],
    "linear_scan_unroll": ["lsa", "unroll", "linear_scan_allocator", "anti_dependency_analyzer", "dep_reduction"],
}


def _compiled(seed, passes, control=False):
    m = random_program(seed, control=control)
    x = inputs_for(m, seed)
    ref = run_module(B.from_json(B.to_json(m)), x)
    run_passes(m, passes, PassContext(get_target("trn1"), options={"unroll_max_trip": 4}))
    return m, x, ref


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), order_seed=st.integers(0, 1000))
def test_interleaved_streams_match_program_order(pipeline, seed, order_seed):
    m, x, ref = _compiled(seed, PIPELINES[pipeline])
    B.verify(m, "trn1")
    for k in range(3):
        got = run_interleaved(m, x, order_seed * 7 + k)
        for a, b in zip(ref, got):
            assert raw_equal(a, b), "seed %d interleaving %d differs from program order" % (seed, k)


@pytest.mark.parametrize("pipeline", ["deps", "full"])
@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), order_seed=st.integers(0, 1000))
def test_while_and_if_regions_are_synchronised(pipeline, seed, order_seed):
    # If branches and While bodies: waits count their executions in registers
    m, x, ref = _compiled(seed, PIPELINES[pipeline], control=True)
    B.verify(m, "trn1")
    assert any(i.name == D.COUNTER_NAME for i in m.instructions())
    for k in range(3):
        got = run_interleaved(m, x, order_seed * 7 + k)
        for a, b in zip(ref, got):
            assert raw_equal(a, b), "seed %d interleaving %d differs from program order" % (seed, k)


def test_without_waits_interleavings_differ():
    bad = 0
    for seed in range(4):
        m = random_program(seed)
        x = inputs_for(m, seed)
        ref = run_module(B.from_json(B.to_json(m)), x)
        for k in range(3):
            got = run_interleaved(B.from_json(B.to_json(m)), x, k)
            bad += not all(raw_equal(a, b) for a, b in zip(ref, got))
    assert bad >= 6


def test_dropping_one_wait_is_caught():
    # every wait matters somewhere: removing waits one at a time breaks some run
    m, x, ref = _compiled(3, PIPELINES["reduced"])
    broken = 0
    waits = [(i.id, k) for i in m.instructions() for k in range(len(i.waits))]
    for iid, k in waits[:8]:
        m2 = B.from_json(B.to_json(m))
        ins = next(i for i in m2.instructions() if i.id == iid)
        del ins.waits[k]
        for s in range(6):
            try:
                got = run_interleaved(m2, x, s)
            except AssertionError:
                broken += 1
                break
            if not all(raw_equal(a, b) for a, b in zip(ref, got)):
                broken += 1
                break
    assert broken >= 1


def _reach(n, edges):
    succ = {}
    for a, b in edges:
        succ.setdefault(a, set()).add(b)
    r = [set() for _ in range(n)]
    for v in range(n - 1, -1, -1):
        for w in succ.get(v, ()):
            r[v] |= {w} | r[w]
    return r


@pytest.mark.parametrize("seed", range(6))
def test_dep_reduction_keeps_reachability(seed):
    m = random_program(seed)
    m.ensure_ids()
    prog = Program(m)
    deps = D.find_deps(prog, physical=False)
    red = D.reduce_deps(prog, deps)
    assert len(red) <= len(deps)
    assert [d for d in red if d.carried is not None] == [d for d in deps if d.carried is not None]
    stream = []
    last = {}
    for s in prog.sites:
        k = D.stream_of(s.instr)
        if k in last:
            stream.append((last[k], s.pos))
        last[k] = s.pos
    full = _reach(len(prog.sites), [(d.src, d.dst) for d in deps if d.carried is None] + stream)
    kept = _reach(len(prog.sites), [(d.src, d.dst) for d in red if d.carried is None] + stream)
    assert full == kept


def test_dep_reduction_removes_waits_somewhere():
    before = after = 0
    for seed in range(6):
        m = random_program(seed)
        ctx = PassContext(get_target("trn1"))
        run_passes(m, ["anti_dependency_analyzer"], ctx)
        before += sum(len(i.waits) for i in m.instructions())
        run_passes(m, ["dep_reduction"], ctx)
        after += sum(len(i.waits) for i in m.instructions())
    assert after < before


def test_waits_are_loop_expressions_not_unrolled():
    m, _, _ = _compiled(1, PIPELINES["deps"])
    exprs = [v for i in m.instructions() for _, v in i.waits if not isinstance(v, int)]
    assert exprs, "loop-carried counts should be expressions of the loop variables"
    assert sum(1 for n in m.walk() if n.kind == "loop") >= 1
