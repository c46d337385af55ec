"""The element ranges walrus derives from access patterns, against enumeration.

``Program.box`` (every dependence and the allocator read it) and the
loop-carried distance (``carried``) both rest on the extent of an access
pattern, negative steps included: each is checked here against the elements
enumerated one by one.
"""
import itertools

from hypothesis import given, settings, strategies as st

from neuronxcc.starfish import birpy as B
from neuronxcc.walrus.carried import DMAX, carried_distance
from neuronxcc.walrus.program import Program

T = 5
BASE = 64          # keeps every element offset >= 0
SIZE = 512         # elements in the memloc: room for every access

dims = st.lists(st.tuples(st.integers(-4, 4), st.integers(1, 4)), min_size=1, max_size=2)
access = st.tuples(st.integers(0, 12), st.integers(-5, 5), dims)     # offset = BASE + c + slope * i


def _elements(c, slope, pattern, i):
    return [BASE + c + slope * i + sum(s * j for (s, _), j in zip(pattern, js))
            for js in itertools.product(*[range(n) for _, n in pattern])]


def _module(a, b):
    """loop i in [0, T): DVE writes t (access a); ACT reads t (access b)."""
    m = B.Module("ranges")
    m.add_memloc("t", "SBUF", 128, SIZE * 4)
    m.add_memloc("u", "SBUF", 128, SIZE * 4)
    bld = B.Builder(m)

    def ap(name, acc, i):
        c, slope, pattern = acc
        return B.AccessPattern(name, "float32", BASE + c + slope * i, [list(p) for p in pattern], 0, 128)
    with bld.loop("i", 0, T) as i:
        bld.inst("memset", "DVE", [ap("t", a, i)], [], value=1.0)
        bld.inst("activation", "ACT", [ap("u", b, i)], [ap("t", b, i)], func="identity")
    bld.finish()
    return m


@settings(max_examples=60, deadline=None)
@given(access, access)
def test_box_is_the_hull_of_the_enumerated_elements(a, b):
    prog = Program(_module(a, b))
    site = prog.sites[0]
    ap = site.instr.dsts[0]
    elems = [e for i in range(T) for e in _elements(*a, i)]
    key, plo, phi, blo, bhi = prog.box(ap, site.loops, physical=False)
    assert (key, plo, phi) == ("t", 0, 128)
    assert (blo, bhi) == (min(elems) * 4, (max(elems) + 1) * 4)


def _extent(pattern):
    e = _elements(-BASE, 0, pattern, 0)
    return min(e), max(e)


def _first_overlap(overlaps):
    d = next((d for d in range(1, T) if overlaps(d)), None)
    return None if d is None else min(d, DMAX + 1)


@settings(max_examples=80, deadline=None)
@given(access, access)
def test_carried_distance_against_enumeration(a, b):
    """One loop, no enclosing loop: the write in iteration t waits for the read d back.

    Safe: never later than the first d at which the enumerated elements of the two
    instances meet. Exact to pelican's bounds: d is the first distance at which the
    range of (a's first element - b's first element) over t in [d, T-1] meets the
    window the two pattern extents allow."""
    prog = Program(_module(a, b))
    sa, sb = prog.sites[0], prog.sites[1]
    got = carried_distance(prog, sa, sb, [(sa.instr.dsts[0], sb.instr.srcs[0])], prog.loops[0], physical=False)

    def meets(d):
        return any(set(_elements(*a, t)) & set(_elements(*b, t - d)) for t in range(d, T))
    exact = _first_overlap(meets)
    assert exact is None or (got is not None and got <= exact)

    (la, ha), (lb, hb) = _extent(a[2]), _extent(b[2])

    def bounds_meet(d):
        diffs = [(a[0] + a[1] * t) - (b[0] + b[1] * (t - d)) for t in range(d, T)]
        return min(diffs) <= hb - la and max(diffs) >= lb - ha
    assert got == _first_overlap(bounds_meet)
