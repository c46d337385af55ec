"""Live intervals of on-chip memory locations over program positions.

Owns: for every SBUF/PSUM memloc, the inclusive position interval
[start, end] during which its contents may be needed, loop-aware:

  * an interval that enters or leaves a loop (or While) covers that whole
    loop: a value defined before the loop is read by every iteration, a value
    defined inside and read after is live from the first iteration on;
  * a value whose accesses all sit inside one loop is live only within an
    iteration when its first access writes the whole of it with an offset
    that does not depend on the loop's (or an outer loop's) variable; else it
    may carry from one iteration to the next and covers the whole loop.

Memlocs nobody touches get no interval (``None``). A memloc that
``vn_splitter`` rotated over its loop's iterations lives over that loop's
body (each copy is private to the iterations that use it).

A value defined afresh in every iteration of a loop records that loop as its
``private`` loop (the innermost loop whose iterations do not carry it);
``pipelined_intervals`` widens such a value's interval to its private loop's
whole body, so that values of one loop body never share bytes: iterations
can then overlap in time without a false WAR/WAW between different values
that happen to share an address.
"""
from neuronxcc.walrus.program import operands


def reads_own_dst(instr, loop=None):
    """A matmul that accumulates into its PSUM dst also reads it.

    ``psum_zero`` True: overwrite. False: accumulate. An expression of loop
    variables (zero on the first iteration of an inner loop): the group starts
    fresh within one iteration of ``loop`` when all its variables belong to
    loops nested inside ``loop``.
    """
    if instr.opcode != "matmul":
        return False
    z = instr.attrs.get("psum_zero", True)
    if z is True or z == 1:
        return False
    if z is False or z == 0 or loop is None:
        return True
    try:
        fv = z.free_vars()
    except AttributeError:
        return True
    return loop.var in fv or not fv


class Value:
    __slots__ = ("name", "memory", "nparts", "size", "start", "end", "sites", "pe", "first_write_full", "private")

    def __init__(self, ml):
        self.name = ml.name
        self.memory = ml.memory
        self.nparts = int(ml.partitions)
        self.size = int(ml.bytes_per_partition)
        self.start = self.end = None
        self.sites = []          # (pos, is_write, ap)
        self.pe = False          # touched by the PE (its rows start at partition 0)
        self.private = None      # LoopInfo: defined afresh in each iteration of this loop


def _covers_whole(prog, v, ap, site, loop):
    """Does this write, within one iteration of ``loop``, define all of ``v``?"""
    inner = [li for li in site.loops if li.depth > loop.depth]
    ranges = prog.var_ranges(inner)
    off = ap.offset
    if not isinstance(off, int):
        if any(x not in ranges for x in off.free_vars()):
            return False
    key, plo, phi, blo, bhi = prog.box(ap, inner, physical=False)
    if (phi - plo) < v.nparts or plo > 0:
        return False
    # a strided pattern that skips bytes still has full bounds; require density
    dense = 1
    for step, num in ap.pattern:
        dense *= max(int(num), 0)
    from neuronxcc.starfish import birpy as B
    isz = B.dtypes.itemsize(ap.dtype)
    trips = 1
    for li in inner:
        trips *= li.trip or 0
    return blo == 0 and bhi >= v.size and dense * isz * max(trips, 1) >= v.size


def compute(prog):
    """{memloc name: Value} for every SBUF/PSUM memloc; intervals filled when used."""
    values = {name: Value(ml) for name, ml in prog.memlocs.items()}
    for site in prog.sites:
        for ap, w in operands(site.instr):
            v = values.get(ap.target)
            if v is None:
                continue
            v.sites.append((site.pos, w, ap))
            if site.instr.engine == "PE":
                v.pe = True
    from neuronxcc.walrus.carried import rotations
    rot = rotations(prog.module)

    def loops_at(p):
        # the repeating regions holding position p, outermost first (only these can hold p)
        return [li for li in prog.sites[p].loops if li.kind in ("loop", "while")]
    for v in values.values():
        if not v.sites:
            continue
        s = min(p for p, _, _ in v.sites)
        e = max(p for p, _, _ in v.sites)
        if v.name in rot:
            # rotated (vn_splitter): copy F mod K is private to iteration F of its loop
            li = next((x for x in loops_at(s) if x.kind == "loop" and x.var == rot[v.name].get("loop")
                       and x.first <= s and e <= x.last), None)
            if li is not None:
                v.start, v.end, v.private = li.first, li.last, li
                continue
        changed = True
        while changed:
            # a loop holding one end but not the other: the value lives through all of it
            changed = False
            for li in loops_at(s) + loops_at(e):
                inside_s = li.first <= s <= li.last
                inside_e = li.first <= e <= li.last
                if inside_s != inside_e:
                    ns, ne = min(s, li.first), max(e, li.last)
                    if (ns, ne) != (s, e):
                        s, e = ns, ne
                        changed = True
        # loops holding every access, innermost first: carried across their iterations?
        holders = sorted((li for li in loops_at(s) if li.first <= s and e <= li.last), key=lambda li: -li.depth)
        m = min(p for p, _, _ in v.sites)
        first = [(p, w, ap) for p, w, ap in v.sites if p == m]
        site = prog.sites[m]
        for li in holders:
            defined = any(w and _covers_whole(prog, v, ap, site, li) for p, w, ap in first) and \
                not any(not w for p, w, ap in first) and not reads_own_dst(site.instr, li)
            if defined:
                v.private = li
                break
            s, e = min(s, li.first), max(e, li.last)
        v.start, v.end = s, e
    return values


def pipelined_intervals(values):
    """{name: (start, end)}: each value's interval, widened to its private loop's body."""
    out = {}
    for name, v in values.items():
        if v.start is None:
            continue
        s, e = v.start, v.end
        li = v.private
        if li is not None and li.kind == "loop" and (li.trip or 0) > 1:
            s, e = min(s, li.first), max(e, li.last)
        out[name] = (s, e)
    return out
