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

This module holds the ``Expr`` type (its Python methods and operators),
``subs`` and the module API (``var``, ``const``, ``as_expr``, ``min_``,
``max_``). The operators call the rules at C level through ``.pxd``
declarations: node allocation, the canonical order and equality, the
linear-combination builder (``Lin``) and the rewrite rules are in
``_canon.pyx``. Read-only walks (eval, bounds, text, range simplification)
live in ``_walks.pyx``, intervals and integer helpers in the inline headers
``_interval.pxd`` and ``_intmath.pxd``.
"""
cimport cython
from cpython.mem cimport PyMem_Free
from cpython.number cimport PyNumber_Index
from cpython.ref cimport Py_DECREF, Py_INCREF, Py_XDECREF, PyObject
from libc.stdint cimport int64_t, uint64_t

from neuronxcc.pelican._intmath cimport ck_add, ck_mul, fdiv, fmod, gcd64, h_fix, h_mix
from neuronxcc.pelican._interval cimport b_make, b_unbounded
from neuronxcc.pelican._canon cimport (Lin, expr_eq, mk_const, mk_var, add_scaled, as_expr_c, floordiv_const, minmax, minmax2, mod_const,
                                       mul_const, new_lin, nterms, term_atom, term_coef, const_of)

import re
from sys import intern as _intern

cdef Bnd UNBOUNDED = b_unbounded()


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
