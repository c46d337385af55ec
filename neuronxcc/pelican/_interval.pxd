# Inclusive int64 intervals for pelican bounds (inline, C-level). A side
# without has_* is unbounded. Arithmetic saturates to "unbounded" on
# overflow, so it never raises; every operation is sound (the result holds
# every value the operation can produce from values in the operands).
from libc.stdint cimport int64_t

from neuronxcc.pelican._intmath cimport fdiv, pel_add_ovf, pel_mul_ovf


cdef struct Bnd:
    int64_t lo
    int64_t hi
    bint has_lo
    bint has_hi


cdef inline Bnd b_make(int64_t lo, int64_t hi, bint has_lo, bint has_hi) noexcept:
    cdef Bnd b
    b.lo = lo
    b.hi = hi
    b.has_lo = has_lo
    b.has_hi = has_hi
    return b


cdef inline Bnd b_unbounded() noexcept:
    return b_make(0, 0, False, False)


cdef inline Bnd b_scale(Bnd a, int64_t c) noexcept:
    cdef Bnd r = b_make(0, 0, True, True)
    if c == 0:
        return r
    if c > 0:
        r.has_lo = a.has_lo and not pel_mul_ovf(a.lo, c, &r.lo)
        r.has_hi = a.has_hi and not pel_mul_ovf(a.hi, c, &r.hi)
    else:
        r.has_lo = a.has_hi and not pel_mul_ovf(a.hi, c, &r.lo)
        r.has_hi = a.has_lo and not pel_mul_ovf(a.lo, c, &r.hi)
    return r


cdef inline Bnd b_add(Bnd a, Bnd b) noexcept:
    cdef Bnd r = b_make(0, 0, False, False)
    r.has_lo = a.has_lo and b.has_lo and not pel_add_ovf(a.lo, b.lo, &r.lo)
    r.has_hi = a.has_hi and b.has_hi and not pel_add_ovf(a.hi, b.hi, &r.hi)
    return r


cdef inline Bnd b_floordiv(Bnd a, int64_t k) noexcept:
    # floor division by k > 0 is monotone
    return b_make(fdiv(a.lo, k), fdiv(a.hi, k), a.has_lo, a.has_hi)


cdef inline Bnd b_mod(Bnd a, int64_t k) noexcept:
    # modulo by k > 0: exact inside one block [m*k, m*k + k - 1], else [0, k-1]
    # (or [0, hi] for a nonnegative a)
    cdef int64_t m
    if a.has_lo and a.has_hi:
        m = fdiv(a.lo, k)
        if m == fdiv(a.hi, k):
            return b_make(a.lo - m * k, a.hi - m * k, True, True)
    if a.has_lo and a.lo >= 0 and a.has_hi and a.hi < k - 1:
        return b_make(0, a.hi, True, True)
    return b_make(0, k - 1, True, True)


cdef inline Bnd b_min(Bnd a, Bnd b) noexcept:
    cdef Bnd r = b_make(0, 0, a.has_lo and b.has_lo, a.has_hi or b.has_hi)
    r.lo = a.lo if a.lo < b.lo else b.lo
    if a.has_hi and b.has_hi:
        r.hi = a.hi if a.hi < b.hi else b.hi
    else:
        r.hi = a.hi if a.has_hi else b.hi
    return r


cdef inline Bnd b_max(Bnd a, Bnd b) noexcept:
    cdef Bnd r = b_make(0, 0, a.has_lo or b.has_lo, a.has_hi and b.has_hi)
    r.hi = a.hi if a.hi > b.hi else b.hi
    if a.has_lo and b.has_lo:
        r.lo = a.lo if a.lo > b.lo else b.lo
    else:
        r.lo = a.lo if a.has_lo else b.lo
    return r


cdef inline Bnd b_meet(Bnd a, Bnd b) noexcept:
    # intersection of two sound intervals for the same quantity
    cdef Bnd r = a
    if b.has_lo and (not r.has_lo or b.lo > r.lo):
        r.lo = b.lo
        r.has_lo = True
    if b.has_hi and (not r.has_hi or b.hi < r.hi):
        r.hi = b.hi
        r.has_hi = True
    return r


cdef inline bint b_le(Bnd a, Bnd b) noexcept:
    # every value of a <= every value of b
    return a.has_hi and b.has_lo and a.hi <= b.lo
