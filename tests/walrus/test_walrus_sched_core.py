"""The typed scheduling core: list scheduling keeps every edge; reduction keeps reachability."""
import itertools

import numpy as np
from hypothesis import given, settings, strategies as st

from neuronxcc.walrus import _sched
from neuronxcc.walrus.deps import csr


dag_st = st.integers(2, 25).flatmap(lambda n: st.tuples(
    st.just(n),
    st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda e: e[0] < e[1]),
             max_size=3 * n, unique=True),
    st.lists(st.integers(0, 3), min_size=n, max_size=n),
    st.lists(st.floats(1, 100), min_size=n, max_size=n)))


@settings(max_examples=80, deadline=None)
@given(dag_st, st.booleans())
def test_csr_lists_each_nodes_neighbours_in_order(d, by_target):
    n, edges, _, _ = d
    by = 1 if by_target else 0
    payload = [(a, b, 10 * a + b) for a, b in edges]
    ptr, idx, es = csr(n, payload, by=by)
    assert ptr.dtype == idx.dtype == np.int64 and len(ptr) == n + 1 and ptr[0] == 0 and ptr[-1] == len(edges)
    for v in range(n):
        want = sorted(e[1 - by] for e in payload if e[by] == v)
        assert idx[ptr[v]:ptr[v + 1]].tolist() == want
        assert all(e[by] == v and e[1 - by] == u and e[2] == 10 * e[0] + e[1]
                   for e, u in zip(es[ptr[v]:ptr[v + 1]], want))


@settings(max_examples=80, deadline=None)
@given(dag_st)
def test_list_schedule_respects_edges_and_engines(d):
    n, edges, eng, cost = d
    ptr, idx, _ = csr(n, edges, by=1)
    lat = np.full(len(idx), 5.0)
    eng = np.array(eng, np.int64)
    cost = np.array(cost, np.float64)
    order, start, makespan = _sched.list_schedule(eng, cost, ptr, idx, lat, np.zeros(n), 4)
    pos = {int(v): i for i, v in enumerate(order)}
    assert sorted(pos) == list(range(n))
    for a, b in edges:
        assert pos[a] < pos[b]
        assert start[b] >= start[a] + cost[a] + (5.0 if True else 0) - 1e-9
    # an engine runs one instruction at a time, in the new order
    for e in range(4):
        mine = [int(v) for v in order if eng[v] == e]
        for a, b in zip(mine, mine[1:]):
            assert start[b] >= start[a] + cost[a] - 1e-9
    assert makespan >= max(cost) - 1e-9


def _reach(n, edges):
    r = {v: set() for v in range(n)}
    for v in range(n - 1, -1, -1):
        for a, b in edges:
            if a == v:
                r[v] |= {b} | r[b]
    return r


@settings(max_examples=80, deadline=None)
@given(dag_st)
def test_transitive_reduction_keeps_reachability(d):
    n, edges, _, _ = d
    ptr, idx, edges = csr(n, edges)
    keep = _sched.transitive_reduction(ptr, idx)
    kept = [e for e, k in zip(edges, keep) if k]
    assert _reach(n, kept) == _reach(n, edges)
    # minimal: no kept edge is implied by the others
    for e in kept:
        others = [x for x in kept if x != e]
        assert e[1] not in _reach(n, others)[e[0]]


def test_conflicts_pairwise():
    rng = np.random.default_rng(1)
    m = 60
    mem = rng.integers(0, 3, m).astype(np.int64)
    w = rng.integers(0, 2, m).astype(np.int64)
    ins = rng.integers(0, 30, m).astype(np.int64)
    plo = rng.integers(0, 100, m).astype(np.int64)
    phi = plo + rng.integers(1, 40, m)
    blo = rng.integers(0, 500, m).astype(np.int64)
    bhi = blo + rng.integers(1, 100, m)
    a, b = _sched.conflicts(mem, w, ins, plo, phi, blo, bhi)
    got = set(zip(a.tolist(), b.tolist()))
    want = set()
    for i, j in itertools.combinations(range(m), 2):
        if (mem[i] == mem[j] and ins[i] != ins[j] and (w[i] or w[j]) and plo[i] < phi[j] and plo[j] < phi[i]
                and blo[i] < bhi[j] and blo[j] < bhi[i]):
            want.add((i, j))
    assert got == want
