# cython: language_level=3, boundscheck=False, wraparound=False
"""Typed plans of birsim for the small instructions every loop and while trip runs besides its
element work: ``register_load`` (``Executor.op_register_load``) and the same-dtype
``dma_scatter`` (``Executor.op_dma_scatter``), so that neither costs a Python call or a numpy
array per execution.

Semantics: the handlers'. register_load: the source's first element read as int64 (the whole
access bounds-checked), wrapped to int32, clamped to [min, max] when given, stored in the
executor's register file and, when the two differ (the streams order), in its env.
dma_scatter: see ``Scatter``."""
from libc.stdint cimport int64_t, uint8_t, uint64_t
from libc.stdlib cimport free, malloc

from neuronxcc.starfish.birsim._apinfo cimport APInfo
from neuronxcc.starfish.birsim._kernels cimport decode_i64, read_i64_ptr
from neuronxcc.starfish.birsim._rawcopy cimport copy_raw_ptr
from neuronxcc.starfish.birsim._plans cimport Plan, _Operand


cdef class RegisterLoad(Plan):
    """register_load REG <- SRC (``plans._register_load``'s closure, typed)."""
    cdef APInfo src
    cdef object keep                # the source's storage
    cdef const uint8_t* p
    cdef object ex
    cdef object reg
    cdef bint has_lo, has_hi
    cdef int64_t lo, hi

    def __init__(self, ex, APInfo src, reg, lo, hi):
        cdef const uint8_t[::1] v = src.tgt.buf
        if src.n < 1:
            raise ValueError("RegisterLoad needs an element to read")
        self.src = src
        self.keep = src.tgt.buf
        self.p = &v[0]
        self.ex = ex
        self.reg = reg
        self.has_lo = lo is not None
        self.has_hi = hi is not None
        self.lo = lo if lo is not None else 0
        self.hi = hi if hi is not None else 0

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t b = self.src.base(env)          # every element inside the target (the read's check)
        cdef int64_t v = decode_i64(self.src.code, self.p + b)
        v = <int64_t>(<uint64_t>v + (<uint64_t>1 << 31))
        v = <int64_t>(<uint64_t>v & 0xFFFFFFFF) - (<int64_t>1 << 31)       # ((v + 2^31) mod 2^32) - 2^31
        if self.has_lo and v < self.lo:
            v = self.lo
        if self.has_hi and v > self.hi:
            v = self.hi
        ex = self.ex
        val = v
        regs = ex.regs
        regs[self.reg] = val
        e = ex.env
        if e is not regs:
            e[self.reg] = val
        return 0


cdef class Scatter(Plan):
    """Same-dtype dma_scatter without accumulation, indices clamped (``plans._dma_scatter``): partition
    p of the on-chip side is copied to the row at the indexed side's offset + clip(index[p], lo, hi) *
    stride, partitions in order (a later one wins where rows meet). The index is read as int64,
    clipped as np.clip does (min(max(x, lo), hi)), completely before any row moves; each row's
    offset reaches the indexed side's access info as env[ROWVAR] (COPIES[p]: partition p -> the row)."""
    cdef list copies
    cdef _Operand idx
    cdef int64_t lo, hi, stride
    cdef object rowvar
    cdef Py_ssize_t n
    cdef int64_t* vals

    def __cinit__(self):
        self.vals = NULL

    def __dealloc__(self):
        free(self.vals)

    def __init__(self, list copies, APInfo idx, int64_t lo, int64_t hi, int64_t stride, rowvar):
        if idx.n != len(copies):
            raise ValueError("Scatter needs one index per partition")
        for c in copies:
            if not isinstance(c, Plan):
                raise TypeError("Scatter's copies are plans")
        self.copies = copies
        self.idx = _Operand(idx)
        self.lo, self.hi, self.stride = lo, hi, stride
        self.rowvar = rowvar
        self.n = idx.n
        self.vals = <int64_t*>malloc(max(1, self.n) * sizeof(int64_t))
        if self.vals == NULL:
            raise MemoryError()

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t ib = self.idx.info.base(env)
        cdef Py_ssize_t p, n = self.n
        cdef int64_t d
        cdef int64_t* vals = self.vals
        read_i64_ptr(self.idx.p, self.idx.code, ib, self.idx.strides, self.idx.nums, vals)
        for p in range(n):          # read completely before any row moves
            d = vals[p] if vals[p] > self.lo else self.lo
            d = d if d < self.hi else self.hi
            vals[p] = <int64_t>(<uint64_t>d * <uint64_t>self.stride)
        try:
            for p in range(n):
                env[self.rowvar] = vals[p]
                (<Plan>self.copies[p]).run(env)
        finally:
            env.pop(self.rowvar, None)
        return 0
