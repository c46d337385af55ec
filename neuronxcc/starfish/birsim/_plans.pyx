# cython: language_level=3, boundscheck=False, wraparound=False
"""Typed execution plans of birsim for the instructions that only move bytes
(same-dtype dma_copy, tensor_copy on DVE/POOL): the operands' storage
pointers, strides and counts are taken once; each execution resolves the two
base addresses (bounds-checked by ``APInfo.base``) and runs the copy kernel.
Semantics: ``Executor.op_dma_copy`` / ``op_tensor_copy`` (a bit-exact copy,
elements paired in row-major order, overlap-safe)."""
from libc.stdint cimport uint8_t

from neuronxcc.starfish.birsim._apinfo cimport APInfo
from neuronxcc.starfish.birsim._kernels cimport copy_raw_ptr


cdef class RawCopy:
    cdef APInfo src, dst
    cdef object sbuf, dbuf                  # keep the storage alive
    cdef const uint8_t* sp
    cdef uint8_t* dp
    cdef Py_ssize_t sstr[6]
    cdef Py_ssize_t snum[6]
    cdef Py_ssize_t dstr[6]
    cdef Py_ssize_t dnum[6]
    cdef Py_ssize_t isz

    def __init__(self, APInfo src, APInfo dst):
        cdef uint8_t[::1] sv = src.tgt.buf
        cdef uint8_t[::1] dv = dst.tgt.buf
        cdef int k
        if src.n != dst.n or src.itemsize != dst.itemsize:
            raise ValueError("RawCopy needs equal element counts and sizes")
        self.src = src
        self.dst = dst
        self.sbuf = src.tgt.buf
        self.dbuf = dst.tgt.buf
        self.sp = &sv[0]
        self.dp = &dv[0]
        for k in range(6):
            self.sstr[k] = src.strides[k]
            self.snum[k] = src.nums[k]
            self.dstr[k] = dst.strides[k]
            self.dnum[k] = dst.nums[k]
        self.isz = src.itemsize

    def __call__(self, dict env):
        cdef Py_ssize_t sb = self.src.base(env)
        cdef Py_ssize_t db = self.dst.base(env)
        cdef int r
        with nogil:
            r = copy_raw_ptr(self.sp, sb, self.sstr, self.snum, self.dp, db, self.dstr, self.dnum, self.isz)
        if r < 0:
            raise MemoryError()


# -- fp32 element-wise ops: read, compute and write in one typed pass ------------

from libc.stdlib cimport realloc
from neuronxcc.starfish.birsim._kernels cimport read_f32_ptr, write_f32_ptr

# ALU ops whose fp32 result is one IEEE operation, identical to numpy's float32 ufunc
EW_OPS = {"add": 1, "subtract": 2, "rsub": 3, "mult": 4, "divide": 5}


cdef extern from *:
    """
    /* fp32 element-wise loops, one per op so that GCC vectorises them (restrict, O3);
       SIMD add/sub/mul/div round exactly like the scalar operations (IEEE, no FMA). */
    #if defined(__GNUC__) && !defined(__clang__)
    #define NCC_EW_HOT __attribute__((optimize("O3")))
    #else
    #define NCC_EW_HOT
    #endif
    #define NCC_EW_LOOPS(NAME, EXPR) \
    static NCC_EW_HOT void ncc_ew_tt_##NAME(float *__restrict x, const float *__restrict y, Py_ssize_t n) { \
        for (Py_ssize_t i = 0; i < n; i++) { float a = x[i], b = y[i]; x[i] = (EXPR); } } \
    static NCC_EW_HOT void ncc_ew_ts_##NAME(float *__restrict x, float s, Py_ssize_t n) { \
        for (Py_ssize_t i = 0; i < n; i++) { float a = x[i], b = s; x[i] = (EXPR); } } \
    static NCC_EW_HOT void ncc_ew_st_##NAME(float *__restrict x, float s, Py_ssize_t n) { \
        for (Py_ssize_t i = 0; i < n; i++) { float a = s, b = x[i]; x[i] = (EXPR); } }
    NCC_EW_LOOPS(add, a + b)
    NCC_EW_LOOPS(sub, a - b)
    NCC_EW_LOOPS(rsub, b - a)
    NCC_EW_LOOPS(mul, a * b)
    NCC_EW_LOOPS(div, a / b)
    static void ncc_ew_tt(int op, float *x, const float *y, Py_ssize_t n) {
        switch (op) { case 1: ncc_ew_tt_add(x, y, n); break; case 2: ncc_ew_tt_sub(x, y, n); break;
                      case 3: ncc_ew_tt_rsub(x, y, n); break; case 4: ncc_ew_tt_mul(x, y, n); break;
                      default: ncc_ew_tt_div(x, y, n); }
    }
    /* x = op(x, s), or op(s, x) when rev */
    static void ncc_ew_ts(int op, float *x, float s, int rev, Py_ssize_t n) {
        if (rev) {
            switch (op) { case 1: ncc_ew_st_add(x, s, n); break; case 2: ncc_ew_st_sub(x, s, n); break;
                          case 3: ncc_ew_st_rsub(x, s, n); break; case 4: ncc_ew_st_mul(x, s, n); break;
                          default: ncc_ew_st_div(x, s, n); }
        } else {
            switch (op) { case 1: ncc_ew_ts_add(x, s, n); break; case 2: ncc_ew_ts_sub(x, s, n); break;
                          case 3: ncc_ew_ts_rsub(x, s, n); break; case 4: ncc_ew_ts_mul(x, s, n); break;
                          default: ncc_ew_ts_div(x, s, n); }
        }
    }
    """
    void ncc_ew_tt(int op, float* x, const float* y, Py_ssize_t n) noexcept nogil
    void ncc_ew_ts(int op, float* x, float s, int rev, Py_ssize_t n) noexcept nogil


# one scratch area for all plans, grown as needed (used with the GIL held: no two users at once)
cdef float* _scratch = NULL
cdef Py_ssize_t _scratch_n = 0


cdef float* _scratch_for(Py_ssize_t n) except NULL:
    global _scratch, _scratch_n
    cdef float* p
    if n > _scratch_n:
        p = <float*>realloc(_scratch, n * sizeof(float) + 64)
        if p == NULL:
            raise MemoryError()
        _scratch = p
        _scratch_n = n
    return _scratch


cdef class _Operand:
    cdef APInfo info
    cdef object buf
    cdef uint8_t* p
    cdef int code
    cdef Py_ssize_t strides[6]
    cdef Py_ssize_t nums[6]

    def __init__(self, APInfo info):
        cdef uint8_t[::1] v = info.tgt.buf
        cdef int k
        self.info = info
        self.buf = info.tgt.buf
        self.p = &v[0]
        self.code = info.code
        for k in range(6):
            self.strides[k] = info.strides[k]
            self.nums[k] = info.nums[k]


cdef class ElementWise:
    """out = op1(op0(a, s0 | b), s1) in fp32 (tensor_scalar with immediate scalars,
    tensor_tensor, identity activations, converting copies; op 0 = none), elements
    paired row-major, the cast on output as write_f32 does.
    Operands are read completely before the output is written (in-place safe)."""
    cdef _Operand out, a, b
    cdef int op0, op1
    cdef bint rev0, rev1, tensor
    cdef float s0, s1
    cdef Py_ssize_t n

    def __init__(self, APInfo out, APInfo a, APInfo b, int op0, float s0, bint rev0, int op1, float s1, bint rev1):
        self.out = _Operand(out)
        self.a = _Operand(a)
        self.tensor = b is not None
        self.b = _Operand(b) if b is not None else None
        self.op0, self.s0, self.rev0 = op0, s0, rev0
        self.op1, self.s1, self.rev1 = op1, s1, rev1
        self.n = out.n

    def __call__(self, dict env):
        cdef Py_ssize_t ab = self.a.info.base(env)
        cdef Py_ssize_t bb = self.b.info.base(env) if self.tensor else 0
        cdef Py_ssize_t ob = self.out.info.base(env)
        cdef Py_ssize_t n = self.n
        cdef float* x
        cdef float* y
        x = _scratch_for((2 if self.tensor else 1) * n)
        y = x + n
        read_f32_ptr(self.a.p, self.a.code, ab, self.a.strides, self.a.nums, x)
        if self.tensor:
            read_f32_ptr(self.b.p, self.b.code, bb, self.b.strides, self.b.nums, y)
            ncc_ew_tt(self.op0, x, y, n)
        elif self.op0 != 0:
            ncc_ew_ts(self.op0, x, self.s0, self.rev0, n)
        if self.op1 != 0:
            ncc_ew_ts(self.op1, x, self.s1, self.rev1, n)
        write_f32_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)


cdef class Select:
    """out = t where pred != 0 else f, through fp32 (Executor.op_select's non-integer
    path: a selection, no arithmetic), elements paired row-major. Operands are read
    completely (pred, t, f) before the output is written."""
    cdef _Operand out, pred, t, f
    cdef Py_ssize_t n

    def __init__(self, APInfo out, APInfo pred, APInfo t, APInfo f):
        self.out = _Operand(out)
        self.pred = _Operand(pred)
        self.t = _Operand(t)
        self.f = _Operand(f)
        self.n = out.n

    def __call__(self, dict env):
        cdef Py_ssize_t pb = self.pred.info.base(env)
        cdef Py_ssize_t tb = self.t.info.base(env)
        cdef Py_ssize_t fb = self.f.info.base(env)
        cdef Py_ssize_t ob = self.out.info.base(env)
        cdef Py_ssize_t i, n = self.n
        cdef float* c = _scratch_for(3 * n)
        cdef float* x = c + n
        cdef float* y = x + n
        read_f32_ptr(self.pred.p, self.pred.code, pb, self.pred.strides, self.pred.nums, c)
        read_f32_ptr(self.t.p, self.t.code, tb, self.t.strides, self.t.nums, x)
        read_f32_ptr(self.f.p, self.f.code, fb, self.f.strides, self.f.nums, y)
        for i in range(n):
            if c[i] == 0:           # NaN != 0: a NaN predicate selects t, as numpy's (pred != 0) does
                x[i] = y[i]
        write_f32_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)


# -- exact integer element-wise ops (int64, wrapping like numpy's int64) --------

from libc.stdint cimport int64_t, uint64_t
from neuronxcc.starfish.birsim._kernels cimport read_i64_ptr, write_i64_ptr

# ops whose alu_i result is one wrapping int64 operation
INT_OPS = {"add": 1, "subtract": 2, "rsub": 3, "mult": 4, "max": 5, "min": 6,
           "bitwise_and": 7, "bitwise_or": 8, "bitwise_xor": 9}


cdef inline int64_t _iop(int op, int64_t a, int64_t b) noexcept nogil:
    if op == 1:
        return <int64_t>(<uint64_t>a + <uint64_t>b)
    if op == 2:
        return <int64_t>(<uint64_t>a - <uint64_t>b)
    if op == 3:
        return <int64_t>(<uint64_t>b - <uint64_t>a)
    if op == 4:
        return <int64_t>(<uint64_t>a * <uint64_t>b)
    if op == 5:
        return a if a > b else b
    if op == 6:
        return a if a < b else b
    if op == 7:
        return a & b
    if op == 8:
        return a | b
    return a ^ b


cdef int64_t* _iscratch = NULL
cdef Py_ssize_t _iscratch_n = 0


cdef int64_t* _iscratch_for(Py_ssize_t n) except NULL:
    global _iscratch, _iscratch_n
    cdef int64_t* p
    if n > _iscratch_n:
        p = <int64_t*>realloc(_iscratch, n * sizeof(int64_t) + 64)
        if p == NULL:
            raise MemoryError()
        _iscratch = p
        _iscratch_n = n
    return _iscratch


cdef class IntTensorTensor:
    """out = op(a, b) in exact int64 (tensor_tensor in the integer domain), wrapped to the
    output dtype on store as write_i64 does. Inputs read completely before the write."""
    cdef _Operand out, a, b
    cdef int op
    cdef Py_ssize_t n

    def __init__(self, APInfo out, APInfo a, APInfo b, int op):
        self.out = _Operand(out)
        self.a = _Operand(a)
        self.b = _Operand(b)
        self.op = op
        self.n = out.n

    def __call__(self, dict env):
        cdef Py_ssize_t ab = self.a.info.base(env)
        cdef Py_ssize_t bb = self.b.info.base(env)
        cdef Py_ssize_t ob = self.out.info.base(env)
        cdef Py_ssize_t i, n = self.n
        cdef int op = self.op
        cdef int64_t* x = _iscratch_for(2 * n)
        cdef int64_t* y = x + n
        read_i64_ptr(self.a.p, self.a.code, ab, self.a.strides, self.a.nums, x)
        read_i64_ptr(self.b.p, self.b.code, bb, self.b.strides, self.b.nums, y)
        for i in range(n):
            x[i] = _iop(op, x[i], y[i])
        write_i64_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
