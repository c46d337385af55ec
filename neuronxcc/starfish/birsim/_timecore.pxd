# cython: language_level=3
# The per-instruction accounting core of birsim's timeline (see _timecore.pyx); declared
# here so the typed interpreter loop (_interp.pyx) calls Core.step without a Python call.
from neuronxcc.starfish.birsim._tracker cimport AccessTracker, Region

cdef enum:
    RES_CAP = 128     # intervals a Resource remembers; the older half is folded into ``floor`` when full
    NKINDS = 5        # Rec.kind codes: 0 other, 1 dma, 2 matmul, 3 pe_transpose, 4 psum_eviction
    MAXW = 16         # waits of one instruction evaluated in typed form
    MAXV = 16         # distinct variables of one instruction's affine waits
    MAXE = 64         # DMA engines the core models (a target's count is capped here)


cdef class Sem:
    cdef double* times
    cdef long long* incs
    cdef long long* cums
    cdef public Py_ssize_t n
    cdef Py_ssize_t cap
    cdef bint mono                  # no negative increment so far: the running totals never decrease
    cdef int _grow(self) except -1
    cdef int add(self, double t, long long inc) except -1
    cdef double reaching(self, long long v)


cdef class Resource:
    cdef double st[RES_CAP]
    cdef double en[RES_CAP]
    cdef int n
    cdef double floor
    cdef public double busy
    cdef double fit(self, double t, double d)
    cdef void book(self, double s, double d)


cdef class Rec:
    cdef public object instr
    cdef public int eng, track
    cdef public double busy_s, latency_s
    cdef public bint on_engine
    cdef public tuple waits          # ((sem id, value or None, expr), ...)
    cdef public tuple signals        # ((sem id, inc), ...)
    cdef public long long iid
    cdef public object cost
    cdef public tuple ports          # port Resource ids held for busy_s
    cdef public double engine_s      # DMA: engine-seconds
    cdef public int width            # DMA: engines used
    cdef public int kind
    cdef public double nbytes        # DMA: bytes moved
    cdef public int first_engine     # DMA: first engine of a fixed set (-1: the width engines free first)
    cdef double shares[MAXE]         # DMA with first_engine >= 0: engine (first + j)'s fraction of engine_s
    cdef public double chunk_s       # DMA: engine-seconds of one round-robin chunk (<= 0: not interleaved)
    # the waits in typed form (nw < 0: evaluate through ``waits``)
    cdef int nw
    cdef int wsem[MAXW]
    cdef long long wconst[MAXW]      # the value when wcomp[i] is None
    cdef list wcomp                  # per wait: None (constant), False (not compiled yet), a CompiledExpr
    cdef int wevals[MAXW]            # evaluations through pelican so far
    # affine waits (A, or max(0, A): a value <= 0 is met either way) over the instruction's
    # variables VNAMES (interned): wconst[i] + sum_k wcoef[i * nvars + k] * env[vnames[k]]
    cdef unsigned char wtyped[MAXW]
    cdef int nvars
    cdef tuple vnames
    cdef long long* wcoef
    cdef _type_waits(self)


cdef class Core:
    cdef double* free_at
    cdef double* done_at
    cdef double* busy
    cdef unsigned char* has_free
    cdef unsigned char* has_busy
    cdef Py_ssize_t ntracks
    cdef double* ring                # DMA queue rings: ring[track * ne + k] = when engine k has done the queue's work
    cdef int ne                      # DMA engines modelled
    cdef double* wend                # wend[track * ne + k]: when engine k ends the queue's booked work
    cdef double* wchunk              # wchunk[track * ne + k]: engine-seconds of a chunk of that work
    cdef int* dtracks                # the tracks that booked DMA engine time, in first-use order
    cdef int ndt
    cdef unsigned char* is_dma
    cdef public bint round_robin     # queues share each DMA engine round-robin by chunks ([DMA])
    cdef public list sems
    cdef public list ports
    cdef public list dma_engines
    cdef public AccessTracker acc
    cdef public bint sync_deps
    cdef public double end
    cdef public long long count
    cdef long long kind_count[NKINDS]
    cdef public double dma_bytes
    cdef public bint raced
    cdef public double race_dep
    cdef public long long race_who
    cdef public object blocked
    cdef long long _wait_value(self, Rec r, int i, dict env) except? -987654321
    cdef double _issue(self, Rec r, dict env) except -2.0
    cpdef double end_time(self, Rec r, dict env) except -2.0
    cdef double _ports_fit(self, Rec r, double t)
    cdef double _serve(self, int k, int tr, double s0, double d, double c, double* start)
    cdef tuple _dma(self, Rec r, double ready, int tr)
    cdef tuple _step(self, Rec r, dict env, Region* regs, int nreg)
    cpdef tuple step(self, Rec r, dict env, list regions)
    cpdef tuple step_infos(self, Rec r, dict env, list infos)
