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

from libc.stdlib cimport malloc, free


cdef class _Ring:
    # attributes in _tracker.pxd
    pass


cdef class AccessTracker:
    # attributes and signatures are declared in _tracker.pxd (the timeline core and the
    # access-pattern infos cimport it)

    def __init__(self):
        self.rings = {}
        self.last_conflict_id = -1
        self.same_dep = 0.0

    cdef _Ring ring_for(self, object key):
        cdef _Ring rg = self.rings.get(key)
        if rg is None:
            rg = _Ring()
            rg.n = 0
            rg.head = 0
            rg.maxend = 0.0
            self.rings[key] = rg
        return rg

    cdef int regions_from_list(self, list regions, Region* out) except -1:
        """[(key, r0, r1, b0, b1, is_write)] as Region structs (OUT holds len(regions))."""
        cdef int i = 0
        cdef _Ring rg
        for reg in regions:
            rg = self.ring_for(reg[0])
            out[i].ring = <void*>rg
            out[i].r0 = reg[1]
            out[i].r1 = reg[2]
            out[i].b0 = reg[3]
            out[i].b1 = reg[4]
            out[i].write = 1 if reg[5] else 0
            i += 1
        return i

    cdef double conflict_regs(self, int track, Region* regs, int n, double floor):
        """The latest end of another track's overlapping access (one side writing); sets
        last_conflict_id, and same_dep for the asking track's own accesses. Accesses that end
        at or before FLOOR are not looked at (the timeline passes the issue time, which they
        cannot delay): the result is then max(FLOOR, that end), same_dep likewise."""
        cdef double dep = floor
        cdef double same = floor
        cdef double e
        cdef _Ring rg
        cdef long long r0, r1, b0, b1
        cdef bint w
        cdef int k, i, blk, k1
        self.last_conflict_id = -1
        for i in range(n):
            rg = <_Ring>regs[i].ring
            if rg.maxend <= floor:
                continue
            r0 = regs[i].r0
            r1 = regs[i].r1
            b0 = regs[i].b0
            b1 = regs[i].b1
            w = regs[i].write
            for blk in range((rg.n + 7) >> 3):
                if rg.bmax[blk] <= floor:
                    continue            # no entry of the block can be looked at (same order as one scan)
                k1 = (blk << 3) + 8
                if k1 > rg.n:
                    k1 = rg.n
                for k in range(blk << 3, k1):
                    e = rg.end[k]
                    if e <= floor or not (w or rg.write[k]):
                        continue
                    if rg.track[k] == track:
                        if e > same and r0 < rg.r1[k] and rg.r0[k] < r1 and b0 < rg.b1[k] and rg.b0[k] < b1:
                            same = e
                        continue
                    if e <= dep:
                        continue
                    if r0 < rg.r1[k] and rg.r0[k] < r1 and b0 < rg.b1[k] and rg.b0[k] < b1:
                        dep = e
                        self.last_conflict_id = rg.iid[k]
        self.same_dep = same
        return dep

    cdef void record_regs(self, int track, Region* regs, int n, double end, long long iid):
        cdef _Ring rg
        cdef int h, i, blk, k
        cdef double bm
        for i in range(n):
            rg = <_Ring>regs[i].ring
            h = rg.head
            rg.r0[h] = regs[i].r0
            rg.r1[h] = regs[i].r1
            rg.b0[h] = regs[i].b0
            rg.b1[h] = regs[i].b1
            rg.write[h] = regs[i].write
            rg.end[h] = end
            rg.track[h] = track
            rg.iid[h] = iid
            if end > rg.maxend:
                rg.maxend = end
            rg.head = (h + 1) % RING
            if rg.n < RING:
                rg.n += 1
            blk = h >> 3
            bm = rg.end[blk << 3]
            for k in range((blk << 3) + 1, min((blk << 3) + 8, rg.n)):
                if rg.end[k] > bm:
                    bm = rg.end[k]
            rg.bmax[blk] = bm

    cpdef double conflict_time(self, int track, list regions, double floor=0.0):
        """regions: [(key, r0, r1, b0, b1, is_write)]; sets last_conflict_id (conflict_regs from FLOOR)."""
        cdef double dep
        cdef Region* regs = <Region*>malloc(max(1, len(regions)) * sizeof(Region))
        if regs == NULL:
            raise MemoryError()
        try:
            dep = self.conflict_regs(track, regs, self.regions_from_list(regions, regs), floor)
        finally:
            free(regs)
        return dep

    cpdef record(self, int track, list regions, double end, long long iid):
        cdef Region* regs = <Region*>malloc(max(1, len(regions)) * sizeof(Region))
        if regs == NULL:
            raise MemoryError()
        try:
            self.record_regs(track, regs, self.regions_from_list(regions, regs), end, iid)
        finally:
            free(regs)
