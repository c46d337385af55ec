# cython: language_level=3
# Typed kernels of the BIR simulator: strided gathers/scatters with dtype
# conversion over flat byte storage. Addressing: an element's byte address is
# base + sum_k i_k * strides[k] for i_k < nums[k], k = 0..5 (outermost first);
# callers pad to exactly 6 dims.
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t

cdef enum:
    NDIM = 6


# The one strided walk: the rows (innermost-dimension runs) of an access pattern in
# row-major order. rows_next advances to the next row and sets r.off to its byte
# offset (base + sum_k i_k * strides[k], k < 5); a kernel then handles the run of
# nums[5] elements at strides[5] from there. Usage:
#     rows_init(&r, base, strides, nums)
#     while rows_next(&r): run(p0 + r.off, strides[5], nums[5], ...)
cdef struct Rows:
    Py_ssize_t off                  # byte offset of the current row
    Py_ssize_t left                 # rows not yet visited
    bint started
    Py_ssize_t idx[5]
    const Py_ssize_t* strides
    const Py_ssize_t* nums


cdef inline void rows_init(Rows* r, Py_ssize_t base, const Py_ssize_t* strides, const Py_ssize_t* nums) noexcept nogil:
    cdef int k
    r.off = base
    r.left = 1 if nums[NDIM - 1] > 0 else 0
    for k in range(NDIM - 1):
        r.idx[k] = 0
        r.left *= nums[k]
    r.started = False
    r.strides = strides
    r.nums = nums


cdef inline bint rows_next(Rows* r) noexcept nogil:
    cdef int k
    if r.left <= 0:
        return False
    r.left -= 1
    if not r.started:
        r.started = True
        return True
    k = NDIM - 2
    while True:             # carry into the outer dimensions (left > 0: some dimension has room)
        r.idx[k] += 1
        r.off += r.strides[k]
        if r.idx[k] < r.nums[k]:
            return True
        r.off -= r.strides[k] * r.idx[k]
        r.idx[k] = 0
        k -= 1

# dtype codes (neuronxcc.common.dtypes, the registry's "code" column; checked when birsim imports)
cdef enum:
    C_F32 = 0
    C_BF16 = 1
    C_F16 = 2
    C_F8E4M3 = 3
    C_F8E5M2 = 4
    C_F8E4M3FN = 5
    C_TF32 = 6
    C_I8 = 10
    C_U8 = 11
    C_I16 = 12
    C_U16 = 13
    C_I32 = 14
    C_U32 = 15
    C_BOOL = 16
    C_I64 = 20
    C_U64 = 21
    C_F64 = 22

cdef float decode_f32(int code, const uint8_t* p) noexcept nogil
cdef void encode_f32(int code, float v, uint8_t* p) noexcept nogil
cdef int64_t decode_i64(int code, const uint8_t* p) noexcept nogil
cdef void encode_i64(int code, int64_t v, uint8_t* p) noexcept nogil
# one row (a run of n elements STRIDE bytes apart at p) through fp32, as read_f32_ptr / write_f32_ptr
# handle each row of an access pattern
cdef void read_run_f32(int code, const uint8_t* p, Py_ssize_t stride, Py_ssize_t n, float* out) noexcept nogil
cdef void write_run_f32(int code, const float* src, uint8_t* p, Py_ssize_t stride, Py_ssize_t n) noexcept nogil
cdef void read_f32_ptr(const uint8_t* p0, int code, Py_ssize_t base, const Py_ssize_t* strides,
                       const Py_ssize_t* nums, float* out) noexcept nogil
cdef void write_f32_ptr(const float* src, uint8_t* p0, int code, Py_ssize_t base, const Py_ssize_t* strides,
                        const Py_ssize_t* nums) noexcept nogil
cdef void read_i64_ptr(const uint8_t* p0, int code, Py_ssize_t base, const Py_ssize_t* strides,
                       const Py_ssize_t* nums, int64_t* out) noexcept nogil
cdef void write_i64_ptr(const int64_t* src, uint8_t* p0, int code, Py_ssize_t base, const Py_ssize_t* strides,
                        const Py_ssize_t* nums) noexcept nogil
cdef void mm_small(const float* s, const float* m, float* r, Py_ssize_t K, Py_ssize_t M, Py_ssize_t N) noexcept nogil
