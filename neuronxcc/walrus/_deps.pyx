# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Typed core of the walrus dependence analysis: linear in the accesses.

``sweep``: one pass over every access in program order. Each memory's
partition and byte axes are cut, once, at every access's bounds, into cells
(the caller numbers them; an access covers a rectangle of whole cells).
Every cell keeps two lists: the writes and the reads still *live* there
(site, key = stream and dynamic context of the site). An access, per cell:

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
accesses times the cells they cover, however many times the allocator
reuses the same bytes: at the top level a cell holds the last write and the
reads since it.

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


def sweep(const i64[::1] site, const i64[::1] write, const i64[::1] p0, const i64[::1] p1,
          const i64[::1] s0, const i64[::1] s1, const i64[::1] base, const i64[::1] width,
          const i64[::1] key, const i64[::1] top, i64 ncell):
    """Candidate edges (a, b) of sites, a < b, in emission order (duplicates possible).

    Accesses in program order (``site`` non-decreasing). Access i covers the cells
    base[i] + p * width[i] + s for p in [p0[i], p1[i]) and s in [s0[i], s1[i])
    (elementary partition x byte ranges of its memory); ``key``/``top`` per access."""
    cdef Py_ssize_t n = site.shape[0], i
    cdef i64 total = 0
    for i in range(n):
        total += (p1[i] - p0[i]) * (s1[i] - s0[i])
    cdef i64 cap_e = max(total, 1)
    # entry pool: each access adds one entry per cell it covers, so ``total`` bounds it
    e_site_a = np.empty(cap_e, np.int64)
    e_key_a = np.empty(cap_e, np.int64)
    e_next_a = np.empty(cap_e, np.int64)
    cdef cnp.int64_t[::1] e_site = e_site_a, e_key = e_key_a, e_next = e_next_a
    head_w_a = np.full(max(ncell, 1), -1, np.int64)
    head_r_a = np.full(max(ncell, 1), -1, np.int64)
    cdef cnp.int64_t[::1] head_w = head_w_a, head_r = head_r_a
    cdef i64 ne = 0, cap = 4096, m = 0, cell, e, prev, nxt, b, k, pp, ss, a, nsite = 0
    cdef int w, t, lst
    for i in range(n):
        if site[i] + 1 > nsite:
            nsite = site[i] + 1
    # stamp[a] == i: the edge (a, this access's site) is already out (one per access, not per cell)
    stamp_a = np.full(max(nsite, 1), -1, np.int64)
    cdef cnp.int64_t[::1] stamp = stamp_a
    ea = np.empty(cap, np.int64)
    eb = np.empty(cap, np.int64)
    cdef cnp.int64_t[::1] va = ea, vb = eb
    for i in range(n):
        b = site[i]
        w = write[i] != 0
        k = key[i]
        t = top[i] != 0
        for pp in range(p0[i], p1[i]):
            for ss in range(s0[i], s1[i]):
                cell = base[i] + pp * width[i] + ss
                # 1. meet the live entries (a read: only the writes)
                for lst in range(2 if w else 1):
                    e = head_w[cell] if lst == 0 else head_r[cell]
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
                # 2. a write retires what it covers (the whole cell)
                if w:
                    for lst in range(2):
                        prev = -1
                        e = head_w[cell] if lst == 0 else head_r[cell]
                        while e >= 0:
                            nxt = e_next[e]
                            if t or e_key[e] == k:
                                if prev < 0:
                                    if lst == 0:
                                        head_w[cell] = nxt
                                    else:
                                        head_r[cell] = nxt
                                else:
                                    e_next[prev] = nxt
                            else:
                                prev = e
                            e = nxt
                e_site[ne] = b
                e_key[ne] = k
                if w:
                    e_next[ne] = head_w[cell]
                    head_w[cell] = ne
                else:
                    e_next[ne] = head_r[cell]
                    head_r[cell] = ne
                ne += 1
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
