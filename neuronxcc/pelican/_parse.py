"""pelican text form -> Expr (the inverse of ``str(expr)``).

Grammar (Python's precedence and floor semantics, so a printed expression
also evaluates the same under Python with min/max):

    expr  := term (('+' | '-') term)*
    term  := unary (('*' | '//' | '%') unary)*
    unary := ('-' | '+') unary | atom
    atom  := INT | NAME | ('min' | 'max') '(' expr (',' expr)* ')' | '(' expr ')'

Names are ``[A-Za-z_][A-Za-z0-9_.]*`` other than min/max. The result is
canonical (built through the same constructors), so ``parse(str(e)) == e``.
Parsed expressions are immutable, so results are cached by text.
"""
import re

from neuronxcc.pelican._expr import Expr, const, max_, min_, var

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_.]*)|(//|[-+*%(),]))")
_CACHE = {}
_CACHE_MAX = 1 << 16


def _tokenize(text):
    toks = []
    pos = 0
    n = len(text)
    while True:
        while pos < n and text[pos].isspace():
            pos += 1
        if pos >= n:
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise ValueError("pelican: cannot parse %r: unexpected %r at column %d" % (text, text[pos], pos + 1))
        if m.group(1) is not None:
            toks.append(("int", int(m.group(1)), pos))
        elif m.group(2) is not None:
            toks.append(("name", m.group(2), pos))
        else:
            toks.append(("op", m.group(3), pos))
        pos = m.end()
    toks.append(("end", None, n))
    return toks


class _Parser:
    def __init__(self, text):
        self.text = text
        self.toks = _tokenize(text)
        self.i = 0

    def fail(self, what):
        kind, val, pos = self.toks[self.i]
        got = "end of text" if kind == "end" else repr(val)
        raise ValueError("pelican: cannot parse %r: expected %s, got %s at column %d" % (self.text, what, got, pos + 1))

    def peek_op(self, *ops):
        kind, val, _ = self.toks[self.i]
        return kind == "op" and val in ops

    def expect(self, op):
        if not self.peek_op(op):
            self.fail(repr(op))
        self.i += 1

    def expr(self):
        e = self.term()
        while self.peek_op("+", "-"):
            op = self.toks[self.i][1]
            self.i += 1
            t = self.term()
            e = e + t if op == "+" else e - t
        return e

    def term(self):
        e = self.unary()
        while self.peek_op("*", "//", "%"):
            op = self.toks[self.i][1]
            self.i += 1
            u = self.unary()
            if op == "*":
                e = e * u
            elif op == "//":
                e = e // _const_operand(u, self.text)
            else:
                e = e % _const_operand(u, self.text)
        return e

    def unary(self):
        if self.peek_op("-"):
            self.i += 1
            return -self.unary()
        if self.peek_op("+"):
            self.i += 1
            return self.unary()
        return self.atom()

    def atom(self):
        kind, val, _ = self.toks[self.i]
        if kind == "int":
            self.i += 1
            return const(val)
        if kind == "name":
            self.i += 1
            if val in ("min", "max"):
                self.expect("(")
                args = [self.expr()]
                while self.peek_op(","):
                    self.i += 1
                    args.append(self.expr())
                self.expect(")")
                return min_(*args) if val == "min" else max_(*args)
            return var(val)
        if self.peek_op("("):
            self.i += 1
            e = self.expr()
            self.expect(")")
            return e
        self.fail("a number, a name, min(, max( or (")


def _const_operand(u, text):
    if not u.is_const():
        raise ValueError("pelican: cannot parse %r: // and %% need a constant right operand, got %s" % (text, u))
    return int(u)


def parse(text):
    """Parse the text form of an expression (see the module docstring)."""
    if isinstance(text, Expr):
        return text
    if not isinstance(text, str):
        raise TypeError("pelican: parse() takes a str, got %r" % (text,))
    e = _CACHE.get(text)
    if e is not None:
        return e
    p = _Parser(text)
    e = p.expr()
    if p.toks[p.i][0] != "end":
        p.fail("an operator or end of text")
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[text] = e
    return e
