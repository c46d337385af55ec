# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Typed core of the SBUF/PSUM allocators.

Values are abstract: value v is live over instruction positions
[start[v], end[v]] (inclusive), needs ``size[v]`` bytes in each of
``nparts[v]`` consecutive partitions. Placement picks a start partition and a
byte offset so that no two values whose live ranges intersect overlap in
(partition range x byte range).

Rules enforced at placement (hardware reference section 4, "Allocation rules"):
  * start partition: 0 when nparts > 64; {0, 64} when 32 < nparts <= 64;
    {0, 32, 64, 96} when nparts <= 32 (``pin_zero`` forces 0, e.g. for values
    the PE reads, whose rows must start at partition 0);
  * byte offset aligned to ``align``; offset + size <= capacity;
  * banked memories (PSUM, ``bank_bytes`` > 0): a value of at most one bank
    lies inside one bank (a matmul accumulation group never crosses a 2 KiB
    bank boundary); a larger value starts on a bank boundary.

The drivers share ``place_one`` (and ``_expire``, the sweep's active list), or its variant:
  * ``color_allocate``: interference-graph colouring; the graph (CSR) comes
    from ``interference_graph``; values are placed in the caller's order and
    only already-placed neighbours are consulted;
  * ``linear_scan_allocate``: values sorted by start; an active list is
    expired as the scan passes each value's end (Poletto-Sarkar), the active
    values are the only ones consulted.
  * ``reuse_distance_allocate``: a second placement in start order within a given capacity
    (the first placement's peak) that puts each value in the bytes whose last use is furthest
    in the past (``_place_far``: free gaps and freed values' edges as candidates), so that a
    value's producer need not wait for the last reader of the value it replaces.
All return -1 on success or the index of the first value that did not fit
(the Python layer then spills or raises OutOfMemoryError). The lower bound the peaks are
measured against is ``_bound.max_live_lower_bound``.

Python validates; this module assumes valid, contiguous int64 inputs.
"""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport malloc, free, qsort

cnp.import_array()

cdef int _cmp_rect_blo(const void* a, const void* b) noexcept nogil:
    cdef i64 x = (<Rect*>a).blo
    cdef i64 y = (<Rect*>b).blo
    return -1 if x < y else (1 if x > y else 0)


cdef inline i64 _fix(i64 o, i64 size, i64 align, i64 bank) noexcept nogil:
    """Smallest offset >= o that is aligned and respects the bank rule."""
    if align > 1 and o % align:
        o += align - o % align
    if bank > 0:
        if size <= bank:
            if o // bank != (o + size - 1) // bank:
                o = (o // bank + 1) * bank
        elif o % bank:
            o = (o // bank + 1) * bank
    return o


cdef inline i64 _partition_step(i64 nparts, i64 pin_zero, i64 num_partitions) noexcept nogil:
    """Distance between the legal start partitions of a value of ``nparts`` partitions."""
    if nparts > 64 or pin_zero:
        return num_partitions
    if nparts > 32:
        return 64
    return 32


cdef i64 place_one(Rect* occ, i64 nocc, bint occ_sorted, i64 size, i64 nparts,
                   i64 capacity, i64 align, i64 bank_bytes, i64 num_partitions,
                   i64 pin_zero, i64* out_pstart) noexcept nogil:
    """Lowest-offset placement against the ``nocc`` occupied rects; -1 if none.

    Tries every legal start partition and keeps the lowest byte offset (ties:
    highest partition, since partition 0 is the one every value pinned there and
    every value over half the partitions needs; a narrow value taking it at an
    offset it could have had elsewhere fragments what they can use): one pass over
    ``occ`` in byte order per start. Sorts ``occ`` by ``blo`` in place unless
    ``occ_sorted`` says it already is.
    """
    cdef i64 step = _partition_step(nparts, pin_zero, num_partitions)
    cdef i64 ps, k, cand, best = -1, best_ps = 0
    if nocc > 1 and not occ_sorted:
        qsort(occ, nocc, sizeof(Rect), _cmp_rect_blo)   # once; each start filters in place
    ps = ((num_partitions - nparts) // step) * step
    while ps >= 0:
        cand = _fix(0, size, align, bank_bytes)
        for k in range(nocc):
            if occ[k].plo >= ps + nparts or ps >= occ[k].phi:
                continue
            if cand + size <= occ[k].blo:
                break
            if occ[k].bhi > cand:
                cand = _fix(occ[k].bhi, size, align, bank_bytes)
        if cand + size <= capacity and (best < 0 or cand < best):
            best = cand
            best_ps = ps
            if best == 0:
                break
        ps -= step
    out_pstart[0] = best_ps
    return best


cdef inline void _occupied(Rect* r, i64 pstart, i64 nparts, i64 offset, i64 size) noexcept nogil:
    """``r`` := the rectangle a placed value occupies."""
    r.plo = pstart
    r.phi = pstart + nparts
    r.blo = offset
    r.bhi = offset + size


cdef inline Py_ssize_t _expire(i64* active, Py_ssize_t nact, const i64[::1] end, i64 t) noexcept nogil:
    """Drop from ``active[:nact]`` the values whose live range ended before ``t``,
    keeping the order of the rest; returns how many remain."""
    cdef Py_ssize_t j, k = 0
    cdef i64 u
    for j in range(nact):
        u = active[j]
        if end[u] >= t:
            active[k] = u
            k += 1
    return k


cdef inline Py_ssize_t _insert_by_offset(i64* active, Py_ssize_t nact, const i64[::1] offset,
                                         i64 v) noexcept nogil:
    """Insert the placed value ``v`` into ``active[:nact]`` (kept in byte-offset order, the order
    ``place_one`` and ``_place_far`` read the occupied rects in); returns the new length."""
    cdef Py_ssize_t j = nact
    while j > 0 and offset[active[j - 1]] > offset[v]:
        active[j] = active[j - 1]
        j -= 1
    active[j] = v
    return nact + 1


def interference_edge_count(const i64[::1] start, const i64[::1] end):
    """An upper bound on the edges ``interference_graph`` would build (exact without
    ties in ``start``), computed without building the graph."""
    cdef Py_ssize_t n = start.shape[0]
    s = np.sort(np.asarray(start))
    e = np.sort(np.asarray(end))
    # pairs (u, v) with start[u] <= start[v] <= end[u]: for each v, the values started
    # no later than it minus those already ended before it (ties broken by index)
    started = np.searchsorted(s, np.asarray(start), side="right")
    ended = np.searchsorted(e, np.asarray(start), side="left")
    return int((started - ended - 1).sum())


def interference_graph(const i64[::1] start, const i64[::1] end):
    """CSR adjacency (indptr, indices) of the interval-overlap graph.

    Sweep over values sorted by start; each value meets the values still
    active. O(n log n + edges).
    """
    cdef Py_ssize_t n = start.shape[0]
    cdef cnp.int64_t[::1] order = np.argsort(np.asarray(start), kind="stable").astype(np.int64)
    cdef cnp.int64_t[::1] deg = np.zeros(n, dtype=np.int64)
    cdef i64* active = <i64*>malloc((n + 1) * sizeof(i64))
    cdef Py_ssize_t nact = 0, i, j, v, u, w
    cdef cnp.int64_t[::1] ea, eb
    # first pass: count edges
    cdef i64 m = 0
    try:
        for i in range(n):
            v = order[i]
            nact = _expire(active, nact, end, start[v])
            m += nact
            active[nact] = v
            nact += 1
        ea = np.empty(m, dtype=np.int64)
        eb = np.empty(m, dtype=np.int64)
        nact = 0
        w = 0
        for i in range(n):
            v = order[i]
            nact = _expire(active, nact, end, start[v])
            for j in range(nact):
                u = active[j]
                ea[w] = u
                eb[w] = v
                w += 1
                deg[u] += 1
                deg[v] += 1
            active[nact] = v
            nact += 1
    finally:
        free(active)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.asarray(deg), out=indptr[1:])
    indices = np.empty(2 * m, dtype=np.int64)
    cdef cnp.int64_t[::1] ip = indptr.copy()
    cdef cnp.int64_t[::1] ind = indices
    for w in range(m):
        ind[ip[ea[w]]] = eb[w]
        ip[ea[w]] += 1
        ind[ip[eb[w]]] = ea[w]
        ip[eb[w]] += 1
    return indptr, indices


def color_allocate(const i64[::1] indptr, const i64[::1] indices, const i64[::1] order,
                   const i64[::1] size, const i64[::1] nparts, const i64[::1] pin_zero,
                   i64 capacity, i64 align, i64 bank_bytes, i64 num_partitions,
                   i64[::1] out_offset, i64[::1] out_pstart):
    """Place values in ``order`` against their placed neighbours. -1 or the failing value."""
    cdef Py_ssize_t n = size.shape[0], i, k, v, u, nocc
    cdef i64 maxdeg = 0, off, ps
    for v in range(n):
        if indptr[v + 1] - indptr[v] > maxdeg:
            maxdeg = indptr[v + 1] - indptr[v]
        out_offset[v] = -1
    cdef Rect* occ = <Rect*>malloc((maxdeg + 1) * sizeof(Rect))
    cdef i64 failed = -1
    try:
        with nogil:
            for i in range(order.shape[0]):
                v = order[i]
                nocc = 0
                for k in range(indptr[v], indptr[v + 1]):
                    u = indices[k]
                    if out_offset[u] >= 0:
                        _occupied(&occ[nocc], out_pstart[u], nparts[u], out_offset[u], size[u])
                        nocc += 1
                off = place_one(occ, nocc, False, size[v], nparts[v], capacity, align,
                                bank_bytes, num_partitions, pin_zero[v], &ps)
                if off < 0:
                    failed = v
                    break
                out_offset[v] = off
                out_pstart[v] = ps
    finally:
        free(occ)
    return failed


def linear_scan_allocate(const i64[::1] start, const i64[::1] end,
                         const i64[::1] size, const i64[::1] nparts, const i64[::1] pin_zero,
                         i64 capacity, i64 align, i64 bank_bytes, i64 num_partitions,
                         i64[::1] out_offset, i64[::1] out_pstart):
    """Linear scan in start order (ties: larger first). -1 or the failing value.

    The active list is kept sorted by byte offset (expiry compacts it in
    place, insertion shifts), so a placement is one pass over it per legal
    start partition, no sorting: O(n * active).
    """
    cdef Py_ssize_t n = start.shape[0], i, j, v, u, nact = 0
    # sort by (start, -size*nparts): big values first among equal starts
    key = np.lexsort((-(np.asarray(size) * np.asarray(nparts)), np.asarray(start)))
    cdef cnp.int64_t[::1] order = key.astype(np.int64)
    cdef i64* active = <i64*>malloc((n + 1) * sizeof(i64))
    cdef Rect* occ = <Rect*>malloc((n + 1) * sizeof(Rect))
    cdef i64 failed = -1, off, ps
    for v in range(n):
        out_offset[v] = -1
    try:
        with nogil:
            for i in range(n):
                v = order[i]
                nact = _expire(active, nact, end, start[v])
                for j in range(nact):
                    u = active[j]
                    _occupied(&occ[j], out_pstart[u], nparts[u], out_offset[u], size[u])
                off = place_one(occ, nact, True, size[v], nparts[v], capacity, align,
                                bank_bytes, num_partitions, pin_zero[v], &ps)
                if off < 0:
                    failed = v
                    break
                out_offset[v] = off
                out_pstart[v] = ps
                nact = _insert_by_offset(active, nact, out_offset, v)
    finally:
        free(active)
        free(occ)
    return failed


cdef inline i64 _fix_down(i64 o, i64 size, i64 align, i64 bank) noexcept nogil:
    """Largest offset <= o that is aligned and respects the bank rule (may be < 0)."""
    if align > 1 and o % align:
        o -= o % align
    if bank > 0:
        if size <= bank:
            if o >= 0 and o // bank != (o + size - 1) // bank:
                o = ((o + size - 1) // bank) * bank - size
                if align > 1 and o % align:
                    o -= o % align
        elif o % bank:
            o = (o // bank) * bank
    return o


cdef inline i64 _last_use(Rect* gr, i64* gend, i64 ng, i64 plo, i64 phi, i64 blo, i64 bhi,
                          i64 ready, i64 stop) noexcept nogil:
    """The latest end among the ghosts overlapping the rectangle, ignoring those that ended
    no later than ``ready`` (-1: no such ghost); stops early once it exceeds ``stop``."""
    cdef i64 k, t = -1
    for k in range(ng):
        if gend[k] > t and gend[k] > ready and gr[k].plo < phi and plo < gr[k].phi and gr[k].blo < bhi and blo < gr[k].bhi:
            t = gend[k]
            if t > stop:
                break
    return t


cdef i64 _place_far(Rect* occ, i64 nocc, Rect* gr, i64* gend, i64 ng, i64 ready, i64 size, i64 nparts,
                    i64 capacity, i64 align, i64 bank_bytes, i64 num_partitions, i64 pin_zero,
                    i64* out_pstart, i64* out_moved) noexcept nogil:
    """The placement against the occupied rects (sorted by ``blo``) whose bytes were last used
    longest ago: candidates are both ends of every free gap and the edges of the ghosts
    (expired values) inside it; the lowest last use wins (uses before ``ready`` count as none),
    ties by offset, then partition. -1 if nothing fits. ``out_moved``: 1 when the pick is not
    the lowest fitting offset."""
    cdef i64 step = _partition_step(nparts, pin_zero, num_partitions)
    cdef i64 ps = 0, k, j, c, cursor, gap_end, lo, t
    cdef i64 best = -1, best_ps = 0, best_t = 0, low = -1, low_ps = 0
    cdef i64 cand[4]
    while ps + nparts <= num_partitions:
        cursor = 0
        for k in range(nocc + 1):
            if k < nocc:
                if occ[k].plo >= ps + nparts or ps >= occ[k].phi:
                    continue
                gap_end = occ[k].blo
            else:
                gap_end = capacity
            lo = _fix(cursor, size, align, bank_bytes)
            if lo + size <= gap_end:
                if low < 0 or lo < low:
                    low, low_ps = lo, ps
                # the free gap [cursor, gap_end): its two ends, then each ghost's edges in it
                for j in range(-1, ng):
                    if j < 0:
                        cand[0] = lo
                        cand[1] = _fix_down(gap_end - size, size, align, bank_bytes)
                    else:
                        if gr[j].plo >= ps + nparts or ps >= gr[j].phi or gr[j].bhi <= cursor \
                                or gr[j].blo >= gap_end:
                            continue
                        cand[0] = _fix(gr[j].bhi, size, align, bank_bytes)
                        cand[1] = _fix_down(gr[j].blo - size, size, align, bank_bytes)
                    for c in range(2):
                        if cand[c] < lo or cand[c] + size > gap_end:
                            continue
                        t = _last_use(gr, gend, ng, ps, ps + nparts, cand[c], cand[c] + size, ready,
                                      best_t if best >= 0 else (<i64>1 << 62))
                        if best < 0 or t < best_t or (t == best_t and cand[c] < best):
                            best, best_ps, best_t = cand[c], ps, t
            if k < nocc and occ[k].bhi > cursor:
                cursor = occ[k].bhi
        ps += step
    out_pstart[0] = best_ps
    out_moved[0] = 1 if (best != low or best_ps != low_ps) else 0
    return best


def reuse_distance_allocate(const i64[::1] start, const i64[::1] end,
                            const i64[::1] size, const i64[::1] nparts, const i64[::1] pin_zero,
                            const i64[::1] ready, const i64[::1] prefer,
                            i64 capacity, i64 align, i64 bank_bytes, i64 num_partitions, i64 max_ghosts,
                            i64[::1] out_offset, i64[::1] out_pstart, i64[::1] out_moved):
    """Start-order placement (ties: larger first) that puts each value with ``prefer[v]`` in the
    bytes whose last use is furthest in the past, within ``capacity`` (the others, and values
    with no such choice, take the lowest fitting offset). -1 or the failing value.

    Reusing the bytes a value freed just before makes the new value's producer wait for the old
    value's last reader (a write-after-read through the address only); bytes idle for longer let
    the producer run ahead. A use that ended before ``ready[v]`` (the position where the
    producer's own inputs are written) costs no wait: the producer waits there anyway. The expired values ("ghosts") with their end positions say when
    bytes were last used; a ghost wholly covered by a later placement is dropped, and beyond
    ``max_ghosts`` the oldest are forgotten (their bytes count as idle), so a placement costs
    O(active + max_ghosts^2).
    """
    cdef Py_ssize_t n = start.shape[0], i, j, k, v, u, nact = 0, ng = 0
    key = np.lexsort((-(np.asarray(size) * np.asarray(nparts)), np.asarray(start)))
    cdef cnp.int64_t[::1] order = key.astype(np.int64)
    cdef i64 gcap = max_ghosts if max_ghosts > 0 else 1
    cdef i64* active = <i64*>malloc((n + 1) * sizeof(i64))
    cdef Rect* occ = <Rect*>malloc((n + 1) * sizeof(Rect))
    cdef Rect* gr = <Rect*>malloc((gcap + n + 1) * sizeof(Rect))
    cdef i64* gend = <i64*>malloc((gcap + n + 1) * sizeof(i64))
    cdef i64 failed = -1, off, ps, oldest, mv = 0
    cdef Rect r
    for v in range(n):
        out_offset[v] = -1
        out_moved[v] = 0
    try:
        with nogil:
            for i in range(n):
                v = order[i]
                # expire into ghosts, keeping the active list's byte order
                k = 0
                for j in range(nact):
                    u = active[j]
                    if end[u] >= start[v]:
                        active[k] = u
                        k += 1
                    else:
                        _occupied(&gr[ng], out_pstart[u], nparts[u], out_offset[u], size[u])
                        gend[ng] = end[u]
                        ng += 1
                nact = k
                while ng > gcap:
                    oldest = 0
                    for j in range(1, ng):
                        if gend[j] < gend[oldest]:
                            oldest = j
                    ng -= 1
                    gr[oldest] = gr[ng]
                    gend[oldest] = gend[ng]
                for j in range(nact):
                    u = active[j]
                    _occupied(&occ[j], out_pstart[u], nparts[u], out_offset[u], size[u])
                off = _place_far(occ, nact, gr, gend, ng if prefer[v] else 0, ready[v], size[v], nparts[v],
                                 capacity, align, bank_bytes, num_partitions, pin_zero[v], &ps, &mv)
                if off < 0:
                    failed = v
                    break
                out_offset[v] = off
                out_pstart[v] = ps
                out_moved[v] = mv
                _occupied(&r, ps, nparts[v], off, size[v])
                k = 0
                for j in range(ng):
                    if not (r.plo <= gr[j].plo and gr[j].phi <= r.phi and r.blo <= gr[j].blo
                            and gr[j].bhi <= r.bhi):
                        gr[k] = gr[j]
                        gend[k] = gend[j]
                        k += 1
                ng = k
                nact = _insert_by_offset(active, nact, out_offset, v)
    finally:
        free(active)
        free(occ)
        free(gr)
        free(gend)
    return failed
