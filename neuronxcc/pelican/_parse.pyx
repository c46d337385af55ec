# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""pelican text form -> Expr (the inverse of ``str(expr)``).

Grammar (Python's precedence and floor semantics, so a printed expression
also evaluates the same under Python with min/max):

    expr  := term (('+' | '-') term)*
    term  := unary (('*' | '//' | '%') unary)*
    unary := ('-' | '+') unary | atom
    atom  := INT | NAME | ('min' | 'max') '(' expr (',' expr)* ')' | '(' expr ')'

Names are ``[A-Za-z_][A-Za-z0-9_.]*`` other than min/max; ``*`` needs a
constant factor, ``//`` and ``%`` a positive constant right operand. The
result is canonical (built through the same constructors), so
``parse(str(e)) == e``. A single-pass scanner over the str, no regex, no
token list. Parsed expressions are immutable, so results are cached by text.
Errors are ValueError naming the column.
"""
from neuronxcc.pelican._expr cimport Expr, K_CONST, K_MIN, K_MAX, var_c
from neuronxcc.pelican._canon cimport add_scaled, mul_const, floordiv_const, mod_const, minmax, mk_const

cdef dict _CACHE = {}
cdef Py_ssize_t _CACHE_MAX = 1 << 16


cdef inline bint _is_space(Py_UCS4 c) noexcept:
    return c == u' ' or c == u'\t' or c == u'\n' or c == u'\r'


cdef inline bint _is_digit(Py_UCS4 c) noexcept:
    return u'0' <= c <= u'9'


cdef inline bint _is_name0(Py_UCS4 c) noexcept:
    return (u'a' <= c <= u'z') or (u'A' <= c <= u'Z') or c == u'_'


cdef inline bint _is_name1(Py_UCS4 c) noexcept:
    return _is_name0(c) or _is_digit(c) or c == u'.'


cdef class _Parser:
    cdef str s
    cdef Py_ssize_t i
    cdef Py_ssize_t n

    def __cinit__(self, str s):
        self.s = s
        self.i = 0
        self.n = len(s)

    cdef Py_UCS4 peek(self):
        # the next non-space character (0 at the end)
        while self.i < self.n and _is_space(self.s[self.i]):
            self.i += 1
        return self.s[self.i] if self.i < self.n else 0

    cdef fail(self, str what):
        cdef Py_UCS4 c = self.peek()
        got = "end of text" if c == 0 else repr(self.s[self.i])
        raise ValueError("pelican: cannot parse %r: expected %s, got %s at column %d"
                         % (self.s, what, got, self.i + 1))

    cdef int expect(self, Py_UCS4 c) except -1:
        if self.peek() != c:
            self.fail(repr(c))
        self.i += 1
        return 0

    cdef Expr expr(self):
        cdef Expr e = self.term()
        cdef Py_UCS4 c
        while True:
            c = self.peek()
            if c == u'+':
                self.i += 1
                e = add_scaled(e, self.term(), 1)
            elif c == u'-':
                self.i += 1
                e = add_scaled(e, self.term(), -1)
            else:
                return e

    cdef Expr term(self):
        cdef Expr e = self.unary()
        cdef Expr u
        cdef Py_UCS4 c
        cdef Py_ssize_t at
        while True:
            c = self.peek()
            at = self.i
            if c == u'*':
                self.i += 1
                if self.peek() == u'*':
                    self.fail("an operand (** is not supported)")
                u = self.unary()
                if u.kind == K_CONST:
                    e = mul_const(e, u.val)
                elif e.kind == K_CONST:
                    e = mul_const(u, e.val)
                else:
                    raise ValueError("pelican: cannot parse %r: non-affine product at column %d" % (self.s, at + 1))
            elif c == u'/' and self.i + 1 < self.n and self.s[self.i + 1] == u'/':
                self.i += 2
                e = floordiv_const(e, self._divisor(at))
            elif c == u'%':
                self.i += 1
                e = mod_const(e, self._divisor(at))
            else:
                return e

    cdef long long _divisor(self, Py_ssize_t at) except? -1:
        cdef Expr u = self.unary()
        if u.kind != K_CONST:
            raise ValueError("pelican: cannot parse %r: // and %% need a constant right operand (column %d)"
                             % (self.s, at + 1))
        return u.val

    cdef Expr unary(self):
        cdef Py_UCS4 c = self.peek()
        if c == u'-':
            self.i += 1
            return mul_const(self.unary(), -1)
        if c == u'+':
            self.i += 1
            return self.unary()
        return self.atom()

    cdef Expr atom(self):
        cdef Py_UCS4 c = self.peek()
        cdef Py_ssize_t j
        cdef str name
        cdef list args
        cdef Expr e
        if _is_digit(c):
            j = self.i
            while self.i < self.n and _is_digit(self.s[self.i]):
                self.i += 1
            if self.i < self.n and _is_name1(self.s[self.i]):
                self.fail("an operator")
            try:
                return mk_const(int(self.s[j:self.i]))
            except OverflowError:
                raise ValueError("pelican: cannot parse %r: %s does not fit int64" % (self.s, self.s[j:self.i]))
        if _is_name0(c):
            j = self.i
            while self.i < self.n and _is_name1(self.s[self.i]):
                self.i += 1
            name = self.s[j:self.i]
            if name == "min" or name == "max":
                self.expect(u'(')
                args = [self.expr()]
                while self.peek() == u',':
                    self.i += 1
                    args.append(self.expr())
                self.expect(u')')
                return minmax(K_MIN if name == "min" else K_MAX, args)
            return var_c(name)
        if c == u'(':
            self.i += 1
            e = self.expr()
            self.expect(u')')
            return e
        self.fail("a number, a name, min(, max( or (")


def parse(text):
    """Parse the text form of an expression (see the module docstring)."""
    cdef _Parser p
    cdef Expr e
    if isinstance(text, Expr):
        return text
    if not isinstance(text, str):
        raise TypeError("pelican: parse() takes a str, got %r" % (text,))
    r = _CACHE.get(text)
    if r is not None:
        return r
    p = _Parser(text)
    e = p.expr()
    if p.peek() != 0:
        p.fail("an operator or end of text")
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[text] = e
    return e


def clear_cache():
    """Forget cached parse results (benchmarks; memory)."""
    _CACHE.clear()
