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

cdef class Plan:
    """A prepared instruction: ``run(env)`` does its element work for the loop variables and
    registers in ENV (the typed interpreter loop calls it in C; Python calls the plan)."""

    cdef int run(self, dict env) except -1:
        raise NotImplementedError(type(self).__name__)

    def __call__(self, dict env):
        self.run(env)


cdef enum:
    NOGIL_BYTES = 16384     # copies this small keep the GIL: releasing and retaking it costs more than they do


cdef class RawCopy(Plan):
    cdef APInfo src, dst
    cdef object sbuf, dbuf                  # keep the storage alive
    cdef const uint8_t* sp
    cdef uint8_t* dp
    cdef Py_ssize_t sstr[6]
    cdef Py_ssize_t snum[6]
    cdef Py_ssize_t dstr[6]
    cdef Py_ssize_t dnum[6]
    cdef Py_ssize_t isz
    cdef Py_ssize_t nbytes

    def __init__(self, APInfo src, APInfo dst, src_order=None):
        """SRC_ORDER: the source's (strides, nums) in the order its elements are read (default
        its own; a transpose passes its dims permuted)."""
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
        sstr, snum = (src.strides, src.nums) if src_order is None else src_order
        for k in range(6):
            self.sstr[k] = sstr[k]
            self.snum[k] = snum[k]
            self.dstr[k] = dst.strides[k]
            self.dnum[k] = dst.nums[k]
        self.isz = src.itemsize
        self.nbytes = src.n * src.itemsize

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t sb = self.src.base(env)
        cdef Py_ssize_t db = self.dst.base(env)
        cdef int r
        if self.nbytes <= NOGIL_BYTES:
            r = copy_raw_ptr(self.sp, sb, self.sstr, self.snum, self.dp, db, self.dstr, self.dnum, self.isz)
        else:
            with nogil:
                r = copy_raw_ptr(self.sp, sb, self.sstr, self.snum, self.dp, db, self.dstr, self.dnum, self.isz)
        if r < 0:
            raise MemoryError()
        return 0


# -- fp32 element-wise ops: read, compute and write in one typed pass ------------

from libc.stdlib cimport realloc
from neuronxcc.starfish.birsim._kernels cimport read_f32_ptr, write_f32_ptr

# ALU ops whose fp32 result is one IEEE operation, identical to numpy's float32 ufunc
EW_OPS = {"add": 1, "subtract": 2, "rsub": 3, "mult": 4, "divide": 5}
# comparisons (1.0 / 0.0, as alu.compare_f(...).astype(float32)): exact for every input
EW_CMP = {"eq": 6, "ne": 7, "lt": 8, "le": 9, "gt": 10, "ge": 11}
# max / min: the plain comparison when neither operand is NaN and no tie is +0 against -0; an
# execution that meets either is the handler's (which NaN or zero numpy's loops return is theirs)
EW_MAXMIN = {"max": 12, "min": 13}
# ScalarE functions computed exactly here after x * scale + bias (alu.act: abs, np.sqrt, x * x,
# 1 / np.sqrt(x), 1 / x: each one IEEE operation or a sign-bit clear)
EW_FUNCS = {"abs": 1, "sqrt": 2, "square": 3, "rsqrt": 4, "reciprocal": 5}


cdef extern from *:
    """
    /* fp32 element-wise loops, one per op so that GCC vectorises them (restrict, O3);
       SIMD add/sub/mul/div/sqrt round exactly like the scalar operations (IEEE, no FMA;
       no errno: sqrt is the one instruction numpy's loops use too). */
    #include <stdint.h>
    #include <string.h>
    #include <math.h>
    #if defined(__GNUC__) && !defined(__clang__)
    #define NCC_EW_HOT __attribute__((optimize("O3", "no-math-errno")))
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
    NCC_EW_LOOPS(eq, (a == b) ? 1.0f : 0.0f)
    NCC_EW_LOOPS(ne, (a != b) ? 1.0f : 0.0f)
    NCC_EW_LOOPS(lt, (a < b) ? 1.0f : 0.0f)
    NCC_EW_LOOPS(le, (a <= b) ? 1.0f : 0.0f)
    NCC_EW_LOOPS(gt, (a > b) ? 1.0f : 0.0f)
    NCC_EW_LOOPS(ge, (a >= b) ? 1.0f : 0.0f)
    NCC_EW_LOOPS(max, (a > b) ? a : b)
    NCC_EW_LOOPS(min, (a < b) ? a : b)
    #define NCC_EW_SWITCH(KIND, ...) switch (op) { \
        case 1: ncc_ew_##KIND##_add(__VA_ARGS__); break; case 2: ncc_ew_##KIND##_sub(__VA_ARGS__); break; \
        case 3: ncc_ew_##KIND##_rsub(__VA_ARGS__); break; case 4: ncc_ew_##KIND##_mul(__VA_ARGS__); break; \
        case 5: ncc_ew_##KIND##_div(__VA_ARGS__); break; case 6: ncc_ew_##KIND##_eq(__VA_ARGS__); break; \
        case 7: ncc_ew_##KIND##_ne(__VA_ARGS__); break; case 8: ncc_ew_##KIND##_lt(__VA_ARGS__); break; \
        case 9: ncc_ew_##KIND##_le(__VA_ARGS__); break; case 10: ncc_ew_##KIND##_gt(__VA_ARGS__); break; \
        case 11: ncc_ew_##KIND##_ge(__VA_ARGS__); break; case 12: ncc_ew_##KIND##_max(__VA_ARGS__); break; \
        default: ncc_ew_##KIND##_min(__VA_ARGS__); }
    static void ncc_ew_tt(int op, float *x, const float *y, Py_ssize_t n) { NCC_EW_SWITCH(tt, x, y, n) }
    /* x = op(x, s), or op(s, x) when rev */
    static void ncc_ew_ts(int op, float *x, float s, int rev, Py_ssize_t n) {
        if (rev) { NCC_EW_SWITCH(st, x, s, n) } else { NCC_EW_SWITCH(ts, x, s, n) }
    }
    /* max / min inputs whose result the plain comparison may not give as numpy does: a NaN, or
       equal values of different signs (+0 and -0) */
    static inline int ncc_ew_odd(float a, float b) {
        uint32_t ua, ub; memcpy(&ua, &a, 4); memcpy(&ub, &b, 4);
        return a != a || b != b || (a == b && ((ua ^ ub) >> 31));
    }
    static int ncc_ew_odd_tt(const float *x, const float *y, Py_ssize_t n) {
        int r = 0; for (Py_ssize_t i = 0; i < n; i++) r |= ncc_ew_odd(x[i], y[i]); return r;
    }
    static int ncc_ew_odd_ts(const float *x, float s, Py_ssize_t n) {
        int r = 0; for (Py_ssize_t i = 0; i < n; i++) r |= ncc_ew_odd(x[i], s); return r;
    }
    /* the exact ScalarE functions (EW_FUNCS) in place */
    static NCC_EW_HOT void ncc_ew_func(int f, float *__restrict x, Py_ssize_t n) {
        Py_ssize_t i;
        switch (f) {
        case 1: for (i = 0; i < n; i++) { uint32_t u; memcpy(&u, &x[i], 4); u &= 0x7FFFFFFFu; memcpy(&x[i], &u, 4); } break;
        case 2: for (i = 0; i < n; i++) x[i] = sqrtf(x[i]); break;
        case 3: for (i = 0; i < n; i++) x[i] = x[i] * x[i]; break;
        case 4: for (i = 0; i < n; i++) x[i] = 1.0f / sqrtf(x[i]); break;
        case 5: for (i = 0; i < n; i++) x[i] = 1.0f / x[i]; break;
        default: break;
        }
    }
    """
    void ncc_ew_tt(int op, float* x, const float* y, Py_ssize_t n) noexcept nogil
    void ncc_ew_ts(int op, float* x, float s, int rev, Py_ssize_t n) noexcept nogil
    int ncc_ew_odd_tt(const float* x, const float* y, Py_ssize_t n) noexcept nogil
    int ncc_ew_odd_ts(const float* x, float s, Py_ssize_t n) noexcept nogil
    void ncc_ew_func(int f, float* x, Py_ssize_t n) noexcept nogil


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


cdef class ElementWise(Plan):
    """out = f(op1(op0(a, s0 | b), s1)) in fp32 (tensor_scalar, tensor_tensor, activations of an
    exact function, converting copies; op 0 = none, f 0 = none, else EW_FUNCS), elements paired
    row-major, the cast on output as write_f32 does. A scalar is an immediate or, with SA0 / SA1
    given, a [P, 1] operand: one value per partition (row) of A, as numpy broadcasts it in the
    handler. Operands are read completely before the output is written (in-place safe). An
    execution the typed loop cannot give exactly (a NaN [P, 1] scalar; max / min meeting a NaN or
    a +0 / -0 tie) runs FALLBACK, the handler, before anything is written."""
    cdef _Operand out, a, b, sa0, sa1
    cdef int op0, op1, ufn
    cdef bint rev0, rev1, tensor, ap0, ap1
    cdef float s0, s1
    cdef Py_ssize_t n, rows
    cdef object fallback            # run(env) of the handler

    def __init__(self, APInfo out, APInfo a, APInfo b, int op0, float s0, bint rev0, int op1, float s1, bint rev1,
                 APInfo sa0=None, APInfo sa1=None, Py_ssize_t rows=1, fallback=None, int ufn=0):
        self.out = _Operand(out)
        self.a = _Operand(a)
        self.tensor = b is not None
        self.b = _Operand(b) if b is not None else None
        self.op0, self.s0, self.rev0 = op0, s0, rev0
        self.op1, self.s1, self.rev1 = op1, s1, rev1
        self.ufn = ufn
        self.n = out.n
        self.ap0 = sa0 is not None
        self.ap1 = sa1 is not None
        self.sa0 = _Operand(sa0) if self.ap0 else None
        self.sa1 = _Operand(sa1) if self.ap1 else None
        self.rows = rows
        self.fallback = fallback
        if (self.ap0 or self.ap1 or op0 >= 12 or op1 >= 12) and fallback is None:
            raise ValueError("ElementWise: scalar operands and max / min need the handler as fallback")
        if (self.ap0 and op0 >= 12) or (self.ap1 and op1 >= 12):
            raise ValueError("ElementWise: max / min take an immediate or a tensor")
        if (self.ap0 or self.ap1) and (rows < 1 or self.n % rows or (self.ap0 and sa0.n != rows)
                                       or (self.ap1 and sa1.n != rows)):
            raise ValueError("ElementWise: a scalar operand needs one value per row")

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t ab = self.a.info.base(env)
        cdef Py_ssize_t bb = self.b.info.base(env) if self.tensor else 0
        cdef Py_ssize_t b0 = self.sa0.info.base(env) if self.ap0 else 0
        cdef Py_ssize_t b1 = self.sa1.info.base(env) if self.ap1 else 0
        cdef Py_ssize_t ob = self.out.info.base(env)
        cdef Py_ssize_t n = self.n, rows = self.rows, p, f
        cdef float* x
        cdef float* y
        cdef float* z0
        cdef float* z1
        x = _scratch_for((2 if self.tensor else 1) * n + 2 * rows)
        y = x + n
        z0 = x + (2 if self.tensor else 1) * n
        z1 = z0 + rows
        read_f32_ptr(self.a.p, self.a.code, ab, self.a.strides, self.a.nums, x)
        if self.ap0:
            read_f32_ptr(self.sa0.p, self.sa0.code, b0, self.sa0.strides, self.sa0.nums, z0)
        if self.ap1:
            read_f32_ptr(self.sa1.p, self.sa1.code, b1, self.sa1.strides, self.sa1.nums, z1)
        if self.ap0 or self.ap1:
            # a NaN scalar meeting a NaN element: which payload survives depends on the operand
            # order numpy's broadcast loops use, so such a row is the handler's (nothing written yet)
            for p in range(rows):
                if (self.ap0 and z0[p] != z0[p]) or (self.ap1 and z1[p] != z1[p]):
                    self.fallback(env)
                    return 0
        f = n // rows
        if self.tensor:
            read_f32_ptr(self.b.p, self.b.code, bb, self.b.strides, self.b.nums, y)
            if self.op0 >= 12 and ncc_ew_odd_tt(x, y, n):
                self.fallback(env)
                return 0
            ncc_ew_tt(self.op0, x, y, n)
        elif self.op0 != 0:
            if self.ap0:
                for p in range(rows):
                    ncc_ew_ts(self.op0, x + p * f, z0[p], self.rev0, f)
            else:
                if self.op0 >= 12 and ncc_ew_odd_ts(x, self.s0, n):
                    self.fallback(env)
                    return 0
                ncc_ew_ts(self.op0, x, self.s0, self.rev0, n)
        if self.op1 != 0:
            if self.ap1:
                for p in range(rows):
                    ncc_ew_ts(self.op1, x + p * f, z1[p], self.rev1, f)
            else:
                if self.op1 >= 12 and ncc_ew_odd_ts(x, self.s1, n):
                    self.fallback(env)
                    return 0
                ncc_ew_ts(self.op1, x, self.s1, self.rev1, n)
        if self.ufn != 0:
            ncc_ew_func(self.ufn, x, n)
        write_f32_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
        return 0


cdef class Select(Plan):
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

    cdef int run(self, dict env) except -1:
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
        return 0


# -- exact integer element-wise ops (int64, wrapping like numpy's int64) --------

from libc.stdint cimport int64_t, uint64_t
import numpy as np
from neuronxcc.starfish.birsim._kernels cimport read_i64_ptr, write_i64_ptr

# alu_i ops (birsim.alu) computed here exactly as there: int64 arithmetic wrapping like numpy's,
# shifts by the first operand's width (``width`` < 64 only: the callers check), 0/1 for tests.
INT_OPS = {"add": 1, "subtract": 2, "rsub": 3, "mult": 4, "max": 5, "min": 6,
           "bitwise_and": 7, "bitwise_or": 8, "bitwise_xor": 9,
           "arith_shift_left": 10, "logical_shift_left": 10, "arith_shift_right": 11, "logical_shift_right": 12,
           "eq": 13, "ne": 14, "lt": 15, "le": 16, "gt": 17, "ge": 18,
           "logical_and": 19, "logical_or": 20, "logical_xor": 21, "average": 22, "bypass": 23, "abs_max": 24,
           "divide": 25, "mod": 26}
# divide/mod here assume operands of magnitude < 2**63 (callers: operands narrower than 64 bits)
INT_DIVMOD = (25, 26)


cdef extern from *:
    """
    /* exact int64 element-wise loops, one per op (alu.alu_i's rules, op by op), so that GCC
       vectorises them: x = op(x, y) (tt), op(x, s) (ts), op(s, x) (st). Shifts by the first
       operand's width W (< 64, MASK = 2**W - 1); divide truncates, x / 0 = -1, x % 0 = x
       (numpy's abs(INT64_MIN) wraps). */
    #include <stdint.h>
    #if defined(__GNUC__) && !defined(__clang__)
    #define NCC_I_HOT __attribute__((optimize("O3")))
    #else
    #define NCC_I_HOT
    #endif
    #define NCC_SH(b) ((b) < 0 ? 0 : ((b) > 63 ? 63 : (int)(b)))
    static inline int64_t ncc_iabs(int64_t a) { return a >= 0 ? a : (int64_t)((uint64_t)0 - (uint64_t)a); }
    static inline int64_t ncc_idiv(int64_t a, int64_t b) {
        int64_t q = (int64_t)((uint64_t)ncc_iabs(a) / (uint64_t)ncc_iabs(b));
        return ((a < 0) != (b < 0)) ? (int64_t)((uint64_t)0 - (uint64_t)q) : q;
    }
    #define NCC_I_OPS(X) \
        X(1, (int64_t)((uint64_t)a + (uint64_t)b)) \
        X(2, (int64_t)((uint64_t)a - (uint64_t)b)) \
        X(3, (int64_t)((uint64_t)b - (uint64_t)a)) \
        X(4, (int64_t)((uint64_t)a * (uint64_t)b)) \
        X(5, (a > b ? a : b)) \
        X(6, (a < b ? a : b)) \
        X(7, (a & b)) \
        X(8, (a | b)) \
        X(9, (a ^ b)) \
        X(10, (b >= w ? 0 : (int64_t)(((uint64_t)a << NCC_SH(b)) & mask))) \
        X(11, (b >= w ? (a < 0 ? -1 : 0) : (a >> NCC_SH(b)))) \
        X(12, (b >= w ? 0 : (int64_t)(((uint64_t)a & mask) >> NCC_SH(b)))) \
        X(13, (int64_t)(a == b)) \
        X(14, (int64_t)(a != b)) \
        X(15, (int64_t)(a < b)) \
        X(16, (int64_t)(a <= b)) \
        X(17, (int64_t)(a > b)) \
        X(18, (int64_t)(a >= b)) \
        X(19, (int64_t)((a != 0) && (b != 0))) \
        X(20, (int64_t)((a != 0) || (b != 0))) \
        X(21, (int64_t)((a != 0) != (b != 0))) \
        X(22, (((int64_t)((uint64_t)a + (uint64_t)b)) >> 1)) \
        X(23, ((void)b, a)) \
        X(24, (ncc_iabs(a) > ncc_iabs(b) ? ncc_iabs(a) : ncc_iabs(b))) \
        X(25, (b == 0 ? -1 : ncc_idiv(a, b))) \
        X(26, (b == 0 ? a : (int64_t)((uint64_t)a - (uint64_t)ncc_idiv(a, b) * (uint64_t)b)))
    #define NCC_I_LOOPS(OP, EXPR) \
    static NCC_I_HOT void ncc_i_tt_##OP(int64_t *__restrict x, const int64_t *__restrict y, Py_ssize_t n, \
                                        int64_t w, uint64_t mask) { \
        (void)w; (void)mask; \
        for (Py_ssize_t i = 0; i < n; i++) { int64_t a = x[i], b = y[i]; x[i] = (EXPR); } } \
    static NCC_I_HOT void ncc_i_ts_##OP(int64_t *__restrict x, int64_t s, Py_ssize_t n, int64_t w, uint64_t mask) { \
        (void)w; (void)mask; \
        for (Py_ssize_t i = 0; i < n; i++) { int64_t a = x[i], b = s; x[i] = (EXPR); } } \
    static NCC_I_HOT void ncc_i_st_##OP(int64_t *__restrict x, int64_t s, Py_ssize_t n, int64_t w, uint64_t mask) { \
        (void)w; (void)mask; \
        for (Py_ssize_t i = 0; i < n; i++) { int64_t a = s, b = x[i]; x[i] = (EXPR); } }
    NCC_I_OPS(NCC_I_LOOPS)
    #define NCC_I_CASE_TT(OP, EXPR) case OP: ncc_i_tt_##OP(x, y, n, w, mask); return 1;
    #define NCC_I_CASE_TS(OP, EXPR) case OP: ncc_i_ts_##OP(x, s, n, w, mask); return 1;
    #define NCC_I_CASE_ST(OP, EXPR) case OP: ncc_i_st_##OP(x, s, n, w, mask); return 1;
    static int ncc_i_tt(int op, int64_t *x, const int64_t *y, Py_ssize_t n, int width) {
        int64_t w = width; uint64_t mask = (width < 64) ? ((((uint64_t)1) << width) - 1) : ~(uint64_t)0;
        switch (op) { NCC_I_OPS(NCC_I_CASE_TT) default: return 0; }
    }
    static int ncc_i_ts(int op, int64_t *x, int64_t s, int rev, Py_ssize_t n, int width) {
        int64_t w = width; uint64_t mask = (width < 64) ? ((((uint64_t)1) << width) - 1) : ~(uint64_t)0;
        if (rev) { switch (op) { NCC_I_OPS(NCC_I_CASE_ST) default: return 0; } }
        switch (op) { NCC_I_OPS(NCC_I_CASE_TS) default: return 0; }
    }
    """
    int ncc_i_tt(int op, int64_t* x, const int64_t* y, Py_ssize_t n, int width) noexcept nogil
    int ncc_i_ts(int op, int64_t* x, int64_t s, int rev, Py_ssize_t n, int width) noexcept nogil


cdef void _iop_tt(int op, int64_t* x, const int64_t* y, Py_ssize_t n, int w) noexcept nogil:
    """x[i] = op(x[i], y[i]) (every INT_OPS op has its loop in ncc_i_tt)."""
    ncc_i_tt(op, x, y, n, w)


cdef void _iop_ts(int op, int64_t* x, int64_t s, bint rev, Py_ssize_t n, int w) noexcept nogil:
    """x[i] = op(x[i], s), or op(s, x[i]) when rev."""
    ncc_i_ts(op, x, s, rev, n, w)


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


cdef class IntElementWise(Plan):
    """out = op1(op0(a, s0 | b), s1) in exact int64 (alu_i: tensor_tensor and tensor_scalar in the
    integer domain, integer converting copies when both ops are 0 = none), each op with the
    operands reversed when its flag says so, shifts by WIDTH bits; wrapped to the output dtype
    on store as write_i64 does. Elements paired row-major; inputs read completely first."""
    cdef _Operand out, a, b
    cdef int op0, op1, width
    cdef bint rev0, rev1, tensor
    cdef int64_t s0, s1
    cdef Py_ssize_t n

    def __init__(self, APInfo out, APInfo a, APInfo b, int op0, int64_t s0, bint rev0, int op1, int64_t s1,
                 bint rev1, int width):
        self.out = _Operand(out)
        self.a = _Operand(a)
        self.tensor = b is not None
        self.b = _Operand(b) if b is not None else None
        self.op0, self.s0, self.rev0 = op0, s0, rev0
        self.op1, self.s1, self.rev1 = op1, s1, rev1
        self.width = width
        self.n = out.n

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t ab = self.a.info.base(env)
        cdef Py_ssize_t bb = self.b.info.base(env) if self.tensor else 0
        cdef Py_ssize_t ob = self.out.info.base(env)
        cdef Py_ssize_t i, n = self.n
        cdef int op0 = self.op0, op1 = self.op1, w = self.width
        cdef int64_t s0 = self.s0, s1 = self.s1
        cdef int64_t* x = _iscratch_for((2 if self.tensor else 1) * n)
        cdef int64_t* y = x + n
        # the GIL stays held: the scratch areas are shared (multi-rank runs use threads)
        read_i64_ptr(self.a.p, self.a.code, ab, self.a.strides, self.a.nums, x)
        if self.tensor:
            read_i64_ptr(self.b.p, self.b.code, bb, self.b.strides, self.b.nums, y)
            _iop_tt(op0, x, y, n, w)
        elif op0 != 0:
            _iop_ts(op0, x, s0, self.rev0, n, w)
        if op1 != 0:
            _iop_ts(op1, x, s1, self.rev1, n, w)
        write_i64_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
        return 0


cdef class IntSelect(Plan):
    """out = t where pred != 0 else f, t and f exact int64 (Executor.op_select's integer path:
    the predicate read through fp32, so a NaN predicate selects t). Inputs read completely first."""
    cdef _Operand out, pred, t, f
    cdef Py_ssize_t n

    def __init__(self, APInfo out, APInfo pred, APInfo t, APInfo f):
        self.out = _Operand(out)
        self.pred = _Operand(pred)
        self.t = _Operand(t)
        self.f = _Operand(f)
        self.n = out.n

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t pb = self.pred.info.base(env)
        cdef Py_ssize_t tb = self.t.info.base(env)
        cdef Py_ssize_t fb = self.f.info.base(env)
        cdef Py_ssize_t ob = self.out.info.base(env)
        cdef Py_ssize_t i, n = self.n
        cdef float* c = _scratch_for(n)
        cdef int64_t* x = _iscratch_for(2 * n)
        cdef int64_t* y = x + n
        # the GIL stays held: the scratch areas are shared (multi-rank runs use threads)
        read_f32_ptr(self.pred.p, self.pred.code, pb, self.pred.strides, self.pred.nums, c)
        read_i64_ptr(self.t.p, self.t.code, tb, self.t.strides, self.t.nums, x)
        read_i64_ptr(self.f.p, self.f.code, fb, self.f.strides, self.f.nums, y)
        for i in range(n):
            if c[i] == 0:
                x[i] = y[i]
        write_i64_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
        return 0


cdef class Fill(Plan):
    """Write fixed values (memset, iota: computed once by the caller) into the AP: fp32 values
    cast on store as write_f32 does, or int64 values wrapped as write_i64 does."""
    cdef _Operand out
    cdef object vals                # keeps the values alive
    cdef const float* fv
    cdef const int64_t* iv
    cdef bint is_int

    def __init__(self, APInfo out, vals):
        cdef const float[::1] f
        cdef const int64_t[::1] q
        self.out = _Operand(out)
        self.is_int = vals.dtype == np.int64
        self.vals = vals
        if vals.shape[0] != out.n or out.n == 0:
            raise ValueError("Fill needs one value per element")
        if self.is_int:
            q = vals
            self.iv = &q[0]
        else:
            f = vals
            self.fv = &f[0]

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t ob = self.out.info.base(env)
        with nogil:
            if self.is_int:
                write_i64_ptr(self.iv, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
            else:
                write_f32_ptr(self.fv, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
        return 0


# -- matmul: np.matmul on the arrays the handler builds ------------------------------

from libc.stdlib cimport malloc, free
from neuronxcc.starfish.birsim._kernels cimport mm_small
from neuronxcc.starfish.birsim._kernels import SMALL_MATMUL

cdef object _ndarray = np.ndarray
cdef object _np_matmul = np.matmul
cdef object _np_add = np.add
cdef object _F32 = np.float32


cdef class Matmul(Plan):
    """Executor.op_matmul as a plan: out = stat.T @ mv [+ out] in fp32 (birsim.alu.matmul_f).
    Small ones (at most SMALL_MATMUL multiply-adds, operands and output of matching sizes): the
    operands read through fp32 into the plan's own buffers, mm_small (products summed over K
    in order), the fp32 add of the old PSUM values, the cast on store. Larger: np.matmul on
    exactly the fp32 arrays the handler builds (read-only storage views for fp32 operands,
    as MachineState.read_f_at makes them; converted copies otherwise), because BLAS's
    summation order may depend on the arrays' layout; fp32 accumulation adds into the
    output's storage view in place (the same IEEE adds as the handler's add-then-write)."""
    cdef APInfo s, m, o
    cdef _Operand so, mo, oo
    cdef object st
    cdef Py_ssize_t srows, mrows, orows, K, M, N
    cdef bint acc, small
    cdef float* buf

    def __cinit__(self):
        self.buf = NULL

    def __dealloc__(self):
        free(self.buf)

    def __init__(self, st, APInfo s, APInfo m, APInfo o, Py_ssize_t srows, Py_ssize_t mrows, Py_ssize_t orows,
                 bint acc):
        self.st = st
        self.s, self.m, self.o = s, m, o
        self.srows, self.mrows, self.orows = srows, mrows, orows
        self.acc = acc
        self.K = srows
        self.M = s.n // srows if srows else 0
        self.N = m.n // mrows if mrows else 0
        self.small = (srows == mrows and srows > 0 and orows == self.M and s.n == srows * self.M
                      and m.n == mrows * self.N and o.n == self.M * self.N and self.M * self.N > 0
                      and self.K * self.M * self.N <= SMALL_MATMUL)
        if self.small:
            self.so, self.mo, self.oo = _Operand(s), _Operand(m), _Operand(o)
            self.buf = <float*>malloc((s.n + m.n + 2 * o.n) * sizeof(float))
            if self.buf == NULL:
                raise MemoryError()

    cdef object _read(self, APInfo a, Py_ssize_t base, Py_ssize_t rows):
        if a.code != 0:
            return self.st.read_f_at(a, base).reshape(rows, -1)
        v = a.rview
        if v is None:
            v = _ndarray(a.shape, dtype=a.npdt, buffer=a.tgt.buf, offset=base, strides=a.vstrides)
            v.flags.writeable = False
            if a.has_fixed:
                a.rview = v
        return v.reshape(rows, -1)

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t sb = self.s.base(env)
        cdef Py_ssize_t mb = self.m.base(env)
        cdef Py_ssize_t ob, i, n
        cdef float* xs
        cdef float* xm
        cdef float* r
        cdef float* old
        if self.small:
            ob = self.o.base(env)
            n = self.o.n
            xs = self.buf
            xm = xs + self.s.n
            r = xm + self.m.n
            old = r + n
            with nogil:
                read_f32_ptr(self.so.p, self.so.code, sb, self.so.strides, self.so.nums, xs)
                read_f32_ptr(self.mo.p, self.mo.code, mb, self.mo.strides, self.mo.nums, xm)
                mm_small(xs, xm, r, self.K, self.M, self.N)
                if self.acc:
                    read_f32_ptr(self.oo.p, self.oo.code, ob, self.oo.strides, self.oo.nums, old)
                    for i in range(n):
                        r[i] = r[i] + old[i]
                write_f32_ptr(r, self.oo.p, self.oo.code, ob, self.oo.strides, self.oo.nums)
            return 0
        r_ = _np_matmul(self._read(self.s, sb, self.srows).T, self._read(self.m, mb, self.mrows))
        ob = self.o.base(env)
        cdef APInfo o = self.o
        if self.acc:
            if o.code == 0:
                ov = _ndarray(o.shape, dtype=o.npdt, buffer=o.tgt.buf, offset=ob, strides=o.vstrides).reshape(
                    self.orows, -1)
                if r_.shape != ov.shape or ov.flags.owndata:
                    # the general path (and its size error)
                    self.st.write_f_at(o, ob, _np_add(r_, self._read(o, ob, self.orows), dtype=_F32))
                    return 0
                _np_add(r_, ov, out=ov, dtype=_F32)
                return 0
            r_ = _np_add(r_, self._read(o, ob, self.orows), dtype=_F32)
        self.st.write_f_at(o, ob, r_)
        return 0


cdef class Gather(Plan):
    """Same-dtype dma_gather (``plans._dma_gather``, ``Executor.op_dma_gather``): partition p of the
    on-chip side gets the row at the indexed side's offset + clip(index[p], lo, hi) * stride. The index
    is read as int64, clipped as np.clip does (min(max(x, lo), hi)), completely before any row moves.
    DIRECT (the row's offset is affine with __row__ at coefficient 1): the row's offset is evaluated
    once with __row__ = 0 and each row's base byte is that plus its delta, bounds-checked as
    ``APInfo.base`` checks it (a row out of bounds goes the general way, for its error); otherwise
    each row's offset reaches the row's access info as env[ROWVAR], one RawCopy per partition."""
    cdef list copies
    cdef _Operand idx
    cdef int64_t lo, hi, stride
    cdef object rowvar
    cdef Py_ssize_t n
    cdef bint direct
    cdef int64_t* deltas

    def __cinit__(self):
        self.deltas = NULL

    def __dealloc__(self):
        free(self.deltas)

    def __init__(self, list copies, APInfo idx, int64_t lo, int64_t hi, int64_t stride, rowvar, bint direct=False):
        if idx.n != len(copies):
            raise ValueError("Gather needs one index per partition")
        self.copies = copies
        self.idx = _Operand(idx)
        self.lo, self.hi, self.stride = lo, hi, stride
        self.rowvar = rowvar
        self.n = idx.n
        self.direct = direct and all((<RawCopy>c).src is (<RawCopy>copies[0]).src for c in copies) and \
            (<RawCopy>copies[0]).src.expr is None if copies else False
        self.deltas = <int64_t*>malloc(max(1, self.n) * sizeof(int64_t))
        if self.deltas == NULL:
            raise MemoryError()

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t ib = self.idx.info.base(env)
        cdef Py_ssize_t p, n = self.n
        cdef int64_t d
        cdef int64_t* x = _iscratch_for(n)
        cdef int64_t* vals = self.deltas
        cdef RawCopy c
        cdef APInfo rs
        cdef long long off0, off
        cdef Py_ssize_t db
        cdef int r
        read_i64_ptr(self.idx.p, self.idx.code, ib, self.idx.strides, self.idx.nums, x)
        for p in range(n):          # read completely before any row moves (the index may be overwritten)
            d = x[p] if x[p] > self.lo else self.lo
            d = d if d < self.hi else self.hi
            vals[p] = <int64_t>(<uint64_t>d * <uint64_t>self.stride)
        if self.direct and n > 0:
            rs = (<RawCopy>self.copies[0]).src
            env[self.rowvar] = 0
            try:
                off0 = rs._offset(env)
            finally:
                env.pop(self.rowvar, None)
            for p in range(n):
                c = <RawCopy>self.copies[p]
                off = off0 + vals[p]
                if off + rs.ext_lo < 0 or (off + rs.ext_hi + 1) * rs.itemsize > rs.limit:
                    env[self.rowvar] = vals[p]          # the general way raises the bounds error
                    try:
                        c.run(env)
                    finally:
                        env.pop(self.rowvar, None)
                    continue
                db = c.dst.base(env)
                r = copy_raw_ptr(c.sp, rs.static_base + off * rs.itemsize, c.sstr, c.snum, c.dp, db, c.dstr,
                                 c.dnum, c.isz)
                if r < 0:
                    raise MemoryError()
            return 0
        for p in range(n):
            env[self.rowvar] = vals[p]
            (<RawCopy>self.copies[p]).run(env)
        env.pop(self.rowvar, None)
        return 0
