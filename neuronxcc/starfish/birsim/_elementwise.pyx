# cython: language_level=3, boundscheck=False, wraparound=False
"""birsim's typed fp32 element-wise plan (``ElementWise``: tensor_scalar, tensor_tensor,
activations of an exact function, converting copies), with its C loops. Semantics: the
handlers' (``Executor.op_tensor_scalar`` and friends): the same IEEE operations per element
as numpy's float32 ufuncs, elements paired row-major, the cast on output as write_f32 does;
whatever the loops cannot give exactly goes to the handler before anything is written."""
from libc.string cimport memcpy

from neuronxcc.starfish.birsim._apinfo cimport APInfo
from neuronxcc.starfish.birsim._kernels cimport (Rows, read_f32_ptr, read_run_f32, rows_init, rows_next, write_f32_ptr,
                                                 write_run_f32)
from neuronxcc.starfish.birsim._plans cimport Plan, _Operand, _row_safe, _same_walk, _scratch_for

# ALU ops whose fp32 result is one IEEE operation, identical to numpy's float32 ufunc
EW_OPS = {"add": 1, "subtract": 2, "rsub": 3, "mult": 4, "divide": 5}
# comparisons (1.0 / 0.0, as alu.compare_f(...).astype(float32)): exact for every input
EW_CMP = {"eq": 6, "ne": 7, "lt": 8, "le": 9, "gt": 10, "ge": 11}
# max / min: the plain comparison when neither operand is NaN and no tie is +0 against -0; an
# execution that meets either is the handler's (which NaN or zero numpy's loops return is theirs)
EW_MAXMIN = {"max": 12, "min": 13}
# ScalarE functions computed exactly here after x * scale + bias (alu.act: abs, np.sqrt, x * x,
# 1 / np.sqrt(x), 1 / x: each one IEEE operation or a sign-bit clear)
# ... and np.sign: 1 / -1 by the sign, +0 for either zero, a NaN as it is (its bits kept)
EW_FUNCS = {"abs": 1, "sqrt": 2, "square": 3, "rsqrt": 4, "reciprocal": 5, "sign": 6}


cdef extern from *:
    """
    /* fp32 element-wise loops, one per op so that GCC vectorises them (restrict, O3);
       SIMD add/sub/mul/div/sqrt round exactly like the scalar operations (IEEE, no FMA;
       no errno: sqrt is the one instruction numpy's loops use too). */
    #include <stdint.h>
    #include <string.h>
    #include <math.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    /* one clone per vector width, picked at load time (ifunc): wider SIMD rounds the same */
    #define NCC_EW_HOT __attribute__((optimize("O3", "no-math-errno"), target_clones("avx512f", "avx2", "default")))
    #elif defined(__GNUC__) && !defined(__clang__)
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
    /* the same loops from two inputs into a third array (disjoint from both) */
    #define NCC_EW_LOOPS3(NAME, EXPR) \
    static NCC_EW_HOT void ncc_ew_3_tt_##NAME(float *__restrict z, const float *__restrict x, \
                                             const float *__restrict y, Py_ssize_t n) { \
        for (Py_ssize_t i = 0; i < n; i++) { float a = x[i], b = y[i]; z[i] = (EXPR); } } \
    static NCC_EW_HOT void ncc_ew_3_ts_##NAME(float *__restrict z, const float *__restrict x, float s, Py_ssize_t n) { \
        for (Py_ssize_t i = 0; i < n; i++) { float a = x[i], b = s; z[i] = (EXPR); } } \
    static NCC_EW_HOT void ncc_ew_3_st_##NAME(float *__restrict z, const float *__restrict x, float s, Py_ssize_t n) { \
        for (Py_ssize_t i = 0; i < n; i++) { float a = s, b = x[i]; z[i] = (EXPR); } }
    #define NCC_EW_BOTH(NAME, EXPR) NCC_EW_LOOPS(NAME, EXPR) NCC_EW_LOOPS3(NAME, EXPR)
    NCC_EW_BOTH(add, a + b)
    NCC_EW_BOTH(sub, a - b)
    NCC_EW_BOTH(rsub, b - a)
    NCC_EW_BOTH(mul, a * b)
    NCC_EW_BOTH(div, a / b)
    NCC_EW_BOTH(eq, (a == b) ? 1.0f : 0.0f)
    NCC_EW_BOTH(ne, (a != b) ? 1.0f : 0.0f)
    NCC_EW_BOTH(lt, (a < b) ? 1.0f : 0.0f)
    NCC_EW_BOTH(le, (a <= b) ? 1.0f : 0.0f)
    NCC_EW_BOTH(gt, (a > b) ? 1.0f : 0.0f)
    NCC_EW_BOTH(ge, (a >= b) ? 1.0f : 0.0f)
    NCC_EW_BOTH(max, (a > b) ? a : b)
    NCC_EW_BOTH(min, (a < b) ? a : b)
    #define NCC_EW_SWITCH(KIND, ...) switch (op) { \
        case 1: ncc_ew_##KIND##_add(__VA_ARGS__); break; case 2: ncc_ew_##KIND##_sub(__VA_ARGS__); break; \
        case 3: ncc_ew_##KIND##_rsub(__VA_ARGS__); break; case 4: ncc_ew_##KIND##_mul(__VA_ARGS__); break; \
        case 5: ncc_ew_##KIND##_div(__VA_ARGS__); break; case 6: ncc_ew_##KIND##_eq(__VA_ARGS__); break; \
        case 7: ncc_ew_##KIND##_ne(__VA_ARGS__); break; case 8: ncc_ew_##KIND##_lt(__VA_ARGS__); break; \
        case 9: ncc_ew_##KIND##_le(__VA_ARGS__); break; case 10: ncc_ew_##KIND##_gt(__VA_ARGS__); break; \
        case 11: ncc_ew_##KIND##_ge(__VA_ARGS__); break; case 12: ncc_ew_##KIND##_max(__VA_ARGS__); break; \
        default: ncc_ew_##KIND##_min(__VA_ARGS__); }
    static void ncc_ew_tt(int op, float *x, const float *y, Py_ssize_t n) { NCC_EW_SWITCH(tt, x, y, n) }
    static void ncc_ew3_tt(int op, float *z, const float *x, const float *y, Py_ssize_t n) {
        NCC_EW_SWITCH(3_tt, z, x, y, n) }
    static void ncc_ew3_ts(int op, float *z, const float *x, float s, int rev, Py_ssize_t n) {
        if (rev) { NCC_EW_SWITCH(3_st, z, x, s, n) } else { NCC_EW_SWITCH(3_ts, z, x, s, n) }
    }
    /* x = op(x, s), or op(s, x) when rev */
    static void ncc_ew_ts(int op, float *x, float s, int rev, Py_ssize_t n) {
        if (rev) { NCC_EW_SWITCH(st, x, s, n) } else { NCC_EW_SWITCH(ts, x, s, n) }
    }
    /* max / min inputs whose result the plain comparison may not give as numpy does: a NaN, or
       equal values of different signs (+0 and -0) */
    /* branch-free, so that the loops below vectorise (a macro: a function would not inline into
       the clones of another target) */
    #define NCC_EW_ODD(a, b, ua, ub) ((uint32_t)((a) != (a)) | (uint32_t)((b) != (b)) | \
                                      ((uint32_t)((a) == (b)) & (((ua) ^ (ub)) >> 31)))
    static NCC_EW_HOT int ncc_ew_odd_tt(const float *x, const float *y, Py_ssize_t n) {
        uint32_t r = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            float a = x[i], b = y[i]; uint32_t ua, ub; memcpy(&ua, &a, 4); memcpy(&ub, &b, 4);
            r |= NCC_EW_ODD(a, b, ua, ub);
        }
        return r != 0;
    }
    static NCC_EW_HOT int ncc_ew_odd_ts(const float *x, float s, Py_ssize_t n) {
        uint32_t r = 0, us; memcpy(&us, &s, 4);
        for (Py_ssize_t i = 0; i < n; i++) {
            float a = x[i]; uint32_t ua; memcpy(&ua, &a, 4);
            r |= NCC_EW_ODD(a, s, ua, us);
        }
        return r != 0;
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
        case 6: for (i = 0; i < n; i++) { float a = x[i]; x[i] = a > 0 ? 1.0f : a < 0 ? -1.0f : a == 0 ? 0.0f : a; }
                break;
        default: break;
        }
    }
    """
    void ncc_ew_tt(int op, float* x, const float* y, Py_ssize_t n) noexcept nogil
    void ncc_ew3_tt(int op, float* z, const float* x, const float* y, Py_ssize_t n) noexcept nogil
    void ncc_ew3_ts(int op, float* z, const float* x, float s, int rev, Py_ssize_t n) noexcept nogil
    void ncc_ew_ts(int op, float* x, float s, int rev, Py_ssize_t n) noexcept nogil
    int ncc_ew_odd_tt(const float* x, const float* y, Py_ssize_t n) noexcept nogil
    int ncc_ew_odd_ts(const float* x, float s, Py_ssize_t n) noexcept nogil
    void ncc_ew_func(int f, float* x, Py_ssize_t n) noexcept nogil



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
    cdef readonly bint rowwise      # the operands' rows pair one to one: a row at a time (see _run_rows)
    cdef bint direct                # ... and all fp32, contiguous rows, immediate scalars (_run_direct)
    cdef Py_ssize_t n5

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
        self.n5 = self.out.nums[5]
        self.rowwise = (self.n > 0 and self.n5 > 0 and _same_walk(self.out, self.a)
                        and (not self.tensor or _same_walk(self.out, self.b))
                        and (not (self.ap0 or self.ap1) or (self.n // rows) % self.n5 == 0))
        self.direct = (self.rowwise and not (self.ap0 or self.ap1) and self.out.code == 0 and self.a.code == 0
                       and self.out.strides[5] == 4 and self.a.strides[5] == 4
                       and (not self.tensor or (self.b.code == 0 and self.b.strides[5] == 4))
                       and all(st % 4 == 0 for st in list(out.strides) + list(a.strides)
                               + (list(b.strides) if b is not None else [])))

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
        if self.rowwise and _row_safe(self.out, ob, self.a, ab) and \
                (not self.tensor or _row_safe(self.out, ob, self.b, bb)):
            return self._run_rows(env, ab, bb, b0, b1, ob)
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


    cdef int _run_rows(self, dict env, Py_ssize_t ab, Py_ssize_t bb, Py_ssize_t b0, Py_ssize_t b1,
                       Py_ssize_t ob) except -1:
        """run() a row at a time (row j of the output from row j of each operand, in a scratch row
        that stays in cache), for operands whose rows pair one to one and where writing a row
        cannot change what a later row reads (``_row_safe``): the same operations on the same
        values, in the same order per element, as the whole-tile pass. What would send the
        whole-tile pass to the handler (a NaN [P, 1] scalar, max / min meeting a NaN or a signed
        zero tie) is found in a first pass over the rows that writes nothing."""
        cdef Py_ssize_t n5 = self.n5, rows = self.rows, f = self.n // self.rows, j, p
        cdef float* x = _scratch_for(2 * n5 + 2 * rows)
        cdef float* y = x + n5
        cdef float* z0 = y + n5
        cdef float* z1 = z0 + rows
        cdef Rows ra, rb, ro
        cdef bint check = self.op0 >= 12 or self.op1 >= 12
        cdef int rnd
        if self.ap0:
            read_f32_ptr(self.sa0.p, self.sa0.code, b0, self.sa0.strides, self.sa0.nums, z0)
        if self.ap1:
            read_f32_ptr(self.sa1.p, self.sa1.code, b1, self.sa1.strides, self.sa1.nums, z1)
        if self.ap0 or self.ap1:
            for p in range(rows):
                if (self.ap0 and z0[p] != z0[p]) or (self.ap1 and z1[p] != z1[p]):
                    self.fallback(env)
                    return 0
        for rnd in range(2):
            if rnd == 0 and not check:
                continue
            if rnd == 1 and self.direct and (ab | bb | ob) % 4 == 0:
                return self._run_direct(env, ab, bb, ob)
            rows_init(&ra, ab, self.a.strides, self.a.nums)
            if self.tensor:
                rows_init(&rb, bb, self.b.strides, self.b.nums)
            rows_init(&ro, ob, self.out.strides, self.out.nums)
            j = 0
            while rows_next(&ra):
                if self.tensor:
                    rows_next(&rb)
                rows_next(&ro)
                p = (j * n5) // f
                j += 1
                read_run_f32(self.a.code, self.a.p + ra.off, self.a.strides[5], n5, x)
                if self.tensor:
                    read_run_f32(self.b.code, self.b.p + rb.off, self.b.strides[5], n5, y)
                    if rnd == 0 and self.op0 >= 12 and ncc_ew_odd_tt(x, y, n5):
                        self.fallback(env)
                        return 0
                    ncc_ew_tt(self.op0, x, y, n5)
                elif self.op0 != 0:
                    if self.ap0:
                        ncc_ew_ts(self.op0, x, z0[p], self.rev0, n5)
                    else:
                        if rnd == 0 and self.op0 >= 12 and ncc_ew_odd_ts(x, self.s0, n5):
                            self.fallback(env)
                            return 0
                        ncc_ew_ts(self.op0, x, self.s0, self.rev0, n5)
                if self.op1 != 0:
                    if self.ap1:
                        ncc_ew_ts(self.op1, x, z1[p], self.rev1, n5)
                    else:
                        if rnd == 0 and self.op1 >= 12 and ncc_ew_odd_ts(x, self.s1, n5):
                            self.fallback(env)
                            return 0
                        ncc_ew_ts(self.op1, x, self.s1, self.rev1, n5)
                if rnd == 0:
                    continue
                if self.ufn != 0:
                    ncc_ew_func(self.ufn, x, n5)
                write_run_f32(self.out.code, x, self.out.p + ro.off, self.out.strides[5], n5)
        return 0

    cdef int _run_direct(self, dict env, Py_ssize_t ab, Py_ssize_t bb, Py_ssize_t ob) except -1:
        """_run_rows for fp32 operands with contiguous, aligned rows and immediate scalars: each
        output row computed straight from the input rows (the same operation per element), a
        scratch row only where the output row is one of the inputs."""
        cdef Py_ssize_t n5 = self.n5
        cdef float* x = _scratch_for(n5)
        cdef float* z
        cdef const float* xa
        cdef const float* yb = NULL
        cdef Rows ra, rb, ro
        rows_init(&ra, ab, self.a.strides, self.a.nums)
        if self.tensor:
            rows_init(&rb, bb, self.b.strides, self.b.nums)
        rows_init(&ro, ob, self.out.strides, self.out.nums)
        while rows_next(&ra):
            rows_next(&ro)
            xa = <const float*>(self.a.p + ra.off)
            z = <float*>(self.out.p + ro.off)
            if self.tensor:
                rows_next(&rb)
                yb = <const float*>(self.b.p + rb.off)
                if <const float*>z != xa and <const float*>z != yb:
                    ncc_ew3_tt(self.op0, z, xa, yb, n5)
                else:
                    memcpy(x, xa, n5 * 4)
                    ncc_ew_tt(self.op0, x, yb, n5)
                    memcpy(z, x, n5 * 4)
            elif self.op0 != 0:
                if <const float*>z != xa:
                    ncc_ew3_ts(self.op0, z, xa, self.s0, self.rev0, n5)
                else:
                    ncc_ew_ts(self.op0, z, self.s0, self.rev0, n5)
            elif <const float*>z != xa:
                memcpy(z, xa, n5 * 4)
            if self.op1 != 0:
                ncc_ew_ts(self.op1, z, self.s1, self.rev1, n5)
            if self.ufn != 0:
                ncc_ew_func(self.ufn, z, n5)
        return 0


# -- GELU (birsim.alu._gelu) in two typed passes around numpy's float64 exp ------------

import numpy as np

cdef extern from *:
    """
    /* alu._gelu's float64 arithmetic element by element, in numpy's order: xs = x / sqrt(2),
       z = |xs|, t = 1 / (1 + 0.5 z), poly = (-z z - c0) + t (c1 + t (...)); then (after
       e = exp(poly), numpy's) erfc = t e, erf = xs >= 0 ? 1 - erfc : erfc - 1, and the fp32
       rounding of (0.5 x) (1 + erf). No contraction into fused multiply-adds. */
    #include <math.h>
    #include <stdint.h>
    #include <string.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define NCC_GELU_FP __attribute__((optimize("O3", "fp-contract=off"), target_clones("avx512f", "avx2", "default")))
    #elif defined(__GNUC__) && !defined(__clang__)
    #define NCC_GELU_FP __attribute__((optimize("O3", "fp-contract=off")))
    #else
    #define NCC_GELU_FP
    #endif
    static NCC_GELU_FP void ncc_gelu_poly(const float *x, Py_ssize_t n, double *t, double *poly) {
        const double r2 = sqrt(2.0);
        for (Py_ssize_t i = 0; i < n; i++) {
            double xs = (double)x[i] / r2;
            double z = fabs(xs);
            double u = 1.0 / (1.0 + 0.5 * z);
            t[i] = u;
            poly[i] = -z * z - 1.26551223 + u * (1.00002368 + u * (0.37409196 + u * (0.09678418 + u * (
                -0.18628806 + u * (0.27886807 + u * (-1.13520398 + u * (1.48851587 + u * (-0.82215223 +
                u * 0.17087277))))))));
        }
    }
    static NCC_GELU_FP void ncc_gelu_out(const float *x, Py_ssize_t n, const double *t, const double *e, float *y) {
        const double r2 = sqrt(2.0);
        for (Py_ssize_t i = 0; i < n; i++) {
            double x64 = (double)x[i];
            double xs = x64 / r2;
            double erfc = t[i] * e[i];
            double pos = 1.0 - erfc, neg = erfc - 1.0, erf;
            uint64_t up, un, m = (uint64_t)0 - (uint64_t)(xs >= 0), ue;
            memcpy(&up, &pos, 8); memcpy(&un, &neg, 8);
            ue = (up & m) | (un & ~m);          /* branch-free: the signs are random */
            memcpy(&erf, &ue, 8);
            y[i] = (float)(0.5 * x64 * (1.0 + erf));
        }
    }
    """
    void ncc_gelu_poly(const float* x, Py_ssize_t n, double* t, double* poly) noexcept nogil
    void ncc_gelu_out(const float* x, Py_ssize_t n, const double* t, const double* e, float* y) noexcept nogil


cdef object _exp = np.exp


def gelu_f32(x):
    """alu._gelu of a float32 array (any shape): 0.5 x (1 + erf(x / sqrt 2)) in float64, erf by
    alu._erf64's fit, rounded to fp32 -- the same float64 operations in the same order, the exp
    numpy's own (np.exp on float64), without numpy's temporaries."""
    cdef const float[::1] xv = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    cdef Py_ssize_t n = xv.shape[0]
    out = np.empty(np.shape(x), np.float32)
    if n == 0:
        return out
    tp = np.empty((2, n), np.float64)
    cdef double[:, ::1] tv = tp
    cdef float[::1] yv = out.reshape(-1)
    with nogil:
        ncc_gelu_poly(&xv[0], n, &tv[0, 0], &tv[1, 0])
    _exp(tp[1], out=tp[1])
    with nogil:
        ncc_gelu_out(&xv[0], n, &tv[0, 0], &tv[1, 0], &yv[0])
    return out
