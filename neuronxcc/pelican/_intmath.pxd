# Floor division and modulo by a positive int64 (Python semantics), shared
# by the expression core and the compiled evaluator. Written in C so that
# no Cython division directive can change their meaning.
from libc.stdint cimport int64_t

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
    """
    int64_t fdiv "pel_fdiv"(int64_t a, int64_t k) noexcept nogil
    int64_t fmod "pel_fmod"(int64_t a, int64_t k) noexcept nogil
