"""The collective instruction on N simulated NeuronCores: semantics per op
against numpy, timing (the transfer starts when the last member is ready),
one trace process per core, and a clear error when ranks disagree."""
import numpy as np
import pytest

from neuronxcc.errors import BirSimError, CollectiveError
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import simulate, simulate_ranks
from neuronxcc.common.tolerances import assert_close


def _prog(op, in_shape, out_shape, n, dtype="float32", **attrs):
    m = B.Module("c", "trn1")
    m.attrs["rank_space"] = [1, n]
    m.add_tensor("x", "input", dtype, in_shape)
    m.add_tensor("y", "output", dtype, out_shape)
    b = B.Builder(m)
    b.inst("collective", "SP", [b.ap("y")], [b.ap("x")], op=op, **attrs)
    b.finish()
    return m


def _run(m, xs):
    return [o[0] for o in simulate_ranks(m, [[x] for x in xs]).outputs]


N = 4
GROUPS = [[0, 1, 2, 3]]


def test_all_reduce_reducers_and_groups():
    xs = [np.random.default_rng(r).standard_normal((2, 8)).astype(np.float32) for r in range(N)]
    got = _run(_prog("all_reduce", (2, 8), (2, 8), N, reduce="add", groups=GROUPS), xs)
    for g in got:
        assert_close(g, sum(xs), row="compiled")
    got = _run(_prog("all_reduce", (2, 8), (2, 8), N, reduce="max", groups=[[0, 2], [1, 3]]), xs)
    np.testing.assert_array_equal(got[0], np.maximum(xs[0], xs[2]))
    np.testing.assert_array_equal(got[3], np.maximum(xs[1], xs[3]))
    ints = [np.full((4,), r + 1, np.int32) for r in range(N)]
    got = _run(_prog("all_reduce", (4,), (4,), N, dtype="int32", reduce="mult", groups=GROUPS), ints)
    assert list(got[1]) == [24] * 4


def test_gather_scatter_all_to_all_permute():
    xs = [np.arange(8, dtype=np.float32).reshape(2, 4) + 10 * r for r in range(N)]
    got = _run(_prog("all_gather", (2, 4), (N, 2, 4), N, groups=GROUPS), xs)
    np.testing.assert_array_equal(got[2], np.stack(xs))
    got = _run(_prog("reduce_scatter", (N, 2), (2,), N, reduce="add", groups=GROUPS),
               [x.reshape(N, 2) for x in xs])
    tot = sum(xs).reshape(N, 2)
    for r in range(N):
        np.testing.assert_array_equal(got[r], tot[r])
    got = _run(_prog("all_to_all", (N, 2), (N, 2), N, groups=GROUPS), [x.reshape(N, 2) for x in xs])
    for r in range(N):
        np.testing.assert_array_equal(got[r], np.stack([xs[j].reshape(N, 2)[r] for j in range(N)]))
    got = _run(_prog("permute", (2, 4), (2, 4), N, pairs=[[0, 1], [1, 2], [2, 0]]), xs)
    np.testing.assert_array_equal(got[1], xs[0])
    np.testing.assert_array_equal(got[0], xs[2])
    np.testing.assert_array_equal(got[3], np.zeros((2, 4), np.float32))   # no pair targets rank 3


def test_timing_waits_for_the_last_member_and_traces_one_process_per_core():
    m = _prog("all_reduce", (64, 64), (64, 64), N, reduce="add", groups=GROUPS)
    xs = [np.ones((64, 64), np.float32)] * N
    res = simulate_ranks(m, [[x] for x in xs], trace=True)
    s = res.summary()
    assert s["ranks"] == N and all(c == 1 for c in s["collectives"])
    assert all(t > 0 for t in s["collective_s"]) and all(0 < f <= 1 for f in s["collective_share"])
    tj = res.trace_json()
    pids = {e["pid"] for e in tj["traceEvents"]}
    assert pids == set(range(1, N + 1))
    assert any(e.get("cat") == "CC" for e in tj["traceEvents"] if e.get("ph") == "X")
    # a bigger message takes longer on the modelled links
    big = _prog("all_reduce", (256, 256), (256, 256), N, reduce="add", groups=GROUPS)
    rb = simulate_ranks(big, [[np.ones((256, 256), np.float32)]] * N)
    assert rb.collective_transfer_s[0] > res.collective_transfer_s[0]


def test_collectives_on_one_core_run_one_at_a_time():
    """The collective engine ("CC") takes its operations in order: two independent all-reduces
    issued together end one collective_time apart, and the rank's collective time stays within
    its run time (each used to take a DMA engine of its own and overlap the other)."""
    from neuronxcc.hwm.interconnect import collective_time
    m = B.Module("c", "trn1")
    m.attrs["rank_space"] = [1, N]
    for k in (0, 1):
        m.add_tensor("x%d" % k, "input", "float32", (64, 64))
        m.add_tensor("y%d" % k, "output", "float32", (64, 64))
    b = B.Builder(m)
    for k in (0, 1):
        b.inst("collective", "SP", [b.ap("y%d" % k)], [b.ap("x%d" % k)], op="all_reduce", reduce="add",
               groups=GROUPS)
    b.finish()
    res = simulate_ranks(m, [[np.ones((64, 64), np.float32)] * 2] * N, trace=True)
    one = collective_time("all_reduce", 64 * 64 * 4, GROUPS[0], "trn1")
    cc = sorted((e["ts"], e["dur"]) for e in res.ranks[0].trace_json()["traceEvents"]
                if e.get("ph") == "X" and e.get("cat") == "CC")
    assert len(cc) == 2 and cc[1][0] >= cc[0][0] + cc[0][1] - 1e-6
    assert cc[1][0] + cc[1][1] == pytest.approx(cc[0][0] + 2 * one * 1e6, rel=1e-6)
    assert all(0 < f <= 1 for f in res.summary()["collective_share"])


def test_one_core_and_the_rank_count_it_needs():
    m = _prog("all_reduce", (4,), (4,), N, reduce="add", groups=GROUPS)
    with pytest.raises(BirSimError, match="all 4 ranks"):
        simulate(m, [np.ones(4, np.float32)])
    one = _prog("all_reduce", (4,), (4,), 1, reduce="add", groups=[[0]])
    np.testing.assert_array_equal(simulate(one, [np.full(4, 3, np.float32)]).outputs[0], [3, 3, 3, 3])
    with pytest.raises(BirSimError, match="compiled for 4 ranks"):
        simulate_ranks(m, [[np.ones(4, np.float32)]] * 2, nranks=2)


def test_ranks_that_disagree_are_an_error_not_a_hang():
    # rank-dependent control flow: only rank 0 reaches the collective
    m = B.Module("d", "trn1")
    m.attrs["rank_space"] = [N, 1]
    m.attrs["rank_id_tensor"] = "rank_id"
    m.add_tensor("rank_id", "const", "int32", (2,), data=np.zeros(2, np.int32))
    m.add_tensor("x", "input", "float32", (4,))
    m.add_tensor("y", "output", "float32", (4,))
    m.add_memloc("r", "SBUF", 1, 4)
    b = B.Builder(m)
    b.inst("register_load", "SP", [], [b.ap("rank_id", pattern=[[1, 1]])], register="rk")
    with b.if_("rk"):
        b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("x")], queue="q0")
    with b.else_():
        b.inst("collective", "SP", [b.ap("y")], [b.ap("x")], op="all_reduce", reduce="add", groups=[[0, 1, 2, 3]])
    b.finish()
    with pytest.raises(CollectiveError, match="never reach") as ei:
        simulate_ranks(m, [[np.ones(4, np.float32)]] * N)
    assert ei.value.one_line().startswith("[NCC_ECCL001]")
