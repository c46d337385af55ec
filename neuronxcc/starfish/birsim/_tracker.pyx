# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Memory-access tracker of birsim's timeline (typed: it runs once per operand
of every simulated instruction).

For each physical storage (keyed by an int) it remembers the last RING
accesses: the row range, the byte range (half-open bounding box), the end
time, the track that made it, whether it wrote, and the instruction id.
``conflict_time`` returns the latest end among remembered accesses by other
tracks that overlap and where at least one side writes, and sets ``same_dep``
to the same for the asking track's own accesses (an engine interlocks on its
own results: the timeline delays a dependent instruction by its producer's
result latency).
"""

cdef class _Ring:
    cdef long long r0[RING]
    cdef long long r1[RING]
    cdef long long b0[RING]
    cdef long long b1[RING]
    cdef double end[RING]
    cdef int track[RING]
    cdef bint write[RING]
    cdef long long iid[RING]
    cdef int n
    cdef int head


cdef class AccessTracker:
    # attributes and cpdef signatures are declared in _tracker.pxd (the timeline core cimports it)

    def __init__(self):
        self.rings = {}
        self.last_conflict_id = -1
        self.same_dep = 0.0

    cpdef double conflict_time(self, int track, list regions):
        """regions: [(key, r0, r1, b0, b1, is_write)]; sets last_conflict_id."""
        cdef double dep = 0.0
        cdef _Ring rg
        cdef long long r0, r1, b0, b1
        cdef bint w
        cdef int k
        self.last_conflict_id = -1
        self.same_dep = 0.0
        for reg in regions:
            rg = self.rings.get(reg[0])
            if rg is None:
                continue
            r0 = reg[1]
            r1 = reg[2]
            b0 = reg[3]
            b1 = reg[4]
            w = reg[5]
            for k in range(rg.n):
                if not (w or rg.write[k]):
                    continue
                if rg.track[k] == track:
                    if rg.end[k] > self.same_dep and r0 < rg.r1[k] and rg.r0[k] < r1 and b0 < rg.b1[k] \
                            and rg.b0[k] < b1:
                        self.same_dep = rg.end[k]
                    continue
                if rg.end[k] <= dep:
                    continue
                if r0 < rg.r1[k] and rg.r0[k] < r1 and b0 < rg.b1[k] and rg.b0[k] < b1:
                    dep = rg.end[k]
                    self.last_conflict_id = rg.iid[k]
        return dep

    cpdef record(self, int track, list regions, double end, long long iid):
        cdef _Ring rg
        cdef int h
        for reg in regions:
            rg = self.rings.get(reg[0])
            if rg is None:
                rg = _Ring()
                rg.n = 0
                rg.head = 0
                self.rings[reg[0]] = rg
            h = rg.head
            rg.r0[h] = reg[1]
            rg.r1[h] = reg[2]
            rg.b0[h] = reg[3]
            rg.b1[h] = reg[4]
            rg.write[h] = reg[5]
            rg.end[h] = end
            rg.track[h] = track
            rg.iid[h] = iid
            rg.head = (h + 1) % RING
            if rg.n < RING:
                rg.n += 1
