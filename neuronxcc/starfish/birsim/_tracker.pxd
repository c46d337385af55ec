# cython: language_level=3
# Memory-access tracker of birsim's timeline (see _tracker.pyx).

cdef enum:
    RING = 64
    RING_BLOCKS = 8   # RING / 8: blocks of 8 entries
    MAXREG = 16       # operands of one instruction the typed step takes as Region structs


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
    cdef double maxend          # >= every end in the ring (the largest ever recorded)
    cdef double bmax[RING_BLOCKS] # per block of 8 entries: the largest end in it (a block ending early is skipped)


# One operand's access: its storage's ring (borrowed: the tracker keeps every ring alive),
# rows [r0, r1) and bytes [b0, b1), half-open, physical.
cdef struct Region:
    void* ring
    long long r0, r1, b0, b1
    int write


cdef class AccessTracker:
    cdef dict rings
    cdef public long long last_conflict_id
    cdef public double same_dep
    cdef _Ring ring_for(self, object key)
    cdef int regions_from_list(self, list regions, Region* out) except -1
    cdef double conflict_regs(self, int track, Region* regs, int n, double floor)
    cdef void record_regs(self, int track, Region* regs, int n, double end, long long iid)
    cpdef double conflict_time(self, int track, list regions, double floor=*)
    cpdef record(self, int track, list regions, double end, long long iid)
