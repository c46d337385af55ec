# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The per-instruction accounting of birsim's timeline (typed: it runs once per
simulated instruction). ``timeline.Timeline`` owns the model and its
documentation; this core holds the state it needs per step -- when each track
(engine or DMA queue, by integer id) is free, its busy time, and each
semaphore's signal events sorted by time with running totals -- and does one
step: issue time from the engine and the waits, memory dependences through the
AccessTracker, start/end on the track, signals.

``Rec`` is what a step needs of one instruction, built once by the timeline.
"""
from libc.stdlib cimport malloc, realloc, free

from neuronxcc.starfish.birsim._tracker cimport AccessTracker


cdef class Sem:
    """Signal events of one semaphore sorted by time (ties: in arrival order), with running totals."""
    cdef double* times
    cdef long long* incs
    cdef long long* cums
    cdef public Py_ssize_t n
    cdef Py_ssize_t cap

    def __cinit__(self):
        self.n = 0
        self.cap = 16
        self.times = <double*>malloc(self.cap * sizeof(double))
        self.incs = <long long*>malloc(self.cap * sizeof(long long))
        self.cums = <long long*>malloc(self.cap * sizeof(long long))
        if self.times == NULL or self.incs == NULL or self.cums == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.times)
        free(self.incs)
        free(self.cums)

    cdef int _grow(self) except -1:
        cdef Py_ssize_t cap = self.cap * 2
        cdef double* t = <double*>realloc(self.times, cap * sizeof(double))
        if t == NULL:
            raise MemoryError()
        self.times = t
        cdef long long* a = <long long*>realloc(self.incs, cap * sizeof(long long))
        if a == NULL:
            raise MemoryError()
        self.incs = a
        a = <long long*>realloc(self.cums, cap * sizeof(long long))
        if a == NULL:
            raise MemoryError()
        self.cums = a
        self.cap = cap
        return 0

    cdef int add(self, double t, long long inc) except -1:
        cdef Py_ssize_t i, lo, hi, mid, k
        cdef long long acc
        if self.n == self.cap:
            self._grow()
        if self.n == 0 or t >= self.times[self.n - 1]:
            self.times[self.n] = t
            self.incs[self.n] = inc
            self.cums[self.n] = (self.cums[self.n - 1] if self.n else 0) + inc
            self.n += 1
            return 0
        lo = 0
        hi = self.n
        while lo < hi:              # bisect_right
            mid = (lo + hi) // 2
            if t < self.times[mid]:
                hi = mid
            else:
                lo = mid + 1
        i = lo
        k = self.n
        while k > i:
            self.times[k] = self.times[k - 1]
            self.incs[k] = self.incs[k - 1]
            k -= 1
        self.times[i] = t
        self.incs[i] = inc
        self.n += 1
        acc = self.cums[i - 1] if i else 0
        for k in range(i, self.n):
            acc += self.incs[k]
            self.cums[k] = acc
        return 0

    @property
    def value(self):
        return self.cums[self.n - 1] if self.n else 0

    cdef double reaching(self, long long v):
        """Time the running total first reaches V (0 for V <= 0); -1 when it never does (yet)."""
        cdef Py_ssize_t lo = 0, hi = self.n, mid
        if v <= 0:
            return 0.0
        while lo < hi:              # bisect_left
            mid = (lo + hi) // 2
            if self.cums[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        if lo >= self.n:
            return -1.0
        return self.times[lo]


cdef class Rec:
    """What one step needs of an instruction (nothing here depends on loop variables)."""
    cdef public object instr
    cdef public int eng, track
    cdef public double busy_s, latency_s
    cdef public bint on_engine
    cdef public tuple waits          # ((sem id, value or None, expr), ...)
    cdef public tuple signals        # ((sem id, inc), ...)
    cdef public long long iid
    cdef public object cost

    def __init__(self, instr, int eng, int track, double busy_s, double latency_s, bint on_engine, tuple waits,
                 tuple signals, cost):
        self.instr = instr
        self.eng = eng
        self.track = track
        self.busy_s = busy_s
        self.latency_s = latency_s
        self.on_engine = on_engine
        self.waits = waits
        self.signals = signals
        self.iid = instr.id if instr.id is not None else -1
        self.cost = cost


cdef class Core:
    cdef double* free_at
    cdef double* busy
    cdef unsigned char* has_free
    cdef unsigned char* has_busy
    cdef Py_ssize_t ntracks
    cdef public list sems                # Sem by id
    cdef public AccessTracker acc
    cdef public bint sync_deps
    cdef public double end
    cdef public long long count
    # set by a step: a race (dep, who) or a blocked wait (sem id, value, have)
    cdef public bint raced
    cdef public double race_dep
    cdef public long long race_who
    cdef public object blocked

    def __cinit__(self):
        self.ntracks = 0
        self.free_at = NULL
        self.busy = NULL
        self.has_free = NULL
        self.has_busy = NULL

    def __init__(self, AccessTracker acc, bint sync_deps):
        self.acc = acc
        self.sync_deps = sync_deps
        self.sems = []
        self.end = 0.0
        self.count = 0
        self.raced = False
        self.blocked = None

    def __dealloc__(self):
        free(self.free_at)
        free(self.busy)
        free(self.has_free)
        free(self.has_busy)

    def ensure_tracks(self, Py_ssize_t n):
        cdef Py_ssize_t k
        if n <= self.ntracks:
            return
        self.free_at = <double*>realloc(self.free_at, n * sizeof(double))
        self.busy = <double*>realloc(self.busy, n * sizeof(double))
        self.has_free = <unsigned char*>realloc(self.has_free, n)
        self.has_busy = <unsigned char*>realloc(self.has_busy, n)
        if self.free_at == NULL or self.busy == NULL or self.has_free == NULL or self.has_busy == NULL:
            raise MemoryError()
        for k in range(self.ntracks, n):
            self.free_at[k] = 0.0
            self.busy[k] = 0.0
            self.has_free[k] = 0
            self.has_busy[k] = 0
        self.ntracks = n

    def ensure_sems(self, Py_ssize_t n):
        while len(self.sems) < n:
            self.sems.append(None)

    def busy_of(self, int track):
        """(busy seconds, True) for a track that ran something, else (0.0, False)."""
        return self.busy[track], bool(self.has_busy[track])

    def free_of(self, int track):
        return self.free_at[track]

    cdef double _issue(self, Rec r, dict env) except -2.0:
        """Issue time, or -1 with self.blocked set when a wait cannot be met yet."""
        cdef double t = self.free_at[r.eng]
        cdef double at
        cdef long long v
        cdef Sem s
        cdef tuple w
        for w in r.waits:
            if w[1] is None:
                v = w[2].eval(env)
            else:
                v = w[1]
            s = self.sems[w[0]]
            if s is None:
                if v <= 0:
                    continue
                self.blocked = (w[0], v, 0)
                return -1.0
            if v <= 0:
                continue
            at = s.reaching(v)
            if at < 0:
                self.blocked = (w[0], v, s.value)
                return -1.0
            if at > t:
                t = at
        return t

    cpdef double end_time(self, Rec r, dict env) except -2.0:
        """Completion time if issued now (no memory dependences), or -1 when a wait is not met."""
        cdef double t = self._issue(r, env)
        if t < 0:
            return -1.0
        if r.on_engine:
            return t + r.busy_s
        if self.free_at[r.track] > t:
            t = self.free_at[r.track]
        return t + r.latency_s + r.busy_s

    cpdef tuple step(self, Rec r, dict env, list regions):
        """One execution; (start, end), or None with self.blocked set (deadlock). Sets self.raced."""
        cdef double t, dep = 0.0, start, end
        cdef int tr = r.track
        cdef Sem s
        cdef tuple sg
        self.raced = False
        if r.waits:
            t = self._issue(r, env)
            if t < 0:
                return None
        else:
            t = self.free_at[r.eng]
        if regions:
            dep = self.acc.conflict_time(tr, regions)
            if self.sync_deps and dep > t:
                t = dep
        if r.on_engine:
            start = t
            end = t + r.busy_s
            self.free_at[tr] = end
            self.has_free[tr] = 1
        else:
            start = self.free_at[tr]
            if t > start:
                start = t
            end = start + r.latency_s + r.busy_s
            self.free_at[tr] = end
            self.has_free[tr] = 1
            if not self.has_free[r.eng]:
                self.free_at[r.eng] = t
                self.has_free[r.eng] = 1
        if dep > start * (1 + 1e-12) + 1e-15 and not self.sync_deps:
            self.raced = True
            self.race_dep = dep
            self.race_who = self.acc.last_conflict_id
        if regions:
            self.acc.record(tr, regions, end, r.iid)
        self.busy[tr] += end - start
        self.has_busy[tr] = 1
        for sg in r.signals:
            s = self.sems[sg[0]]
            if s is None:
                s = Sem()
                self.sems[sg[0]] = s
            s.add(end, sg[1])
        if end > self.end:
            self.end = end
        self.count += 1
        return (start, end)
