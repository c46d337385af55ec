# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Typed core of the walrus dependence analysis: linear in the accesses.

``sweep``: one pass over every access in program order. Each memory's
partition and byte axes are cut, once, at every access's bounds, into cells
(the caller numbers them; an access covers a rectangle of whole cells).
Every cell keeps two lists: the writes and the reads still *live* there
(site, key = stream and dynamic context of the site); runs of cells with the
same lists are one segment. An access, per segment it covers:

  1. meets the live entries: a write meets every entry, a read only the
     writes; an entry of another site gives the candidate edge (entry's
     site, this site);
  2. then, if it writes, retires the cell's entries: all of them when the
     site is at the top level (``top``: no While body or If branch around
     it, so it runs whenever the program does), else only those of its own
     key (same stream, same dynamic region); and it becomes a live entry.

Why retiring keeps every ordering: a retired entry e and any later access c
that would have met it in that cell also meet the retiring write f (f
covers the cell and writes), so the edges e->f and f->c order e before c
through f, an instruction that runs between them whenever c runs. Each entry
is retired once and a read only scans writes, so the work is linear in the
accesses times the segments they cover, however many times the allocator
reuses the same bytes: at the top level a segment holds the last write and
the reads since it, and a write leaves one segment over what it wrote.

``vc_reduce``: transitive reduction of dependence edges plus each stream's
program order, with vector clocks: ``clock[v][s]`` is the latest node of
stream s that reaches v. An edge u->v is implied exactly when another
predecessor p of v (an edge source or v's stream predecessor) already has u
in its clock (p == u excluded). O((nodes + edges) x streams).

Python validates; these functions assume consistent int64 inputs.
"""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport malloc, free

cnp.import_array()

ctypedef long long i64


cdef class _Pool:
    """Growable int64 columns (entries or segments), addressed by index."""
    cdef public object cols
    cdef i64 n, cap

    def __init__(self, ncols, cap):
        self.cap = max(cap, 16)
        self.n = 0
        self.cols = [np.empty(self.cap, np.int64) for _ in range(ncols)]

    cdef void expand(self):
        cdef i64 k
        self.cap *= 2
        for k in range(len(self.cols)):
            c = np.empty(self.cap, np.int64)
            c[:self.n] = self.cols[k][:self.n]
            self.cols[k] = c


def sweep(const i64[::1] site, const i64[::1] write, const i64[::1] p0, const i64[::1] p1,
          const i64[::1] s0, const i64[::1] s1, const i64[::1] base, const i64[::1] width,
          const i64[::1] key, const i64[::1] top, i64 ncell):
    """Candidate edges (a, b) of sites, a < b (one per source and access; duplicates across a
    site's accesses possible).

    Accesses in program order (``site`` non-decreasing). Access i covers, in each row
    r = base[i] + p * width[i] (p in [p0[i], p1[i])), the cells [r + s0[i], r + s1[i]): elementary
    partition x byte ranges of its memory; ``key``/``top`` per access.

    A row's cells are grouped into *segments*, runs of cells with the same live lists
    (``owner[cell]`` -> segment): an access splits the segments at its bounds, visits the
    segments in between, and a top-level write merges them back into one, so an access
    costs its segments, not its cells."""
    cdef Py_ssize_t n = site.shape[0], i
    cdef i64 nsite = 0, c, c2, r, lo, hi, sg, t2, e, prev, nxt, b, k, pp, a, m = 0, cap = 4096, first, f
    cdef int w, t, lst
    for i in range(n):
        if site[i] + 1 > nsite:
            nsite = site[i] + 1
    stamp_a = np.full(max(nsite, 1), -1, np.int64)
    cdef cnp.int64_t[::1] stamp = stamp_a
    owner_a = np.full(max(ncell, 1), -1, np.int64)
    cdef cnp.int64_t[::1] owner = owner_a
    cdef _Pool ent = _Pool(3, 4 * n + 16)          # site, key, next
    cdef _Pool seg = _Pool(4, 2 * n + 16)          # lo cell, hi cell, writes head, reads head
    cdef cnp.int64_t[::1] e_site, e_key, e_next, g_lo, g_hi, g_w, g_r
    e_site, e_key, e_next = ent.cols
    g_lo, g_hi, g_w, g_r = seg.cols
    ea = np.empty(cap, np.int64)
    eb = np.empty(cap, np.int64)
    cdef cnp.int64_t[::1] va = ea, vb = eb
    for i in range(n):
        b = site[i]
        w = write[i] != 0
        k = key[i]
        t = top[i] != 0
        for pp in range(p0[i], p1[i]):
            r = base[i] + pp * width[i]
            lo = r + s0[i]
            hi = r + s1[i]
            if lo >= hi:
                continue
            if owner[lo] < 0:
                # first touch of this row: one empty segment over all of it
                if seg.n == seg.cap:
                    seg.expand()
                    g_lo, g_hi, g_w, g_r = seg.cols
                sg = seg.n
                seg.n += 1
                g_lo[sg] = r
                g_hi[sg] = r + width[i]
                g_w[sg] = -1
                g_r[sg] = -1
                for c in range(r, r + width[i]):
                    owner[c] = sg
            # split at lo and at hi: the part from the bound on gets copies of the lists
            for c2 in range(2):
                c = lo if c2 == 0 else hi
                if c >= r + width[i]:
                    continue
                sg = owner[c]
                if g_lo[sg] == c:
                    continue
                if seg.n == seg.cap:
                    seg.expand()
                    g_lo, g_hi, g_w, g_r = seg.cols
                t2 = seg.n
                seg.n += 1
                g_lo[t2] = c
                g_hi[t2] = g_hi[sg]
                g_hi[sg] = c
                for lst in range(2):
                    prev = -1
                    e = g_w[sg] if lst == 0 else g_r[sg]
                    if lst == 0:
                        g_w[t2] = -1
                    else:
                        g_r[t2] = -1
                    while e >= 0:
                        if ent.n == ent.cap:
                            ent.expand()
                            e_site, e_key, e_next = ent.cols
                        f = ent.n
                        ent.n += 1
                        e_site[f] = e_site[e]
                        e_key[f] = e_key[e]
                        e_next[f] = -1
                        if prev < 0:
                            if lst == 0:
                                g_w[t2] = f
                            else:
                                g_r[t2] = f
                        else:
                            e_next[prev] = f
                        prev = f
                        e = e_next[e]
                for f in range(c, g_hi[t2]):
                    owner[f] = t2
            # visit the segments in [lo, hi)
            first = owner[lo]
            c = lo
            while c < hi:
                sg = owner[c]
                # 1. meet the live entries (a read: only the writes)
                for lst in range(2 if w else 1):
                    e = g_w[sg] if lst == 0 else g_r[sg]
                    while e >= 0:
                        a = e_site[e]
                        if a != b and stamp[a] != i:
                            stamp[a] = i
                            if m == cap:
                                cap *= 2
                                ea2 = np.empty(cap, np.int64)
                                eb2 = np.empty(cap, np.int64)
                                ea2[:m] = ea
                                eb2[:m] = eb
                                ea, eb = ea2, eb2
                                va = ea
                                vb = eb
                            va[m] = a
                            vb[m] = b
                            m += 1
                        e = e_next[e]
                # 2. a write retires what it covers
                if w:
                    for lst in range(2):
                        prev = -1
                        e = g_w[sg] if lst == 0 else g_r[sg]
                        while e >= 0:
                            nxt = e_next[e]
                            if t or e_key[e] == k:
                                if prev < 0:
                                    if lst == 0:
                                        g_w[sg] = nxt
                                    else:
                                        g_r[sg] = nxt
                                else:
                                    e_next[prev] = nxt
                            else:
                                prev = e
                            e = nxt
                c = g_hi[sg]
                if not (w and t) or sg == first:
                    if ent.n == ent.cap:
                        ent.expand()
                        e_site, e_key, e_next = ent.cols
                    f = ent.n
                    ent.n += 1
                    e_site[f] = b
                    e_key[f] = k
                    if w:
                        e_next[f] = g_w[sg]
                        g_w[sg] = f
                    else:
                        e_next[f] = g_r[sg]
                        g_r[sg] = f
            if w and t:
                # every segment in [lo, hi) now holds just this write: one segment again
                g_hi[first] = hi
                for c in range(lo, hi):
                    owner[c] = first
    return ea[:m].copy(), eb[:m].copy()


def vc_reduce(const i64[::1] stream, const i64[::1] spred, const i64[::1] ptr, const i64[::1] idx, i64 ns):
    """Keep mask over the edges idx[ptr[v]:ptr[v+1]] (sources of edges into v, all < v, distinct,
    none v's stream predecessor): 1 when no other path reaches v from that source.

    Nodes 0..n-1 in a topological order; ``stream[v]`` in 0..ns-1; ``spred[v]`` the previous node
    of v's stream or -1."""
    cdef Py_ssize_t n = stream.shape[0], v, k, s
    ns = max(ns, 1)
    clock_a = np.full((max(n, 1), ns), -1, np.int64)
    cdef cnp.int64_t[:, ::1] clock = clock_a
    keep_a = np.ones(idx.shape[0], np.uint8)
    cdef cnp.uint8_t[::1] keep = keep_a
    cdef i64 *b1 = <i64 *> malloc(ns * sizeof(i64))
    cdef i64 *b2 = <i64 *> malloc(ns * sizeof(i64))
    cdef i64 *who = <i64 *> malloc(ns * sizeof(i64))
    cdef i64 p, x, u, su, other, np_, j
    try:
        for v in range(n):
            for s in range(ns):
                b1[s] = -1
                b2[s] = -1
                who[s] = -1
            np_ = ptr[v + 1] - ptr[v]
            # predecessors: the edge sources, then the stream predecessor
            for j in range(np_ + 1):
                if j < np_:
                    p = idx[ptr[v] + j]
                else:
                    p = spred[v]
                    if p < 0:
                        break
                for s in range(ns):
                    x = clock[p, s]
                    if s == stream[p] and p > x:
                        x = p
                    if x > b1[s]:
                        b2[s] = b1[s]
                        b1[s] = x
                        who[s] = p
                    elif x > b2[s]:
                        b2[s] = x
            for k in range(ptr[v], ptr[v + 1]):
                u = idx[k]
                su = stream[u]
                other = b2[su] if who[su] == u else b1[su]
                if other >= u:
                    keep[k] = 0
            for s in range(ns):
                clock[v, s] = b1[s]
    finally:
        free(b1)
        free(b2)
        free(who)
    return keep_a
