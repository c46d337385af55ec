# cython: language_level=3
# birsim's PE matmul kernel (see _pe.pyx): r[i, j] (+)= sum over k in order of s[k, i] * m[k, j],
# unfused fp32; rows of unit-stride fp32 with row strides ss, ms, rs (in floats); WORK holds K * 32 floats.
cdef void mm_f32(const float* s, Py_ssize_t ss, const float* m, Py_ssize_t ms, float* r, Py_ssize_t rs,
                 Py_ssize_t K, Py_ssize_t M, Py_ssize_t N, bint acc, float* work) noexcept nogil
