# Integer helpers shared by the pelican modules (inline, C-level):
# floor division and modulo by a positive int64 with Python semantics, checked
# int64 add/mul (OverflowError instead of wrapping), gcd, and hash mixing.
# fdiv/fmod are written in C so that no Cython division directive can change
# their meaning.
cimport cython
from libc.stdint cimport int64_t, uint64_t

cdef extern from *:
    """
    static inline int64_t pel_fdiv(int64_t a, int64_t k) {  /* floor(a / k), k > 0 */
        int64_t q = a / k;
        return (a % k < 0) ? q - 1 : q;
    }
    static inline int64_t pel_fmod(int64_t a, int64_t k) {  /* a - k*floor(a / k), k > 0 */
        int64_t r = a % k;
        return (r < 0) ? r + k : r;
    }
    static inline int pel_add_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_add_overflow(a, b, r); }
    static inline int pel_mul_ovf(int64_t a, int64_t b, int64_t *r) { return __builtin_mul_overflow(a, b, r); }
    """
    int64_t fdiv "pel_fdiv"(int64_t a, int64_t k) noexcept nogil
    int64_t fmod "pel_fmod"(int64_t a, int64_t k) noexcept nogil
    bint pel_add_ovf(int64_t a, int64_t b, int64_t *r) noexcept nogil
    bint pel_mul_ovf(int64_t a, int64_t b, int64_t *r) noexcept nogil


cdef inline int64_t ck_add(int64_t a, int64_t b) except? -1:
    cdef int64_t r
    if pel_add_ovf(a, b, &r):
        raise OverflowError("pelican: int64 overflow in %d + %d" % (a, b))
    return r


cdef inline int64_t ck_mul(int64_t a, int64_t b) except? -1:
    cdef int64_t r
    if pel_mul_ovf(a, b, &r):
        raise OverflowError("pelican: int64 overflow in %d * %d" % (a, b))
    return r


@cython.cdivision(True)
cdef inline int64_t gcd64(int64_t a, int64_t b) noexcept nogil:
    cdef int64_t t
    if a < 0:
        a = -a
    if b < 0:
        b = -b
    while b:
        t = a % b
        a = b
        b = t
    return a


cdef inline Py_hash_t h_fix(uint64_t h) noexcept:
    # a Python hash is never -1
    cdef Py_hash_t r = <Py_hash_t>h
    return -2 if r == -1 else r


cdef inline uint64_t h_mix(uint64_t h, uint64_t x) noexcept:
    h ^= x + <uint64_t>0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2)
    return h * <uint64_t>0x100000001B3ULL
