"""Elementary functions the engines lack, built from engine primitives on one tile.

Owns: the ``TileMath`` methods ``TileEval`` (``tiles.py``) inherits for the HLO ops without one
engine instruction: integer divide/remainder, fmod, sine/cosine (Cody-Waite reduction to ACT's
[-pi, pi] sin), tan, atan2 (ACT arctan on [0, 1] plus octant fix-ups), cbrt, popcount and
count-leading-zeros (SWAR on POOL), trunc and the roundings. Each builds its result from the
evaluator's ``binary`` / ``act`` / ``materialise`` / ``new_tile`` / ``splat`` and its emitter
(``em``); it holds no state of its own.
"""
import math

from neuronxcc.common.dtypes import onchip_as


class TileMath:
    """Mixin of ``tiles.TileEval``: the elementary functions (see the module docstring)."""

    def int_divmod(self, x, a, b):
        """XLA integer divide/remainder truncate toward zero; x/0 = -1, x%0 = x (POOL exact int math)."""
        dt = onchip_as(x.dtype)
        return self.binary("divide" if x.op == "divide" else "mod", a, b, dt)

    def fmod(self, a, b, dt):
        return self.binary("mod", a, b, dt)

    def sine(self, a, dt, phase):
        """sin(x + phase) with ACT sin on [-pi, pi]: Cody-Waite reduction by 2pi in fp32."""
        a = self.materialise(a, "float32")
        c1 = 6.28125                           # 2pi split: c1 exact in 7 bits, c2 the rest
        c2 = 2 * math.pi - c1
        rnd = 12582912.0                       # 1.5 * 2^23: round to nearest integer
        k = self.new_tile("float32")
        self.em.inst("tensor_scalar", "DVE", [k.ap], [a.ap], op0="mult", operand0=1.0 / (2 * math.pi),
                     op1="add", operand1=rnd)
        k2 = self.binary("subtract", k, self.splat("float32", rnd), "float32")
        t1 = self.binary("mult", k2, self.splat("float32", c1), "float32")
        r = self.binary("subtract", a, t1, "float32")
        t2 = self.binary("mult", k2, self.splat("float32", c2), "float32")
        r = self.binary("subtract", r, t2, "float32")                 # r in [-pi, pi]
        if phase:
            r = self.binary("add", r, self.splat("float32", phase), "float32")
            over = self.binary("gt", r, self.splat("float32", math.pi), "float32")
            o2 = self.binary("mult", over, self.splat("float32", 2 * math.pi), "float32")
            r = self.binary("subtract", r, o2, "float32")
        return self.act("sin", r, dt)

    def tan(self, a, dt):
        s = self.sine(a, "float32", 0.0)
        c = self.sine(a, "float32", math.pi / 2)
        return self.binary("divide", s, c, dt)

    def _negative(self, v):
        """v < 0 or v is -0.0 (1/v < 0)."""
        F = "float32"
        z = self.splat(F, 0.0)
        inv = self.binary("divide", self.splat(F, 1.0), v, F)
        return self.binary("logical_or", self.binary("lt", v, z, "bool"), self.binary("lt", inv, z, "bool"), "bool")

    def atan2(self, y, x, dt):
        """atan2(y, x) from ACT arctan on [0, 1] plus octant fix-ups (signed zeros via 1/v < 0)."""
        F = "float32"
        y = self.materialise(y, F)
        x = self.materialise(x, F)
        ay = self.act("abs", y, F)
        ax = self.act("abs", x, F)
        mx = self.binary("max", ay, ax, F)
        mn = self.binary("min", ay, ax, F)
        q = self.binary("divide", mn, mx, F)
        # q is NaN for 0/0 (atan 0) and inf/inf (both infinite: atan 1, XLA's pi/4 octants)
        fill = self.binary("subtract", self.splat(F, 1.0), self.binary("eq", mx, self.splat(F, 0.0),
                                                                               "float32"), F)
        q2 = self.new_tile(F)
        self.em.inst("select", "DVE", [q2.ap], [self.binary("eq", q, q, "bool").ap, q.ap, fill.ap])
        r = self.act("arctan", q2, F)
        swap = self.binary("gt", ay, ax, "bool")
        rs = self.binary("subtract", self.splat(F, math.pi / 2), r, F)
        r1 = self.new_tile(F)
        self.em.inst("select", "DVE", [r1.ap], [swap.ap, rs.ap, r.ap])
        xneg = self._negative(x)
        rp = self.binary("subtract", self.splat(F, math.pi), r1, F)
        r2 = self.new_tile(F)
        self.em.inst("select", "DVE", [r2.ap], [xneg.ap, rp.ap, r1.ap])
        yneg = self._negative(y)
        rn = self.binary("mult", r2, self.splat(F, -1.0), F)
        out = self.new_tile(dt)
        self.em.inst("select", "DVE", [out.ap], [yneg.ap, rn.ap, r2.ap])
        # NaN in either operand propagates
        isnan = self.binary("logical_or", self.binary("ne", x, x, "bool"), self.binary("ne", y, y, "bool"), "bool")
        nant = self.materialise(self.splat(F, float("nan")))
        res = self.new_tile(dt)
        self.em.inst("select", "DVE", [res.ap], [isnan.ap, nant.ap, out.ap])
        return res

    def cbrt(self, a, dt):
        a = self.materialise(a, "float32")
        ab = self.act("abs", a, "float32")
        lg = self.act("log", ab, "float32")
        r = self.act("exp", lg, "float32", scale=1.0 / 3.0)
        sg = self.act("sign", a, "float32")
        return self.binary("mult", r, sg, dt)

    def _srl(self, a, k, dt):
        return self.binary("logical_shift_right", a, self.splat(dt, k), dt)

    def _and(self, a, m, dt):
        return self.binary("bitwise_and", a, self.splat(dt, m), dt)

    def popcnt(self, a, dt):
        """SWAR bit count on POOL (exact integer math)."""
        a = self.materialise(a, dt)
        t = self.binary("subtract", a, self._and(self._srl(a, 1, dt), 0x55555555, dt), dt)
        t = self.binary("add", self._and(t, 0x33333333, dt), self._and(self._srl(t, 2, dt), 0x33333333, dt), dt)
        t = self._and(self.binary("add", t, self._srl(t, 4, dt), dt), 0x0F0F0F0F, dt)
        t = self.binary("add", t, self._srl(t, 8, dt), dt)
        t = self.binary("add", t, self._srl(t, 16, dt), dt)
        return self._and(t, 0x3F, dt)

    def clz(self, a, dt):
        a = self.materialise(a, dt)
        t = a
        for k in (1, 2, 4, 8, 16):
            t = self.binary("bitwise_or", t, self._srl(t, k, dt), dt)
        pc = self.popcnt(t, dt)
        return self.binary("subtract", self.splat(dt, 32), pc, dt)

    def trunc(self, a):
        fr = self.new_tile("float32")
        self.em.inst("tensor_scalar", "DVE", [fr.ap], [a.ap], op0="mod", operand0=1.0)
        # |a| >= 2^23 (and inf) is integral already: fraction 0 (fmod(inf, 1) would be NaN)
        small = self.binary("lt", self.act("abs", a, "float32"), self.splat("float32", 8388608.0), "bool")
        zt = self.materialise(self.splat("float32", 0.0))
        fr2 = self.new_tile("float32")
        self.em.inst("select", "DVE", [fr2.ap], [small.ap, fr.ap, zt.ap])
        return self.binary("subtract", a, fr2, "float32")

    def rounding(self, op, a, dt):
        a = self.materialise(a, "float32")
        if op == "round-nearest-even":
            # adding and subtracting 1.5*2^23 rounds to nearest even in fp32 for |x| < 2^22
            big = self.binary("lt", self.act("abs", a, "float32"), self.splat("float32", 4194304.0),
                              "bool")
            t = self.binary("add", a, self.splat("float32", 12582912.0), "float32")
            t = self.binary("subtract", t, self.splat("float32", 12582912.0), "float32")
            out = self.new_tile(dt)
            self.em.inst("select", "DVE", [out.ap], [big.ap, t.ap, a.ap])
            return out
        if op in ("floor", "ceil"):
            t = self.trunc(a)
            if op == "floor":
                adj = self.binary("lt", a, t, "float32")
                return self.binary("subtract", t, adj, dt)
            adj = self.binary("gt", a, t, "float32")
            return self.binary("add", t, adj, dt)
        # round half away from zero: sign(x) * trunc(|x| + 0.5)
        ab = self.act("abs", a, "float32")
        h = self.binary("add", ab, self.splat("float32", 0.5), "float32")
        fh = self.trunc(h)
        sg = self.act("sign", a, "float32")
        return self.binary("mult", fh, sg, dt)
