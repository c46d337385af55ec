# cython: language_level=3, boundscheck=False, wraparound=False
"""Typed execution plans of birsim for the instructions that only move bytes
(same-dtype dma_copy, tensor_copy on DVE/POOL): the operands' storage
pointers, strides and counts are taken once; each execution resolves the two
base addresses (bounds-checked by ``APInfo.base``) and runs the copy kernel.
Semantics: ``Executor.op_dma_copy`` / ``op_tensor_copy`` (a bit-exact copy,
elements paired in row-major order, overlap-safe)."""
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.string cimport memmove

from neuronxcc.starfish.birsim._apinfo cimport APInfo
from neuronxcc.starfish.birsim._rawcopy cimport copy_raw_ptr

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


# -- operands of the typed element-wise plans (here and in _elementwise) ------------

from libc.stdlib cimport realloc
from neuronxcc.starfish.birsim._kernels cimport read_f32_ptr, write_f32_ptr

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
    # attributes in _plans.pxd

    def __init__(self, APInfo info):
        cdef uint8_t[::1] v = info.tgt.buf
        cdef int k
        cdef Py_ssize_t st, span
        self.info = info
        self.buf = info.tgt.buf
        self.p = &v[0]
        self.code = info.code
        self.lo = 0
        self.hi = info.itemsize
        dims = []
        for k in range(6):
            self.strides[k] = info.strides[k]
            self.nums[k] = info.nums[k]
            if self.nums[k] > 1:
                st = self.strides[k]
                if st >= 0:
                    self.hi += st * (self.nums[k] - 1)
                else:
                    self.lo += st * (self.nums[k] - 1)
                dims.append((abs(st), self.nums[k]))
        self.injective = True
        span = info.itemsize
        for st, k in sorted(dims):
            if st < span:
                self.injective = False
                break
            span = st * (k - 1) + span


cdef bint _same_walk(_Operand x, _Operand y) noexcept:
    """X and Y have the same counts: their rows (innermost runs) pair one to one."""
    cdef int k
    for k in range(6):
        if x.nums[k] != y.nums[k]:
            return False
    return True


cdef bint _row_safe(_Operand out, Py_ssize_t ob, _Operand x, Py_ssize_t xb) noexcept:
    """Writing OUT row by row never changes what a later row of X reads: disjoint bytes, or X is
    OUT itself (same base and strides, no byte shared by two elements)."""
    cdef int k
    if x.p != out.p or xb + x.hi <= ob + out.lo or ob + out.hi <= xb + x.lo:
        return True
    if xb != ob or not out.injective:
        return False
    for k in range(6):
        if x.strides[k] != out.strides[k] and x.nums[k] > 1:
            return False
    return True


cdef extern from *:
    """
    /* x[i] = c[i] == 0 ? y[i] : x[i], branch-free (random predicates mispredict a branch); a NaN
       predicate keeps x, as numpy's (pred != 0) does */
    #include <stdint.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define NCC_SEL_HOT __attribute__((optimize("O3"), target_clones("avx512f", "avx2", "default")))
    #elif defined(__GNUC__) && !defined(__clang__)
    #define NCC_SEL_HOT __attribute__((optimize("O3")))
    #else
    #define NCC_SEL_HOT
    #endif
    static NCC_SEL_HOT void ncc_sel_f32(const float *__restrict c, uint32_t *__restrict x,
                                        const uint32_t *__restrict y, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t m = (uint32_t)0 - (uint32_t)(c[i] == 0.0f);
            x[i] = (y[i] & m) | (x[i] & ~m);
        }
    }
    static NCC_SEL_HOT void ncc_sel_i64(const float *__restrict c, int64_t *__restrict x,
                                        const int64_t *__restrict y, Py_ssize_t n) {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t m = (uint64_t)0 - (uint64_t)(c[i] == 0.0f);
            x[i] = (int64_t)(((uint64_t)y[i] & m) | ((uint64_t)x[i] & ~m));
        }
    }
    """
    void ncc_sel_f32(const float* c, uint32_t* x, const uint32_t* y, Py_ssize_t n) noexcept nogil
    void ncc_sel_i64(const float* c, int64_t* x, const int64_t* y, Py_ssize_t n) noexcept nogil


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
        # NaN != 0: a NaN predicate selects t, as numpy's (pred != 0) does
        ncc_sel_f32(c, <uint32_t*>x, <const uint32_t*>y, n)
        write_f32_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
        return 0


# -- exact integer element-wise ops (int64, wrapping like numpy's int64) --------

from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport malloc, free
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
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define NCC_I_HOT __attribute__((optimize("O3"), target_clones("avx512f", "avx2", "default")))
    #elif defined(__GNUC__) && !defined(__clang__)
    #define NCC_I_HOT __attribute__((optimize("O3")))
    #else
    #define NCC_I_HOT
    #endif
    #define NCC_SH(b) ((b) < 0 ? 0 : ((b) > 63 ? 63 : (int)(b)))
    static inline __attribute__((always_inline)) int64_t ncc_iabs(int64_t a) { return a >= 0 ? a : (int64_t)((uint64_t)0 - (uint64_t)a); }
    static inline __attribute__((always_inline)) int64_t ncc_idiv(int64_t a, int64_t b) {
        /* |a|, |b| < 2**53: the double quotient truncated is exact (its rounding error, below
           |a| 2**-53 / |b|, cannot reach the next integer, at least 1 / |b| away), and much
           cheaper than a 64-bit integer division */
        if ((uint64_t)a + ((uint64_t)1 << 53) < ((uint64_t)1 << 54) &&
                (uint64_t)b + ((uint64_t)1 << 53) < ((uint64_t)1 << 54))
            return (int64_t)((double)a / (double)b);
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
    on store as write_i64 does. A scalar may instead be a [P, 1] operand (SA0 / SA1: one value
    per row of ROWS rows, broadcast along the row as numpy broadcasts the handler's [P, 1] array).
    Elements paired row-major; inputs read completely first (the source, then the [P, 1]
    operands, as the handler reads them)."""
    cdef _Operand out, a, b, sa0, sa1
    cdef int op0, op1, width
    cdef bint rev0, rev1, tensor
    cdef int64_t s0, s1
    cdef Py_ssize_t n, rows
    cdef int64_t* svals            # the [P, 1] operands' values: rows for sa0, then rows for sa1

    def __cinit__(self):
        self.svals = NULL

    def __dealloc__(self):
        free(self.svals)

    def __init__(self, APInfo out, APInfo a, APInfo b, int op0, int64_t s0, bint rev0, int op1, int64_t s1,
                 bint rev1, int width, APInfo sa0=None, APInfo sa1=None, Py_ssize_t rows=1):
        self.out = _Operand(out)
        self.a = _Operand(a)
        self.tensor = b is not None
        self.b = _Operand(b) if b is not None else None
        self.op0, self.s0, self.rev0 = op0, s0, rev0
        self.op1, self.s1, self.rev1 = op1, s1, rev1
        self.width = width
        self.n = out.n
        self.rows = rows
        self.sa0 = _Operand(sa0) if sa0 is not None else None
        self.sa1 = _Operand(sa1) if sa1 is not None else None
        if sa0 is not None or sa1 is not None:
            if rows <= 0 or out.n != a.n or a.n % rows != 0 or b is not None or \
                    (sa0 is not None and sa0.n != rows) or (sa1 is not None and sa1.n != rows):
                raise ValueError("IntElementWise: a [P, 1] operand needs one value per row")
            self.svals = <int64_t*>malloc(2 * rows * sizeof(int64_t))
            if self.svals == NULL:
                raise MemoryError()

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t ab = self.a.info.base(env)
        cdef Py_ssize_t bb = self.b.info.base(env) if self.tensor else 0
        cdef Py_ssize_t b0 = self.sa0.info.base(env) if self.sa0 is not None else 0
        cdef Py_ssize_t b1 = self.sa1.info.base(env) if self.sa1 is not None else 0
        cdef Py_ssize_t ob = self.out.info.base(env)
        cdef Py_ssize_t r, f, n = self.n, rows = self.rows
        cdef int op0 = self.op0, op1 = self.op1, w = self.width
        cdef int64_t s0 = self.s0, s1 = self.s1
        cdef int64_t* x = _iscratch_for((2 if self.tensor else 1) * n)
        cdef int64_t* y = x + n
        cdef int64_t* v0 = self.svals
        cdef int64_t* v1 = self.svals + rows if self.svals != NULL else NULL
        # the GIL stays held: the scratch areas are shared (multi-rank runs use threads)
        read_i64_ptr(self.a.p, self.a.code, ab, self.a.strides, self.a.nums, x)
        if self.sa0 is not None:
            read_i64_ptr(self.sa0.p, self.sa0.code, b0, self.sa0.strides, self.sa0.nums, v0)
        if self.sa1 is not None:
            read_i64_ptr(self.sa1.p, self.sa1.code, b1, self.sa1.strides, self.sa1.nums, v1)
        if self.tensor:
            read_i64_ptr(self.b.p, self.b.code, bb, self.b.strides, self.b.nums, y)
            _iop_tt(op0, x, y, n, w)
        elif op0 != 0:
            if self.sa0 is not None:
                f = n // rows
                for r in range(rows):
                    _iop_ts(op0, x + r * f, v0[r], self.rev0, f, w)
            else:
                _iop_ts(op0, x, s0, self.rev0, n, w)
        if op1 != 0:
            if self.sa1 is not None:
                f = n // rows
                for r in range(rows):
                    _iop_ts(op1, x + r * f, v1[r], self.rev1, f, w)
            else:
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
        ncc_sel_i64(c, x, y, n)
        write_i64_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
        return 0


cdef class AffineSelect(Plan):
    """out = x where cond else fill, COND fixed (affine_select's iota grid compared once by the
    caller, one flag per element in row-major order): through fp32 (FILL cast to fp32, the cast
    on store as write_f32 does) or, with IS_INT, exact int64 (wrapped on store as write_i64
    does), as Executor.op_affine_select's np.where. The source is read completely first."""
    cdef _Operand out, src
    cdef object cond                # keeps the flags alive
    cdef const uint8_t* c
    cdef bint is_int
    cdef float ffill
    cdef int64_t ifill
    cdef Py_ssize_t n

    def __init__(self, APInfo out, APInfo src, cond, fill, bint is_int):
        cdef const uint8_t[::1] cv
        if out.n != src.n or cond.shape[0] != out.n or out.n == 0:
            raise ValueError("AffineSelect needs one flag per element")
        self.out = _Operand(out)
        self.src = _Operand(src)
        self.cond = cond
        cv = cond
        self.c = &cv[0]
        self.is_int = is_int
        if is_int:
            self.ifill = fill
        else:
            self.ffill = fill
        self.n = out.n

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t sb = self.src.info.base(env)
        cdef Py_ssize_t ob = self.out.info.base(env)
        cdef Py_ssize_t i, n = self.n
        cdef float* x
        cdef int64_t* q
        if self.is_int:
            q = _iscratch_for(n)
            read_i64_ptr(self.src.p, self.src.code, sb, self.src.strides, self.src.nums, q)
            for i in range(n):
                if not self.c[i]:
                    q[i] = self.ifill
            write_i64_ptr(q, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
        else:
            x = _scratch_for(n)
            read_f32_ptr(self.src.p, self.src.code, sb, self.src.strides, self.src.nums, x)
            for i in range(n):
                if not self.c[i]:
                    x[i] = self.ffill
            write_f32_ptr(x, self.out.p, self.out.code, ob, self.out.strides, self.out.nums)
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


cdef bint _same_offsets(list infos):
    """Do these access infos (a row's per-partition slices) compute the same offset, extent and
    bounds in the same target, so that their bases differ by their static bases only?"""
    cdef APInfo a = infos[0] if infos else None, b
    if a is None:
        return False
    for b in infos:
        if b.tgt is not a.tgt or (b.itemsize, b.const_off, b.ext_lo, b.ext_hi, b.limit, b.ncoef, b.names) != \
                (a.itemsize, a.const_off, a.ext_lo, a.ext_hi, a.limit, a.ncoef, a.names) or \
                [b.coeffs[k] for k in range(b.ncoef)] != [a.coeffs[k] for k in range(a.ncoef)] or \
                (b.expr is not a.expr and (a.expr is None or b.expr is None or str(b.expr) != str(a.expr))):
            return False
    return True


cdef bint _one_run(RawCopy c) noexcept:      # is each side of C one contiguous run (a memmove copies it)?
    cdef int k
    for k in range(5):
        if c.snum[k] != 1 or c.dnum[k] != 1:
            return False
    return (c.snum[5] == 1 or c.sstr[5] == c.isz) and (c.dnum[5] == 1 or c.dstr[5] == c.isz)


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
    cdef bint same_dst              # the partitions' on-chip slices differ only in their start partition
    cdef bint runs                  # every row is one contiguous run of bytes on both sides
    cdef Py_ssize_t* dshift         # same_dst: partition p's static base - partition 0's

    def __cinit__(self):
        self.deltas = NULL
        self.dshift = NULL

    def __dealloc__(self):
        free(self.deltas)
        free(self.dshift)

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
        self.dshift = <Py_ssize_t*>malloc(max(1, self.n) * sizeof(Py_ssize_t))
        if self.deltas == NULL or self.dshift == NULL:
            raise MemoryError()
        # one offset, extent and target for all on-chip slices: evaluated and bounds-checked once (partition 0)
        self.same_dst = self.direct and _same_offsets([(<RawCopy>c).dst for c in copies])
        self.runs = self.direct and all(_one_run(c) for c in copies)
        if self.same_dst:
            for k in range(self.n):
                self.dshift[k] = (<RawCopy>copies[k]).dst.static_base - (<RawCopy>copies[0]).dst.static_base

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
            db0 = (<RawCopy>self.copies[0]).dst.base(env) if self.same_dst else 0
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
                db = db0 + self.dshift[p] if self.same_dst else c.dst.base(env)
                if self.runs:
                    memmove(c.dp + db, c.sp + rs.static_base + off * rs.itemsize, c.nbytes)
                    continue
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
