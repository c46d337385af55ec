# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""pelican canonical construction: node makers and the rewrite rules behind every operator.

Owns the only code that allocates an ``Expr`` node (the small-constant cache
and the raw constructor of each node kind, which computes the node's hash,
intrinsic bounds and variable mask and trusts the caller for canonical form),
the canonical total order and structural equality (``expr_cmp`` /
``expr_eq``), the linear-combination builder (``Lin``) and the
construction-time rules: sums (``add_scaled``, ``mul_const``), ``//`` and
``%`` by constants (``floordiv_const``, ``mod_const``), ``min``/``max``
(``minmax``, ``minmax2``). Invariants: every rule's result is canonical (see
``_expr.pyx``) and holds for all integer values of the variables; int64
overflow raises OverflowError; constants in [-64, 1024) are shared.

The makers and the rules share this module so the C compiler inlines the one
into the other. The ``Expr`` type (its Python methods and operators),
``subs`` and the module API live in ``_expr.pyx``, which calls these through
``_canon.pxd``; ``_expr`` is always initialised first (the package imports
it, and it imports this module), so no maker runs before the type exists.
"""
cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.number cimport PyNumber_Index
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, Py_XINCREF, PyObject
from libc.stdint cimport int64_t, uint64_t
from libc.string cimport memcpy, memmove

from neuronxcc.pelican._intmath cimport ck_add, ck_mul, fdiv, fmod, gcd64, h_fix, h_mix
from neuronxcc.pelican._interval cimport (Bnd, b_add, b_floordiv, b_le, b_make, b_max, b_min, b_mod,
                                          b_scale, b_unbounded)
from neuronxcc.pelican._expr cimport Expr, K_CONST, K_VAR, K_ADD, K_FLOORDIV, K_MOD, K_MIN, K_MAX

cdef Bnd UNBOUNDED = b_unbounded()


# ---------------------------------------------------------------- node makers

cdef list _SMALL = []
cdef int64_t _SMALL_LO = -64
cdef int64_t _SMALL_HI = 1024


cdef Expr _new_const(int64_t v):
    cdef Expr e = <Expr>Expr.__new__(Expr)
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
    cdef Expr e = <Expr>Expr.__new__(Expr)
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
    cdef Expr e = <Expr>Expr.__new__(Expr)
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

@cython.final
@cython.freelist(8)
@cython.no_gc
cdef class Lin:
    """A linear combination being built: sorted atoms (owned references),
    their coefficients and a constant; ``build()`` returns the canonical Expr."""

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


# the small-constant cache, filled before anything below asks mk_const for a constant
for _i in range(_SMALL_LO, _SMALL_HI):
    _SMALL.append(_new_const(_i))

cdef Expr ZERO = mk_const(0)
