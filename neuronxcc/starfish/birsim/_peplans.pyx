# cython: language_level=3, boundscheck=False, wraparound=False
"""Typed execution plans of birsim for the PE array: ``matmul`` (Matmul) and the 4-byte transpose
that a permuting copy is (Transpose32), both on ``_pe``'s kernels. The plan base, the operands and
the fp32 scratch are ``_plans``'s. Semantics: ``Executor.op_matmul`` / the RawCopy it replaces."""
from neuronxcc.starfish.birsim._apinfo cimport APInfo
from neuronxcc.starfish.birsim._kernels cimport read_f32_ptr, write_f32_ptr
from neuronxcc.starfish.birsim._pe cimport mm_f32, transpose_b32
from neuronxcc.starfish.birsim._plans cimport Plan, _Operand, _scratch_for


cdef bint _rows_in_place(_Operand x, Py_ssize_t rows, Py_ssize_t cols) noexcept:
    """X is fp32 rows of COLS unit-stride elements, ROWS of them (one per partition): usable in place."""
    cdef int k
    for k in range(4):
        if x.nums[k] != 1:
            return False
    return x.code == 0 and x.nums[4] == rows and x.nums[5] == cols and x.strides[5] == 4 and \
        (rows == 1 or (x.strides[4] > 0 and x.strides[4] % 4 == 0))


cdef class Matmul(Plan):
    """Executor.op_matmul as a plan: out = stat.T @ mv [+ out] in fp32, the PE arithmetic of
    ``_pe`` (birsim.alu.matmul_f: per result the in-order fp32 sum over K of unfused products;
    accumulation adds the old value, one more fp32 add). Operands of matching sizes (stationary
    [K, M], moving [K, N], output [M, N], one row per partition): an fp32 operand whose rows are
    unit-stride runs is used in place, any other is read through fp32 into the plans' scratch;
    the sums go into an fp32 output in place unless it overlaps an operand (its old values read
    first, as the handler reads them), else into the scratch and are cast on store. Other
    operand sizes run the handler (its numpy error)."""
    cdef _Operand so, mo, oo
    cdef object fallback
    cdef Py_ssize_t K, M, N
    cdef bint acc, ok, sin, min_, oin

    def __init__(self, st, APInfo s, APInfo m, APInfo o, Py_ssize_t srows, Py_ssize_t mrows, Py_ssize_t orows,
                 bint acc, fallback=None):
        self.acc = acc
        self.fallback = fallback
        self.K = srows
        self.M = s.n // srows if srows else 0
        self.N = m.n // mrows if mrows else 0
        self.ok = (srows == mrows and srows > 0 and orows == self.M and s.n == srows * self.M
                   and m.n == mrows * self.N and o.n == self.M * self.N and self.M * self.N > 0)
        if not self.ok and fallback is None:
            raise ValueError("Matmul: operands of other sizes need the handler as fallback")
        if self.ok:
            self.so, self.mo, self.oo = _Operand(s), _Operand(m), _Operand(o)
            self.sin = _rows_in_place(self.so, self.K, self.M)
            self.min_ = _rows_in_place(self.mo, self.K, self.N)
            self.oin = _rows_in_place(self.oo, self.M, self.N)

    cdef int run(self, dict env) except -1:
        if not self.ok:
            self.fallback(env)
            return 0
        cdef Py_ssize_t sb = self.so.info.base(env)
        cdef Py_ssize_t mb = self.mo.info.base(env)
        cdef Py_ssize_t ob = self.oo.info.base(env)
        cdef Py_ssize_t K = self.K, M = self.M, N = self.N, need = K * 32
        cdef bint sin = self.sin and sb % 4 == 0
        cdef bint min_ = self.min_ and mb % 4 == 0
        cdef bint oin = self.oin and ob % 4 == 0 and not _overlaps(self.oo, ob, self.so, sb) and \
            not _overlaps(self.oo, ob, self.mo, mb)
        if not sin:
            need += K * M
        if not min_:
            need += K * N
        if not oin:
            need += M * N
        cdef float* w = _scratch_for(need)
        cdef float* work = w
        w += K * 32
        cdef const float* xs
        cdef const float* xm
        cdef float* r
        cdef Py_ssize_t ss = M, ms = N, rs = N
        if sin:
            xs = <const float*>(self.so.p + sb)
            ss = self.so.strides[4] // 4
        else:
            read_f32_ptr(self.so.p, self.so.code, sb, self.so.strides, self.so.nums, w)
            xs = w
            w += K * M
        if min_:
            xm = <const float*>(self.mo.p + mb)
            ms = self.mo.strides[4] // 4
        else:
            read_f32_ptr(self.mo.p, self.mo.code, mb, self.mo.strides, self.mo.nums, w)
            xm = w
            w += K * N
        if oin:
            r = <float*>(self.oo.p + ob)
            rs = self.oo.strides[4] // 4
            mm_f32(xs, ss, xm, ms, r, rs, K, M, N, self.acc, work)
        else:
            r = w
            if self.acc:
                read_f32_ptr(self.oo.p, self.oo.code, ob, self.oo.strides, self.oo.nums, r)
            mm_f32(xs, ss, xm, ms, r, rs, K, M, N, self.acc, work)
            write_f32_ptr(r, self.oo.p, self.oo.code, ob, self.oo.strides, self.oo.nums)
        return 0


cdef class Transpose32(Plan):
    """A same-dtype transpose of 4-byte elements from [A, B] (A partitions of B unit-stride elements)
    into [B, A], bit for bit what COPY (the RawCopy with the source's dims permuted) writes, by
    ``_pe``'s blocked transpose; an execution whose two operands overlap runs COPY."""
    cdef _Operand so, do
    cdef Plan copy
    cdef Py_ssize_t A, B

    def __init__(self, APInfo src, APInfo dst, Py_ssize_t A, Py_ssize_t B, Plan copy):
        self.so, self.do = _Operand(src), _Operand(dst)
        self.A, self.B = A, B
        self.copy = copy
        if not (_rows_in_place_bytes(self.so, A, B) and _rows_in_place_bytes(self.do, B, A)):
            raise ValueError("Transpose32 needs [A, B] rows into [B, A] rows of unit-stride 4-byte elements")

    cdef int run(self, dict env) except -1:
        cdef Py_ssize_t sb = self.so.info.base(env)
        cdef Py_ssize_t db = self.do.info.base(env)
        if _overlaps(self.do, db, self.so, sb):
            return self.copy.run(env)
        transpose_b32(self.so.p + sb, self.so.strides[4], self.do.p + db, self.do.strides[4], self.A, self.B)
        return 0


cdef bint _rows_in_place_bytes(_Operand x, Py_ssize_t rows, Py_ssize_t cols) noexcept:
    """X is ROWS rows of COLS unit-stride 4-byte elements (any dtype)."""
    cdef int k
    for k in range(4):
        if x.nums[k] != 1:
            return False
    return x.info.itemsize == 4 and x.nums[4] == rows and x.nums[5] == cols and x.strides[5] == 4


cdef bint _overlaps(_Operand x, Py_ssize_t xb, _Operand y, Py_ssize_t yb) noexcept:
    """Do X (at XB) and Y (at YB) share a byte of one storage?"""
    return x.p == y.p and xb + x.lo < yb + y.hi and yb + y.lo < xb + x.hi
