# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The per-instruction accounting of birsim's timeline (typed: it runs once per
simulated instruction). ``timeline.Timeline`` owns the model and its
documentation; this core holds the state it needs per step -- when each track
(engine or DMA queue, by integer id) is free, its busy time, and each
semaphore's signal events sorted by time with running totals -- and does one
step: issue time from the engine and the waits, memory dependences through the
AccessTracker, start/end on the track, signals.

``Rec`` is what a step needs of one instruction, built once by the timeline.
``Resource`` is a shared unit that serves one booking at a time but, unlike an
engine, not in program order: a booking takes the earliest gap at or after
its ready time (the DMA engines, the v2 SBUF/PSUM ports). Each DMA queue
also keeps, per DMA engine, when that engine has done the queue's work so
far (its ring: a queue is in order on each engine, [DMA]), and when its
booked work there ends with the chunk size of that work: the engines serve
the queues round-robin by chunks ([DMA]), so a transfer that finds an engine
busy with other queues' work waits for at most its own number of chunks of
each of them (``Core._serve``).
"""
from libc.stdlib cimport malloc, realloc, free
from libc.string cimport memmove
from sys import intern

from neuronxcc.pelican._compiled cimport CompiledExpr
from neuronxcc.starfish.birsim._apinfo cimport APInfo, COMPILE_AFTER, compile_env_expr, eval_env, regions_of
from neuronxcc.starfish.birsim._tracker cimport AccessTracker, MAXREG, Region


MAXW_PUBLIC = MAXW     # waits one instruction may have for the typed form (tests pad past it)


cdef class Sem:
    """Signal events of one semaphore sorted by time (ties: in arrival order), with running totals."""

    def __cinit__(self):
        self.n = 0
        self.mono = True
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
        if inc < 0:
            self.mono = False
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
        # the common case, a wait met by the latest signal: what the bisection below finds when
        # the totals never decrease (the first total >= V is the last one)
        if self.mono and hi > 0 and self.cums[hi - 1] >= v and (hi == 1 or self.cums[hi - 2] < v):
            return self.times[hi - 1]
        while lo < hi:              # bisect_left
            mid = (lo + hi) // 2
            if self.cums[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        if lo >= self.n:
            return -1.0
        return self.times[lo]


cdef class Resource:
    """Busy intervals [s, e) sorted by start (touching ones merged); before ``floor`` all is busy."""

    def __cinit__(self):
        self.n = 0
        self.floor = 0.0
        self.busy = 0.0

    cdef double fit(self, double t, double d):
        """Earliest start >= t of a free gap of length d."""
        cdef int lo = 0, hi = self.n, mid
        cdef double s = t
        if s < self.floor:
            s = self.floor
        while lo < hi:              # first interval ending after s
            mid = (lo + hi) // 2
            if self.en[mid] <= s:
                lo = mid + 1
            else:
                hi = mid
        while lo < self.n:
            if s + d <= self.st[lo] * (1 + 1e-12):
                return s
            if self.en[lo] > s:
                s = self.en[lo]
            lo += 1
        return s

    cdef void book(self, double s, double d):
        cdef int lo, hi, mid, i
        cdef double e = s + d
        cdef double eps
        if d <= 0:
            return
        self.busy += d
        eps = 1e-12 * e
        if self.n == RES_CAP:
            self.floor = self.en[RES_CAP // 2 - 1]
            memmove(&self.st[0], &self.st[RES_CAP // 2], (RES_CAP // 2) * sizeof(double))
            memmove(&self.en[0], &self.en[RES_CAP // 2], (RES_CAP // 2) * sizeof(double))
            self.n = RES_CAP // 2
        lo = 0
        hi = self.n
        while lo < hi:              # first interval starting at or after s
            mid = (lo + hi) // 2
            if self.st[mid] < s:
                lo = mid + 1
            else:
                hi = mid
        i = lo
        if i > 0 and self.en[i - 1] >= s - eps:          # extend the previous one
            if e > self.en[i - 1]:
                self.en[i - 1] = e
            i -= 1
        else:
            memmove(&self.st[i + 1], &self.st[i], (self.n - i) * sizeof(double))
            memmove(&self.en[i + 1], &self.en[i], (self.n - i) * sizeof(double))
            self.st[i] = s
            self.en[i] = e
            self.n += 1
        while i + 1 < self.n and self.st[i + 1] <= self.en[i] + eps:    # absorb followers
            if self.en[i + 1] > self.en[i]:
                self.en[i] = self.en[i + 1]
            memmove(&self.st[i + 1], &self.st[i + 2], (self.n - i - 2) * sizeof(double))
            memmove(&self.en[i + 1], &self.en[i + 2], (self.n - i - 2) * sizeof(double))
            self.n -= 1


cdef class Rec:
    """What one step needs of an instruction (nothing here depends on loop variables). The waits
    are kept twice: as given (``waits``), and typed -- a constant value, or an affine one as
    const + sum(coeff * env[var]) -- so a step evaluates them without pelican."""

    def __init__(self, instr, int eng, int track, double busy_s, double latency_s, bint on_engine, tuple waits,
                 tuple signals, cost, tuple ports=(), double engine_s=0.0, int width=0, int kind=0,
                 double nbytes=0.0, int first_engine=-1, tuple shares=(), double chunk_s=0.0):
        cdef int j
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
        self.ports = ports
        self.engine_s = engine_s
        self.width = width
        self.kind = kind
        self.nbytes = nbytes
        self.first_engine = first_engine
        self.chunk_s = chunk_s
        if first_engine >= 0:
            if not 0 < len(shares) <= MAXE or len(shares) != width:
                raise ValueError("a DMA on fixed engines needs one share per engine (at most %d)" % MAXE)
            for j in range(width):
                self.shares[j] = shares[j]
        self._type_waits()

    def __cinit__(self):
        self.wcoef = NULL
        self.nvars = 0

    def __dealloc__(self):
        free(self.wcoef)

    cdef _type_waits(self):
        cdef int i = 0, k
        comp = []
        self.nw = -1
        if len(self.waits) > MAXW:
            return
        names = {}
        affs = []
        for w in self.waits:
            self.wsem[i] = w[0]
            self.wevals[i] = 0
            self.wtyped[i] = 0
            if w[1] is not None:
                self.wconst[i] = w[1]
                comp.append(None)
                affs.append(None)
            else:
                self.wconst[i] = 0
                comp.append(False)
                aff = _affine_wait(w[2])
                if aff is not None:
                    for v in aff[0]:
                        if v not in names:
                            names[v] = len(names)
                    if len(names) > MAXV:
                        aff = None
                        for v in list(names)[MAXV:]:
                            del names[v]
                affs.append(aff)
            i += 1
        self.wcomp = comp
        self.nw = i
        self.nvars = len(names)
        self.vnames = tuple([intern(v) for v in names])
        if self.nvars:
            self.wcoef = <long long*>malloc(self.nw * self.nvars * sizeof(long long))
            if self.wcoef == NULL:
                raise MemoryError()
            for i in range(self.nw):
                for k in range(self.nvars):
                    self.wcoef[i * self.nvars + k] = 0
                aff = affs[i]
                if aff is None or any(v not in names for v in aff[0]):
                    continue
                for v, c in aff[0].items():
                    self.wcoef[i * self.nvars + <int>names[v]] = c
                self.wconst[i] = aff[1]
                self.wtyped[i] = 1


cdef object _affine_wait(object expr):
    """(coeffs, const) of a wait value A or max(0, A) with A affine, else None. Dropping the max is
    exact for a wait: a value <= 0 is met at once, and above 0 max(0, A) is A."""
    try:
        aff = expr.affine()
        if aff is None and expr.op == "max" and len(expr.children) == 2 and expr.children[0].is_const() \
                and int(expr.children[0]) == 0:
            aff = expr.children[1].affine()
        return aff
    except (AttributeError, TypeError, ValueError):
        return None


cdef class Core:
    def __cinit__(self):
        self.ntracks = 0
        self.ring = NULL
        self.wend = NULL
        self.wchunk = NULL
        self.dtracks = NULL
        self.is_dma = NULL
        self.ndt = 0
        self.ne = 1
        self.free_at = NULL
        self.done_at = NULL
        self.busy = NULL
        self.has_free = NULL
        self.has_busy = NULL

    def __init__(self, AccessTracker acc, bint sync_deps, int dma_engines=16, bint round_robin=True):
        cdef int k
        self.acc = acc
        self.round_robin = round_robin
        self.sync_deps = sync_deps
        self.sems = []
        self.ports = []
        self.ne = min(max(1, dma_engines), MAXE)
        self.dma_engines = [Resource() for k in range(self.ne)]
        self.end = 0.0
        self.count = 0
        for k in range(NKINDS):
            self.kind_count[k] = 0
        self.dma_bytes = 0.0
        self.raced = False
        self.blocked = None

    def __dealloc__(self):
        free(self.free_at)
        free(self.ring)
        free(self.wend)
        free(self.wchunk)
        free(self.dtracks)
        free(self.is_dma)
        free(self.done_at)
        free(self.busy)
        free(self.has_free)
        free(self.has_busy)

    def ensure_tracks(self, Py_ssize_t n):
        cdef Py_ssize_t k
        if n <= self.ntracks:
            return
        self.free_at = <double*>realloc(self.free_at, n * sizeof(double))
        self.busy = <double*>realloc(self.busy, n * sizeof(double))
        self.done_at = <double*>realloc(self.done_at, n * sizeof(double))
        self.has_free = <unsigned char*>realloc(self.has_free, n)
        self.has_busy = <unsigned char*>realloc(self.has_busy, n)
        self.ring = <double*>realloc(self.ring, n * self.ne * sizeof(double))
        self.wend = <double*>realloc(self.wend, n * self.ne * sizeof(double))
        self.wchunk = <double*>realloc(self.wchunk, n * self.ne * sizeof(double))
        self.dtracks = <int*>realloc(self.dtracks, n * sizeof(int))
        self.is_dma = <unsigned char*>realloc(self.is_dma, n)
        if self.free_at == NULL or self.busy == NULL or self.has_free == NULL or self.has_busy == NULL \
                or self.done_at == NULL or self.ring == NULL or self.wend == NULL or self.wchunk == NULL \
                or self.dtracks == NULL or self.is_dma == NULL:
            raise MemoryError()
        for k in range(self.ntracks * self.ne, n * self.ne):
            self.ring[k] = 0.0
            self.wend[k] = 0.0
            self.wchunk[k] = 0.0
        for k in range(self.ntracks, n):
            self.is_dma[k] = 0
            self.free_at[k] = 0.0
            self.done_at[k] = 0.0
            self.busy[k] = 0.0
            self.has_free[k] = 0
            self.has_busy[k] = 0
        self.ntracks = n

    def ensure_sems(self, Py_ssize_t n):
        while len(self.sems) < n:
            self.sems.append(None)

    def ensure_ports(self, Py_ssize_t n):
        while len(self.ports) < n:
            self.ports.append(Resource())

    def busy_of(self, int track):
        """(busy seconds, True) for a track that ran something, else (0.0, False)."""
        return self.busy[track], bool(self.has_busy[track])

    def free_of(self, int track):
        return self.free_at[track]

    def kind_counts(self):
        return [self.kind_count[k] for k in range(NKINDS)]

    def dma_engine_busy(self):
        """Engine-seconds the DMA engines spent on transfers (all engines together)."""
        cdef Resource e
        cdef double b = 0.0
        for e in self.dma_engines:
            b += e.busy
        return b

    cdef long long _wait_value(self, Rec r, int i, dict env) except? -987654321:
        ce = r.wcomp[i]
        if ce is None:
            return r.wconst[i]
        if ce is False:
            r.wevals[i] += 1
            if r.wevals[i] == COMPILE_AFTER:           # evaluated repeatedly (in a loop): compile it
                c = compile_env_expr(r.waits[i][2])
                if c is not None:
                    r.wcomp[i] = c
            return r.waits[i][2].eval(env)
        return eval_env(<CompiledExpr>ce, env)

    cdef double _issue(self, Rec r, dict env) except -2.0:
        """Issue time, or -1 with self.blocked set when a wait cannot be met yet."""
        cdef double t = self.free_at[r.eng]
        cdef double at
        cdef long long v
        cdef Sem s
        cdef tuple w
        cdef int i, sid
        cdef long long vals[MAXV]
        cdef int loaded = 0          # the variables: 0 not read yet, 1 read, -1 one has no value
        cdef int k, nv = r.nvars
        cdef unsigned long long acc
        if r.nw >= 0:
            for i in range(r.nw):
                if r.wtyped[i]:
                    if loaded == 0:
                        loaded = 1
                        for k in range(nv):
                            o = env.get(r.vnames[k])
                            if o is None:
                                loaded = -1
                                break
                            vals[k] = o
                    if loaded == 1:
                        acc = <unsigned long long>r.wconst[i]      # int64 arithmetic, wrapping as compiled exprs do
                        for k in range(nv):
                            acc += <unsigned long long>r.wcoef[i * nv + k] * <unsigned long long>vals[k]
                        v = <long long>acc
                    else:
                        v = r.waits[i][2].eval(env)     # pelican's error (or the value, if this wait lacks the variable)
                else:
                    v = self._wait_value(r, i, env)
                sid = r.wsem[i]
                s = self.sems[sid]
                if v <= 0:
                    continue
                if s is None:
                    self.blocked = (sid, v, 0)
                    return -1.0
                at = s.reaching(v)
                if at < 0:
                    self.blocked = (sid, v, s.value)
                    return -1.0
                if at > t:
                    t = at
            return t
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
        """Completion time if issued now (no memory dependences, engines unshared), or -1 when a wait
        is not met."""
        cdef double t = self._issue(r, env)
        if t < 0:
            return -1.0
        if r.on_engine:
            return t + r.busy_s + r.latency_s
        t += r.latency_s
        if self.free_at[r.track] > t:
            t = self.free_at[r.track]
        return t + r.busy_s

    cdef double _ports_fit(self, Rec r, double t):
        cdef double s = t, s2
        cdef Resource p
        cdef int rounds, changed
        if not r.ports:
            return t
        for rounds in range(8):
            changed = 0
            for k in r.ports:
                p = self.ports[k]
                s2 = p.fit(s, r.busy_s)
                if s2 > s:
                    s = s2
                    changed = 1
            if not changed:
                break
        return s

    cdef double _serve(self, int k, int tr, double s0, double d, double c, double* start):
        """Book D engine-seconds of queue TR's work on DMA engine K, from S0 on, in chunks of C
        engine-seconds (<= 0: one chunk); the time it is done (*START: when it starts).

        The engine's first gap of length D at or after S0 is F (what it has booked so far, in program
        order). F <= S0: the engine is free, done at S0 + D. Else what is in the way is other queues'
        work, and the engine serves the queues round-robin by chunks ([DMA]): the transfer waits, for
        each other queue i with booked work left there (rem_i = its end there - S0 > 0, chunk c_i),
        min(rem_i, n * c_i) with n = ceil(D / C) its own chunks (c_i: the largest chunk of that queue's
        work booked there without a gap; rem_i when the work is not interleaved), so it
        is done at min(F + D, S0 + D + those waits). The engine time it takes is booked at F (the
        engine's total work grows by D: later bookings see it), and each other queue's booked work
        there ends later by what the transfer was served before that work ended (D when the transfer
        ends first, else its chunks in the rounds queue i still had, floor(rem_i / c_i) * C), so the
        queue's later transfers there start after it. End times already handed out are not revised
        (one pass in program order): the queue's next transfer carries the delay."""
        cdef Resource e = self.dma_engines[k]
        cdef double f = e.fit(s0, d), fin, pen = 0.0, rem, ci, nch, give, lim
        cdef int j, i, ne = self.ne
        if not self.is_dma[tr]:
            self.is_dma[tr] = 1
            self.dtracks[self.ndt] = tr
            self.ndt += 1
        e.book(f, d)
        if f + d > self.end:    # an engine ends its booked work at the same time in any service order
            self.end = f + d    # (work-conserving): the core is not done before that, though end times
                                # handed out for overtaken transfers are not revised
        if c <= 0 or c > d:
            c = d
        if not self.round_robin or f <= s0 * (1 + 1e-12) or d <= 0:
            fin = f + d
            start[0] = f
        else:
            nch = <double>(<long long>(d / c * (1 - 1e-12)) + 1)     # ceil(d / c)
            lim = f - s0
            for j in range(self.ndt):
                i = self.dtracks[j]
                if i == tr:
                    continue
                rem = self.wend[i * ne + k] - s0
                if rem <= 0:
                    continue
                ci = self.wchunk[i * ne + k]
                if ci <= 0 or rem <= nch * ci:
                    pen += rem
                else:
                    pen += nch * ci
                if pen >= lim * (1 - 1e-9):
                    break
            if pen >= lim * (1 - 1e-9):      # no earlier than first come first served: that order
                fin = f + d
                start[0] = f
            else:
                fin = s0 + d + pen
                start[0] = s0
                for j in range(self.ndt):      # the service it took from the queues it overtook
                    i = self.dtracks[j]
                    if i == tr:
                        continue
                    rem = self.wend[i * ne + k] - s0
                    if rem <= 0:
                        continue
                    ci = self.wchunk[i * ne + k]
                    if ci <= 0:
                        continue
                    if rem > nch * ci:
                        give = d
                    else:
                        give = (<double>(<long long>(rem / ci * (1 + 1e-12)))) * c
                        if give > d:
                            give = d
                    self.wend[i * ne + k] += give
                    if self.ring[i * ne + k] < self.wend[i * ne + k]:
                        self.ring[i * ne + k] = self.wend[i * ne + k]
        if s0 > self.wend[tr * ne + k] * (1 + 1e-12) or self.wchunk[tr * ne + k] < c:
            self.wchunk[tr * ne + k] = c         # the largest chunk of the queue's work without a gap
        self.wend[tr * ne + k] = fin
        return fin

    cdef tuple _dma(self, Rec r, double ready, int tr):
        """Book a transfer of queue track TR, triggered so that it may start at READY, on its engines:
        the fixed ones (``first_engine``, each for its share of engine_s) or the r.width engines that can
        start their piece earliest (ties: lowest index). On each engine it starts no earlier than the
        queue's earlier work there (in order per engine) and shares the engine with the other queues
        round-robin (``_serve``); it is done when every engine of the core has passed it in the queue
        (each writes its completion semaphore update, [DMA]). (start, end)."""
        cdef int ne = self.ne, w = r.width, i, j, k, best
        cdef double* ring = &self.ring[tr * self.ne]
        cdef double piece = r.busy_s, d, s0, st
        cdef double fits[MAXE]
        cdef unsigned char used[MAXE]
        cdef double start = -1.0, end = ready, f
        cdef Resource e
        for i in range(ne):
            used[i] = 0
        if r.engine_s > 0 and r.first_engine >= 0:
            if w > ne:
                w = ne
            for j in range(w):
                k = (r.first_engine + j) % ne
                d = r.engine_s * r.shares[j]
                if d <= 0:
                    continue
                s0 = ring[k] if ring[k] > ready else ready
                ring[k] = self._serve(k, tr, s0, d, r.chunk_s, &st)
                used[k] = 1
                if start < 0 or st < start:
                    start = st
        elif piece > 0:
            if w < 1:
                w = 1
            if w > ne:
                w = ne
            for i in range(ne):
                e = self.dma_engines[i]
                fits[i] = e.fit(ring[i] if ring[i] > ready else ready, piece)
            for j in range(w):
                best = -1
                for i in range(ne):
                    if not used[i] and (best < 0 or fits[i] < fits[best]):
                        best = i
                used[best] = 1
                s0 = ring[best] if ring[best] > ready else ready
                ring[best] = self._serve(best, tr, s0, piece, r.chunk_s, &st)
                if start < 0 or st < start:
                    start = st
        if start < 0:
            start = ready
        for i in range(ne):
            if not used[i] and ring[i] < ready:
                ring[i] = ready             # an idle engine's semaphore update, at once
            if ring[i] > end:
                end = ring[i]
        return (start, end)

    cpdef tuple step(self, Rec r, dict env, list regions):
        """One execution; REGIONS = [(key, r0, r1, b0, b1, is_write)]; (start, end), or None with
        self.blocked set (deadlock). Sets self.raced."""
        cdef Region stack[MAXREG]
        cdef Region* regs = stack
        if len(regions) <= MAXREG:
            return self._step(r, env, regs, self.acc.regions_from_list(regions, regs))
        regs = <Region*>malloc(len(regions) * sizeof(Region))
        if regs == NULL:
            raise MemoryError()
        try:
            return self._step(r, env, regs, self.acc.regions_from_list(regions, regs))
        finally:
            free(regs)

    cpdef tuple step_infos(self, Rec r, dict env, list infos):
        """step() with the operands' regions taken from INFOS = [(APInfo, is_write)] for ENV
        (``regions_of``) without building tuples."""
        cdef Region regs[MAXREG]
        cdef int i = 0
        cdef tuple iw
        if len(infos) > MAXREG:
            return self.step(r, env, regions_of(infos, env))
        for iw in infos:
            (<APInfo>iw[0]).fill_region(env, iw[1], &regs[i], self.acc)
            i += 1
        return self._step(r, env, regs, i)

    cdef tuple _step(self, Rec r, dict env, Region* regs, int nreg):
        cdef double t, dep = 0.0, start, end, vis, qs, ready
        cdef int tr = r.track
        cdef Sem s
        cdef Resource p
        cdef tuple sg, se
        self.raced = False
        if r.waits:
            t = self._issue(r, env)
            if t < 0:
                return None
        else:
            t = self.free_at[r.eng]
        if nreg:
            dep = self.acc.conflict_regs(tr, regs, nreg, t)
            if self.sync_deps and dep > t:
                t = dep
            if self.acc.same_dep > t:       # the engine (or queue) interlocks on its own results
                t = self.acc.same_dep
        if r.on_engine:
            start = self._ports_fit(r, t)
            end = start + r.busy_s
            vis = end + r.latency_s
            if vis < self.done_at[tr]:      # results (and semaphore increments) come out in order
                vis = self.done_at[tr]
            self.done_at[tr] = vis
            for k in r.ports:
                p = self.ports[k]
                p.book(start, r.busy_s)
            self.free_at[tr] = end
            self.has_free[tr] = 1
            qs = start
        else:
            qs = self.free_at[tr]
            if t > qs:
                qs = t
            ready = t + r.latency_s          # fixed latency from issue, overlapping earlier transfers
            if r.kind != 1 and ready < qs:
                ready = qs                   # not a DMA (a collective on "CC"): its track runs one at a time
            se = self._dma(r, ready, tr)     # in order per engine within the queue
            start = se[0]
            end = se[1]
            vis = end
            self.free_at[tr] = end
            self.has_free[tr] = 1
            # the trigger is an instruction of the issuing engine's in-order stream: what follows it
            # on that engine issues no earlier than it did (after its waits were met)
            if not self.has_free[r.eng] or self.free_at[r.eng] < t:
                self.free_at[r.eng] = t
                self.has_free[r.eng] = 1
            self.dma_bytes += r.nbytes
        if dep > qs * (1 + 1e-12) + 1e-15 and not self.sync_deps:
            self.raced = True
            self.race_dep = dep
            self.race_who = self.acc.last_conflict_id
        if nreg:
            self.acc.record_regs(tr, regs, nreg, vis, r.iid)
        self.busy[tr] += end - start
        self.has_busy[tr] = 1
        if 0 <= r.kind < NKINDS:
            self.kind_count[r.kind] += 1
        for sg in r.signals:
            s = self.sems[sg[0]]
            if s is None:
                s = Sem()
                self.sems[sg[0]] = s
            s.add(vis, sg[1])
        if vis > self.end:
            self.end = vis
        self.count += 1
        return (start, end)
