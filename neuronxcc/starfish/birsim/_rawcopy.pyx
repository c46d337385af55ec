# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""birsim's bit-exact copies of access patterns' elements (no dtype conversion; the converting
kernels are ``_kernels``): gather into / scatter from a contiguous buffer, and a direct copy
from one access pattern into another (``copy_raw_ptr``, declared in _rawcopy.pxd for the plans).
Addressing and the row walk (Rows) as in _kernels.pxd. No Python objects in the loops.

Invariant: callers (birsim.state, the plans) have bounds-checked every address; the kernels trust them.
"""
from libc.stdint cimport uint8_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

from neuronxcc.starfish.birsim._kernels cimport NDIM, Rows, rows_init, rows_next


# -- direct copies between two access patterns ------------------------------

cdef inline void _extent(Py_ssize_t base, const Py_ssize_t* strides, const Py_ssize_t* nums, Py_ssize_t itemsize,
                         Py_ssize_t* lo, Py_ssize_t* hi) noexcept nogil:
    cdef Py_ssize_t k, d
    lo[0] = base
    hi[0] = base + itemsize
    for k in range(NDIM):
        d = strides[k] * (nums[k] - 1)
        if d < 0:
            lo[0] += d
        else:
            hi[0] += d


cdef inline void _copy_elems(uint8_t* d, Py_ssize_t ds, const uint8_t* s, Py_ssize_t ss, Py_ssize_t n,
                             Py_ssize_t isz) noexcept nogil:
    """n elements of isz bytes, strided on both sides (constant-size copies for the usual sizes)."""
    cdef Py_ssize_t k
    if ss == isz and ds == isz:
        memcpy(d, s, n * isz)
    elif isz == 4:
        for k in range(n):
            memcpy(d + k * ds, s + k * ss, 4)
    elif isz == 2:
        for k in range(n):
            memcpy(d + k * ds, s + k * ss, 2)
    elif isz == 1:
        for k in range(n):
            d[k * ds] = s[k * ss]
    else:
        for k in range(n):
            memcpy(d + k * ds, s + k * ss, isz)


cdef inline Py_ssize_t _count_p(const Py_ssize_t* nums) noexcept nogil:
    cdef Py_ssize_t n = 1, k
    for k in range(NDIM):
        n *= nums[k]
    return n


cdef enum:
    TBLOCK = 32
    SMALL_COPY = 4096   # bytes of an overlapping copy's temporary kept on the stack


cdef inline Py_ssize_t _absz(Py_ssize_t x) noexcept nogil:
    return -x if x < 0 else x


cdef bint _blocked_2d(const uint8_t* sp, Py_ssize_t sbase, const Py_ssize_t* sstrides, const Py_ssize_t* snums,
                      uint8_t* dp, Py_ssize_t dbase, const Py_ssize_t* dstrides, const Py_ssize_t* dnums,
                      Py_ssize_t isz) noexcept nogil:
    """A transposing copy (same 2-D counts on both sides, one side not unit-stride inside)
    in cache-sized blocks. Only when no two destination elements share an address, so
    the order of the writes cannot matter. False when the case does not apply."""
    cdef Py_ssize_t k, A, B, i0, j0, i1, j1, i, j
    cdef Py_ssize_t sa, sb, da, db
    for k in range(4):
        if snums[k] != 1 or dnums[k] != 1:
            return False
    A = snums[4]
    B = snums[5]
    if dnums[4] != A or dnums[5] != B or A < TBLOCK or B < TBLOCK:
        return False
    sa, sb, da, db = sstrides[4], sstrides[5], dstrides[4], dstrides[5]
    if sb == isz and db == isz:
        return False
    if not (_absz(da) >= _absz(db) * (B - 1) + isz or _absz(db) >= _absz(da) * (A - 1) + isz):
        return False
    i0 = 0
    while i0 < A:
        i1 = i0 + TBLOCK if i0 + TBLOCK < A else A
        j0 = 0
        while j0 < B:
            j1 = j0 + TBLOCK if j0 + TBLOCK < B else B
            if _absz(da) < _absz(db):      # the destination is denser along A: walk A innermost
                for j in range(j0, j1):
                    _copy_elems(dp + dbase + i0 * da + j * db, da, sp + sbase + i0 * sa + j * sb, sa, i1 - i0, isz)
            else:
                for i in range(i0, i1):
                    _copy_elems(dp + dbase + i * da + j0 * db, db, sp + sbase + i * sa + j0 * sb, sb, j1 - j0, isz)
            j0 = j1
        i0 = i1
    return True


cdef void _walk_copy(const uint8_t* sp, Py_ssize_t sbase, const Py_ssize_t* sstrides, const Py_ssize_t* snums,
                     uint8_t* dp, Py_ssize_t dbase, const Py_ssize_t* dstrides, const Py_ssize_t* dnums,
                     Py_ssize_t itemsize, Py_ssize_t n) noexcept nogil:
    if _blocked_2d(sp, sbase, sstrides, snums, dp, dbase, dstrides, dnums, itemsize):
        return
    cdef Rows s, d
    cdef Py_ssize_t spos = 0, dpos = 0, run, j = 0
    cdef Py_ssize_t sn5 = snums[5], dn5 = dnums[5], ss5 = sstrides[5], ds5 = dstrides[5]
    rows_init(&s, sbase, sstrides, snums)
    rows_init(&d, dbase, dstrides, dnums)
    if not rows_next(&s) or not rows_next(&d):
        return
    while j < n:
        # the longest run both sides can take without leaving their current row
        run = sn5 - spos if sn5 - spos < dn5 - dpos else dn5 - dpos
        _copy_elems(dp + d.off + dpos * ds5, ds5, sp + s.off + spos * ss5, ss5, run, itemsize)
        j += run
        spos += run
        dpos += run
        if spos == sn5 and j < n:
            rows_next(&s)
            spos = 0
        if dpos == dn5 and j < n:
            rows_next(&d)
            dpos = 0


cdef int copy_raw_ptr(const uint8_t* sp, Py_ssize_t sbase, const Py_ssize_t* sstrides, const Py_ssize_t* snums,
                      uint8_t* dp, Py_ssize_t dbase, const Py_ssize_t* dstrides, const Py_ssize_t* dnums,
                      Py_ssize_t itemsize) noexcept nogil:
    """Bit-exact copy of the source AP's elements into the destination AP, paired in
    row-major order (equal element counts: the caller checks). Equivalent to a gather
    then a scatter: when the two byte ranges may overlap in the same storage the source
    goes through a temporary first. Returns -1 when that temporary cannot be allocated."""
    cdef Py_ssize_t n = _count_p(snums)
    cdef Py_ssize_t slo, shi, dlo, dhi
    cdef Py_ssize_t cstr[NDIM]
    cdef uint8_t* tmp
    cdef uint8_t stackbuf[SMALL_COPY]
    cdef int k
    if n == 0:
        return 0
    _extent(sbase, sstrides, snums, itemsize, &slo, &shi)
    _extent(dbase, dstrides, dnums, itemsize, &dlo, &dhi)
    if <const void*>sp == <const void*>dp and slo < dhi and dlo < shi:
        # small copies use the stack (a malloc/free pair costs more than copying them)
        if n * itemsize <= SMALL_COPY:
            tmp = &stackbuf[0]
        else:
            tmp = <uint8_t*>malloc(n * itemsize)
        if tmp == NULL:
            return -1
        # the temporary, addressed with the source's counts, row-major contiguous
        cstr[5] = itemsize
        for k in range(4, -1, -1):
            cstr[k] = cstr[k + 1] * snums[k + 1]
        _walk_copy(sp, sbase, sstrides, snums, tmp, 0, cstr, snums, itemsize, n)
        _walk_copy(tmp, 0, cstr, snums, dp, dbase, dstrides, dnums, itemsize, n)
        if tmp != &stackbuf[0]:
            free(tmp)
        return 0
    _walk_copy(sp, sbase, sstrides, snums, dp, dbase, dstrides, dnums, itemsize, n)
    return 0


def copy_raw(const uint8_t[::1] sbuf, Py_ssize_t sbase, const Py_ssize_t[::1] sstrides, const Py_ssize_t[::1] snums,
             uint8_t[::1] dbuf, Py_ssize_t dbase, const Py_ssize_t[::1] dstrides, const Py_ssize_t[::1] dnums,
             Py_ssize_t itemsize):
    """copy_raw_ptr on buffers (see there)."""
    cdef int r
    with nogil:
        r = copy_raw_ptr(&sbuf[0], sbase, &sstrides[0], &snums[0], &dbuf[0], dbase, &dstrides[0], &dnums[0], itemsize)
    if r < 0:
        raise MemoryError()


def gather_raw(const uint8_t[::1] buf, Py_ssize_t itemsize, Py_ssize_t base, const Py_ssize_t[::1] strides,
               const Py_ssize_t[::1] nums, uint8_t[::1] out):
    """Bit-exact gather of the AP's elements into out (itemsize bytes each)."""
    cdef Rows r
    cdef uint8_t* o = &out[0] if out.shape[0] else NULL
    cdef Py_ssize_t j = 0, n5 = nums[5], s5 = strides[5]
    with nogil:
        rows_init(&r, base, &strides[0], &nums[0])
        while rows_next(&r):
            _copy_elems(o + j, itemsize, &buf[0] + r.off, s5, n5, itemsize)
            j += n5 * itemsize


def scatter_raw(const uint8_t[::1] src, uint8_t[::1] buf, Py_ssize_t itemsize, Py_ssize_t base,
                const Py_ssize_t[::1] strides, const Py_ssize_t[::1] nums):
    """Bit-exact scatter of src (itemsize bytes per element) into the AP."""
    cdef Rows r
    cdef const uint8_t* q = &src[0] if src.shape[0] else NULL
    cdef Py_ssize_t j = 0, n5 = nums[5], s5 = strides[5]
    with nogil:
        rows_init(&r, base, &strides[0], &nums[0])
        while rows_next(&r):
            _copy_elems(&buf[0] + r.off, s5, q + j, itemsize, n5, itemsize)
            j += n5 * itemsize
