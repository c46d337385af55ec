"""Exact loop-carried dependence distances (pelican), and rotated buffers.

Owns: for two conflicting instructions a < b (program order) that share the
repeating loop C (the innermost they share), the smallest distance d >= 1
such that a's instance in some iteration i of C touches a byte that b's
instance d iterations earlier touches (one of them writing); None when no
earlier instance of b touches what a touches.

Distances are counted in *flattened* iterations of C: d iterations back from
C's index t is t - d in the same iteration of the enclosing loops when
t >= d, else an iteration of C in an earlier iteration of the enclosing
loops. The semaphore count ``deps.wait_value`` derives for "d back" (the
loop variable substituted by v - d*step) is at least b's count at that
flattened instance, so waiting for it covers every instance of b at least d
back; d must therefore be the smallest distance with an overlap. Tests, per
operand pair, on the byte difference D = (a's first byte) - (b's first
byte) with pelican bounds (a conflict needs D inside the window set by the
two access patterns' extents):

  within(d)     a at index t in [d, T-1], b at t - d, same enclosing iterations
  boundary(d)   a at t in [0, d-1], b at t + T - d in *any* iteration of the
                enclosing shared loops (a superset of "the previous one")
  far           after d = 1..DMAX found nothing: a anywhere, b anywhere in C
                and in any enclosing iteration (covers every longer distance)
b's loops that a does not share are renamed, so the two instances vary
independently. Offsets that pelican cannot bound (registers, unknown loops)
overlap. While loops keep distance 1.

Rotated buffers (``vn_splitter``): module attr ``walrus.rotations`` maps a
memloc to {"copies": K, "loop": var}: its accesses all lie in loop ``var``,
and iteration F (flattened over that loop and its enclosing loops) uses copy
F mod K, so two of its accesses conflict only at distances that are
multiples of K: the distance is K.

Isomorphic pairs (``PairMemo``): the unrolled layers of a model repeat the same loops with the same
access patterns at other addresses, so most pairs pose a problem already solved. A pair's problem
is fixed by its loops' shapes (kind, start, step, trip, which is the carrying loop, how many are
shared), each access's offset with the loop variables renamed by depth, its dtype and extent, and
the difference of the two bases; when both offsets are affine the answer is exact (pelican bounds
of affine expressions are exact), so a pair with the same key has the same distance and is looked
up instead of solved. Non-affine offsets are always solved.
"""
from neuronxcc.starfish import birpy as B
from neuronxcc.walrus.program import pattern_extent

DMAX = 4
ROTATIONS = "walrus.rotations"


def _pel():
    from neuronxcc import pelican
    return pelican


def rotations(module):
    r = module.attrs.get(ROTATIONS) if isinstance(module.attrs, dict) else None
    return r if isinstance(r, dict) else {}


class _Instance:
    """One instance of an access: its offset with variables renamed / substituted, and ranges."""

    def __init__(self, prog, site, ap, c, tvar, shift, rename_outer, suffix, physical):
        pel = _pel()
        self.isz = B.dtypes.itemsize(ap.dtype)
        self.ext = pattern_extent(ap)
        ml = prog.memlocs.get(ap.target)
        self.base = int(ml.byte_offset) if (physical and ml is not None and ml.byte_offset is not None) else 0
        if ml is None:
            t = prog.tensors.get(ap.target)
            if getattr(t, "arena_offset", None) is not None:
                self.base = int(t.arena_offset)        # scratch sharing the arena: absolute bytes
        subs = {}
        self.ranges = {}
        inside = False
        for li in site.loops:
            if li is c:
                inside = True
                subs[li.var] = pel.const(li.start) + (pel.var(tvar) + shift) * li.step
                continue
            if li.var is None:
                continue
            r = li.var_range()
            renamed = inside or rename_outer
            name = li.var + suffix if renamed else li.var
            if renamed:
                subs[li.var] = pel.var(name)
            if r is not None:
                self.ranges[name] = r
        off = pel.as_expr(ap.offset)
        self.off = off.subs(subs) if subs else off

    def first_byte(self):
        return self.off * self.isz + self.base


def _disjoint(ia, ib, ranges):
    d = ia.first_byte() - ib.first_byte()
    fv = d.free_vars()
    if any(v not in ranges for v in fv):
        return False
    try:
        lo, hi = d.bounds({v: ranges[v] for v in fv})
    except Exception:
        return False
    if lo is None or hi is None:
        return False
    (la, ha), (lb, hb) = ia.ext, ib.ext
    # overlap iff isb*lb - isa*(ha+1) < D < isb*(hb+1) - isa*la
    return hi <= ib.isz * lb - ia.isz * (ha + 1) or lo >= ib.isz * (hb + 1) - ia.isz * la


def _overlaps(prog, sa, sb, ap_a, ap_b, c, mode, d, physical):
    T = c.trip
    ia = _Instance(prog, sa, ap_a, c, "__t", 0, False, "", physical)
    if mode == "within":
        ib = _Instance(prog, sb, ap_b, c, "__t", -d, False, "__b", physical)
        tr = (d, T - 1)
    elif mode == "boundary":
        ib = _Instance(prog, sb, ap_b, c, "__t", T - d, True, "__b", physical)
        tr = (0, d - 1)
    else:
        ib = _Instance(prog, sb, ap_b, c, "__tb", 0, True, "__b", physical)
        tr = (0, T - 1)
    if tr[0] > tr[1]:
        return False
    ranges = dict(ib.ranges)
    ranges.update(ia.ranges)
    ranges["__t"] = tr
    ranges["__tb"] = (0, T - 1)
    return not _disjoint(ia, ib, ranges)


def carried_distance(prog, sa, sb, ops, c, physical, rot=None, memo=None):
    """Smallest d >= 1 at which a (``sa``) must wait for b (``sb``) d iterations of ``c`` back;
    None when no earlier instance of b conflicts. ``ops``: conflicting (ap of a, ap of b).
    ``memo``: a ``PairMemo`` of ``prog`` shared by the calls of one analysis."""
    if c.kind != "loop" or not c.trip or c.var is None:
        return 1
    rot = rot or {}
    T = c.trip
    outer = any(li.kind in ("loop", "while") for li in sa.loops[:sa.loops.index(c)]) if c in sa.loops else True
    best = None
    for ap_a, ap_b in ops:
        if ap_a is None or ap_b is None:
            return 1
        r = rot.get(ap_a.target)
        if r is not None and ap_a.target == ap_b.target and r.get("loop") == c.var:
            d = int(r.get("copies", 1))
            best = d if best is None else min(best, d)
            continue
        if memo is not None:
            d = memo.distance(sa, sb, ap_a, ap_b, c, T, outer)
        else:
            d = _pair_distance(prog, sa, sb, ap_a, ap_b, c, T, outer, physical)
        if d is not None:
            best = d if best is None else min(best, d)
        if best == 1:
            return 1
    return best


def _pair_distance(prog, sa, sb, ap_a, ap_b, c, T, outer, physical):
    try:
        for d in range(1, DMAX + 1):
            if d <= T - 1 and _overlaps(prog, sa, sb, ap_a, ap_b, c, "within", d, physical):
                return d
            if outer and d <= T and _overlaps(prog, sa, sb, ap_a, ap_b, c, "boundary", d, physical):
                return d
        if T - 1 > DMAX:
            # any distance in (DMAX, T-1] within one iteration of the enclosing loops
            ia = _Instance(prog, sa, ap_a, c, "__t", 0, False, "", physical)
            ib = _Instance(prog, sb, ap_b, c, "__tb", 0, False, "__b", physical)
            ranges = dict(ib.ranges)
            ranges.update(ia.ranges)
            ranges["__t"], ranges["__tb"] = (DMAX + 1, T - 1), (0, T - 2 - DMAX)
            if not _disjoint(ia, ib, ranges):
                return DMAX + 1
        if outer and _overlaps(prog, sa, sb, ap_a, ap_b, c, "far", 0, physical):
            return DMAX + 1
    except (ValueError, OverflowError, TypeError):
        return 1
    return None


class PairMemo:
    """``_pair_distance`` of isomorphic pairs computed once (module doc): one per analysis of one
    ``Program`` (it keys accesses by their site and object, valid while the program is)."""

    def __init__(self, prog, physical):
        self.prog, self.physical = prog, physical
        self._access = {}       # (site pos, id(ap)) -> (ap, access class or None, base)
        self._classes = {}      # (canonical offset, dtype, extent) -> access class
        self._shapes = {}       # (id(loops of a), id(loops of b), id(c)) -> (loops, loops, pair shape)
        self._shape_ids = {}    # pair shape -> id
        self._known = {}        # key -> distance
        self.solved = self.reused = 0

    def _describe(self, site, ap):
        k = (site.pos, id(ap))
        ent = self._access.get(k)
        if ent is not None and ent[0] is ap:
            return ent
        pel = _pel()
        off = pel.as_expr(ap.offset)
        names = [li.var for li in site.loops if li.var is not None]
        cls = None
        if off.affine() is not None and len(set(names)) == len(names):
            canon = off.subs({li.var: pel.var("__w%d" % i) for i, li in enumerate(site.loops)
                              if li.var is not None})
            cls = self._classes.setdefault((canon, ap.dtype, pattern_extent(ap)), len(self._classes))
        prog = self.prog
        ml = prog.memlocs.get(ap.target)
        base = int(ml.byte_offset) if (self.physical and ml is not None and ml.byte_offset is not None) else 0
        if ml is None:
            t = prog.tensors.get(ap.target)
            if getattr(t, "arena_offset", None) is not None:
                base = int(t.arena_offset)
        ent = self._access[k] = (ap, cls, base)
        return ent

    def _pair_shape(self, sa, sb, c):
        """An id of the loops' shapes of the pair: kind, start, step, trip of every loop, which
        one is ``c`` and how many the two share."""
        k = (id(sa.loops), id(sb.loops), id(c))
        ent = self._shapes.get(k)
        if ent is not None and ent[0] is sa.loops and ent[1] is sb.loops:
            return ent[2]
        shared = 0
        for x, y in zip(sa.loops, sb.loops):
            if x is not y:
                break
            shared += 1
        shape = (sa.loops.index(c), shared,
                 tuple((li.kind, li.var is None, li.start, li.step, li.trip) for li in sa.loops),
                 tuple((li.kind, li.var is None, li.start, li.step, li.trip) for li in sb.loops))
        sid = self._shape_ids.setdefault(shape, len(self._shape_ids))
        self._shapes[k] = (sa.loops, sb.loops, sid)
        return sid

    def distance(self, sa, sb, ap_a, ap_b, c, T, outer):
        ea, eb = self._describe(sa, ap_a), self._describe(sb, ap_b)
        if ea[1] is None or eb[1] is None:
            self.solved += 1
            return _pair_distance(self.prog, sa, sb, ap_a, ap_b, c, T, outer, self.physical)
        key = (self._pair_shape(sa, sb, c), ea[1], eb[1], ea[2] - eb[2], outer)
        d = self._known.get(key, self)
        if d is not self:
            self.reused += 1
            return d
        self.solved += 1
        d = self._known[key] = _pair_distance(self.prog, sa, sb, ap_a, ap_b, c, T, outer, self.physical)
        return d
