# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False, cdivision=True
"""Compiled evaluation of pelican expressions (the simulator's hot path).

``CompiledExpr(expr, var_order)`` (also ``expr.compile(var_order)``) lowers a
canonical expression to either

* an affine form (``is_affine``): ``constant + sum(coeffs[i] * values[i])``,
  evaluated from sparse (index, coefficient) arrays, or
* a flat stack program of (op, a, b) int64 triples.

``eval_ptr(const int64_t*)`` / ``eval_vec(const int64_t[::1])`` are ``cdef ...
noexcept nogil``: no Python objects, no allocation for stacks up to 64 deep.
Callers guarantee ``len(values) >= nvars``; the Python-level ``__call__`` and
``eval_many`` check it. Arithmetic wraps modulo 2**64 (no overflow check on
this path; construction and ``Expr.eval`` do check).
"""
cimport cython
from libc.stdint cimport int64_t, uint64_t
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy

import numpy as np

from neuronxcc.pelican._expr cimport (Expr, K_CONST, K_VAR, K_ADD, K_FLOORDIV, K_MOD, K_MIN, K_MAX)
from neuronxcc.pelican._intmath cimport fdiv, fmod

cdef enum:
    OP_CONST = 0      # push a
    OP_VAR = 1        # push values[a]
    OP_ACCVAR = 2     # top += b * values[a]
    OP_MULADD = 3     # x = pop; top += b * x
    OP_FDIV = 4       # top = floor(top / a)
    OP_MOD = 5        # top = top mod a
    OP_MIN = 6        # x = pop; top = min(top, x)
    OP_MAX = 7        # x = pop; top = max(top, x)
    OP_SHR = 8        # top = top >> a      (floor division by 2**a)
    OP_AND = 9        # top = top & a       (modulo 2**k, a = 2**k - 1)

cdef enum:
    CHUNK = 256       # rows evaluated together by eval_rows (column-wise)

cdef enum:
    STACK = 64        # stack slots on the C stack; deeper programs malloc


cdef Py_ssize_t _emit(Expr e, dict idx, list prog, Py_ssize_t sp) except -1:
    # Append code that pushes e at stack slot sp; return the depth reached.
    cdef Py_ssize_t d, i
    cdef Expr a
    if e.kind == K_CONST:
        prog.extend((OP_CONST, e.val, 0))
        return sp + 1
    if e.kind == K_VAR:
        prog.extend((OP_VAR, idx[e.name], 0))
        return sp + 1
    if e.kind == K_ADD:
        prog.extend((OP_CONST, e.val, 0))
        d = sp + 1
        for i in range(e.n):
            a = <Expr>e.ch[i]
            if a.kind == K_VAR:
                prog.extend((OP_ACCVAR, idx[a.name], e.cf[i]))
            else:
                d = max(d, _emit(a, idx, prog, sp + 1))
                prog.extend((OP_MULADD, 0, e.cf[i]))
        return d
    if e.kind == K_FLOORDIV or e.kind == K_MOD:
        d = _emit(<Expr>e.ch[0], idx, prog, sp)
        k = e.val
        if k & (k - 1) == 0:
            # powers of two: an arithmetic shift is floor division, a mask is
            # the (nonnegative) modulo, for negative values too
            if e.kind == K_FLOORDIV:
                prog.extend((OP_SHR, k.bit_length() - 1, 0))
            else:
                prog.extend((OP_AND, k - 1, 0))
        else:
            prog.extend((OP_FDIV if e.kind == K_FLOORDIV else OP_MOD, k, 0))
        return d
    d = _emit(<Expr>e.ch[0], idx, prog, sp)
    for i in range(1, e.n):
        d = max(d, _emit(<Expr>e.ch[i], idx, prog, sp + 1))
        prog.extend((OP_MIN if e.kind == K_MIN else OP_MAX, 0, 0))
    return d


@cython.final
cdef class CompiledExpr:
    """An expression lowered for fast evaluation from int64 values in var_order."""

    def __init__(self, Expr expr, var_order):
        cdef dict idx = {}
        cdef list prog = []
        cdef const int64_t[::1] mv
        order = tuple(var_order)
        for i, n in enumerate(order):
            if not isinstance(n, str):
                raise TypeError("pelican: var_order holds names, got %r" % (n,))
            if n in idx:
                raise ValueError("pelican: %r appears twice in var_order" % n)
            idx[n] = i
        missing = sorted(expr.free_vars() - set(order))
        if missing:
            raise ValueError("pelican: var_order %r lacks %s used by %s" % (order, ", ".join(missing), expr))
        self.expr = expr
        self.var_order = order
        self.nvars = len(order)
        aff = expr.affine()
        self.is_affine = aff is not None
        self.coeffs = None
        self.constant = 0
        if aff is not None:
            coeffs, self.constant = aff
            dense = np.zeros(self.nvars, dtype=np.int64)
            for n, c in coeffs.items():
                dense[idx[n]] = c
            dense.setflags(write=False)
            self.coeffs = dense
            nz = np.flatnonzero(dense)
            self._aidx = np.ascontiguousarray(nz, dtype=np.int64)
            self._acoef = np.ascontiguousarray(dense[nz], dtype=np.int64)
            self.annz = len(nz)
            if self.annz:
                mv = self._aidx
                self.aidx = &mv[0]
                mv = self._acoef
                self.acoef = &mv[0]
        self.depth = _emit(expr, idx, prog, 0)
        self._code = np.array(prog, dtype=np.int64)
        self.ncode = len(prog) // 3
        mv = self._code
        self.code = &mv[0]

    cdef int64_t eval_ptr(self, const int64_t* values) noexcept nogil:
        cdef Py_ssize_t i, sp = 0
        cdef int64_t op
        cdef uint64_t acc
        cdef int64_t x, k
        cdef int64_t buf[STACK]
        cdef int64_t* st = buf
        cdef const int64_t* c
        if self.is_affine:
            acc = <uint64_t>self.constant
            for i in range(self.annz):
                acc += <uint64_t>self.acoef[i] * <uint64_t>values[self.aidx[i]]
            return <int64_t>acc
        if self.depth > STACK:
            st = <int64_t*>malloc(self.depth * sizeof(int64_t))
            if st == NULL:
                return 0
        for i in range(self.ncode):
            c = self.code + 3 * i
            op = c[0]
            if op == OP_CONST:
                st[sp] = c[1]
                sp += 1
            elif op == OP_VAR:
                st[sp] = values[c[1]]
                sp += 1
            elif op == OP_ACCVAR:
                st[sp - 1] = <int64_t>(<uint64_t>st[sp - 1] + <uint64_t>c[2] * <uint64_t>values[c[1]])
            elif op == OP_MULADD:
                sp -= 1
                st[sp - 1] = <int64_t>(<uint64_t>st[sp - 1] + <uint64_t>c[2] * <uint64_t>st[sp])
            elif op == OP_FDIV:
                st[sp - 1] = fdiv(st[sp - 1], c[1])
            elif op == OP_MOD:
                st[sp - 1] = fmod(st[sp - 1], c[1])
            elif op == OP_SHR:
                st[sp - 1] = st[sp - 1] >> c[1]
            elif op == OP_AND:
                st[sp - 1] = st[sp - 1] & c[1]
            elif op == OP_MIN:
                sp -= 1
                if st[sp] < st[sp - 1]:
                    st[sp - 1] = st[sp]
            else:
                sp -= 1
                if st[sp] > st[sp - 1]:
                    st[sp - 1] = st[sp]
        x = st[0]
        if st != buf:
            free(st)
        return x

    cdef int64_t eval_vec(self, const int64_t[::1] values) noexcept nogil:
        return self.eval_ptr(&values[0]) if values.shape[0] else self.eval_ptr(NULL)

    cdef int eval_rows(self, const int64_t* values, Py_ssize_t nrows, Py_ssize_t stride,
                       int64_t* out) except -1 nogil:
        """out[r] = value at values[r*stride : r*stride + nvars], r < nrows.

        Column-wise over chunks of CHUNK rows: each instruction runs over the
        whole chunk, so the loops are plain (vectorisable) array loops."""
        cdef Py_ssize_t b0, m, r, i, sp, j
        cdef int64_t* st
        cdef int64_t* t
        cdef int64_t* u
        cdef const int64_t* c
        cdef int64_t a, k, op
        if self.is_affine:
            b0 = 0
            while b0 < nrows:
                m = min(<Py_ssize_t>CHUNK, nrows - b0)
                t = out + b0
                for r in range(m):
                    t[r] = self.constant
                for j in range(self.annz):
                    a = self.acoef[j]
                    i = self.aidx[j]
                    for r in range(m):
                        t[r] = <int64_t>(<uint64_t>t[r] + <uint64_t>a * <uint64_t>values[(b0 + r) * stride + i])
                b0 += CHUNK
            return 0
        st = <int64_t*>malloc(self.depth * CHUNK * sizeof(int64_t))
        if st == NULL:
            with gil:
                raise MemoryError()
        b0 = 0
        while b0 < nrows:
            m = min(<Py_ssize_t>CHUNK, nrows - b0)
            sp = 0
            for i in range(self.ncode):
                c = self.code + 3 * i
                a = c[1]
                k = c[2]
                op = c[0]
                if op == OP_CONST:
                    t = st + sp * CHUNK
                    for r in range(m):
                        t[r] = a
                    sp += 1
                elif op == OP_VAR:
                    t = st + sp * CHUNK
                    for r in range(m):
                        t[r] = values[(b0 + r) * stride + a]
                    sp += 1
                elif op == OP_ACCVAR:
                    t = st + (sp - 1) * CHUNK
                    for r in range(m):
                        t[r] = <int64_t>(<uint64_t>t[r] + <uint64_t>k * <uint64_t>values[(b0 + r) * stride + a])
                elif op == OP_MULADD:
                    sp -= 1
                    t = st + (sp - 1) * CHUNK
                    u = st + sp * CHUNK
                    for r in range(m):
                        t[r] = <int64_t>(<uint64_t>t[r] + <uint64_t>k * <uint64_t>u[r])
                elif op == OP_FDIV:
                    t = st + (sp - 1) * CHUNK
                    for r in range(m):
                        t[r] = fdiv(t[r], a)
                elif op == OP_MOD:
                    t = st + (sp - 1) * CHUNK
                    for r in range(m):
                        t[r] = fmod(t[r], a)
                elif op == OP_SHR:
                    t = st + (sp - 1) * CHUNK
                    for r in range(m):
                        t[r] = t[r] >> a
                elif op == OP_AND:
                    t = st + (sp - 1) * CHUNK
                    for r in range(m):
                        t[r] = t[r] & a
                else:
                    sp -= 1
                    t = st + (sp - 1) * CHUNK
                    u = st + sp * CHUNK
                    if op == OP_MIN:
                        for r in range(m):
                            if u[r] < t[r]:
                                t[r] = u[r]
                    else:
                        for r in range(m):
                            if u[r] > t[r]:
                                t[r] = u[r]
            memcpy(out + b0, st, m * sizeof(int64_t))
            b0 += CHUNK
        free(st)
        return 0

    def __call__(self, values):
        """The value for int64 values (a sequence or 1-D array in var_order)."""
        cdef int64_t buf[STACK]
        cdef Py_ssize_t i, n
        cdef const int64_t[::1] mv
        if isinstance(values, np.ndarray):
            mv = np.ascontiguousarray(values, dtype=np.int64).reshape(-1)
            if mv.shape[0] < self.nvars:
                raise ValueError("pelican: need %d values in the order %r, got %d"
                                 % (self.nvars, self.var_order, mv.shape[0]))
            return self.eval_vec(mv)
        n = len(values)
        if n < self.nvars:
            raise ValueError("pelican: need %d values in the order %r, got %d" % (self.nvars, self.var_order, n))
        if self.nvars > STACK:
            return self(np.asarray(values, dtype=np.int64))
        for i in range(self.nvars):
            buf[i] = values[i]
        return self.eval_ptr(buf)

    def eval_many(self, values):
        """Values for each row of a 2-D int64 array (rows = assignments in var_order)."""
        arr = np.ascontiguousarray(values, dtype=np.int64)
        if arr.ndim != 2 or arr.shape[1] < self.nvars:
            raise ValueError("pelican: need rows of %d values in the order %r, got shape %s"
                             % (self.nvars, self.var_order, arr.shape))
        out = np.empty(arr.shape[0], dtype=np.int64)
        if arr.shape[0] == 0:
            return out
        cdef const int64_t[:, ::1] mv = arr
        cdef int64_t[::1] o = out
        cdef const int64_t* base = &mv[0, 0] if arr.shape[1] else NULL
        cdef Py_ssize_t n = arr.shape[0], stride = arr.shape[1]
        with nogil:
            self.eval_rows(base, n, stride, &o[0])
        return out

    def __reduce__(self):
        return (CompiledExpr, (self.expr, self.var_order))

    def __repr__(self):
        return "CompiledExpr(%r, %r)" % (str(self.expr), self.var_order)
