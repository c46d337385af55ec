# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""pelican expression core: canonical symbolic integer expressions.

Owns the ``Expr`` node type and every rewrite rule. Invariants:

* Nodes are immutable and always canonical: every constructor (operators,
  ``var``, ``const``, ``min_``, ``max_``, ``subs``, ``parse``) returns the
  canonical form, so structural equality (``==``) is the equality of canonical
  forms and ``hash`` agrees with it (a constant hashes like its int).
* A sum is a linear combination ``c0 + sum(c_i * atom_i)`` with nonzero
  coefficients and atoms in the canonical total order (``expr_cmp``); an atom
  is a variable or a ``//``, ``%``, ``min``, ``max`` node. ``1*atom + 0`` is
  the atom itself, a sum without atoms is a constant.
* Every construction-time rule holds for all integer values of the variables
  (Python floor semantics). Range-dependent rules run only in
  ``simplify(ranges)``, which must not leak: its result carries no ranges.
* Integers are int64; construction raises OverflowError rather than wrap.

The operators call the rules here at C level, so the node type, the linear
combination builder (``Lin``) and the rules share this module; read-only
walks (eval, bounds, text, range simplification) live in ``_walks.pyx``,
intervals and integer helpers in the inline headers ``_interval.pxd`` and
``_intmath.pxd``.
"""
cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.number cimport PyNumber_Index
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, Py_XINCREF, PyObject
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy, memmove

from neuronxcc.pelican._intmath cimport ck_add, ck_mul, fdiv, fmod, gcd64, h_fix, h_mix
from neuronxcc.pelican._interval cimport (b_add, b_floordiv, b_le, b_make, b_max, b_min, b_mod,
                                          b_scale, b_unbounded)

import re
from sys import intern as _intern

cdef Bnd UNBOUNDED = b_unbounded()


# ---------------------------------------------------------------- node makers

cdef list _SMALL = []
cdef int64_t _SMALL_LO = -64
cdef int64_t _SMALL_HI = 1024


cdef Expr _new_const(int64_t v):
    cdef Expr e = Expr.__new__(Expr)
    e.kind = K_CONST
    e.val = v
    e.hsh = hash(v)
    e.ib = b_make(v, v, True, True)
    return e


cdef Expr mk_const(int64_t v):
    if _SMALL_LO <= v < _SMALL_HI:
        return <Expr>_SMALL[v - _SMALL_LO]
    return _new_const(v)


cdef Expr mk_var(str name, Bnd b):
    cdef Expr e = Expr.__new__(Expr)
    cdef Py_hash_t h = hash(name)
    e.kind = K_VAR
    e.name = name
    e.val = h               # the name's hash (substitution lookups compare it first)
    e.hsh = h_fix(h_mix(<uint64_t>K_VAR, <uint64_t>h))
    e.ib = b
    e.vmask = (<uint64_t>1) << (<uint64_t>h & 63)
    return e


cdef Expr new_node(int kind, Py_ssize_t n, bint with_cf):
    # An Expr with room for n children (and n coefficients); the caller
    # stores the children (owned references) one by one, raising e.n as it goes.
    cdef Expr e = Expr.__new__(Expr)
    cdef size_t per = sizeof(PyObject*) + (sizeof(int64_t) if with_cf else 0)
    e.kind = kind
    e.ch = <PyObject**>PyMem_Malloc(n * per if n > 0 else per)
    if e.ch == NULL:
        raise MemoryError()
    if with_cf:
        e.cf = <int64_t*>(e.ch + n)
    e.n = 0
    return e


cdef inline void put(Expr e, Expr child) noexcept:
    Py_INCREF(child)
    e.ch[e.n] = <PyObject*>child
    e.n += 1


cdef Expr finish_node(Expr e):
    # hash, intrinsic bounds and variable mask of a //, %, min or max node
    cdef uint64_t h = h_mix(<uint64_t>e.kind, <uint64_t>e.val)
    cdef uint64_t vm = 0
    cdef Expr a
    cdef Bnd b
    cdef Py_ssize_t i
    for i in range(e.n):
        a = <Expr>e.ch[i]
        h = h_mix(h, <uint64_t>a.hsh)
        vm |= a.vmask
    e.hsh = h_fix(h)
    e.vmask = vm
    a = <Expr>e.ch[0]
    if e.kind == K_FLOORDIV:
        b = b_floordiv(a.ib, e.val)
    elif e.kind == K_MOD:
        b = b_mod(a.ib, e.val)
    else:
        b = a.ib
        for i in range(1, e.n):
            b = b_min(b, (<Expr>e.ch[i]).ib) if e.kind == K_MIN else b_max(b, (<Expr>e.ch[i]).ib)
    e.ib = b
    return e


cdef Expr mk_div(int kind, Expr x, int64_t k):
    # K_FLOORDIV or K_MOD node x // k, x % k (x canonical, nothing left to apply)
    cdef Expr e = new_node(kind, 1, False)
    e.val = k
    put(e, x)
    return finish_node(e)


cdef Expr mk_minmax(int kind, list items):
    # K_MIN / K_MAX node over sorted, deduplicated operands
    cdef Expr e = new_node(kind, len(items), False)
    cdef Expr a
    for a in items:
        put(e, a)
    return finish_node(e)


cdef Expr mk_minmax2(int kind, Expr x, Expr y):
    cdef Expr e = new_node(kind, 2, False)
    put(e, x)
    put(e, y)
    return finish_node(e)


cdef Expr finish_add(Expr e, int64_t c):
    # hash, intrinsic bounds and variable mask of a filled sum node
    cdef uint64_t h = h_mix(<uint64_t>K_ADD, <uint64_t>c)
    cdef Bnd b = b_make(c, c, True, True)
    cdef uint64_t vm = 0
    cdef Py_ssize_t i
    cdef Expr a
    for i in range(e.n):
        a = <Expr>e.ch[i]
        h = h_mix(h_mix(h, <uint64_t>a.hsh), <uint64_t>e.cf[i])
        b = b_add(b, b_scale(a.ib, e.cf[i]))
        vm |= a.vmask
    e.val = c
    e.hsh = h_fix(h)
    e.ib = b
    e.vmask = vm
    return e


cdef Expr mk_add2(Expr x, int64_t cx, Expr y, int64_t cy, int64_t c):
    # sum of two distinct atoms, x before y in the canonical order
    cdef Expr e = new_node(K_ADD, 2, True)
    e.cf[0] = cx
    e.cf[1] = cy
    put(e, x)
    put(e, y)
    return finish_add(e, c)


cdef Expr mk_add1(Expr x, int64_t cx, int64_t c):
    cdef Expr e = new_node(K_ADD, 1, True)
    e.cf[0] = cx
    put(e, x)
    return finish_add(e, c)


# ---------------------------------------------------------------- order and equality

cdef bint expr_eq(Expr a, Expr b) except -1:
    cdef Py_ssize_t i, n
    if a is b:
        return True
    if a.kind != b.kind or a.hsh != b.hsh or a.val != b.val:
        return False
    if a.kind == K_CONST:
        return True
    if a.kind == K_VAR:
        return a.name == b.name
    n = a.n
    if n != b.n:
        return False
    if a.kind == K_ADD:
        for i in range(n):
            if a.cf[i] != b.cf[i]:
                return False
    for i in range(n):
        if not expr_eq(<Expr>a.ch[i], <Expr>b.ch[i]):
            return False
    return True


cdef int expr_cmp(Expr a, Expr b) except -2:
    """The canonical total order: -1, 0, 1 (0 exactly when expr_eq)."""
    cdef Py_ssize_t i, n, m
    cdef int r
    if a is b:
        return 0
    if a.kind != b.kind:
        return -1 if a.kind < b.kind else 1
    if a.kind == K_CONST:
        return 0 if a.val == b.val else (-1 if a.val < b.val else 1)
    if a.kind == K_VAR:
        if a.hsh == b.hsh and a.name == b.name:
            return 0
        return -1 if a.name < b.name else 1
    n = a.n
    m = b.n
    if n != m:
        return -1 if n < m else 1
    for i in range(n):
        r = expr_cmp(<Expr>a.ch[i], <Expr>b.ch[i])
        if r:
            return r
    if a.kind == K_ADD:
        for i in range(n):
            if a.cf[i] != b.cf[i]:
                return -1 if a.cf[i] < b.cf[i] else 1
    if a.val != b.val:
        return -1 if a.val < b.val else 1
    return 0


# ---------------------------------------------------------------- linear combinations

cdef enum:
    LIN_INLINE = 16         # terms held without a heap allocation


@cython.final
@cython.freelist(8)
@cython.no_gc
cdef class Lin:
    """A linear combination being built: sorted atoms (owned references),
    their coefficients and a constant; ``build()`` returns the canonical Expr."""
    cdef PyObject** at
    cdef int64_t* cf
    cdef Py_ssize_t n
    cdef Py_ssize_t cap
    cdef int64_t c
    cdef PyObject* at0[LIN_INLINE]
    cdef int64_t cf0[LIN_INLINE]

    def __cinit__(self):
        self.at = self.at0
        self.cf = self.cf0
        self.n = 0
        self.cap = LIN_INLINE
        self.c = 0

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            Py_XDECREF(self.at[i])
        if self.at != self.at0:
            PyMem_Free(self.at)
            PyMem_Free(self.cf)

    cdef int grow(self, Py_ssize_t need) except -1:
        cdef Py_ssize_t cap
        cdef PyObject** nat
        cdef int64_t* ncf
        if need <= self.cap:
            return 0
        cap = need if need > 2 * self.cap else 2 * self.cap
        nat = <PyObject**>PyMem_Malloc(cap * sizeof(PyObject*))
        ncf = <int64_t*>PyMem_Malloc(cap * sizeof(int64_t))
        if nat == NULL or ncf == NULL:
            PyMem_Free(nat)
            PyMem_Free(ncf)
            raise MemoryError()
        memcpy(nat, self.at, self.n * sizeof(PyObject*))
        memcpy(ncf, self.cf, self.n * sizeof(int64_t))
        if self.at != self.at0:
            PyMem_Free(self.at)
            PyMem_Free(self.cf)
        self.at = nat
        self.cf = ncf
        self.cap = cap
        return 0

    cdef int push(self, Expr atom, int64_t k) except -1:
        # append an atom known to sort after every atom held
        if k == 0:
            return 0
        self.grow(self.n + 1)
        Py_INCREF(atom)
        self.at[self.n] = <PyObject*>atom
        self.cf[self.n] = k
        self.n += 1
        return 0

    cdef void remove(self, Py_ssize_t i) noexcept:
        Py_XDECREF(self.at[i])
        memmove(&self.at[i], &self.at[i + 1], (self.n - i - 1) * sizeof(PyObject*))
        memmove(&self.cf[i], &self.cf[i + 1], (self.n - i - 1) * sizeof(int64_t))
        self.n -= 1

    cdef int add_term(self, Expr atom, int64_t k) except -1:
        cdef Py_ssize_t lo = 0, hi = self.n, mid
        cdef int r
        if k == 0:
            return 0
        while lo < hi:
            mid = (lo + hi) >> 1
            r = expr_cmp(<Expr>self.at[mid], atom)
            if r == 0:
                self.cf[mid] = ck_add(self.cf[mid], k)
                if self.cf[mid] == 0:
                    self.remove(mid)
                return 0
            if r < 0:
                lo = mid + 1
            else:
                hi = mid
        self.grow(self.n + 1)
        memmove(&self.at[lo + 1], &self.at[lo], (self.n - lo) * sizeof(PyObject*))
        memmove(&self.cf[lo + 1], &self.cf[lo], (self.n - lo) * sizeof(int64_t))
        Py_INCREF(atom)
        self.at[lo] = <PyObject*>atom
        self.cf[lo] = k
        self.n += 1
        return 0

    cdef int add(self, Expr e, int64_t k) except -1:
        cdef Py_ssize_t i, m
        if k == 0:
            return 0
        if e.kind == K_CONST:
            self.c = ck_add(self.c, ck_mul(e.val, k))
        elif e.kind == K_ADD:
            m = e.n
            if self.n == 0:
                self.grow(m)
                for i in range(m):
                    self.cf[i] = ck_mul(e.cf[i], k)
                for i in range(m):
                    Py_XINCREF(e.ch[i])
                    self.at[i] = e.ch[i]
                self.n = m
            else:
                for i in range(m):
                    self.add_term(<Expr>e.ch[i], ck_mul(e.cf[i], k))
            self.c = ck_add(self.c, ck_mul(e.val, k))
        else:
            self.add_term(e, k)
        return 0

    cdef int divide(self, int64_t g) except -1:
        # every coefficient is a multiple of g
        cdef Py_ssize_t i
        for i in range(self.n):
            self.cf[i] = self.cf[i] // g
        return 0

    cdef int64_t coef_gcd(self, int64_t g) noexcept:
        cdef Py_ssize_t i
        for i in range(self.n):
            g = gcd64(g, self.cf[i])
        return g

    cdef bint _fold_divmod(self) except -1:
        # c*k*(y // k) + c*(y % k) == c*y  (the division identity)
        cdef Py_ssize_t i, j
        cdef Expr m, f, d
        cdef int64_t c, want
        for i in range(self.n):
            m = <Expr>self.at[i]
            if m.kind != K_MOD:
                continue
            c = self.cf[i]
            want = ck_mul(c, m.val)
            f = None
            for j in range(self.n):
                d = <Expr>self.at[j]
                if d.kind != K_FLOORDIV or self.cf[j] != want or (d.vmask & ~m.vmask) != 0:
                    continue
                if f is None:
                    f = floordiv_const(<Expr>m.ch[0], m.val)
                if expr_eq(d, f):
                    Py_INCREF(m)
                    if j > i:
                        self.remove(j)
                        self.remove(i)
                    else:
                        self.remove(i)
                        self.remove(j)
                    self.add(<Expr>m.ch[0], c)
                    Py_DECREF(m)
                    return True
        return False

    cdef Expr build(self):
        cdef Py_ssize_t i
        cdef bint has_mod = False, has_div = False
        cdef Expr a, e
        for i in range(self.n):
            a = <Expr>self.at[i]
            if a.kind == K_MOD:
                has_mod = True
            elif a.kind == K_FLOORDIV:
                has_div = True
        if has_mod and has_div:
            while self._fold_divmod():
                pass
        if self.n == 0:
            return mk_const(self.c)
        if self.n == 1 and self.c == 0 and self.cf[0] == 1:
            return <Expr>self.at[0]
        e = new_node(K_ADD, self.n, True)
        memcpy(e.cf, self.cf, self.n * sizeof(int64_t))
        for i in range(self.n):
            Py_XINCREF(self.at[i])
            e.ch[i] = self.at[i]
        e.n = self.n
        return finish_add(e, self.c)


cdef inline Lin new_lin():
    return Lin.__new__(Lin)


cdef inline Py_ssize_t nterms(Expr e) noexcept:
    if e.kind == K_ADD:
        return e.n
    return 0 if e.kind == K_CONST else 1


cdef inline Expr term_atom(Expr e, Py_ssize_t i):
    return <Expr>e.ch[i] if e.kind == K_ADD else e


cdef inline int64_t term_coef(Expr e, Py_ssize_t i) noexcept:
    return e.cf[i] if e.kind == K_ADD else 1


cdef inline int64_t const_of(Expr e) noexcept:
    return e.val if (e.kind == K_ADD or e.kind == K_CONST) else 0


# ---------------------------------------------------------------- canonical constructors

cdef Expr copy_add(Expr a, int64_t k, int64_t c):
    # the sum a (K_ADD) with coefficients times k and constant c
    cdef Expr e = new_node(K_ADD, a.n, True)
    cdef Py_ssize_t i
    for i in range(a.n):
        e.cf[i] = a.cf[i] if k == 1 else ck_mul(a.cf[i], k)
    for i in range(a.n):
        Py_XINCREF(a.ch[i])
        e.ch[i] = a.ch[i]
    e.n = a.n
    return finish_add(e, c)


cdef Expr add_const(Expr a, int64_t c):
    """a + c, canonical."""
    cdef int64_t nc
    if c == 0:
        return a
    if a.kind == K_CONST:
        return mk_const(ck_add(a.val, c))
    if a.kind == K_ADD:
        nc = ck_add(a.val, c)
        if nc == 0 and a.n == 1 and a.cf[0] == 1:
            return <Expr>a.ch[0]
        return copy_add(a, 1, nc)
    return mk_add1(a, 1, c)


cdef Expr add_scaled(Expr a, Expr b, int64_t cb):
    """a + cb*b, canonical."""
    cdef Lin lin
    cdef int r
    if cb == 0:
        return a
    if b.kind == K_CONST:
        return add_const(a, ck_mul(b.val, cb))
    if a.kind == K_CONST:
        return add_const(mul_const(b, cb), a.val)
    if a.kind != K_ADD and b.kind != K_ADD and not (a.kind == K_MOD and b.kind == K_FLOORDIV) \
            and not (a.kind == K_FLOORDIV and b.kind == K_MOD):
        # two atoms: no search, no identity to apply
        r = expr_cmp(a, b)
        if r == 0:
            return mul_const(a, ck_add(1, cb))
        if r < 0:
            return mk_add2(a, 1, b, cb, 0)
        return mk_add2(b, cb, a, 1, 0)
    lin = new_lin()
    lin.add(a, 1)
    lin.add(b, cb)
    return lin.build()


cdef Expr mul_const(Expr a, int64_t k):
    if k == 1:
        return a
    if k == 0:
        return ZERO
    if a.kind == K_CONST:
        return mk_const(ck_mul(a.val, k))
    if a.kind == K_ADD:
        if a.n == 1 and a.val == 0 and a.cf[0] == -1 and k == -1:
            return <Expr>a.ch[0]
        return copy_add(a, k, ck_mul(a.val, k))
    return mk_add1(a, k, 0)


cdef inline bint _same_block(Bnd b, int64_t k, int64_t* m) noexcept:
    # True when b lies in one block [m*k, m*k + k - 1]
    if b.has_lo and b.has_hi:
        m[0] = fdiv(b.lo, k)
        return m[0] == fdiv(b.hi, k)
    return False


cdef Expr floordiv_canon(Expr ye, int64_t k):
    # ye // k for a dividend with nothing left to move out
    cdef int64_t m
    if ye.kind == K_FLOORDIV:
        # (x // a) // k == x // (a*k)
        return floordiv_const(<Expr>ye.ch[0], ck_mul(ye.val, k))
    if ye.kind == K_MOD and ye.val % k == 0:
        # (x % (a*k)) // k == (x // k) % a
        return mod_const(floordiv_const(<Expr>ye.ch[0], k), ye.val // k)
    if _same_block(ye.ib, k, &m):
        return mk_const(m)
    return mk_div(K_FLOORDIV, ye, k)


cdef Expr floordiv_const(Expr a, int64_t k):
    cdef int64_t m, g, cf, r
    cdef Py_ssize_t i, n
    cdef Lin q, y
    cdef Expr ye, atom, res
    if k <= 0:
        raise ValueError("pelican: floordiv by %d: the divisor must be a positive integer" % k)
    if k == 1:
        return a
    if a.kind == K_CONST:
        return mk_const(fdiv(a.val, k))
    if _same_block(a.ib, k, &m):
        return mk_const(m)
    if a.kind != K_ADD:
        return floordiv_canon(a, k)
    # (k*x + y) // k == x + y // k: move the terms divisible by k out.
    q = new_lin()
    y = new_lin()
    n = nterms(a)
    for i in range(n):
        cf = term_coef(a, i)
        if cf % k == 0:
            q.push(term_atom(a, i), cf // k)
        else:
            y.push(term_atom(a, i), cf)
    r = const_of(a)
    q.c = fdiv(r, k)
    y.c = fmod(r, k)
    if y.n == 0:
        return q.build()          # y in [0, k): y // k == 0
    # (g*u + c) // (g*v) == (u + c//g) // v  (a floor of a floor; 0 <= c < g*v)
    g = y.coef_gcd(k)
    if g > 1:
        k //= g
        y.c //= g
        y.divide(g)
    res = None
    for i in range(y.n):
        atom = <Expr>y.at[i]
        if atom.kind == K_FLOORDIV and y.cf[i] == 1:
            # (x // a + u) // k == (x + a*u) // (a*k)
            Py_INCREF(atom)       # keep it alive across remove()
            y.remove(i)
            res = floordiv_const(add_scaled(<Expr>atom.ch[0], y.build(), atom.val), ck_mul(atom.val, k))
            Py_DECREF(atom)
            break
    if res is None:
        res = floordiv_canon(y.build(), k)
    if q.n == 0:
        return add_const(res, q.c)
    q.add(res, 1)
    return q.build()


cdef Expr mod_const(Expr a, int64_t k):
    cdef int64_t m, g, cf
    cdef Py_ssize_t i, j, n
    cdef Lin y
    cdef Expr ye, atom
    if k <= 0:
        raise ValueError("pelican: mod by %d: the modulus must be a positive integer" % k)
    if k == 1:
        return ZERO
    if a.kind == K_CONST:
        return mk_const(fmod(a.val, k))
    if _same_block(a.ib, k, &m):
        return add_const(a, -ck_mul(m, k))
    if a.kind != K_ADD:
        if a.kind == K_MOD and a.val % k == 0:
            return mod_const(<Expr>a.ch[0], k)
        return mk_div(K_MOD, a, k)
    y = new_lin()
    n = nterms(a)
    for i in range(n):
        atom = term_atom(a, i)
        cf = term_coef(a, i)
        if cf % k == 0:
            continue                      # (k*x + y) % k == y % k
        if atom.kind == K_MOD and atom.val % k == 0:
            y.add(<Expr>atom.ch[0], cf) # (x % (a*k)) % k == x % k
        else:
            y.add_term(atom, cf)
    y.c = fmod(ck_add(y.c, const_of(a)), k)
    # terms brought in from inner mods may be multiples of k
    j = 0
    while j < y.n:
        if y.cf[j] % k == 0:
            y.remove(j)
        else:
            j += 1
    if y.n == 0:
        return mk_const(y.c)
    # (g*u + c) % (g*v) == g*((u + c//g) % v) + c % g  (0 <= c < g*v)
    g = y.coef_gcd(k)
    if g > 1:
        m = y.c % g
        y.c //= g
        y.divide(g)
        return add_const(mul_const(mod_const(y.build(), k // g), g), m)
    ye = y.build()
    if _same_block(ye.ib, k, &m):
        return add_const(ye, -ck_mul(m, k))
    return mk_div(K_MOD, ye, k)


cdef int64_t BIG = (<int64_t>1) << 62


cdef bint _const_diff(Expr a, Expr b, int64_t* d) except -1:
    # True (and d = a - b) when a - b is a constant
    cdef Py_ssize_t i, n = nterms(a)
    if n != nterms(b):
        return False
    for i in range(n):
        if term_coef(a, i) != term_coef(b, i) or not expr_eq(term_atom(a, i), term_atom(b, i)):
            return False
    if not (-BIG < const_of(a) < BIG and -BIG < const_of(b) < BIG):
        return False                      # keep the difference clear of overflow
    d[0] = const_of(a) - const_of(b)
    return True


cdef Expr minmax2(int kind, Expr a, Expr b):
    """min/max of two expressions: the common case without list juggling."""
    cdef int64_t d
    cdef int r
    cdef bint is_min = kind == K_MIN
    if a.kind == kind or b.kind == kind:
        return minmax(kind, [a, b])
    if a.kind == K_CONST and b.kind == K_CONST:
        return a if ((a.val <= b.val) == is_min) else b
    if b_le(a.ib, b.ib):
        return a if is_min else b
    if b_le(b.ib, a.ib):
        return b if is_min else a
    if _const_diff(a, b, &d):
        return a if ((d <= 0) == is_min) else b
    r = expr_cmp(a, b)
    if r == 0:
        return a
    return mk_minmax2(kind, a, b) if r < 0 else mk_minmax2(kind, b, a)


cdef Expr minmax(int kind, list items):
    """min (kind K_MIN) or max (K_MAX) of canonical expressions, canonical."""
    cdef list flat = []
    cdef Expr e, o, cst = None
    cdef Py_ssize_t i, j, n
    cdef int64_t d
    cdef bint is_min = kind == K_MIN, drop
    for e in items:
        if e.kind == kind:
            for i in range(e.n):
                flat.append(<Expr>e.ch[i])
        elif e.kind == K_CONST:
            if cst is None or (e.val < cst.val if is_min else e.val > cst.val):
                cst = e
        else:
            flat.append(e)
    if cst is not None:
        flat.append(cst)
    if not flat:
        raise ValueError("pelican: min/max of no operands")
    n = len(flat)
    if n > 1:
        # drop every operand another surviving operand always beats
        keep = [True] * n
        for i in range(n):
            e = <Expr>flat[i]
            drop = False
            for j in range(n):
                if j == i or not keep[j]:
                    continue
                o = <Expr>flat[j]
                if is_min:
                    drop = b_le(o.ib, e.ib) or (_const_diff(o, e, &d) and d <= 0)
                else:
                    drop = b_le(e.ib, o.ib) or (_const_diff(o, e, &d) and d >= 0)
                if drop:
                    break
            if drop:
                keep[i] = False
        flat = [flat[i] for i in range(n) if keep[i]]
    if len(flat) == 1:
        return <Expr>flat[0]
    # canonical order (insertion sort on expr_cmp; operand lists are short)
    for i in range(1, len(flat)):
        e = <Expr>flat[i]
        j = i - 1
        while j >= 0 and expr_cmp(<Expr>flat[j], e) > 0:
            flat[j + 1] = flat[j]
            j -= 1
        flat[j + 1] = e
    return mk_minmax(kind, flat)


cdef Expr as_expr_c(object x):
    if isinstance(x, Expr):
        return <Expr>x
    if isinstance(x, str):
        raise TypeError("pelican: use var(%r) or parse(%r) for a name or text, not a bare str" % (x, x))
    return mk_const(<int64_t>PyNumber_Index(x))


# ---------------------------------------------------------------- tree walks

cdef Expr sm_get(SubsMap* sm, Expr v):
    # the replacement for variable v, or None
    cdef Py_ssize_t j
    cdef object x
    if sm.big != NULL:
        x = (<dict>sm.big).get(v.name)
        return None if x is None else as_expr_c(x)
    for j in range(sm.n):
        if sm.h[j] == v.val and (sm.k[j] == <PyObject*>v.name or (<str>sm.k[j]) == v.name):
            return <Expr>sm.v[j]
    return None


cdef int sm_fill(SubsMap* sm, dict mapping) except -1:
    # sm from {name: int | Expr}; the caller releases it with sm_clear (also on error)
    cdef Py_hash_t h
    cdef Expr ev
    sm.n = 0
    sm.mask = 0
    sm.big = NULL
    if len(mapping) > SM_MAX:
        for k in mapping:
            if not isinstance(k, str):
                raise TypeError("pelican: subs keys are variable names, got %r" % (k,))
            sm.mask |= (<uint64_t>1) << (<uint64_t>hash(k) & 63)
        sm.big = <PyObject*>mapping
        return 0
    for k, v in mapping.items():
        if not isinstance(k, str):
            raise TypeError("pelican: subs keys are variable names, got %r" % (k,))
        h = hash(k)
        ev = as_expr_c(v)
        Py_INCREF(ev)
        sm.v[sm.n] = <PyObject*>ev
        sm.k[sm.n] = <PyObject*>k      # borrowed: the mapping outlives the call
        sm.h[sm.n] = h
        sm.n += 1
        sm.mask |= (<uint64_t>1) << (<uint64_t>h & 63)
    return 0


cdef void sm_clear(SubsMap* sm) noexcept:
    cdef Py_ssize_t j
    for j in range(sm.n):
        Py_XDECREF(sm.v[j])
    sm.n = 0


cdef Expr subs_dict(Expr e, dict mapping):
    """e with the variables in mapping ({name: int | Expr}) replaced, canonical."""
    cdef SubsMap sm
    sm.n = 0
    try:
        sm_fill(&sm, mapping)
        if sm.mask == 0:
            return e
        return subs_rec(e, &sm)
    finally:
        sm_clear(&sm)


cdef Expr subs_rec(Expr e, SubsMap* sm):
    # Rebuild e with variables replaced; subtrees without a replaced variable
    # (by the vmask filter, then by identity) are returned as they are.
    cdef Expr s, a
    cdef Py_ssize_t i, n
    cdef list new
    cdef bint changed = False
    cdef Lin lin, ch
    if (e.vmask & sm.mask) == 0:
        return e
    if e.kind == K_VAR:
        s = sm_get(sm, e)
        return e if s is None else s
    if e.kind == K_FLOORDIV or e.kind == K_MOD:
        a = <Expr>e.ch[0]
        s = subs_rec(a, sm)
        if s is a:
            return e
        return floordiv_const(s, e.val) if e.kind == K_FLOORDIV else mod_const(s, e.val)
    n = e.n
    if e.kind == K_ADD:
        # unchanged atoms keep their order: append them; merge the rest after
        # (constants fold into the constant term at once)
        lin = new_lin()
        lin.c = e.val
        ch = None
        for i in range(n):
            a = <Expr>e.ch[i]
            s = subs_rec(a, sm)
            if s is a:
                lin.push(a, e.cf[i])
                continue
            changed = True
            if s.kind == K_CONST:
                lin.c = ck_add(lin.c, ck_mul(s.val, e.cf[i]))
            else:
                if ch is None:
                    ch = new_lin()
                ch.add(s, e.cf[i])
        if not changed:
            return e
        if ch is not None:
            lin.c = ck_add(lin.c, ch.c)
            for i in range(ch.n):
                lin.add_term(<Expr>ch.at[i], ch.cf[i])
        return lin.build()
    if n == 2:
        a = subs_rec(<Expr>e.ch[0], sm)
        s = subs_rec(<Expr>e.ch[1], sm)
        if a is <Expr>e.ch[0] and s is <Expr>e.ch[1]:
            return e
        return minmax2(e.kind, a, s)
    new = []
    for i in range(n):
        a = <Expr>e.ch[i]
        s = subs_rec(a, sm)
        if s is not a:
            changed = True
        new.append(s)
    if not changed:
        return e
    return minmax(e.kind, new)


# ---------------------------------------------------------------- the Python type

_KIND_NAMES = ("const", "var", "add", "floordiv", "mod", "min", "max")

cdef object _W = None


cdef object W():
    # the tree-walk module (eval, bounds, text, simplify), imported on first use
    global _W
    if _W is None:
        from neuronxcc.pelican import _walks
        _W = _walks
    return _W


@cython.freelist(64)
@cython.no_gc
cdef class Expr:
    """A canonical symbolic integer expression (immutable, hashable).

    Build with ``var``, ``const``, ``parse``, ``min_``, ``max_`` and the
    operators ``+ - * // %`` (``*``, ``//``, ``%`` by integer constants;
    ``//`` and ``%`` by positive constants, floor semantics). ``==`` is
    structural equality of canonical forms and returns a bool.
    """

    def __init__(self, *args, **kwargs):
        raise TypeError("pelican: build expressions with var(), const(), parse() and operators")

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            Py_XDECREF(self.ch[i])
        PyMem_Free(self.ch)

    # -- operators
    def __add__(self, other):
        try:
            return add_scaled(self, as_expr_c(other), 1)
        except TypeError:
            return NotImplemented

    def __radd__(self, other):
        try:
            return add_scaled(as_expr_c(other), self, 1)
        except TypeError:
            return NotImplemented

    def __sub__(self, other):
        try:
            return add_scaled(self, as_expr_c(other), -1)
        except TypeError:
            return NotImplemented

    def __rsub__(self, other):
        try:
            return add_scaled(as_expr_c(other), self, -1)
        except TypeError:
            return NotImplemented

    def __mul__(self, other):
        cdef Expr o
        try:
            o = as_expr_c(other)
        except TypeError:
            return NotImplemented
        if o.kind == K_CONST:
            return mul_const(self, o.val)
        if self.kind == K_CONST:
            return mul_const(o, self.val)
        raise ValueError("pelican: non-affine product (%s) * (%s): one factor must be a constant" % (self, o))

    def __rmul__(self, other):
        return self.__mul__(other)

    def __floordiv__(self, other):
        try:
            return floordiv_const(self, to_i64(other))
        except TypeError:
            return NotImplemented

    def __rfloordiv__(self, other):
        try:
            return floordiv_const(as_expr_c(other), to_i64(self))
        except TypeError:
            return NotImplemented

    def __mod__(self, other):
        try:
            return mod_const(self, to_i64(other))
        except TypeError:
            return NotImplemented

    def __rmod__(self, other):
        try:
            return mod_const(as_expr_c(other), to_i64(self))
        except TypeError:
            return NotImplemented

    def __truediv__(self, other):
        raise TypeError("pelican: use // (floor division) on integer expressions")

    def __rtruediv__(self, other):
        raise TypeError("pelican: use // (floor division) on integer expressions")

    def __neg__(self):
        return mul_const(self, -1)

    def __pos__(self):
        return self

    # -- equality, hashing, conversion
    def __eq__(self, other):
        if isinstance(other, Expr):
            return expr_eq(self, <Expr>other)
        if isinstance(other, int):
            return self.kind == K_CONST and self.val == other
        return NotImplemented

    def __ne__(self, other):
        if isinstance(other, Expr):
            return not expr_eq(self, <Expr>other)
        if isinstance(other, int):
            return not (self.kind == K_CONST and self.val == other)
        return NotImplemented

    def __hash__(self):
        return self.hsh

    def __int__(self):
        if self.kind != K_CONST:
            raise TypeError("pelican: int() of a non-constant expression %s" % self)
        return self.val

    def __index__(self):
        return self.__int__()

    def __bool__(self):
        if self.kind != K_CONST:
            raise TypeError("pelican: the truth value of %s depends on its variables" % self)
        return self.val != 0

    def __str__(self):
        return W().expr_str(self)

    def __repr__(self):
        return "Expr(%r)" % W().expr_str(self)

    def __reduce__(self):
        from neuronxcc.pelican._parse import parse
        return (parse, (W().expr_str(self),))

    # -- queries
    @property
    def op(self):
        """Node kind: 'const', 'var', 'add', 'floordiv', 'mod', 'min' or 'max'."""
        return _KIND_NAMES[self.kind]

    @property
    def children(self):
        """Operands: the atoms of a sum, the dividend of // and %, the operands of min/max."""
        return tuple([<Expr>self.ch[i] for i in range(self.n)])

    def terms(self):
        """Linear view: ({atom: coefficient}, constant); atoms are Exprs."""
        return {term_atom(self, i): term_coef(self, i) for i in range(nterms(self))}, const_of(self)

    def is_const(self):
        return self.kind == K_CONST

    def free_vars(self):
        """frozenset of the variable names in the expression."""
        return W().expr_free_vars(self)

    def affine(self):
        """({var: coeff}, const) when the expression is affine in its variables, else None."""
        cdef dict d
        cdef Py_ssize_t i
        if self.kind == K_CONST:
            return {}, self.val
        if self.kind == K_VAR:
            return {self.name: 1}, 0
        if self.kind != K_ADD:
            return None
        d = {}
        for i in range(self.n):
            a = <Expr>self.ch[i]
            if a.kind != K_VAR:
                return None
            d[a.name] = self.cf[i]
        return d, self.val

    # -- transformations
    def simplify(self, ranges=None):
        """The canonical form; with ranges {name: (lo, hi)} (inclusive, or a
        range object) also the rules valid when each variable stays in its
        range: x // k -> m and x % k -> x - m*k when x stays in one block
        [m*k, m*k + k - 1], min/max decided by bounds. Variables without a
        range are unbounded."""
        return W().expr_simplify(self, ranges) if ranges else self

    def subs(self, mapping):
        """Replace variables by ints or Exprs ({name: value}); the result is canonical."""
        if not isinstance(mapping, dict):
            mapping = dict(mapping)
        return subs_dict(self, <dict>mapping)

    def eval(self, values):
        """The integer value with every variable given in values ({name: int})."""
        return W().expr_eval(self, values)

    def bounds(self, ranges=None):
        """Inclusive (lo, hi) over the variable ranges {name: (lo, hi)}.

        Exact for affine expressions, sound (may be wider) otherwise; a side
        is None when it is unbounded (a variable without a range)."""
        return W().expr_bounds(self, ranges)

    def compile(self, var_order):
        """A CompiledExpr evaluating this expression from int64 values given in var_order."""
        from neuronxcc.pelican._compiled import CompiledExpr
        return CompiledExpr(self, var_order)

    # -- serialisation
    def to_json(self):
        """The JSON form: the text form (a str)."""
        return W().expr_str(self)

    @staticmethod
    def from_json(obj):
        """Inverse of to_json; also accepts a JSON integer."""
        from neuronxcc.pelican._parse import parse
        if isinstance(obj, str):
            return parse(obj)
        if isinstance(obj, bool) or not isinstance(obj, int):
            raise ValueError("pelican: not a JSON expression: %r" % (obj,))
        return mk_const(<int64_t>obj)


for _i in range(_SMALL_LO, _SMALL_HI):
    _SMALL.append(_new_const(_i))

cdef Expr ZERO = mk_const(0)

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*\Z")
_RESERVED = frozenset(["min", "max"])


# ---------------------------------------------------------------- module API

cdef Expr var_c(str name):
    if _NAME_RE.match(name) is None or name in _RESERVED:
        raise ValueError("pelican: bad variable name %r (want [A-Za-z_][A-Za-z0-9_.]*, not min/max)" % (name,))
    return mk_var(_intern(name), UNBOUNDED)


def var(name):
    """The variable `name` (a loop variable or a sequencer register)."""
    if not isinstance(name, str):
        raise ValueError("pelican: bad variable name %r (want a str)" % (name,))
    return var_c(name)


def const(value):
    """The integer constant `value` (int64)."""
    return mk_const(to_i64(value))


def as_expr(x):
    """x if it is an Expr, else the constant int(x)."""
    return as_expr_c(x)


def min_(*args):
    """min of expressions or ints (one or more; a single iterable is accepted)."""
    if len(args) == 2:
        return minmax2(K_MIN, as_expr_c(args[0]), as_expr_c(args[1]))
    if len(args) == 1 and not isinstance(args[0], (Expr, int)):
        args = tuple(args[0])
    return minmax(K_MIN, [as_expr_c(a) for a in args])


def max_(*args):
    """max of expressions or ints (one or more; a single iterable is accepted)."""
    if len(args) == 2:
        return minmax2(K_MAX, as_expr_c(args[0]), as_expr_c(args[1]))
    if len(args) == 1 and not isinstance(args[0], (Expr, int)):
        args = tuple(args[0])
    return minmax(K_MAX, [as_expr_c(a) for a in args])
