# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Typed core of the walrus list scheduler and the dependence finder.

``list_schedule``: one straight-line block of n instructions, each on one
engine stream (``engine[v]`` in 0..n_engines-1) with an estimated cost; a DAG
of dependences in CSR form (``pred_ptr``/``pred_idx``, with a latency per
edge: the semaphore hand-off between engines). Engines run their streams in
order and in parallel. Greedy list scheduling: repeatedly take, among the
ready instructions, the one that can start earliest (ties: the longest
remaining critical path, then the lower original index). Returns the new
order, the start times and the makespan. Every dependence a->b ends with a
before b in the new order (b only becomes ready once a is placed).

``conflicts``: all pairs of accesses to the same memory whose
(partition x byte) boxes overlap and of which at least one writes; the
Python layer turns them into RAW/WAR/WAW dependences.

Python validates; these functions assume consistent int64/float64 inputs.
"""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport malloc, free

cnp.import_array()

ctypedef long long i64


def critical_path(const i64[::1] succ_ptr, const i64[::1] succ_idx, const double[::1] succ_lat,
                  const double[::1] cost):
    """Bottom level: cost of the longest path from each node to a sink (nodes in topological index order)."""
    cdef Py_ssize_t n = cost.shape[0], v, k
    out = np.zeros(n, dtype=np.float64)
    cdef double[::1] bl = out
    cdef double best, c
    for v in range(n - 1, -1, -1):
        best = 0.0
        for k in range(succ_ptr[v], succ_ptr[v + 1]):
            c = succ_lat[k] + bl[succ_idx[k]]
            if c > best:
                best = c
        bl[v] = cost[v] + best
    return out


def list_schedule(const i64[::1] engine, const double[::1] cost,
                  const i64[::1] pred_ptr, const i64[::1] pred_idx, const double[::1] pred_lat,
                  const double[::1] priority, i64 n_engines):
    """Greedy list schedule (see module docstring). Edges must go from lower to higher index."""
    cdef Py_ssize_t n = cost.shape[0], i, v, k, u, best_v
    order_a = np.empty(n, dtype=np.int64)
    start_a = np.zeros(n, dtype=np.float64)
    cdef cnp.int64_t[::1] order = order_a
    cdef double[::1] start = start_a
    cdef double[::1] finish = np.zeros(n, dtype=np.float64)
    cdef cnp.int64_t[::1] npred = np.zeros(n, dtype=np.int64)
    cdef double[::1] ready_at = np.zeros(n, dtype=np.float64)
    cdef double[::1] eng_free = np.zeros(max(n_engines, 1), dtype=np.float64)
    cdef cnp.int64_t[::1] done = np.zeros(n, dtype=np.int64)
    # successor lists from the predecessor CSR
    cdef cnp.int64_t[::1] sptr = np.zeros(n + 1, dtype=np.int64)
    for v in range(n):
        npred[v] = pred_ptr[v + 1] - pred_ptr[v]
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            sptr[pred_idx[k] + 1] += 1
    for v in range(n):
        sptr[v + 1] += sptr[v]
    cdef cnp.int64_t[::1] sfill = np.asarray(sptr).copy()
    cdef cnp.int64_t[::1] sidx = np.zeros(max(pred_idx.shape[0], 1), dtype=np.int64)
    cdef double[::1] slat = np.zeros(max(pred_idx.shape[0], 1), dtype=np.float64)
    for v in range(n):
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[k]
            sidx[sfill[u]] = v
            slat[sfill[u]] = pred_lat[k]
            sfill[u] += 1
    cdef i64* ready = <i64*>malloc((n + 1) * sizeof(i64))
    cdef Py_ssize_t nready = 0, j, best_j
    cdef double est, best_est, t, makespan = 0.0
    try:
        with nogil:
            for v in range(n):
                if npred[v] == 0:
                    ready[nready] = v
                    nready += 1
            for i in range(n):
                best_j = -1
                best_est = 0.0
                best_v = -1
                for j in range(nready):
                    v = ready[j]
                    est = ready_at[v]
                    if eng_free[engine[v]] > est:
                        est = eng_free[engine[v]]
                    if (best_j < 0 or est < best_est
                            or (est == best_est and (priority[v] > priority[best_v]
                                                     or (priority[v] == priority[best_v] and v < best_v)))):
                        best_j = j
                        best_est = est
                        best_v = v
                if best_j < 0:
                    break  # a cycle: caller checks len(order)
                v = best_v
                ready[best_j] = ready[nready - 1]
                nready -= 1
                order[i] = v
                start[v] = best_est
                finish[v] = best_est + cost[v]
                eng_free[engine[v]] = finish[v]
                if finish[v] > makespan:
                    makespan = finish[v]
                done[v] = 1
                for k in range(sptr[v], sptr[v + 1]):
                    u = sidx[k]
                    t = finish[v] + slat[k]
                    if t > ready_at[u]:
                        ready_at[u] = t
                    npred[u] -= 1
                    if npred[u] == 0:
                        ready[nready] = u
                        nready += 1
    finally:
        free(ready)
    return order_a, start_a, makespan


def conflicts(const i64[::1] mem, const i64[::1] write, const i64[::1] instr,
              const i64[::1] plo, const i64[::1] phi, const i64[::1] blo, const i64[::1] bhi):
    """Pairs (a, b) of access indices, a < b, same mem, boxes overlap, one writes, different instr.

    Half-open boxes. Sort by (mem, blo), sweep with an early exit on blo.
    """
    cdef Py_ssize_t n = mem.shape[0], i, j, a, b
    order_a = np.lexsort((np.asarray(blo), np.asarray(mem))).astype(np.int64)
    cdef cnp.int64_t[::1] o = order_a
    out_a = []
    out_b = []
    cdef i64 cap = 1024, m = 0
    ea = np.empty(cap, dtype=np.int64)
    eb = np.empty(cap, dtype=np.int64)
    cdef cnp.int64_t[::1] va = ea
    cdef cnp.int64_t[::1] vb = eb
    for i in range(n):
        a = o[i]
        for j in range(i + 1, n):
            b = o[j]
            if mem[b] != mem[a] or blo[b] >= bhi[a]:
                break
            if instr[a] == instr[b] or (write[a] == 0 and write[b] == 0):
                continue
            if plo[a] < phi[b] and plo[b] < phi[a] and blo[a] < bhi[b] and blo[b] < bhi[a]:
                if m == cap:
                    cap *= 2
                    ea = np.resize(ea, cap)
                    eb = np.resize(eb, cap)
                    va = ea
                    vb = eb
                if a < b:
                    va[m] = a
                    vb[m] = b
                else:
                    va[m] = b
                    vb[m] = a
                m += 1
    return ea[:m].copy(), eb[:m].copy()


def transitive_reduction(const i64[::1] ptr, const i64[::1] idx):
    """Keep edge u->v (CSR successor lists, edges from lower to higher index) only if
    v is not reachable from u through another successor. Returns a keep mask per edge.

    Reachability as bitsets, computed in reverse index order.
    """
    cdef Py_ssize_t n = ptr.shape[0] - 1, v, k, w, nw
    nw = (n + 63) // 64
    reach_a = np.zeros((n, max(nw, 1)), dtype=np.uint64)
    cdef cnp.uint64_t[:, ::1] reach = reach_a
    keep_a = np.ones(idx.shape[0], dtype=np.uint8)
    cdef cnp.uint8_t[::1] keep = keep_a
    cdef cnp.uint64_t[::1] via = np.zeros(max(nw, 1), dtype=np.uint64)
    cdef i64 s
    for v in range(n - 1, -1, -1):
        # via = union of reach(s) over direct successors s (what is reachable in >= 2 steps)
        for w in range(nw):
            via[w] = 0
        for k in range(ptr[v], ptr[v + 1]):
            s = idx[k]
            for w in range(nw):
                via[w] |= reach[s, w]
        for k in range(ptr[v], ptr[v + 1]):
            s = idx[k]
            if (via[s >> 6] >> (s & 63)) & 1:
                keep[k] = 0
        for w in range(nw):
            reach[v, w] = via[w]
        for k in range(ptr[v], ptr[v + 1]):
            s = idx[k]
            reach[v, s >> 6] |= (<cnp.uint64_t>1) << (s & 63)
    return keep_a
