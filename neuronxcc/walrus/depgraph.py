"""The dependence graph of one program state (the ``deps`` analysis).

Owns: turning every instruction's accesses (reads and writes as boxes over
memories: SBUF/PSUM partitions x bytes after allocation, memlocs before,
HBM tensors, registers; ``access.accesses``) into *candidate edges* (a, b),
a < b in program order, such that every pair of conflicting accesses (same
memory, overlapping boxes, one writes) is ordered by a path of candidate
edges through instructions that run between them (see ``_deps.sweep``).
Cost: linear in the accesses times the live entries per segment.

Readers: ``deps.find_deps`` (the cross-stream dependences: per destination,
stream and dynamic region of the source, the latest source), the schedulers
and the time estimate (``block_edges``: the edges inside one straight-line
block, same stream included) and, through the pass manager's cache
(``PassContext.analysis``), every pass that asks for the same program state.

Loop-carried pairs (both ends inside one repeating region) are still every
conflicting pair there (``loop_pairs``): a loop body is small, and the
carried distances need each operand pair.

Invariant: built from one ``Program``; it is only valid while the module has
that program's instructions in that order with those addresses (the pass
manager drops it when a pass changes the module).
"""
import numpy as np

from neuronxcc.walrus import _deps, _sched
from neuronxcc.walrus.access import accesses, site_streams
from neuronxcc.walrus.program import DYNAMIC, REPEATING


def sorted_unique(a):
    """``np.unique`` of a 1-d integer array (sorted, distinct), without the numpy.ma import that
    np.unique costs a tool process at start-up."""
    s = np.sort(np.asarray(a), kind="stable")
    if s.size < 2:
        return s
    keep = np.empty(s.size, bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def context(site):
    """The innermost dynamic region holding the site (None at the top level)."""
    for li in reversed(site.loops):
        if li.kind in DYNAMIC:
            return li
    return None


class DepGraph:
    """Candidate edges over the sites of ``prog`` (arrays ``src``, ``dst``, sorted by (dst, src))."""

    def __init__(self, prog, physical):
        self.prog = prog
        self.physical = physical
        n = len(prog.sites)
        self.streams = site_streams(prog)
        ids = {}
        self.stream_id = np.array([ids.setdefault(k, len(ids)) for k in self.streams], np.int64)
        self.stream_names = list(ids)
        self.ctx = [context(s) for s in prog.sites]
        keys = {}
        self.key = np.array([keys.setdefault((st, id(c)), len(keys)) for st, c in zip(self.streams, self.ctx)],
                            np.int64)
        self.nkeys = len(keys)
        self.aps = []
        rows = accesses(prog, physical, self.aps)
        self.rows = rows
        mem, write, site, plo, phi, blo, bhi = rows
        o = np.argsort(site, kind="stable")
        cells, ncell = _cells(mem, plo, phi, blo, bhi)
        top = np.array([c is None for c in self.ctx], np.int64)
        c = [np.ascontiguousarray(x[o]) for x in [site, write] + cells]
        ea, eb = _deps.sweep(*c, np.ascontiguousarray(self.key[site[o]]), np.ascontiguousarray(top[site[o]]),
                             ncell)
        codes = sorted_unique(eb * max(n, 1) + ea)
        self.dst = codes // max(n, 1)
        self.src = codes % max(n, 1)
        self._blocks = None
        self._block_edges = None
        self.instr_ids = None     # set by ``store``: the instruction sequence it was stored for

    def __len__(self):
        return int(self.src.shape[0])

    # -- views -------------------------------------------------------------------
    def cross_stream_latest(self):
        """[(a, b)]: per destination b and per (stream, dynamic region) of the source, the latest
        source of another stream."""
        src, dst = self.src, self.dst
        cross = self.stream_id[src] != self.stream_id[dst]
        src, dst = src[cross], dst[cross]
        if not src.size:
            return []
        g = dst * max(self.nkeys, 1) + self.key[src]
        o = np.lexsort((src, g))
        g, src, dst = g[o], src[o], dst[o]
        last = np.ones(g.shape[0], bool)
        last[:-1] = g[1:] != g[:-1]
        return list(zip(src[last].tolist(), dst[last].tolist()))

    def blocks(self):
        """[(owner list, [sites])] for every maximal run of instructions in one body list."""
        if self._blocks is None:
            out = []
            cur = None
            for s in self.prog.sites:
                if cur is not None and cur[0] is s.owner and cur[1][-1].index == s.index - 1:
                    cur[1].append(s)
                else:
                    cur = (s.owner, [s])
                    out.append(cur)
            self._blocks = out
        return self._blocks

    def block_edges(self):
        """{block number: [(a, b)]}: the candidate edges whose ends lie in one block (any streams)."""
        if self._block_edges is None:
            blk = np.empty(len(self.prog.sites), np.int64)
            for k, (_, bs) in enumerate(self.blocks()):
                blk[bs[0].pos:bs[-1].pos + 1] = k
            out = {}
            if self.src.size:
                same = blk[self.src] == blk[self.dst]
                for a, b in zip(self.src[same].tolist(), self.dst[same].tolist()):
                    out.setdefault(int(blk[a]), []).append((a, b))
            self._block_edges = out
        return self._block_edges

    def loop_pairs(self):
        """{(a, b): [(ap of a, ap of b)]} for every conflicting pair of sites a < b of different
        streams that lie in one repeating region (Loop or While body)."""
        prog = self.prog
        region = np.full(len(prog.sites), -1, np.int64)
        rid = {}
        for s in prog.sites:
            for li in s.loops:
                if li.kind in REPEATING:
                    region[s.pos] = rid.setdefault(id(li), len(rid))
                    break
        mem, write, site, plo, phi, blo, bhi = self.rows
        pairs = {}
        if not site.size:
            return pairs
        r = region[site]
        keep = np.nonzero(r >= 0)[0]
        if not keep.size:
            return pairs
        nm = int(mem.max()) + 1
        mem2 = np.ascontiguousarray(r[keep] * nm + mem[keep])
        sel = [np.ascontiguousarray(x[keep]) for x in (write, site, plo, phi, blo, bhi)]
        ia, ib = _sched.conflicts(mem2, sel[0], sel[1], sel[2], sel[3], sel[4], sel[5])
        ra, rb = keep[ia], keep[ib]
        streams = self.streams
        aps = self.aps
        for x, y, qa, qb in zip(site[ra].tolist(), site[rb].tolist(), ra.tolist(), rb.tolist()):
            a, b = (x, y) if x < y else (y, x)
            if streams[a] != streams[b]:
                if x > y:
                    qa, qb = qb, qa
                pairs.setdefault((a, b), []).append((aps[qa], aps[qb]))
        return pairs


def _ranks(mem, lo, hi):
    """Per memory, the rank of each access's lo and hi among that memory's distinct bounds;
    and the number of distinct bounds of each memory."""
    n = mem.shape[0]
    mm = np.concatenate([mem, mem])
    vv = np.concatenate([lo, hi])
    o = np.lexsort((vv, mm))
    m, v = mm[o], vv[o]
    newmem = np.ones(2 * n, bool)
    newmem[1:] = m[1:] != m[:-1]
    newval = newmem.copy()
    newval[1:] |= v[1:] != v[:-1]
    u = np.cumsum(newval) - 1                          # index among all (memory, bound) pairs
    start = np.maximum.accumulate(np.where(newmem, u, 0))
    rank = np.empty(2 * n, np.int64)
    rank[o] = u - start
    nmem = int(mem.max()) + 1
    count = np.zeros(nmem, np.int64)
    np.maximum.at(count, m, u - start + 1)
    return rank[:n], rank[n:], count


def _cells(mem, plo, phi, blo, bhi):
    """Elementary (partition x byte) cells per memory: per access its rectangle
    (p0, p1, s0, s1), the memory's first cell and row width; and the cell count."""
    n = mem.shape[0]
    if not n:
        return [np.zeros(0, np.int64) for _ in range(6)], 0
    p0, p1, npb = _ranks(mem, plo, phi)
    s0, s1, nbb = _ranks(mem, blo, bhi)
    w = np.maximum(nbb - 1, 0)
    size = np.maximum(npb - 1, 0) * w
    first = np.zeros_like(size)
    first[1:] = np.cumsum(size)[:-1]
    return [p0, p1, s0, s1, first[mem], w[mem]], int(size.sum())


def instruction_ids(module):
    """The identity of a module's instruction sequence (what a stored graph was built for)."""
    return [id(i) for i in module.instructions()]


def store(ctx, graph, computed=True):
    """Cache ``graph`` as the ``deps`` analysis of its program's module as it is now (the
    synchronising passes store the graph they built, or put back one still valid with
    ``computed=False``; ``analysis`` checks it is still current)."""
    graph.instr_ids = instruction_ids(graph.prog.module)
    ctx.store(("deps", bool(graph.physical)), graph, computed)


def analysis(ctx, module, physical):
    """The DepGraph of the module's current state, from the pass manager's cache when it has one.

    A cached graph is used only while the module has exactly the instructions it was built for,
    in that order: the synchronising passes preserve ``deps`` (they change only waits, signals
    and the instructions they insert, and store the graph of their result when they built it),
    and post_sched's reordering shows in the sequence."""
    from neuronxcc.walrus.program import Program

    def build():
        module.ensure_ids()
        prog = ctx.analysis("lsa", lambda: Program(module)) if ctx is not None else Program(module)
        if prog.module is not module or len(prog.sites) != sum(1 for _ in module.instructions()):
            prog = Program(module)
        g = DepGraph(prog, physical)
        g.instr_ids = instruction_ids(module)
        return g
    if ctx is None:
        return build()
    key = ("deps", bool(physical))
    g = ctx.cached(key)
    if g is not None and (g.prog.module is not module or g.instr_ids != instruction_ids(module)):
        ctx.drop("deps")
        g = None
    if g is None:
        g = ctx.analysis(key, build)
    return g
