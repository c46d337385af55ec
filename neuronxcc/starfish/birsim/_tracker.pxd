# cython: language_level=3
# Memory-access tracker of birsim's timeline (see _tracker.pyx).

cdef enum:
    RING = 64


cdef class AccessTracker:
    cdef dict rings
    cdef public long long last_conflict_id
    cdef public double same_dep
    cpdef double conflict_time(self, int track, list regions)
    cpdef record(self, int track, list regions, double end, long long iid)
