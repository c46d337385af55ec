"""Dependence analysis over address ranges, turned into semaphore waits.

Owns: finding RAW/WAR/WAW dependences between instructions that run on
different *streams* and expressing each as a semaphore wait; the transitive
reduction of those waits (dep_reduction).

Streams: each compute engine runs its instructions in program order (stream
``PE``, ``ACT``, ``DVE``, ``POOL``, ``SP``); a DMA runs on its queue in
issue order, asynchronously to the engine that triggers it, so DMAs that one
engine issues to one queue form a stream (``Q_<engine>_<queue>``): two
engines feeding one queue are not ordered with each other. Instructions of
one stream need no semaphore between them.

Dependences: two accesses conflict when they touch the same memory (after
allocation: the same SBUF/PSUM array; before: the same memloc; HBM: the same
tensor) with overlapping (partition x byte) boxes over all iterations of
their loops (pelican bounds), and one of them writes. Registers are memories
of their own. For a conflicting pair a < b in program order:
  * forward: each instance of b waits for the latest instance of a before
    it (a's loops that do not enclose b at their last iteration);
  * loop-carried, when a and b share loops: each instance of a waits for b's
    instance in the previous iteration of the innermost shared loop.

Semaphores: every instruction that some other stream waits on signals its
stream's semaphore (``S_<engine>`` / ``Q_<engine>_<queue>``) by 1 when it completes.
A wait value is the number of signals its source stream has given when the
awaited instance completes: an affine pelican expression of the loop
variables (static trip counts; ``While``/``If`` bodies may not hold
instructions involved in cross-stream dependences -- NotBuiltYetError).

Invariant of the output: for every dependence a -> b (a's instance before
b's), b waits on a's stream for a value >= a's count at that instance, and
that value is reached without b's stream making progress (no deadlock).
"""
import numpy as np

from neuronxcc import errors
from neuronxcc.walrus import _sched
from neuronxcc.walrus.program import operands


def stream_of(instr):
    if instr.opcode == "dma_copy":
        return "Q_%s_%s" % (instr.engine, instr.attrs.get("queue", "q0"))
    return "S_" + instr.engine


class Dep:
    __slots__ = ("src", "dst", "carried")

    def __init__(self, src, dst, carried):
        self.src, self.dst, self.carried = src, dst, carried   # positions; carried: LoopInfo or None

    def key(self):
        return (self.src, self.dst, None if self.carried is None else id(self.carried))


def _register_names(prog):
    regs = set()
    for site in prog.sites:
        if site.instr.opcode == "register_load":
            r = site.instr.attrs.get("register")
            if r is not None:
                regs.add(str(r))
    return regs


def accesses(prog, physical=True):
    """Arrays (mem, write, site, plo, phi, blo, bhi) over every operand of every site."""
    regs = _register_names(prog)
    memids = {}
    rows = []
    for site in prog.sites:
        ins = site.instr
        for ap, w in operands(ins):
            key, plo, phi, blo, bhi = prog.box(ap, site.loops, physical)
            rows.append((memids.setdefault(key, len(memids)), int(w), site.pos, plo, phi, blo, bhi))
            if regs and not isinstance(ap.offset, int):
                for v in ap.offset.free_vars():
                    if v in regs:
                        rows.append((memids.setdefault(("REG", v), len(memids)), 0, site.pos, 0, 1, 0, 1))
        if ins.opcode == "register_load" and ins.attrs.get("register") is not None:
            r = str(ins.attrs["register"])
            rows.append((memids.setdefault(("REG", r), len(memids)), 1, site.pos, 0, 1, 0, 1))
    if not rows:
        z = np.zeros(0, np.int64)
        return z, z, z, z, z, z, z
    a = np.array(rows, dtype=np.int64)
    return tuple(np.ascontiguousarray(a[:, k]) for k in range(7))


def _common_loops(a, b):
    out = []
    for x, y in zip(a.loops, b.loops):
        if x is not y:
            break
        out.append(x)
    return out


def find_deps(prog, physical=True):
    """Cross-stream dependences (list of Dep), deduplicated."""
    mem, write, site, plo, phi, blo, bhi = accesses(prog, physical)
    ia, ib = _sched.conflicts(mem, write, site, plo, phi, blo, bhi)
    seen = set()
    deps = []
    streams = [stream_of(s.instr) for s in prog.sites]
    for x, y in zip(site[ia].tolist(), site[ib].tolist()):
        a, b = (x, y) if x < y else (y, x)
        if (a, b) in seen or streams[a] == streams[b]:
            continue
        seen.add((a, b))
        sa, sb = prog.sites[a], prog.sites[b]
        deps.append(Dep(a, b, None))
        common = [li for li in _common_loops(sa, sb) if li.kind == "loop"]
        if common and (common[-1].trip or 0) > 1:
            deps.append(Dep(b, a, common[-1]))
    return deps


# -- counts -------------------------------------------------------------------

def _pel():
    from neuronxcc import pelican
    return pelican


def _iter_index(li):
    pel = _pel()
    v = pel.var(li.var)
    if li.step > 0:
        return (v - li.start) // li.step if li.step != 1 else v - li.start
    return (pel.const(li.start) - v) // (-li.step)


def signal_counts(prog, signalling):
    """{pos: Expr} count of its stream's signals when that instance completes."""
    from neuronxcc.walrus.program import _block_kind
    pel = _pel()
    pos_of = {id(s.instr): s.pos for s in prog.sites}
    streams = {s.pos: stream_of(s.instr) for s in prog.sites}
    per_iter_cache = {}

    def static_signals(body):
        key = id(body)
        if key in per_iter_cache:
            return per_iter_cache[key]
        acc = {}
        for node in body:
            if node.kind == "inst":
                p = pos_of[id(node)]
                if p in signalling:
                    acc[streams[p]] = acc.get(streams[p], 0) + 1
            elif node.kind == "loop":
                inner = static_signals(node.body)
                for s, n in inner.items():
                    acc[s] = acc.get(s, 0) + n * node.trip_count
            else:
                for sub in _block_kind(node)[1]:
                    if any(v for v in static_signals(sub).values()):
                        raise errors.NotBuiltYetError(
                            "anti_dependency_analyzer: cross-engine dependences inside %s bodies "
                            "(node #%s)" % (node.kind, node.id))
        per_iter_cache[key] = acc
        return acc

    out = {}

    def walk(body, prefix):
        for node in body:
            if node.kind == "inst":
                p = pos_of[id(node)]
                if p in signalling:
                    s = streams[p]
                    prefix[s] = prefix.get(s, pel.const(0)) + 1
                    out[p] = prefix[s]
            elif node.kind == "loop":
                per = static_signals(node.body)
                if not per:
                    continue
                k = _iter_index(prog_loop[id(node)])
                inner = dict(prefix)
                for s, n in per.items():
                    inner[s] = inner.get(s, pel.const(0)) + k * n
                walk(node.body, inner)
                for s, n in per.items():
                    prefix[s] = prefix.get(s, pel.const(0)) + n * node.trip_count
            else:
                for sub in _block_kind(node)[1]:
                    static_signals(sub)

    prog_loop = {id(li.node): li for li in prog.loops}
    walk(prog.module.body, {})
    return out


def _last_value(li):
    return li.start + (li.trip - 1) * li.step


def wait_value(prog, counts, dep):
    """The Expr dst waits for: src's count at its latest instance before dst's instance."""
    pel = _pel()
    sa, sb = prog.sites[dep.src], prog.sites[dep.dst]
    common = set(id(li) for li in _common_loops(sa, sb))
    subs = {}
    for li in sa.loops:
        if li.kind != "loop":
            continue
        if id(li) not in common:
            if not li.trip:
                return None      # the source never runs: nothing to wait for
            subs[li.var] = _last_value(li)
    if dep.carried is not None:
        subs[dep.carried.var] = pel.var(dep.carried.var) - dep.carried.step
    e = counts[dep.src]
    return e.subs(subs) if subs else e


def materialize(prog, deps):
    """Replace every instruction's waits/signals by those that enforce ``deps``."""
    signalling = {d.src for d in deps}
    counts = signal_counts(prog, signalling)
    waits = {}
    for d in deps:
        v = wait_value(prog, counts, d)
        if v is None:
            continue
        sem = stream_of(prog.sites[d.src].instr)
        lst = waits.setdefault(d.dst, {}).setdefault(sem, [])
        lst.append(v)
    nwaits = 0
    for site in prog.sites:
        ins = site.instr
        ins.signals = [(stream_of(ins), 1)] if site.pos in signalling else []
        out = []
        ranges = prog.var_ranges(site.loops)
        for sem, vals in sorted(waits.get(site.pos, {}).items()):
            for v in _dominant(vals):
                if v.is_const():
                    if int(v) > 0:
                        out.append((sem, int(v)))
                    continue
                lo, _ = v.bounds({x: ranges[x] for x in v.free_vars() if x in ranges})
                if lo is None or lo < 0:
                    v = _pel().max_(v, 0)   # first iterations of a carried wait: nothing to wait for
                out.append((sem, v))
        ins.waits = out
        nwaits += len(out)
    return nwaits


def _dominant(vals):
    """One value per class of values that differ by a constant (the largest)."""
    keep = []
    for v in vals:
        for i, k in enumerate(keep):
            d = v - k
            if d.is_const():
                if int(d) > 0:
                    keep[i] = v
                break
        else:
            keep.append(v)
    return keep


# -- reduction ------------------------------------------------------------------

def reduce_deps(prog, deps):
    """Transitive reduction of the forward dependences.

    The graph: forward deps plus program order within each stream, over
    positions (edges go to higher positions, so paths stay inside the loop
    bodies that hold both ends and keep instance semantics). A forward dep
    implied by another path is dropped; loop-carried deps are kept.
    """
    n = len(prog.sites)
    fwd = [d for d in deps if d.carried is None]
    carried = [d for d in deps if d.carried is not None]
    last = {}
    stream_edges = []
    for s in prog.sites:
        k = stream_of(s.instr)
        if k in last:
            stream_edges.append((last[k], s.pos))
        last[k] = s.pos
    edges = sorted(set([(d.src, d.dst) for d in fwd] + stream_edges))
    ptr = np.zeros(n + 1, np.int64)
    for a, b in edges:
        ptr[a + 1] += 1
    ptr = np.cumsum(ptr)
    idx = np.array([b for _, b in edges], np.int64)
    keep = _sched.transitive_reduction(ptr, idx)
    kept = {e for e, k in zip(edges, keep) if k}
    return [d for d in fwd if (d.src, d.dst) in kept] + carried
