"""Semaphores around data-dependent control flow, checked in birsim's stream order.

An If inside a Loop runs its branch on some iterations only, so signal
counts taken over the program text over-count on the iterations where it is
not taken (the reported "waits for Q_SP_q0 >= 82 but only 80 signals precede
it"). walrus balances the branches (``walrus.balance`` nops) and guards the
condition reads (``walrus.cond`` nops); While trip counts stay in per-engine
counter registers. The check: after the sync passes, birsim in program order
and in stream order (each engine on its own, ordered only by the semaphores)
give bit for bit the outputs of the unsynchronised program in program order.
"""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import simulate
from neuronxcc.walrus import deps as D
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_checks import raw_equal
from support.walrus_programs import KINDS, chip, random_op

PIPELINES = {
    "deps": ["lsa", "anti_dependency_analyzer"],
    "reduced": ["lsa", "anti_dependency_analyzer", "dep_reduction"],
    "full": ["lsa", "pre_sched", "coloring", "coloring_allocator", "dma_optimization",
             "anti_dependency_analyzer", "post_sched", "dep_reduction", "birverifier"],
    "linear_scan_unroll": ["lsa", "unroll", "linear_scan_allocator", "anti_dependency_analyzer", "dep_reduction"],
}
F = 8


def _sync(m, passes):
    run_passes(m, passes, PassContext(get_target("trn1"), options={"unroll_max_trip": 4}))
    B.verify(m, "trn1")


def _check(m, inputs, passes):
    ref = simulate(B.from_json(B.to_json(m)), inputs).outputs
    _sync(m, passes)
    # strict: a conflicting access that starts before the other one ends is an error, not a note
    prog = simulate(B.from_json(B.to_json(m)), inputs, strict=True).outputs
    streams = simulate(B.from_json(B.to_json(m)), inputs, order="streams", strict=True).outputs
    for r, a, b in zip(ref, prog, streams):
        assert raw_equal(r, a), "program order differs from the unsynchronised program"
        assert raw_equal(r, b), "stream order differs from program order"
    return m


def if_in_loop(T=6):
    """Loop i: flag <- flags[i]; a <- x[i] (DMA); if flag: b <- x[i] (DMA), a += b (DVE);
    c <- 0.5 a + 1 (ACT); y[i] <- c (DMA). The DMA and the add in the branch depend on
    each other, on the DMA before the If and (WAR) on the ACT after it."""
    m = B.Module("if_in_loop")
    m.add_tensor("x", "input", "float32", (128, T * F))
    m.add_tensor("flags", "input", "int32", (T,))
    m.add_tensor("y", "output", "float32", (128, T * F))
    for b in ("a", "b", "c"):
        m.add_memloc(b, "SBUF", 128, F * 4)
    bld = B.Builder(m)

    def ch(n):
        return B.AccessPattern(n, "float32", 0, [[1, F]], 0, 128)

    def xs(t, i):
        return B.AccessPattern(t, "float32", i * F, [[T * F, 128], [1, F]])

    bld.inst("memset", "DVE", [ch("b")], value=1.0)
    with bld.loop("i", 0, T) as i:
        bld.inst("register_load", "SP", [], [B.AccessPattern("flags", "int32", i, [[1, 1]])], register="flag",
                 min=0, max=1)
        bld.inst("dma_copy", "SP", [ch("a")], [xs("x", i)], queue="q0")
        with bld.if_("flag"):
            bld.inst("dma_copy", "SP", [ch("b")], [xs("x", i)], queue="q0")
            bld.inst("tensor_tensor", "DVE", [ch("a")], [ch("a"), ch("b")], op="add")
        bld.inst("activation", "ACT", [ch("c")], [ch("a")], func="identity", scale=0.5, bias=1.0)
        bld.inst("dma_copy", "SP", [xs("y", i)], [ch("c")], queue="q0")
    bld.finish()
    return m


def _if_inputs(T=6, flags=(1, 0, 0, 1, 0, 1)):
    x = (np.arange(128 * T * F) % 7).astype(np.float32).reshape(128, T * F)
    return [x, np.array(flags, np.int32)]


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
def test_dma_in_if_in_loop_reproducer(pipeline):
    # before the fix: "deadlock: ... waits for S_DVE >= 2 but only 1 signals precede it"
    m = _check(if_in_loop(), _if_inputs(), PIPELINES[pipeline])
    assert any(i.name == D.BALANCE_NAME for i in m.instructions())
    assert any(i.name == D.COND_NAME for i in m.instructions())


@pytest.mark.parametrize("flags", [(0,) * 6, (1,) * 6, (0, 1, 1, 0, 1, 0)])
def test_if_in_loop_all_taken_or_none(flags):
    _check(if_in_loop(), _if_inputs(flags=flags), PIPELINES["reduced"])


def test_balanced_branches_give_equal_signals():
    m = if_in_loop()
    _sync(m, PIPELINES["deps"])
    for node in m.walk():
        if node.kind != "if":
            continue
        per = []
        for body in (node.then_body, node.else_body):
            acc = {}
            for ins in body:
                for sem, inc in ins.signals:
                    acc[sem] = acc.get(sem, 0) + inc
            per.append(acc)
        assert per[0] == per[1] and per[0]


# -- random programs: Ifs taken on some iterations, with DMAs and compute inside ----------------

def random_if_program(seed, nbuf=4, with_while=False):
    """Loops over i (and j) whose bodies hold ops and Ifs on a per-iteration flag
    (flags[i*J + j], an input) with DMAs and compute in both branches; with_while adds
    a While (trip count from an input) inside the loop. Exact small-integer arithmetic."""
    rng = np.random.default_rng(seed)
    T = int(rng.integers(2, 5))
    J = int(rng.integers(1, 3))
    N = T * J
    m = B.Module("rif%d" % seed)
    m.add_tensor("x", "input", "float32", (128, N * F))
    m.add_tensor("flags", "input", "int32", (N + 1,))
    m.add_tensor("y", "output", "float32", (128, N * F))
    m.add_tensor("z", "output", "float32", (nbuf, 128, F))
    bufs = ["b%d" % k for k in range(nbuf)]
    for b in bufs:
        m.add_memloc(b, "SBUF", 128, F * 4)
    if with_while:
        m.add_memloc("cnt", "SBUF", 1, 4)
    bld = B.Builder(m)

    def op(iv):
        random_op(bld, rng, bufs, iv, N * F, KINDS, ("q0", "q1"), f=F)

    def body(iv):
        for _ in range(int(rng.integers(1, 4))):
            op(iv)
        bld.inst("register_load", str(rng.choice(["SP", "ACT", "POOL"])), [],
                 [B.AccessPattern("flags", "int32", iv, [[1, 1]])], register="flag", min=0, max=1)
        with bld.if_("flag"):
            for _ in range(int(rng.integers(1, 4))):
                op(iv)
        if rng.integers(0, 2):
            with bld.else_():
                for _ in range(int(rng.integers(1, 3))):
                    op(iv)
        for _ in range(int(rng.integers(1, 3))):
            op(iv)
        if with_while:
            bld.inst("dma_copy", "SP", [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)],
                     [B.AccessPattern("flags", "int32", N, [[1, 1]])], queue="q3")
            bld.inst("register_load", "SP", [], [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)],
                     register="w", min=0, max=4)
            with bld.while_("w", max_trips=4):
                for _ in range(int(rng.integers(1, 3))):
                    op(iv)
                bld.inst("tensor_scalar", "POOL", [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)],
                         [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)], op0="add", operand0=-1.0)
                bld.inst("register_load", "SP", [], [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)],
                         register="w", min=0, max=4)

    for b in bufs:
        bld.inst("memset", str(rng.choice(["DVE", "POOL"])), [chip(b, 0, 128, 0, F)], value=float(rng.integers(-3, 4)))
    with bld.loop("i", 0, T) as i:
        if J > 1:
            with bld.loop("j", 0, J) as j:
                body(i * J + j)
        else:
            body(i)
    for k, b in enumerate(bufs):
        bld.inst("dma_copy", "SP", [B.AccessPattern("z", "float32", k * 128 * F, [[F, 128], [1, F]])],
                 [chip(b, 0, 128, 0, F)], queue="q0")
    bld.finish()
    return m


def random_if_inputs(m, seed):
    rng = np.random.default_rng(seed + 7)
    n = m.tensors["flags"].shape[0]
    flags = rng.integers(0, 2, n).astype(np.int32)
    flags[-1] = rng.integers(0, 3)        # While trips
    x = rng.integers(-4, 5, m.tensors["x"].shape).astype(np.float32)
    return [x, flags]


@pytest.mark.parametrize("pipeline", sorted(PIPELINES))
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_random_ifs_in_loops_stream_order_matches_program_order(pipeline, seed):
    m = random_if_program(seed)
    _check(m, random_if_inputs(m, seed), PIPELINES[pipeline])


@pytest.mark.parametrize("pipeline", ["deps", "reduced", "full"])
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_random_ifs_and_whiles_in_loops_stream_order_matches_program_order(pipeline, seed):
    m = random_if_program(seed, with_while=True)
    _check(m, random_if_inputs(m, seed), PIPELINES[pipeline])


def test_walrus_driver_full_pipeline_bir_sim_passes(tmp_path):
    # the reported route: walrus_driver's pipeline ending in bir_sim on the goldens
    import json

    from support.cli import run_tool
    PIPELINE = ("lsa,coloring,unroll,lower_ac,pre_sched,partitioner,bir_splitter,coloring_allocator,"
                "dma_optimization,anti_dependency_analyzer,vn_splitter,post_sched,tensorcopy_accel,"
                "dep_reduction,print_metrics,birverifier,bir_sim")
    m = if_in_loop()
    x = _if_inputs()
    outs = simulate(B.from_json(B.to_json(m)), x).outputs
    d = {"input%d" % i: a for i, a in enumerate(x)}
    d.update({"output%d" % i: a for i, a in enumerate(outs)})
    np.savez(str(tmp_path / "goldens.npz"), **d)
    B.save(m, str(tmp_path / "bir.json"))
    r = run_tool("walrus_driver", ["--input", str(tmp_path / "bir.json"), "--output", str(tmp_path / "o.json"),
                                   "--walrus-passes", PIPELINE, "--target", "trn1",
                                   "--goldens", str(tmp_path / "goldens.npz"),
                                   "--metrics", str(tmp_path / "metrics.json")], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "metrics.json").read_text())["bir_sim"] == "passed"
    out = B.load(str(tmp_path / "o.json"))
    got = simulate(out, x, order="streams", strict=True).outputs
    assert all(raw_equal(a, b) for a, b in zip(outs, got))
