"""acos, acosh, asin, asinh, atanh, cosh, sinh as Penguin elementwise ops.

The engines have exp, log, sqrt and (through tiles.py) atan2; the inverse and
hyperbolic functions are written with them in f32 (bf16/f16 operands widened
once, the result rounded once), with odd Taylor series near zero where the
closed form cancels (sinh, asinh, atanh) and the log(2|x|) form where x*x
would overflow (asinh, acosh):

    sinh x  = (e^x - e^-x) / 2              x + x^3/6 + x^5/120 + x^7/5040    for |x| < 0.5
    cosh x  = (e^x + e^-x) / 2
    asinh x = sign(x) log(|x| + sqrt(x^2 + 1))    x - x^3/6 + 3x^5/40 - 5x^7/112  for |x| < 0.125
    acosh x = log(x + sqrt(x^2 - 1))       (NaN below 1)
    atanh x = log((1 + x) / (1 - x)) / 2          x + x^3/3 + x^5/5 + x^7/7     for |x| < 0.125
    asin x  = 2 atan2(x, 1 + sqrt(1 - x^2))
    acos x  = 2 atan2(sqrt(1 - x^2), 1 + x)     (pi at x = -1)
"""
import math

OPCODES = ("acos", "acosh", "asin", "asinh", "atanh", "cosh", "sinh")
_BIG = 1e18             # above this x*x overflows f32: asinh / acosh use log(2|x|)


class _E:
    def __init__(self, g, loc, name, shape):
        self.g, self.loc, self.name, self.shape = g, loc, name, tuple(shape)

    def op(self, kind, ins, dtype="float32", attrs=None):
        return self.g.add_op(kind, ins, [(self.name + "." + kind, self.shape, dtype)], attrs or {}, self.loc)[0]

    def c(self, v):
        return self.op("constant", [], attrs={"value": float(v)})

    def add(self, a, b):
        return self.op("add", [a, b])

    def sub(self, a, b):
        return self.op("subtract", [a, b])

    def mul(self, a, b):
        return self.op("multiply", [a, b])

    def div(self, a, b):
        return self.op("divide", [a, b])

    def lt(self, a, b):
        return self.op("compare", [a, b], "bool", {"direction": "LT"})

    def sel(self, p, a, b):
        return self.op("select", [p, a, b])

    def odd_series(self, x, coeffs):
        """x * (c0 + c1 x^2 + c2 x^4 + ...) by Horner in x^2."""
        x2 = self.mul(x, x)
        acc = self.c(coeffs[-1])
        for k in reversed(coeffs[:-1]):
            acc = self.add(self.mul(acc, x2), self.c(k))
        return self.mul(acc, x)


def lower(g, inst, x, loc):
    """The Penguin value of ``inst`` (one of OPCODES) applied to value ``x``."""
    v = g.values[x]
    e = _E(g, loc, inst.name, v.shape)
    dt = v.dtype
    if dt != "float32":
        x = e.op("convert", [x])
    y = _FORMS[inst.opcode](e, x)
    if dt != "float32":
        y = e.op("convert", [y], dt)
    return y


def _sinh(e, x):
    ex = e.op("exponential", [x])
    emx = e.op("exponential", [e.op("negate", [x])])
    big = e.mul(e.sub(ex, emx), e.c(0.5))
    small = e.odd_series(x, [1.0, 1.0 / 6, 1.0 / 120, 1.0 / 5040])
    return e.sel(e.lt(e.op("abs", [x]), e.c(0.5)), small, big)


def _cosh(e, x):
    ex = e.op("exponential", [x])
    emx = e.op("exponential", [e.op("negate", [x])])
    return e.mul(e.add(ex, emx), e.c(0.5))


def _asinh(e, x):
    ax = e.op("abs", [x])
    r = e.op("sqrt", [e.add(e.mul(ax, ax), e.c(1.0))])
    mid = e.op("log", [e.add(ax, r)])
    huge = e.add(e.op("log", [ax]), e.c(math.log(2.0)))
    mag = e.sel(e.lt(ax, e.c(_BIG)), mid, huge)
    big = e.mul(e.op("sign", [x]), mag)
    small = e.odd_series(x, [1.0, -1.0 / 6, 3.0 / 40, -5.0 / 112])
    return e.sel(e.lt(ax, e.c(0.125)), small, big)


def _acosh(e, x):
    r = e.op("sqrt", [e.sub(e.mul(x, x), e.c(1.0))])
    mid = e.op("log", [e.add(x, r)])
    huge = e.add(e.op("log", [x]), e.c(math.log(2.0)))
    return e.sel(e.lt(x, e.c(_BIG)), mid, huge)


def _atanh(e, x):
    q = e.div(e.add(e.c(1.0), x), e.sub(e.c(1.0), x))
    big = e.mul(e.op("log", [q]), e.c(0.5))
    small = e.odd_series(x, [1.0, 1.0 / 3, 1.0 / 5, 1.0 / 7])
    return e.sel(e.lt(e.op("abs", [x]), e.c(0.125)), small, big)


def _asin(e, x):
    r = e.op("sqrt", [e.sub(e.c(1.0), e.mul(x, x))])
    return e.mul(e.op("atan2", [x, e.add(e.c(1.0), r)]), e.c(2.0))


def _acos(e, x):
    r = e.op("sqrt", [e.sub(e.c(1.0), e.mul(x, x))])
    a = e.mul(e.op("atan2", [r, e.add(e.c(1.0), x)]), e.c(2.0))
    minus_one = e.op("compare", [x, e.c(-1.0)], "bool", {"direction": "EQ"})
    return e.sel(minus_one, e.c(math.pi), a)


_FORMS = {"sinh": _sinh, "cosh": _cosh, "asinh": _asinh, "acosh": _acosh, "atanh": _atanh, "asin": _asin,
          "acos": _acos}
