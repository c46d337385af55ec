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
    instance d iterations back in the innermost shared loop, d the smallest
    distance at which the accesses really overlap (``carried``: per-iteration
    ranges by substituting the loop variable, the first iterations checked
    against the previous iterations of enclosing loops; no dep when no
    earlier iteration overlaps). A count d iterations back that falls before
    the loop's first iteration is the count of an instance of the enclosing
    loops' previous iterations at least d flattened iterations back, so
    waiting for it covers every conflicting instance.

Semaphores: every instruction that some other stream waits on signals its
stream's semaphore (``S_<engine>`` / ``Q_<engine>_<queue>``) by 1 when it completes.
A wait value is the number of signals its source stream has given when the
awaited instance completes: an affine pelican expression of the loop
variables and, when ``While`` bodies are involved, of registers
``walrus_n<id>_<engine>`` that count their executions (every engine keeps
its own copy, loaded by ``register_load`` from the const table
``walrus.iota``; see ``insert_counters``). Values that may be negative
(first iterations of a carried dependence) are clamped with ``max(0, .)``.

Data-dependent control flow: an ``If`` runs one branch, so counts taken
over the program text would over-count whenever the other branch ran (a
wait for signals that never come). ``balance_ifs`` therefore gives both
branches the same signals per stream: the short branch ends with a ``nop``
(``walrus.balance``) on the stream's engine signalling the difference (a
DMA queue's nop first waits for that queue's earlier signals, so a count
still means "every DMA up to here is done"); counts through an If are then
static. A ``While`` cannot be balanced: its trips are counted per engine as
above. Every engine reads an If/While condition register when it reaches
the node (birsim's stream order, like the hardware): ``walrus.cond`` nops
before each If/While and at each While body's end, treated as readers of
that register, order those reads against the register_loads.

Invariant of the output: for every dependence a -> b (a's instance before
b's), b waits on a's stream for a value >= a's count at that instance, and
that value is reached without b's stream making progress (no deadlock).
"""
import numpy as np

from neuronxcc.starfish import birpy as B
from neuronxcc.walrus.access import BALANCE_NAME, COND_NAME, COUNTER_NAME, accesses, site_streams, stream_of  # noqa: F401
from neuronxcc.walrus.depgraph import DepGraph, context, instruction_ids as depgraph_ids, store as depgraph_store
from neuronxcc.walrus.program import DYNAMIC, REPEATING, Program


class Dep:
    __slots__ = ("src", "dst", "carried", "distance")

    def __init__(self, src, dst, carried, distance=1):
        self.src, self.dst, self.carried = src, dst, carried   # positions; carried: LoopInfo or None
        self.distance = distance      # carried: dst's instance waits for src's this many iterations back

    def key(self):
        return (self.src, self.dst, None if self.carried is None else id(self.carried), self.distance)


def _common_loops(a, b):
    out = []
    for x, y in zip(a.loops, b.loops):
        if x is not y:
            break
        out.append(x)
    return out


def find_deps(prog, physical=True, exact=True, graph=None):
    """Cross-stream dependences (list of Dep).

    Forward deps: per destination, per stream and dynamic region of the
    source, only the latest source of the dependence graph
    (``depgraph.DepGraph``): its count dominates the others' (every earlier
    instruction of that stream in that region precedes it), and a source the
    graph retired is ordered through the instruction that retired it. A pair
    that shares a repeating loop gets a loop-carried dep over the innermost
    shared loop at the distance ``carried.carried_distance`` finds (none when
    no earlier iteration's access overlaps; ``exact=False``: distance 1 always).
    ``graph``: a DepGraph of ``prog`` already built.
    """
    from neuronxcc.walrus import carried as CA
    g = graph if graph is not None else DepGraph(prog, physical)
    rot = CA.rotations(prog.module) if exact else {}
    memo = CA.PairMemo(prog, physical) if exact else None
    deps = []
    carrier = {}      # (id(loops of a), id(loops of b)) -> the carrying loop or None (the sites hold the tuples)
    sites = prog.sites
    for (a, b), ops in sorted(g.loop_pairs().items()):
        sa, sb = sites[a], sites[b]
        k = (id(sa.loops), id(sb.loops))
        c = carrier.get(k, carrier)
        if c is carrier:
            common = [li for li in _common_loops(sa, sb) if li.kind in REPEATING]
            c = carrier[k] = common[-1] if common and (common[-1].kind == "while" or (common[-1].trip or 0) > 1) \
                else None
        if c is not None:
            d = CA.carried_distance(prog, sa, sb, ops, c, physical, rot, memo) if exact else 1
            if d is not None:
                deps.append(Dep(b, a, c, d))
    deps.extend(Dep(a, b, None) for a, b in g.cross_stream_latest())
    return deps


# -- counts -------------------------------------------------------------------

_PELICAN = []


def _pel():
    """pelican, imported on first use (kept: every count and wait value is built through it)."""
    if not _PELICAN:
        from neuronxcc import pelican
        _PELICAN.append(pelican)
    return _PELICAN[0]


def _iter_index(li):
    pel = _pel()
    v = pel.var(li.var)
    if li.step > 0:
        return (v - li.start) // li.step if li.step != 1 else v - li.start
    return (pel.const(li.start) - v) // (-li.step)


def counter_register(li, engine=None):
    """Name of the register counting the executions (trips) of While body ``li``:
    ``walrus_n<k>`` in counts, ``walrus_n<k>_<engine>`` the copy that engine keeps."""
    if engine is None:
        return "walrus_n%d" % li.dyn_index
    return "walrus_n%d_%s" % (li.dyn_index, engine)


def signal_counts(prog, signalling, entries=None):
    """{pos: Expr} count of its stream's signals when that instance completes.

    ``signalling``: {pos: increment} (or a set: increment 1). count =
    (signals of the static structure before it, affine in the loop variables,
    While bodies counted as empty, an If as one of its branches: ``balance_ifs``
    made both branches give every stream the same number of signals) + sum
    over While bodies R of S_R(stream) * n_R, where S_R is one execution's
    signals of R's body (its own While bodies excluded) and n_R the register
    counting R's completed executions (cumulative over the whole run; during
    an execution of R it is that execution's index). ``entries``, a dict,
    receives {(id(If node), stream): count when the If starts}.
    """
    if not isinstance(signalling, dict):
        signalling = {p: 1 for p in signalling}
    from neuronxcc.walrus.program import block_kind
    pel = _pel()
    pos_of = {id(s.instr): s.pos for s in prog.sites}
    streams = site_streams(prog)
    cache = {}

    def static_signals(body):
        key = id(body)
        if key in cache:
            return cache[key]
        acc = {}
        for node in body:
            if node.kind == "inst":
                p = pos_of[id(node)]
                if p in signalling:
                    acc[streams[p]] = acc.get(streams[p], 0) + signalling[p]
            elif node.kind == "loop":
                for st, n in static_signals(node.body).items():
                    acc[st] = acc.get(st, 0) + n * node.trip_count
            elif node.kind == "if":
                t, e = static_signals(node.then_body), static_signals(node.else_body)
                for st in set(t) | set(e):
                    acc[st] = acc.get(st, 0) + max(t.get(st, 0), e.get(st, 0))
        cache[key] = acc
        return acc

    loop_of = {id(li.node): li for li in prog.loops if li.kind == "loop"}
    out = {}

    def walk(body, prefix):
        for node in body:
            if node.kind == "inst":
                p = pos_of[id(node)]
                if p in signalling:
                    st = streams[p]
                    prefix[st] = prefix.get(st, pel.const(0)) + signalling[p]
                    out[p] = prefix[st]
            elif node.kind == "loop":
                per = static_signals(node.body)
                k = _iter_index(loop_of[id(node)])
                inner = dict(prefix)
                for st, n in per.items():
                    inner[st] = inner.get(st, pel.const(0)) + k * n
                walk(node.body, inner)
                for st, n in per.items():
                    prefix[st] = prefix.get(st, pel.const(0)) + n * node.trip_count
            elif node.kind == "if":
                if entries is not None:
                    for st, v in prefix.items():
                        entries[(id(node), st)] = v
                walk(node.then_body, dict(prefix))
                walk(node.else_body, dict(prefix))
                t, e = static_signals(node.then_body), static_signals(node.else_body)
                for st in set(t) | set(e):
                    prefix[st] = prefix.get(st, pel.const(0)) + max(t.get(st, 0), e.get(st, 0))
            else:
                for sub in block_kind(node)[1]:
                    walk(sub, dict(prefix))

    walk(prog.module.body, {})
    glob = {}
    for li in prog.loops:
        if li.kind != "while":
            continue
        for st, n in static_signals(li.node.body).items():
            glob[st] = glob.get(st, pel.const(0)) + pel.var(counter_register(li)) * n
    for p in out:
        g = glob.get(streams[p])
        if g is not None:
            out[p] = out[p] + g
    if entries is not None:
        for k in entries:
            g = glob.get(k[1])
            if g is not None:
                entries[k] = entries[k] + g
    return out


def _last_value(li):
    return li.start + (li.trip - 1) * li.step


def wait_value(prog, counts, dep, entries=None):
    """The Expr dst waits for: src's count at its latest instance before dst's instance.

    src's regions that do not hold dst: a Loop at its last iteration, a
    While body at its previous execution (n_R - 1); an If branch needs
    nothing (counts are static: the branch not taken gives the same signals
    through ``walrus.balance`` nops, so src's count in this instance of the
    If bounds its latest real instance from above). A loop-carried dep: the
    carrying Loop's variable d steps back, or the carrying While's counter
    one trip back; src's While bodies inside the carrying Loop at their
    previous execution. The value never exceeds the count of the source
    stream's signals that precede dst in program order (so no deadlock).
    """
    sa = prog.sites[dep.src]
    if not sa.loops and dep.carried is None:
        return counts[dep.src]       # nothing to substitute
    pel = _pel()
    sb = prog.sites[dep.dst]
    common = set(id(li) for li in _common_loops(sa, sb))
    outer = next((li for li in sa.loops if id(li) not in common), None)
    if dep.carried is None and outer is not None and outer.kind in ("then", "else") \
            and any(li.node is outer.node for li in sb.loops):
        # src in one branch, dst in the other: src's latest instance ran before this If
        v = (entries or {}).get((id(outer.node), stream_of(sa.instr)))
        return v if v is not None and not (v.is_const() and int(v) <= 0) else None
    subs = {}
    for li in sa.loops:
        if id(li) in common:
            continue
        if li.kind == "loop":
            if not li.trip:
                return None      # the source never runs: nothing to wait for
            subs[li.var] = _last_value(li)
        elif li.kind == "while":
            r = counter_register(li)
            subs[r] = pel.var(r) - 1
    if dep.carried is not None:
        inside = False
        for li in sa.loops:
            if li is dep.carried:
                inside = True
            elif inside and li.kind == "while" and id(li) in common:
                r = counter_register(li)
                subs[r] = pel.var(r) - 1
        if dep.carried.kind == "loop":
            subs[dep.carried.var] = pel.var(dep.carried.var) - dep.carried.step * dep.distance
        else:
            r = counter_register(dep.carried)
            subs[r] = pel.var(r) - 1
    e = counts[dep.src]
    return e.subs(subs) if subs else e


def materialize(prog, deps, signalling=None):
    """Replace every instruction's waits/signals by those that enforce ``deps``.

    ``signalling``: {pos: increment} (default: every dep source, by 1). A
    ``walrus.balance`` nop that stands for DMAs of a queue first waits for
    every earlier signal of that queue (its count minus its increment)."""
    if signalling is None:
        signalling = {d.src: 1 for d in deps}
    entries = {}
    counts = signal_counts(prog, signalling, entries)
    streams = site_streams(prog)
    waits = {}
    for p, inc in signalling.items():
        ins = prog.sites[p].instr
        if ins.name == BALANCE_NAME and ins.signals and ins.signals[0][0].startswith("Q_"):
            waits.setdefault(p, {}).setdefault(ins.signals[0][0], []).append(counts[p] - inc)
    known = {}      # the value depends on dst only through dst's loops (a tuple its body's sites share)
    sites = prog.sites
    for d in deps:
        k = (d.src, id(sites[d.dst].loops), None if d.carried is None else id(d.carried), d.distance)
        v = known.get(k, known)
        if v is known:
            v = known[k] = wait_value(prog, counts, d, entries)
        if v is None:
            continue
        lst = waits.setdefault(d.dst, {}).setdefault(streams[d.src], [])
        lst.append(v)
    pel = _pel()
    generic = {counter_register(li): li for li in prog.loops if li.kind == "while"}
    own_of = {}          # engine -> {counter: the copy that engine keeps}
    nwaits = 0
    for site in prog.sites:
        ins = site.instr
        pos = site.pos
        if ins.name == BALANCE_NAME:
            ins.signals = [(ins.signals[0][0], signalling[pos])]
        else:
            ins.signals = [(streams[pos], signalling[pos])] if pos in signalling else []
        sw = waits.get(pos)
        if not sw:
            ins.waits = []
            continue
        own = {}
        if generic:
            own = own_of.get(ins.engine)
            if own is None:
                own = own_of[ins.engine] = {r: pel.var(counter_register(li, ins.engine)) for r, li in generic.items()}
            if ins.name == COND_NAME and site.loops and site.loops[-1].kind == "while" and \
                    all(n.kind == "inst" for n in site.owner[site.index + 1:]):
                # a While body's closing nop comes after the engine's counter update
                own = dict(own)
                r = counter_register(site.loops[-1])
                own[r] = own[r] - 1
        out = []
        ranges = None
        for sem, vals in sorted(sw.items()):
            for v in _dominant(vals):
                if own and not v.is_const():
                    v = v.subs({r: e for r, e in own.items() if r in v.free_vars()})
                if v.is_const():
                    if int(v) > 0:
                        out.append((sem, int(v)))
                    continue
                if ranges is None:
                    ranges = prog.var_ranges(site.loops)
                lo, _ = v.bounds({x: ranges[x] for x in v.free_vars() if x in ranges})
                if lo is None or lo < 0:
                    v = pel.max_(v, 0)   # first iterations of a carried wait: nothing to wait for
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
    bodies that hold both ends and keep instance semantics). Only sites of
    one dynamic context (the same innermost While body / If branch, or the
    top level) take part in one reduction: a path through a region that may
    not run this time proves nothing. A forward dep implied by another path
    is dropped; loop-carried and cross-context deps are kept. Per-stream
    vector clocks (``_deps.vc_reduce``): O((sites + deps) x streams).
    """
    from neuronxcc.walrus import _deps
    ctx_of = [context(s) for s in prog.sites]
    fwd = [d for d in deps if d.carried is None and ctx_of[d.src] is ctx_of[d.dst]]
    kept_deps = [d for d in deps if not (d.carried is None and ctx_of[d.src] is ctx_of[d.dst])]
    groups = {}
    for s in prog.sites:
        groups.setdefault(id(ctx_of[s.pos]), []).append(s.pos)
    by_group = {}
    for d in fwd:
        by_group.setdefault(id(ctx_of[d.src]), []).append(d)
    sids = {}
    streams = site_streams(prog)
    for gid, ds in by_group.items():
        members = groups[gid]
        local = {p: i for i, p in enumerate(members)}
        n = len(members)
        stream = np.empty(n, np.int64)
        spred = np.full(n, -1, np.int64)
        last = {}
        for i, p in enumerate(members):
            k = sids.setdefault(streams[p], len(sids))
            stream[i] = k
            if k in last:
                spred[i] = last[k]
            last[k] = i
        uniq = {}
        for d in ds:
            uniq.setdefault((local[d.dst], local[d.src]), []).append(d)
        edges = sorted(uniq)
        ptr = np.zeros(n + 1, np.int64)
        ptr[1:] = np.cumsum(np.bincount(np.array([e[0] for e in edges], np.int64), minlength=n))
        idx = np.array([e[1] for e in edges], np.int64)
        keep = _deps.vc_reduce(stream, spred, ptr, idx, len(sids))
        for e, k in zip(edges, keep):
            if k:
                kept_deps += uniq[e]
    return kept_deps


def csr(n, edges, by=0):
    """Compressed adjacency of ``edges`` over nodes 0..n-1, the form ``_sched`` reads.

    ``edges`` are tuples (a, b, ...); grouped by end ``by`` (0: successor lists
    of each a, 1: predecessor lists of each b), ordered by (that end, the other
    end). Returns (ptr, idx, sorted edges): node v's neighbours are
    idx[ptr[v]:ptr[v + 1]] and edge k of that order is sorted_edges[k] (for
    the payload, e.g. a latency in e[2]).
    """
    other = 1 - by
    es = sorted(edges, key=lambda e: (e[by], e[other]))
    ptr = np.zeros(n + 1, np.int64)
    ptr[1:] = np.cumsum(np.bincount(np.array([e[by] for e in es], np.int64), minlength=n))
    idx = np.array([e[other] for e in es], np.int64)
    return ptr, idx, es


# -- counters and the whole synchronisation step ------------------------------------

INSERTED = (COUNTER_NAME, COND_NAME, BALANCE_NAME)
IOTA = "walrus.iota"
MAX_COUNT = 1 << 20
WHILE_TRIPS = 1 << 16


def strip_sync(module):
    """Remove every wait/signal and the counter/cond/balance instructions a previous run inserted."""
    from neuronxcc.walrus.program import block_kind

    def clean(body):
        body[:] = [n for n in body if not (n.kind == "inst" and n.name in INSERTED)]
        for n in body:
            if n.kind == "inst":
                n.waits, n.signals = [], []
            else:
                for sub in block_kind(n)[1]:
                    clean(sub)
    clean(module.body)
    module.tensors.pop(IOTA, None)


def insert_cond_guards(module):
    """Before every If and While, and at the end of every While body, a
    ``nop`` (name ``walrus.cond``) on every engine with instructions inside.
    Each engine reads the condition register when it reaches the If/While
    (and at every trip's end); the nop, which the dependence analysis treats
    as reading that register, makes the engine wait for the register_load
    that set it and makes the next register_load of it wait for the engine's
    read. Returns the number of nops inserted."""
    n = [0]

    def walk(body):
        out = []
        for node in body:
            if node.kind == "if":
                walk(node.then_body)
                walk(node.else_body)
                engines = sorted({i.engine for b in (node.then_body, node.else_body)
                                  for i in _instructions(b)})
                for e in engines:
                    out.append(B.Instruction("nop", e, [], [], {}, name=COND_NAME))
                n[0] += len(engines)
            elif node.kind == "while":
                walk(node.body)
                engines = sorted({i.engine for i in _instructions(node.body)})
                for e in engines:
                    out.append(B.Instruction("nop", e, [], [], {}, name=COND_NAME))
                    node.body.append(B.Instruction("nop", e, [], [], {}, name=COND_NAME))
                n[0] += 2 * len(engines)
            elif node.kind != "inst":
                for sub in node.children():
                    walk(sub)
            out.append(node)
        body[:] = out
    walk(module.body)
    return n[0]


def _instructions(body):
    for node in body:
        if node.kind == "inst":
            yield node
        else:
            for sub in node.children():
                yield from _instructions(sub)


def balance_ifs(module, signalling):
    """Make both branches of every If give every stream the same signals.

    ``signalling``: {id(instr): increment}, updated with the nops added. For
    each stream whose signals in one branch (loops multiplied out, While
    bodies not counted, inner Ifs balanced first) fall short of the other's,
    a ``nop`` named ``walrus.balance`` on the stream's engine is appended to
    the short branch, signalling the difference (so counts stay exact
    whichever branch runs; a queue's nop first waits for the queue's earlier
    signals, see ``materialize``). Returns the number of nops added.
    """
    engine_of = {}
    for ins in _instructions(module.body):
        engine_of.setdefault(stream_of(ins), ins.engine)
    added = [0]

    def count(body):
        acc = {}
        for node in body:
            if node.kind == "inst":
                inc = signalling.get(id(node))
                if inc:
                    st = node.signals[0][0] if node.name == BALANCE_NAME else stream_of(node)
                    acc[st] = acc.get(st, 0) + inc
            elif node.kind == "loop":
                for st, k in count(node.body).items():
                    acc[st] = acc.get(st, 0) + k * node.trip_count
            elif node.kind == "while":
                count(node.body)
            else:
                t, e = count(node.then_body), count(node.else_body)
                for st in sorted(set(t) | set(e)):
                    d = t.get(st, 0) - e.get(st, 0)
                    if d:
                        nop = B.Instruction("nop", engine_of[st], [], [], {}, signals=[(st, abs(d))],
                                            name=BALANCE_NAME)
                        (node.else_body if d > 0 else node.then_body).append(nop)
                        signalling[id(nop)] = abs(d)
                        added[0] += 1
                    acc[st] = acc.get(st, 0) + max(t.get(st, 0), e.get(st, 0))
        return acc
    count(module.body)
    return added[0]


def _has_while(body):
    for node in body:
        if node.kind == "while":
            return True
        if node.kind != "inst" and any(_has_while(sub) for sub in node.children()):
            return True
    return False


def insert_counters(module):
    """Count the executions of every non-empty While body in a register.

    Every engine of the module keeps its own copy (``counter_register(li,
    engine)``), so an engine reads its counters in its own program order and
    no semaphore orders counter reads: at the program start
    ``n_R_E <- iota[0]``; at the end of each execution of R ``n_R_E <-
    iota[n_R_E + 1]`` (register_load on E, clamped to the table). Every
    engine thus takes part in every While. Returns the number of regions
    counted.
    """
    if not _has_while(module.body):
        return 0
    module.ensure_ids()
    prog = Program(module)
    regions = [li for li in prog.loops if li.kind == "while" and li.last is not None and li.last >= li.first]
    if not regions:
        return 0
    cap = 1
    for li in regions:
        n = 1
        for outer in prog.sites[li.first].loops:
            if outer is li:
                break
            n *= (outer.trip or 1) if outer.kind == "loop" else \
                ((getattr(outer.node, "max_trips", None) or WHILE_TRIPS) if outer.kind == "while" else 1)
        n *= (getattr(li.node, "max_trips", None) or WHILE_TRIPS) if li.kind == "while" else 1
        cap = max(cap, min(n, MAX_COUNT))
    module.add_tensor(IOTA, "const", "int32", (cap + 2,), data=np.arange(cap + 2, dtype=np.int32))
    init = []
    engines = sorted({s.instr.engine for s in prog.sites})
    for li in regions:
        for e in engines:
            r = counter_register(li, e)
            init.append(B.Instruction("register_load", e, [], [B.AccessPattern(IOTA, "int32", 0, [[1, 1]])],
                                      {"register": r, "min": 0, "max": cap}, name=COUNTER_NAME))
            li.node.body.append(B.Instruction("register_load", e, [],
                                              [B.AccessPattern(IOTA, "int32", _pel().var(r) + 1, [[1, 1]])],
                                              {"register": r, "min": 0, "max": cap}, name=COUNTER_NAME))
    module.body[0:0] = init
    module.renumber()
    return len(regions)


def sync_deps(prog, physical, ctx=None):
    """``find_deps`` of the instrumented program (no waits, counters and cond guards inserted),
    kept in the pass manager's cache under ``sync_deps``: anti_dependency_analyzer, post_sched
    and dep_reduction see the same instrumented program whenever the instructions they were
    given and their addresses are the same, so the dependences are found once for it."""
    return _sync_deps(prog, physical, ctx)[0]


def _sync_deps(prog, physical, ctx):
    """(``sync_deps``, the DepGraph of ``prog`` when this call built one, else None)."""
    sig = (bool(physical), len(prog.sites),
           tuple(id(s.instr) for s in prog.sites if s.instr.name not in INSERTED))
    cached = ctx.cached("sync_deps") if ctx is not None else None
    graph = None
    if cached is not None and cached[0] == sig:
        rows = cached[1]
    else:
        loop_index = {id(li): k for k, li in enumerate(prog.loops)}
        graph = DepGraph(prog, physical)
        deps = find_deps(prog, physical=physical, graph=graph)
        rows = [(d.src, d.dst, None if d.carried is None else loop_index[id(d.carried)], d.distance)
                for d in deps]
        if ctx is not None:
            ctx.store("sync_deps", (sig, rows))
    return [Dep(a, b, None if c is None else prog.loops[c], dist) for a, b, c, dist in rows], graph


def synchronize(module, physical, reduce=False, ctx=None):
    """Recompute every wait/signal of ``module`` from its current addresses.

    ``ctx`` (a PassContext) shares the dependences between passes (``sync_deps``).
    Returns (dependences found, dependences enforced, waits written, counted regions).
    """
    prev = ctx.cached(("deps", bool(physical))) if ctx is not None else None
    strip_sync(module)
    if ctx is not None:
        ctx.drop("deps")          # the module changes here; a graph of it is stored below when valid
    nreg = insert_counters(module)
    insert_cond_guards(module)
    module.ensure_ids()
    prog = Program(module)
    deps, graph = _sync_deps(prog, physical, ctx)
    used = reduce_deps(prog, deps) if reduce else deps
    instr_of = [s.instr for s in prog.sites]
    signalling = {id(instr_of[d.src]): 1 for d in used}
    balanced = balance_ifs(module, signalling)
    if graph is not None and ctx is not None and not balanced and not nreg:
        # The graph of the instrumented program is the graph of the synchronised one: only waits
        # and signals change below, and without counted While bodies no wait reads a register
        # (the one way waits enter the accesses). post_sched reads it instead of building it again.
        depgraph_store(ctx, graph)
    elif graph is None and prev is not None and not balanced and not nreg and \
            prev.prog.module is module and prev.instr_ids == depgraph_ids(module):
        # The dependences came from the cache and the graph stored with them is of this very
        # instruction sequence (nothing inserted: no counted While, no If to balance): still valid.
        depgraph_store(ctx, prev, computed=False)
    if balanced:
        module.renumber()
        module.ensure_ids()
        old = prog
        prog = Program(module)
        pos = {id(s.instr): s.pos for s in prog.sites}
        loop_map = {(id(li.node), li.kind): li for li in prog.loops}
        for d in used:
            d.src, d.dst = pos[id(instr_of[d.src])], pos[id(instr_of[d.dst])]
            if d.carried is not None:
                d.carried = loop_map[(id(d.carried.node), d.carried.kind)]
        del old
    sig = {s.pos: signalling[id(s.instr)] for s in prog.sites if id(s.instr) in signalling}
    n = materialize(prog, used, sig)
    return len(deps), len(used), n, nreg
