# The compiled fast-evaluation form of a pelican expression (see _compiled.pyx).
# Cython callers (the BIR simulator) cimport CompiledExpr and call eval_ptr /
# eval_vec without the GIL; the values must hold at least nvars entries.
from libc.stdint cimport int64_t


cdef class CompiledExpr:
    cdef readonly object expr          # the source Expr
    cdef readonly tuple var_order      # variable names, the order of the values
    cdef readonly Py_ssize_t nvars
    cdef readonly bint is_affine       # then value = constant + sum(coeffs * values)
    cdef readonly int64_t constant     # affine constant term (0 when not affine)
    cdef readonly object coeffs        # affine: int64 ndarray (nvars,); else None
    cdef const int64_t* code           # stack program: (op, a, b) triples
    cdef Py_ssize_t ncode              # number of triples
    cdef readonly Py_ssize_t depth     # stack depth the program needs
    cdef const int64_t* aidx           # affine, sparse: value indices of nonzero coefficients
    cdef const int64_t* acoef          # affine, sparse: the coefficients
    cdef Py_ssize_t annz
    cdef object _code, _aidx, _acoef   # ndarrays owning the buffers above

    cdef int64_t eval_ptr(self, const int64_t* values) noexcept nogil
    cdef int64_t eval_vec(self, const int64_t[::1] values) noexcept nogil
    # Batch: out[r] = value at values[r*stride:], r < nrows (column-wise, chunked).
    cdef int eval_rows(self, const int64_t* values, Py_ssize_t nrows, Py_ssize_t stride,
                       int64_t* out) except -1 nogil
