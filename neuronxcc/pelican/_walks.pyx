# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""pelican tree walks that read expressions without building them: evaluation
with a dict, interval bounds, free variables, the text form, and the
range-dependent simplification (which rebuilds through the core's ``subs``).

The ``Expr`` methods ``eval``, ``bounds``, ``free_vars``, ``simplify``,
``__str__`` and ``to_json`` call the ``expr_*`` functions here. Invariants:
evaluation uses checked int64 arithmetic (OverflowError, never a wrapped
value); bounds are sound for every expression and exact for affine ones; the
text form uses Python's precedence so that ``parse(str(e)) == e`` and Python
itself evaluates it the same (with min/max).
"""
from libc.stdint cimport int64_t, uint64_t

from neuronxcc.pelican._expr cimport (Expr, K_ADD, K_CONST, K_FLOORDIV, K_MAX, K_MIN, K_MOD, K_VAR,
                                      subs_dict, to_i64)
from neuronxcc.pelican._canon cimport mk_var
from neuronxcc.pelican._interval cimport (Bnd, b_add, b_floordiv, b_make, b_max, b_meet, b_min, b_mod,
                                          b_scale, b_unbounded)
from neuronxcc.pelican._intmath cimport ck_add, ck_mul, fdiv, fmod


# ---------------------------------------------------------------- evaluation and bounds

cdef int64_t eval_rec(Expr e, dict env) except? -1:
    cdef Py_ssize_t i
    cdef int64_t acc, v
    cdef object x
    if e.kind == K_CONST:
        return e.val
    if e.kind == K_VAR:
        x = env.get(e.name)
        if x is None:
            raise ValueError("pelican: no value for variable %r in %s" % (e.name, e))
        return to_i64(x)
    if e.kind == K_ADD:
        acc = e.val
        for i in range(e.n):
            acc = ck_add(acc, ck_mul(e.cf[i], eval_rec(<Expr>e.ch[i], env)))
        return acc
    if e.kind == K_FLOORDIV:
        return fdiv(eval_rec(<Expr>e.ch[0], env), e.val)
    if e.kind == K_MOD:
        return fmod(eval_rec(<Expr>e.ch[0], env), e.val)
    acc = eval_rec(<Expr>e.ch[0], env)
    for i in range(1, e.n):
        v = eval_rec(<Expr>e.ch[i], env)
        if (v < acc) if e.kind == K_MIN else (v > acc):
            acc = v
    return acc


cdef Bnd bnd_rec(Expr e, dict rng) except *:
    # Interval of e when each variable in rng lies in its (lo, hi); others unbounded.
    cdef Py_ssize_t i
    cdef Bnd b
    cdef tuple t
    if e.kind == K_CONST:
        return e.ib
    if e.kind == K_VAR:
        t = rng.get(e.name)
        if t is None:
            return b_unbounded()
        return b_make(<int64_t>t[0], <int64_t>t[1], True, True)
    if e.kind == K_ADD:
        b = b_make(e.val, e.val, True, True)
        for i in range(e.n):
            b = b_add(b, b_scale(bnd_rec(<Expr>e.ch[i], rng), e.cf[i]))
        return b
    if e.kind == K_FLOORDIV:
        return b_floordiv(bnd_rec(<Expr>e.ch[0], rng), e.val)
    if e.kind == K_MOD:
        return b_mod(bnd_rec(<Expr>e.ch[0], rng), e.val)
    b = bnd_rec(<Expr>e.ch[0], rng)
    for i in range(1, e.n):
        if e.kind == K_MIN:
            b = b_min(b, bnd_rec(<Expr>e.ch[i], rng))
        else:
            b = b_max(b, bnd_rec(<Expr>e.ch[i], rng))
    return b


cdef int vars_rec(Expr e, set out) except -1:
    cdef Py_ssize_t i
    if e.kind == K_VAR:
        out.add(e.name)
    elif e.kind != K_CONST:
        for i in range(e.n):
            vars_rec(<Expr>e.ch[i], out)


cdef dict norm_ranges(object ranges):
    """{name: (lo, hi)} (inclusive) or {name: range(...)} -> {name: (lo, hi)}."""
    cdef dict out = {}
    cdef int64_t lo, hi
    for name, r in ranges.items():
        if not isinstance(name, str):
            raise TypeError("pelican: range keys are variable names, got %r" % (name,))
        if isinstance(r, range):
            if len(r) == 0:
                raise ValueError("pelican: empty range for %r" % name)
            last = r.start + (len(r) - 1) * r.step
            lo = min(r.start, last)
            hi = max(r.start, last)
        else:
            lo, hi = to_i64(r[0]), to_i64(r[1])
            if lo > hi:
                raise ValueError("pelican: empty range (%d, %d) for %r" % (lo, hi, name))
        out[name] = (lo, hi)
    return out


# ---------------------------------------------------------------- text form
# Printed with Python's precedence so that parse(str(e)) == e and eval(str(e))
# in Python (with min/max) gives the same value.

cdef str _prim(Expr a):
    # an atom after "c*" or a leading "-"
    if a.kind == K_FLOORDIV or a.kind == K_MOD:
        return "(" + to_str(a) + ")"
    return to_str(a)


cdef str _operand(Expr a):
    # the left operand of // or %
    if a.kind == K_VAR or a.kind == K_MIN or a.kind == K_MAX:
        return to_str(a)
    return "(" + to_str(a) + ")"


cdef str to_str(Expr e):
    cdef list parts
    cdef Py_ssize_t i
    cdef int64_t c
    if e.kind == K_CONST:
        return str(e.val)
    if e.kind == K_VAR:
        return e.name
    if e.kind == K_FLOORDIV:
        return _operand(<Expr>e.ch[0]) + "//" + str(e.val)
    if e.kind == K_MOD:
        return _operand(<Expr>e.ch[0]) + " % " + str(e.val)
    if e.kind == K_MIN or e.kind == K_MAX:
        return ("min(" if e.kind == K_MIN else "max(") + ", ".join([to_str(<Expr>e.ch[i]) for i in range(e.n)]) + ")"
    parts = []
    for i in range(e.n):
        c = e.cf[i]
        a = <Expr>e.ch[i]
        if i == 0:
            if c == 1:
                parts.append(to_str(a))
            elif c == -1:
                parts.append("-" + _prim(a))
            else:
                parts.append(str(c) + "*" + _prim(a))
        else:
            parts.append(" - " if c < 0 else " + ")
            parts.append(to_str(a) if (c == 1 or c == -1) else str(abs(<object>c)) + "*" + _prim(a))
    if e.val:
        parts.append((" - %d" % -(<object>e.val)) if e.val < 0 else (" + %d" % e.val))
    return "".join(parts)


# ---------------------------------------------------------------- entry points (Expr methods)

def expr_str(Expr e):
    return to_str(e)


def expr_eval(Expr e, values):
    if not isinstance(values, dict):
        values = dict(values)
    return eval_rec(e, <dict>values)


def expr_free_vars(Expr e):
    cdef set out = set()
    vars_rec(e, out)
    return frozenset(out)


def expr_simplify(Expr e, ranges):
    cdef dict rng, bounded, plain
    if not ranges:
        return e
    rng = norm_ranges(ranges)
    bounded = {n: mk_var(n, b_make(<int64_t>t[0], <int64_t>t[1], True, True)) for n, t in rng.items()}
    plain = {n: mk_var(n, b_unbounded()) for n in rng}
    # rebuild with range-carrying variables (the rules see the ranges), then
    # with plain ones, so that no range fact stays attached to the result
    return subs_dict(subs_dict(e, bounded), plain)


def expr_bounds(Expr e, ranges):
    cdef dict rng = norm_ranges(ranges) if ranges else {}
    cdef Bnd b = bnd_rec(e, rng)
    if rng and e.kind != K_CONST and e.kind != K_VAR and e.affine() is None:
        # range rules may tighten a non-affine expression; both are sound
        b = b_meet(b, bnd_rec(<Expr>expr_simplify(e, ranges), rng))
    return (b.lo if b.has_lo else None, b.hi if b.has_hi else None)
