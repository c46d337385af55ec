"""The typed allocation core on random interval sets, checked independently."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from support.walrus_checks import check_placement, legal_starts
from neuronxcc.walrus import _alloc, _bound

values_st = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 20), st.sampled_from([1, 16, 32, 48, 64, 100, 128]),
              st.integers(1, 3000), st.booleans()),
    min_size=1, max_size=40)


def _arrays(vals):
    start = np.array([v[0] for v in vals], np.int64)
    end = start + np.array([v[1] for v in vals], np.int64)
    nparts = np.array([v[2] for v in vals], np.int64)
    size = np.array([v[3] for v in vals], np.int64)
    pin = np.array([int(v[4]) for v in vals], np.int64)
    return start, end, nparts, size, pin


def _as_values(start, end, nparts, size, off, ps):
    return [dict(start=int(start[i]), end=int(end[i]), nparts=int(nparts[i]), size=int(size[i]),
                 offset=int(off[i]), pstart=int(ps[i])) for i in range(len(start))]


@pytest.mark.parametrize("method", ["coloring", "linear_scan"])
@pytest.mark.parametrize("bank", [0, 2048])
@settings(max_examples=60, deadline=None)
@given(vals=values_st)
def test_random_intervals_never_overlap(method, bank, vals):
    start, end, nparts, size, pin = _arrays(vals)
    if bank:
        size = np.minimum(size, 2048)
    n = len(vals)
    off = np.zeros(n, np.int64)
    ps = np.zeros(n, np.int64)
    capacity = 16384 if bank else 1 << 40
    align = 4 if bank else 1
    if method == "coloring":
        indptr, ind = _alloc.interference_graph(start, end)
        order = np.argsort(-(size * nparts), kind="stable").astype(np.int64)
        failed = _alloc.color_allocate(indptr, ind, order, size, nparts, pin, capacity, align, bank, 128, off, ps)
    else:
        failed = _alloc.linear_scan_allocate(start, end, size, nparts, pin, capacity, align, bank, 128, off, ps)
    if failed >= 0:
        # only allowed when the bounded PSUM is genuinely short at the failing value
        assert bank
        return
    assert check_placement(_as_values(start, end, nparts, size, off, ps), capacity, 128, align, bank) == []
    for i in range(n):
        if pin[i]:
            assert ps[i] == 0
    peak = int((off + size).max())
    lb = _bound.max_live_lower_bound(start, end, size, nparts, 128, pin)
    assert lb <= peak
    assert lb <= _bound.max_live_lower_bound(start, end, size, nparts, 128, pin, bank) <= peak


def test_interference_graph_matches_pairwise():
    rng = np.random.default_rng(0)
    start = rng.integers(0, 50, 80).astype(np.int64)
    end = start + rng.integers(0, 10, 80).astype(np.int64)
    indptr, ind = _alloc.interference_graph(start, end)
    got = {(i, int(j)) for i in range(80) for j in ind[indptr[i]:indptr[i + 1]]}
    want = {(i, j) for i in range(80) for j in range(80)
            if i != j and start[i] <= end[j] and start[j] <= end[i]}
    assert got == want


def test_reports_failure_when_short():
    start = np.array([0, 0], np.int64)
    end = np.array([5, 5], np.int64)
    size = np.array([600, 600], np.int64)
    nparts = np.array([128, 128], np.int64)
    pin = np.zeros(2, np.int64)
    off = np.zeros(2, np.int64)
    ps = np.zeros(2, np.int64)
    assert _alloc.linear_scan_allocate(start, end, size, nparts, pin, 1000, 1, 0, 128, off, ps) == 1


def test_small_values_pack_into_quadrants():
    # four 32-partition values all live at once fit in the bytes of one
    start = np.zeros(4, np.int64)
    end = np.full(4, 3, np.int64)
    size = np.full(4, 1000, np.int64)
    nparts = np.full(4, 32, np.int64)
    pin = np.zeros(4, np.int64)
    off = np.zeros(4, np.int64)
    ps = np.zeros(4, np.int64)
    assert _alloc.linear_scan_allocate(start, end, size, nparts, pin, 1000, 1, 0, 128, off, ps) == -1
    assert sorted(ps.tolist()) == [0, 32, 64, 96]


def _reference_allocate(order, start, end, size, nparts, pin, capacity, align, bank, num_partitions=128):
    """Plain first fit, value by value in ``order``: the lowest legal byte offset (ties: the
    lowest legal start partition) clear of every placed value whose live range meets it."""
    def fix(o, sz):
        o = -(-o // align) * align
        if bank and sz <= bank and o // bank != (o + sz - 1) // bank:
            o = (o // bank + 1) * bank
        elif bank and sz > bank and o % bank:
            o = (o // bank + 1) * bank
        return o

    off = {}
    ps_of = {}
    for v in order:
        v = int(v)
        occ = [(ps_of[u], ps_of[u] + nparts[u], off[u], off[u] + size[u]) for u in off
               if start[u] <= end[v] and start[v] <= end[u]]
        best = None
        # ties: the highest start partition (partition 0 is the one PE values and wide ones need)
        for p0 in (sorted(legal_starts(int(nparts[v])), reverse=True) if not pin[v] else [0]):
            if p0 + nparts[v] > num_partitions:
                continue
            o = fix(0, size[v])
            while True:
                hit = [r for r in occ if r[0] < p0 + nparts[v] and p0 < r[1] and r[2] < o + size[v] and o < r[3]]
                if not hit:
                    break
                o = fix(max(r[3] for r in hit), size[v])
            if o + size[v] <= capacity and (best is None or o < best[0]):
                best = (o, p0)
        if best is None:
            return v, off, ps_of
        off[v], ps_of[v] = best
    return -1, off, ps_of


@pytest.mark.parametrize("bank", [0, 2048])
@settings(max_examples=60, deadline=None)
@given(vals=values_st)
def test_both_allocators_are_first_fit_in_their_order(bank, vals):
    """Each typed allocator places exactly as a plain first fit over its own order would."""
    start, end, nparts, size, pin = _arrays(vals)
    if bank:
        size = np.minimum(size, 2048)
    capacity = 16384 if bank else 12000
    align = 4 if bank else 1
    n = len(vals)
    color_order = np.argsort(-(size * nparts), kind="stable").astype(np.int64)
    scan_order = np.lexsort((-(size * nparts), start)).astype(np.int64)
    for order in (color_order, scan_order):
        off = np.zeros(n, np.int64)
        ps = np.zeros(n, np.int64)
        if order is color_order:
            indptr, ind = _alloc.interference_graph(start, end)
            failed = _alloc.color_allocate(indptr, ind, order, size, nparts, pin, capacity, align, bank, 128, off, ps)
        else:
            failed = _alloc.linear_scan_allocate(start, end, size, nparts, pin, capacity, align, bank, 128, off, ps)
        want_failed, want_off, want_ps = _reference_allocate(order, start, end, size, nparts, pin,
                                                             capacity, align, bank)
        assert failed == want_failed
        for v, o in want_off.items():
            assert (off[v], ps[v]) == (o, want_ps[v]), v


@pytest.mark.parametrize("bank", [0, 2048])
@settings(max_examples=60, deadline=None)
@given(vals=values_st, seed=st.integers(0, 3))
def test_reuse_distance_placement_is_legal_within_the_first_peak(bank, vals, seed):
    """The reuse-distance placement obeys every placement rule (PE values at partition 0
    included) and never exceeds the capacity it is given: the first placement's peak."""
    from neuronxcc.walrus.placement import reuse_placement
    start, end, nparts, size, pin = _arrays(vals)
    if bank:
        size = np.minimum(size, 2048)
    align = 4 if bank else 1
    n = len(vals)
    off = np.zeros(n, np.int64)
    ps = np.zeros(n, np.int64)
    if _alloc.linear_scan_allocate(start, end, size, nparts, pin, 16384 if bank else 1 << 40, align, bank, 128,
                                   off, ps) >= 0:
        return
    peak = int((off + size).max())
    ready = np.random.default_rng(seed).integers(-1, 40, n).astype(np.int64)
    got = reuse_placement(start, end, size, nparts, pin, ready, peak, align, bank, 128)
    if got is None:
        return
    roff, rps, moved = got
    placed = _as_values(start, end, nparts, size, roff, rps)
    assert check_placement(placed, peak, 128, align, bank) == []
    assert 0 <= moved <= n
    for i in range(n):
        if pin[i]:
            assert rps[i] == 0


def test_reuse_distance_prefers_the_bytes_idle_longest():
    """a [0,1] and b [0,3] take the bytes [0,100) and [100,200); c [5,6] and d [8,9] then fit in
    either. Lowest offset puts c in a's bytes (last used at 1) and d back in c's (last used at 6).
    Reuse distance: c goes where a was (a ended before b), d where b was (idle since 3, c's bytes
    since 6). With d's producer ready only at 7 (its input written there), c's bytes cost it no
    wait and d keeps the lowest offset."""
    start = np.array([0, 0, 5, 8], np.int64)
    end = np.array([1, 3, 6, 9], np.int64)
    size = np.full(4, 100, np.int64)
    nparts = np.full(4, 128, np.int64)
    pin = np.zeros(4, np.int64)
    off = np.zeros(4, np.int64)
    ps = np.zeros(4, np.int64)
    moved = np.zeros(4, np.int64)
    prefer = np.ones(4, np.int64)
    ready = np.full(4, -1, np.int64)
    assert _alloc.reuse_distance_allocate(start, end, size, nparts, pin, ready, prefer, 200, 1, 0, 128, 32,
                                          off, ps, moved) == -1
    assert off.tolist() == [0, 100, 0, 100] and moved.tolist() == [0, 0, 0, 1]
    ready[3] = 7
    assert _alloc.reuse_distance_allocate(start, end, size, nparts, pin, ready, prefer, 200, 1, 0, 128, 32,
                                          off, ps, moved) == -1
    assert off.tolist() == [0, 100, 0, 0] and moved.tolist() == [0, 0, 0, 0]
    # without the preference every value takes its lowest offset: the linear scan's placement
    prefer[:] = 0
    ready[3] = -1
    assert _alloc.reuse_distance_allocate(start, end, size, nparts, pin, ready, prefer, 200, 1, 0, 128, 32,
                                          off, ps, moved) == -1
    ls_off = np.zeros(4, np.int64)
    assert _alloc.linear_scan_allocate(start, end, size, nparts, pin, 200, 1, 0, 128, ls_off, ps) == -1
    assert off.tolist() == ls_off.tolist()


def test_banked_lower_bound_counts_banks():
    """Two 1536 B accumulators and four 520 B transposes live at once at partition 0 (mlp_train_step's
    PSUM): 5152 B in all, but no 520 B value fits beside a 1536 B one in a 2 KiB bank, and only three
    fit in one bank, so four banks are needed and the last holds at least 520 B: 3 * 2048 + 520. The
    allocator reaches it."""
    size = np.array([1536, 1536, 520, 520, 520, 520], np.int64)
    n = len(size)
    start = np.zeros(n, np.int64)
    end = np.full(n, 5, np.int64)
    nparts = np.array([65, 65, 75, 75, 75, 75], np.int64)
    pin = np.ones(n, np.int64)
    assert _bound.max_live_lower_bound(start, end, size, nparts, 128, pin) == 5152
    assert _bound.max_live_lower_bound(start, end, size, nparts, 128, pin, 2048) == 3 * 2048 + 520
    off = np.zeros(n, np.int64)
    ps = np.zeros(n, np.int64)
    assert _alloc.linear_scan_allocate(start, end, size, nparts, pin, 16384, 4, 2048, 128, off, ps) == -1
    assert int((off + size).max()) == 3 * 2048 + 520
    # cumsum's: two 1200 B and four 520 B: a bank holds at most 1720 B of them, so the third bank
    # holds at least 4480 - 2 * 1720 = 1040 B
    size2 = np.array([1200, 1200, 520, 520, 520, 520], np.int64)
    assert _bound.max_live_lower_bound(start, end, size2, nparts, 128, pin, 2048) == 2 * 2048 + 1040
    # causal_attention's: five values over half a bank (2048, 1536, 1040, 1040, 1024) take a bank
    # each, so the last bank holds at least 1024 B
    size3 = np.array([2048, 1024, 1536, 32, 1040, 48, 520, 1040, 520], np.int64)
    n3 = len(size3)
    assert _bound.max_live_lower_bound(np.zeros(n3, np.int64), np.zeros(n3, np.int64), size3,
                                       np.full(n3, 128, np.int64), 128, None, 2048) == 4 * 2048 + 1024
    # values that may sit at partition 64 are not counted in partition 0's banks
    nparts[:] = 64
    pin[:] = 0
    assert _bound.max_live_lower_bound(start, end, size, nparts, 128, pin, 2048) < 3 * 2048 + 520
    # a multi-bank value is whole banks plus its remainder inside one
    size = np.array([4096 + 1536, 520], np.int64)
    assert _bound.max_live_lower_bound(np.zeros(2, np.int64), np.ones(2, np.int64), size,
                                       np.full(2, 128, np.int64), 128, None, 2048) == 3 * 2048 + 520


def _best_bank_packing(sizes, bank, nbanks):
    """The lowest peak of any assignment of the values (each inside one bank) to ``nbanks`` banks,
    by brute force: per bank the values stack from its start."""
    import itertools
    best = None
    for assign in itertools.product(range(nbanks), repeat=len(sizes)):
        load = [0] * nbanks
        for x, b in zip(sizes, assign):
            load[b] += x
        if max(load) > bank:
            continue
        peak = max(b * bank + load[b] for b in range(nbanks) if load[b])
        best = peak if best is None else min(best, peak)
    return best


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.sampled_from([16, 260, 520, 700, 1024, 1040, 1200, 1536, 2048]), min_size=1, max_size=5))
def test_banked_lower_bound_never_exceeds_the_best_packing(sizes):
    """Values live at once at partition 0 of a banked memory: while few are live the bound is the
    best packing itself (never above it, and no weaker)."""
    n = len(sizes)
    best = _best_bank_packing(sizes, 2048, 5)
    lb = _bound.max_live_lower_bound(np.zeros(n, np.int64), np.zeros(n, np.int64), np.array(sizes, np.int64),
                                     np.full(n, 128, np.int64), 128, None, 2048)
    assert lb == best


def test_banked_lower_bound_is_the_exact_packing_of_transformer_blocks_psum():
    """transformer_block's attention loop body keeps 13 PSUM values live at partition 0: two 1536 B
    and three 1040 B (no two of these share a 2 KiB bank), six 512 B, 48 B and 16 B, 9328 B in all,
    4.6 banks. L2 and the subset-sum terms allow five banks, but the five big values' banks have room
    for only five of the 512 B values (1008 B beside a 1040 B one holds one), so a sixth bank holds
    at least 512 B: 5 * 2048 + 512, which the allocator reaches."""
    size = np.array([512, 512, 512, 16, 1040, 1040, 1040, 1536, 1536, 512, 48, 512, 512], np.int64)
    n = len(size)
    start, end = np.zeros(n, np.int64), np.full(n, 64, np.int64)
    nparts = np.array([128, 128, 128, 128, 128, 128, 4, 128, 128, 128, 128, 128, 4], np.int64)
    pin = np.ones(n, np.int64)
    assert _bound.max_live_lower_bound(start, end, size, nparts, 128, pin) == 9328
    assert _bound.max_live_lower_bound(start, end, size, nparts, 128, pin, 2048) == 5 * 2048 + 512
    off = np.zeros(n, np.int64)
    ps = np.zeros(n, np.int64)
    assert _alloc.linear_scan_allocate(start, end, size, nparts, pin, 16384, 4, 2048, 128, off, ps) == -1
    assert int((off + size).max()) == 5 * 2048 + 512


@settings(max_examples=30, deadline=None)
@given(sizes=st.lists(st.sampled_from([16, 48, 260, 512, 520, 700, 1024, 1040, 1200, 1536, 2048]),
                      min_size=20, max_size=64))
def test_banked_lower_bound_stays_sound_when_the_search_gives_up(sizes):
    """Up to 64 values live at once (the exact packing's budget may run out): the bound never
    exceeds what first fit decreasing packs them into, nor what the allocator reaches."""
    n = len(sizes)
    size = np.array(sizes, np.int64)
    start, end = np.zeros(n, np.int64), np.zeros(n, np.int64)
    nparts = np.full(n, 128, np.int64)
    lb = _bound.max_live_lower_bound(start, end, size, nparts, 128, None, 2048)
    loads = []
    for x in sorted(sizes, reverse=True):
        j = next((j for j, l in enumerate(loads) if l + x <= 2048), None)
        if j is None:
            loads.append(x)
        else:
            loads[j] += x
    assert lb <= (len(loads) - 1) * 2048 + min(loads)
    off = np.zeros(n, np.int64)
    ps = np.zeros(n, np.int64)
    if _alloc.linear_scan_allocate(start, end, size, nparts, np.ones(n, np.int64), 1 << 20, 4, 2048, 128,
                                   off, ps) == -1:
        assert lb <= int((off + size).max())


@settings(max_examples=40, deadline=None)
@given(small=st.lists(st.integers(1, 5000), min_size=1, max_size=7), wide=st.lists(st.integers(1, 5000), max_size=2))
def test_quarter_lower_bound_never_exceeds_the_best_stacking(small, wide):
    """Values of 1 partition (each in one quarter) and of 128 (in all four) live at once: the bound
    is at most the best assignment of the small ones to the four quarters."""
    import itertools
    best = min(max(sum(x for x, q in zip(small, a) if q == k) for k in range(4))
               for a in itertools.product(range(4), repeat=len(small))) + sum(wide)
    sizes = np.array(small + wide, np.int64)
    n = len(sizes)
    nparts = np.array([1] * len(small) + [128] * len(wide), np.int64)
    lb = _bound.max_live_lower_bound(np.zeros(n, np.int64), np.zeros(n, np.int64), sizes, nparts, 128,
                                     np.zeros(n, np.int64))
    assert lb <= best


def test_quarter_lower_bound_counts_stacks():
    """conditional's loop body: thirteen 4000 B values of one partition live at once. The quarters
    hold 13000 B each on average, but some quarter holds four of them: 16000."""
    n = 13
    args = (np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, 4000, np.int64), np.ones(n, np.int64), 128,
            np.zeros(n, np.int64))
    assert _bound.max_live_lower_bound(*args) == 16000
    off = np.zeros(n, np.int64)
    ps = np.zeros(n, np.int64)
    assert _alloc.linear_scan_allocate(args[0], args[1], args[2], args[3], args[5], 1 << 20, 4, 0, 128, off,
                                       ps) == -1
    assert int((off + 4000).max()) == 16000


def test_a_narrow_value_leaves_partition_0_to_the_values_pinned_there():
    """A 32-partition value that may start anywhere is placed first, then one of 32 partitions the
    PE reads (pinned to partition 0), both live at once. At the same offset everywhere, the free one
    takes the highest start partition, so the pinned one fits beside it at offset 0: a peak of 100 B,
    the max-live bound (it used to take partition 0 and push the pinned one to 100 B)."""
    start, end = np.zeros(2, np.int64), np.ones(2, np.int64)
    size = np.array([100, 100], np.int64)
    nparts = np.array([32, 32], np.int64)
    pin = np.array([0, 1], np.int64)
    indptr, ind = _alloc.interference_graph(start, end)
    off = np.zeros(2, np.int64)
    ps = np.zeros(2, np.int64)
    assert _alloc.color_allocate(indptr, ind, np.array([0, 1], np.int64), size, nparts, pin, 1000, 4, 0, 128,
                                 off, ps) == -1
    assert ps.tolist() == [96, 0] and int((off + size).max()) == 100
    assert _bound.max_live_lower_bound(start, end, size, nparts, 128, pin) == 100
