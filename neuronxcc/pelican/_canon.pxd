# Declarations of the pelican node makers and rewrite rules (see _canon.pyx for the contract).
# The Expr operators, subs, the parser and the walks cimport these; the inline helpers
# read a sum's terms uniformly (a non-sum is one term with coefficient 1).
cimport cython
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t

from neuronxcc.pelican._expr cimport Expr, K_ADD, K_CONST
from neuronxcc.pelican._interval cimport Bnd

cdef enum:
    LIN_INLINE = 16         # terms held without a heap allocation


@cython.final
cdef class Lin:
    # sorted atoms (owned references), their coefficients and the constant term
    cdef PyObject** at      # atoms: at0 until more than LIN_INLINE, then a heap block
    cdef int64_t* cf        # coefficients, parallel to at (cf0 or the same heap block's partner)
    cdef Py_ssize_t n       # terms held
    cdef Py_ssize_t cap     # room in at / cf
    cdef int64_t c          # the constant term
    cdef PyObject* at0[LIN_INLINE]
    cdef int64_t cf0[LIN_INLINE]

    cdef int grow(self, Py_ssize_t need) except -1
    cdef int push(self, Expr atom, int64_t k) except -1
    cdef void remove(self, Py_ssize_t i) noexcept
    cdef int add_term(self, Expr atom, int64_t k) except -1
    cdef int add(self, Expr e, int64_t k) except -1
    cdef int divide(self, int64_t g) except -1
    cdef int64_t coef_gcd(self, int64_t g) noexcept
    cdef bint _fold_divmod(self) except -1
    cdef Expr build(self)


cdef Expr mk_const(int64_t v)                   # shared for small values
cdef Expr mk_var(str name, Bnd b)               # unvalidated (var_c validates)
cdef bint expr_eq(Expr a, Expr b) except -1     # structural equality of canonical forms
cdef int expr_cmp(Expr a, Expr b) except -2     # the canonical total order (-1, 0, 1)
cdef Expr add_scaled(Expr a, Expr b, int64_t cb)
cdef Expr mul_const(Expr a, int64_t k)
cdef Expr floordiv_const(Expr a, int64_t k)
cdef Expr mod_const(Expr a, int64_t k)
cdef Expr minmax2(int kind, Expr a, Expr b)
cdef Expr minmax(int kind, list items)
cdef Expr as_expr_c(object x)       # an Expr as itself, an int as its constant (a str is a TypeError)


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
