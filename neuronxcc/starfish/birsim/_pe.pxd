# cython: language_level=3
from libc.stdint cimport uint8_t

# birsim's PE matmul kernel (see _pe.pyx): r[i, j] (+)= sum over k in order of s[k, i] * m[k, j],
# unfused fp32; rows of unit-stride fp32 with row strides ss, ms, rs (in floats); WORK holds K * 32 floats.
cdef void mm_f32(const float* s, Py_ssize_t ss, const float* m, Py_ssize_t ms, float* r, Py_ssize_t rs,
                 Py_ssize_t K, Py_ssize_t M, Py_ssize_t N, bint acc, float* work) noexcept nogil
# PE transpose of 4-byte elements, bits unchanged: d[j * da + i] = s[i * sa + j] for i < A, j < B (da, sa:
# byte strides between rows; elements contiguous within a row)
cdef void transpose_b32(const uint8_t* s, Py_ssize_t sa, uint8_t* d, Py_ssize_t da, Py_ssize_t A,
                        Py_ssize_t B) noexcept nogil
