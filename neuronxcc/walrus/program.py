"""A flat, position-numbered view of a BIR module's body (the lsa analysis).

Owns: walking ``module.body`` (instructions, ``Loop``, ``While``, ``If``) in
program order, numbering every static instruction (its *position*), recording
the loop nest around it, and computing the box of memory an operand touches
over all iterations of its loops (pelican bounds of the offset over the loop
ranges). Every walrus pass reads the program through this view.

Invariants: positions are 0..n-1 in program text order; a region (a
``Loop``, a ``While`` body, each branch of an ``If``) covers the contiguous
position range [first, last] of the instructions inside it and appears in
the ``loops`` of every site inside; a ``While`` is a loop with an unknown
trip count and no variable; the *dynamic* regions (While bodies and If
branches) run a number of times known only at run time; an operand
whose offset cannot be bounded (registers, unknown loops) touches its whole
memory location or tensor.
"""
from neuronxcc.starfish import birpy as B

HBM = "HBM"
from neuronxcc.starfish.birpy.hbm import ARENA  # noqa: E402  (the shared scratch arena)
DYNAMIC = ("while", "then", "else")
REPEATING = ("loop", "while")


class LoopInfo:
    __slots__ = ("node", "var", "start", "stop", "step", "trip", "first", "last", "depth", "parent", "kind",
                 "owner", "index", "dyn_index")

    def __init__(self, node, kind, var, start, stop, step, trip, depth, parent, owner, index):
        self.node = node
        self.kind = kind          # 'loop' | 'while' | 'then' | 'else' (If branches)
        self.var = var
        self.start, self.stop, self.step, self.trip = start, stop, step, trip
        self.first = self.last = None
        self.depth = depth
        self.parent = parent
        self.owner = owner        # the python list holding the node
        self.index = index
        self.dyn_index = None     # ordinal among the dynamic regions, program order

    def var_range(self):
        """Inclusive (lo, hi) of the loop variable, or None."""
        if self.var is None or not self.trip:
            return None
        a = self.start
        b = self.start + (self.trip - 1) * self.step
        return (min(a, b), max(a, b))


class Site:
    """One static instruction: its position, the list that holds it, its loops."""
    __slots__ = ("pos", "instr", "owner", "index", "loops")

    def __init__(self, pos, instr, owner, index, loops):
        self.pos, self.instr, self.owner, self.index, self.loops = pos, instr, owner, index, loops

    @property
    def engine(self):
        return self.instr.engine


def _int(x):
    try:
        return int(x)
    except (TypeError, ValueError):
        return None


def trip_count(start, stop, step):
    if start is None or stop is None or not step:
        return None
    if step > 0:
        return max(0, -(-(stop - start) // step))
    return max(0, -(-(start - stop) // -step))


class Program:
    """The flattened view. ``sites`` in position order, ``loops`` outermost first."""

    def __init__(self, module):
        self.module = module
        self.sites = []
        self.loops = []
        self.memlocs = {m.name: m for m in _memlocs(module)}
        self.tensors = {t.name: t for t in _tensors(module)}
        self._ndyn = 0
        self._walk(module.body, (), 0, None)

    def _walk(self, body, loops, depth, parent):
        for idx, node in enumerate(body):
            if isinstance(node, B.Instruction):
                self.sites.append(Site(len(self.sites), node, body, idx, loops))
                continue
            kind, sub = block_kind(node)
            if kind == "loop":
                start, stop, step = _int(node.start), _int(node.stop), _int(node.step)
                li = LoopInfo(node, "loop", node.var, start, stop, step, trip_count(start, stop, step),
                              depth, parent, body, idx)
                self._region(li, [node.body], loops, depth)
            elif kind == "while":
                li = LoopInfo(node, "while", None, None, None, None, None, depth, parent, body, idx)
                self._region(li, [node.body], loops, depth)
            else:
                # each branch is a region of its own (runs 0 or 1 times per execution of the If)
                for bkind, bbody in (("then", node.then_body), ("else", node.else_body)):
                    li = LoopInfo(node, bkind, None, None, None, None, None, depth, parent, body, idx)
                    self._region(li, [bbody], loops, depth)

    def _region(self, li, bodies, loops, depth):
        if li.kind in DYNAMIC:
            li.dyn_index = self._ndyn
            self._ndyn += 1
        self.loops.append(li)
        first = len(self.sites)
        for b in bodies:
            self._walk(b, loops + (li,), depth + 1, li)
        li.first, li.last = first, len(self.sites) - 1

    def __len__(self):
        return len(self.sites)

    def var_ranges(self, loops):
        out = {}
        for li in loops:
            r = li.var_range()
            if r is not None:
                out[li.var] = r
        return out

    def dynamic_count(self, site):
        """How many times the instruction runs (None if a While surrounds it; If
        branches count as taken)."""
        n = 1
        for li in site.loops:
            if li.kind == "while":
                return None
            if li.kind == "loop":
                n *= li.trip or 0
        return n

    # -- operands ------------------------------------------------------------
    def memory_of(self, ap):
        if ap.target in self.memlocs:
            return self.memlocs[ap.target].memory
        return HBM

    def box(self, ap, loops, physical=True, fixed=()):
        """(memory key, plo, phi, blo, bhi) half-open, over all iterations of ``loops``.

        With ``physical`` and an allocated memloc the key is the memory
        ('SBUF'/'PSUM') and the box is absolute; otherwise the key is the
        memloc/tensor name and the box is relative to it. Variables in
        ``fixed`` are left symbolic... except that bounds need numbers, so the
        box is then computed per value and callers should not pass ``fixed``.
        """
        return self.box_in(ap, self.var_ranges(loops), physical)

    def box_in(self, ap, ranges, physical=True):
        """``box`` with the loop variables' ranges given (``var_ranges`` of the site's loops)."""
        isz = _ITEMSIZE.get(ap.dtype)
        if isz is None:
            isz = _ITEMSIZE[ap.dtype] = B.dtypes.itemsize(ap.dtype)
        lo, hi = _elem_range(ap, ranges)
        ml = self.memlocs.get(ap.target)
        if ml is not None:
            size = int(ml.bytes_per_partition)
            sp = ap.start_partition
            sp = (_int(sp) or 0) if sp is not None else 0
            npart = ap.num_partitions
            npart = (_int(npart) if npart is not None else None) or int(ml.partitions)
            if lo is None:
                blo, bhi = 0, size
            else:
                blo, bhi = max(0, lo * isz), min(size, (hi + 1) * isz)
                if bhi <= blo:
                    blo, bhi = 0, size
            if physical and ml.start_partition is not None and ml.byte_offset is not None:
                p0, b0 = int(ml.start_partition), int(ml.byte_offset)
                return (ml.memory, p0 + sp, p0 + sp + npart, b0 + blo, b0 + bhi)
            return (ml.name, sp, sp + npart, blo, bhi)
        t = self.tensors.get(ap.target)
        total = tensor_bytes(t) if t is not None else 1 << 62
        key, base = ap.target, 0
        if getattr(t, "arena_offset", None) is not None:
            # scratch placed by liveness: tensors sharing bytes are one memory (birpy/hbm.py)
            key, base = ARENA, t.arena_offset
        if lo is None:
            return (key, 0, 1, base, base + total)
        return (key, 0, 1, base + max(0, lo * isz), base + min(total, (hi + 1) * isz))


_ITEMSIZE = {}      # dtype name -> bytes per element


def _elem_range(ap, ranges):
    """Inclusive element range [lo, hi] touched by the AP, or (None, None) if unbounded."""
    off = ap.offset
    try:
        if isinstance(off, int):
            olo = ohi = off
        else:
            olo, ohi = _offset_bounds(off, ranges)
            if olo is None or ohi is None:
                return None, None
    except Exception:
        return None, None
    lo_add, hi_add = pattern_extent(ap)
    return int(olo) + lo_add, int(ohi) + hi_add


# id(offset Expr) -> (the Expr, its free variables, {their ranges: bounds}): every pass
# rebuilds the program view, the offsets (immutable pelican Exprs) stay the same objects
_BOUNDS = {}
_BOUNDS_MAX = 1 << 20


def _offset_bounds(off, ranges):
    """pelican bounds of ``off`` over ``ranges`` ((None, None) when a variable has no range)."""
    ent = _BOUNDS.get(id(off))
    if ent is None or ent[0] is not off:
        if len(_BOUNDS) >= _BOUNDS_MAX:
            _BOUNDS.clear()
        ent = (off, tuple(sorted(off.free_vars())), {})
        _BOUNDS[id(off)] = ent
    fv = ent[1]
    try:
        key = tuple(ranges[v] for v in fv)
    except KeyError:
        return None, None
    r = ent[2].get(key)
    if r is None:
        r = off.bounds(dict(zip(fv, key)))
        ent[2][key] = r
    return r


def pattern_extent(ap):
    """(lo, hi): the smallest and largest element offset the access pattern reaches
    relative to its offset (negative steps reach below it); birpy's own rule."""
    lo, hi = ap.element_extent()
    return int(lo), int(hi)


def tensor_bytes(t):
    n = 1
    for d in t.shape:
        n *= int(d)
    return n * B.dtypes.itemsize(t.dtype)


def _memlocs(module):
    m = module.memlocs
    return list(m.values()) if isinstance(m, dict) else list(m)


def _tensors(module):
    t = module.tensors
    return list(t.values()) if isinstance(t, dict) else list(t)


def block_kind(node):
    """('loop'|'while'|'if', [bodies]) for a control node."""
    name = type(node).__name__
    if name == "Loop":
        return "loop", [node.body]
    if name == "While":
        return "while", [b for b in (getattr(node, "cond_body", None), node.body) if b]
    if name == "If":
        return "if", [b for b in (getattr(node, "then_body", None), getattr(node, "else_body", None)) if b]
    raise TypeError("unknown BIR body node %r" % name)


def operands(instr):
    """[(ap, is_write)] for every operand of the instruction."""
    return [(ap, True) for ap in instr.dsts] + [(ap, False) for ap in instr.srcs]


def iter_instructions(body):
    """All Instruction objects under ``body``, in program order."""
    for node in body:
        if isinstance(node, B.Instruction):
            yield node
        else:
            for sub in block_kind(node)[1]:
                yield from iter_instructions(sub)


def program(module, ctx):
    """The lsa analysis of ``module``: its ``Program``, from the pass manager's cache (``lsa``)."""
    def build():
        module.ensure_ids()
        return Program(module)
    prog = ctx.analysis("lsa", build)
    if prog.module is not module:
        prog = build()
        ctx.store("lsa", prog)
    return prog
