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

DMAs (``dma``, optional) follow birsim's timeline rules (``birsim.timeline``,
``birpy.cost``), so the schedule and the simulator agree on what a transfer
costs: a DMA's trigger is an instruction of its issuing engine's in-order
stream (``issuer[v]``: later instructions of that stream issue no earlier,
but the stream is not held), its transfer starts the fixed latency later on
its DMA engines, which all queues share (each engine serves one transfer at
a time, in arrival order here), and its queue (``engine[v]``) completes in
order. ``replay`` gives the makespan of a fixed order under the same rules.

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

cdef enum:
    MAXE = 64           # DMA engines modelled


cdef double _dma_place(Py_ssize_t v, double est, i64 q, i64 iss, double* eng_free, double* dfree, int ne,
                       const double[::1] dlat, const i64[::1] dwidth, const double[:, ::1] dur) noexcept nogil:
    """Place DMA v triggered at EST: its completion time. Updates the issuing stream's free time (to
    EST at least), the DMA engines' free times and the queue's completion (eng_free[q])."""
    cdef double ready = est + dlat[v], fin, s, d, best_s
    cdef int k, j, w, best
    cdef unsigned char used[MAXE]
    if iss >= 0 and eng_free[iss] < est:
        eng_free[iss] = est
    fin = ready
    w = <int>dwidth[v]
    if w < 0:                   # fixed engines: dur[v, k] on engine k
        for k in range(ne):
            d = dur[v, k]
            if d > 0:
                s = dfree[k] if dfree[k] > ready else ready
                dfree[k] = s + d
                if s + d > fin:
                    fin = s + d
    else:                       # any W engines, a piece dur[v, 0] each: those free first
        d = dur[v, 0]
        if w > ne:
            w = ne
        for k in range(ne):
            used[k] = 0
        if d > 0:
            for j in range(w):
                best = -1
                best_s = 0.0
                for k in range(ne):
                    if used[k]:
                        continue
                    s = dfree[k] if dfree[k] > ready else ready
                    if best < 0 or s < best_s:
                        best = k
                        best_s = s
                used[best] = 1
                dfree[best] = best_s + d
                if best_s + d > fin:
                    fin = best_s + d
    if eng_free[q] > fin:       # a queue completes in order
        fin = eng_free[q]
    eng_free[q] = fin
    return fin


cdef class _Dma:
    """The optional DMA arrays of list_schedule / replay (see module doc)."""
    cdef const i64[::1] issuer
    cdef const double[::1] dlat
    cdef const i64[::1] dwidth
    cdef const double[:, ::1] dur
    cdef int ne

    def __init__(self, dma, Py_ssize_t n):
        issuer, dlat, dwidth, dur = dma
        self.issuer = issuer
        self.dlat = dlat
        self.dwidth = dwidth
        self.dur = dur
        self.ne = min(max(1, dur.shape[1]), MAXE)
        if self.issuer.shape[0] != n or self.dlat.shape[0] != n or self.dwidth.shape[0] != n or \
                self.dur.shape[0] != n:
            raise ValueError("DMA arrays must have one row per instruction")


def replay(const i64[::1] engine, const double[::1] cost, const i64[::1] pred_ptr, const i64[::1] pred_idx,
           const double[::1] pred_lat, const i64[::1] order, i64 n_engines, dma=None, ports=None):
    """Makespan when each stream runs its instructions in ORDER (DMAs by the rules above)."""
    cdef Py_ssize_t n = cost.shape[0], i, v, k
    cdef double[::1] finish = np.zeros(max(n, 1), dtype=np.float64)
    cdef double[::1] eng_free = np.zeros(max(n_engines, 1), dtype=np.float64)
    cdef double[::1] dfree = np.zeros(MAXE, dtype=np.float64)
    cdef double[::1] pfree = np.zeros(NPORTS, dtype=np.float64)
    cdef double t, done = 0.0
    cdef _Dma d = _Dma(dma, n) if dma is not None else None
    cdef bint has_dma = d is not None
    cdef const i64[:, ::1] pt = ports if ports is not None else np.full((1, NPORTS), -1, dtype=np.int64)
    cdef bint has_ports = ports is not None
    for i in range(order.shape[0]):
        v = order[i]
        if has_dma and d.issuer[v] >= 0:
            t = eng_free[d.issuer[v]]
        else:
            t = eng_free[engine[v]]
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            if finish[pred_idx[k]] + pred_lat[k] > t:
                t = finish[pred_idx[k]] + pred_lat[k]
        if has_dma and d.issuer[v] >= 0:
            finish[v] = _dma_place(v, t, engine[v], d.issuer[v], &eng_free[0], &dfree[0], d.ne, d.dlat,
                                   d.dwidth, d.dur)
        else:
            if has_ports:
                t = _port_wait(pt, v, t, &pfree[0])
            finish[v] = t + cost[v]
            eng_free[engine[v]] = finish[v]
            if has_ports:
                _port_hold(pt, v, finish[v], &pfree[0])
        if finish[v] > done:
            done = finish[v]
    return done


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


cdef int NPORTS = 2     # shared ports an instruction may hold (birpy.cost: Cost.ports, SBUF and PSUM)


cdef inline double _port_wait(const i64[:, ::1] pt, Py_ssize_t v, double t, double* pfree) noexcept nogil:
    cdef int j
    cdef i64 p
    for j in range(NPORTS):
        p = pt[v, j]
        if p >= 0 and pfree[p] > t:
            t = pfree[p]
    return t


cdef inline void _port_hold(const i64[:, ::1] pt, Py_ssize_t v, double until, double* pfree) noexcept nogil:
    cdef int j
    cdef i64 p
    for j in range(NPORTS):
        p = pt[v, j]
        if p >= 0 and until > pfree[p]:       # a port is never freed earlier than it was held
            pfree[p] = until


def list_schedule(const i64[::1] engine, const double[::1] cost,
                  const i64[::1] pred_ptr, const i64[::1] pred_idx, const double[::1] pred_lat,
                  const double[::1] priority, i64 n_engines, dma=None, ports=None):
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
    cdef double[::1] dfree = np.zeros(MAXE, dtype=np.float64)
    cdef _Dma dd = _Dma(dma, n) if dma is not None else None
    cdef bint has_dma = dd is not None
    cdef const i64[::1] issuer = dd.issuer if has_dma else engine
    cdef const double[::1] dlat = dd.dlat if has_dma else cost
    cdef const i64[::1] dwidth = dd.dwidth if has_dma else engine
    cdef const double[:, ::1] dur = dd.dur if has_dma else np.zeros((1, 1), dtype=np.float64)
    cdef int ne = dd.ne if has_dma else 1
    cdef cnp.int64_t[::1] done = np.zeros(n, dtype=np.int64)
    cdef double[::1] pfree = np.zeros(NPORTS, dtype=np.float64)
    cdef const i64[:, ::1] pt = ports if ports is not None else np.full((1, NPORTS), -1, dtype=np.int64)
    cdef bint has_ports = ports is not None
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
                    if has_dma and issuer[v] >= 0:      # a DMA waits for its issuing stream, not its queue
                        if eng_free[issuer[v]] > est:
                            est = eng_free[issuer[v]]
                    else:
                        if eng_free[engine[v]] > est:
                            est = eng_free[engine[v]]
                        if has_ports:
                            est = _port_wait(pt, v, est, &pfree[0])
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
                if has_dma and issuer[v] >= 0:
                    finish[v] = _dma_place(v, best_est, engine[v], issuer[v], &eng_free[0], &dfree[0], ne,
                                           dlat, dwidth, dur)
                else:
                    finish[v] = best_est + cost[v]
                    eng_free[engine[v]] = finish[v]
                    if has_ports:
                        _port_hold(pt, v, finish[v], &pfree[0])
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
