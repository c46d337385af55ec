"""pre_sched / post_sched: list scheduling across engines, and the time estimate.

Owns: reordering the instructions of each straight-line block (a maximal run
of instructions between control nodes in one body list) so that the engine
streams start work as early as the cost model allows, without ever moving an
instruction across a dependence; and the whole-program time estimate that
print_metrics reports.

Dependences here include same-stream ones (their order is the stream's
order, so reordering must keep them): every conflicting pair of accesses
(RAW/WAR/WAW over boxes, registers included) inside a block is ordered by a
path of the dependence graph's edges inside the block (``depgraph``), so
keeping those edges keeps every pair.
Costs come from ``birpy.cost.instruction_cost`` (the timeline's rules,
``neuronxcc.hwm`` numbers); a cross-stream edge from a DMA adds the DMA's
fixed latency. Typed core: ``_sched.list_schedule`` / ``_sched.critical_path``.

pre_sched runs before allocation (dependences by memloc identity);
post_sched after (dependences by address, so the allocator's reuse of bytes
is respected) and then re-derives the semaphore waits for the new order when
the module had any.
"""
import logging

import numpy as np

from neuronxcc.walrus import _sched, depgraph, deps as D
from neuronxcc.walrus.registry import WalrusPass, register

log = logging.getLogger("neuronxcc.walrus")


class Costs:
    def __init__(self, module, target):
        from neuronxcc.starfish.birpy import cost as C
        self._C = C
        self.module = module
        self.target = target
        self.cache = {}

    def __call__(self, instr):
        key = id(instr)
        c = self.cache.get(key)
        if c is None:
            try:
                c = self._C.instruction_cost(instr, self.module, self.target)
                c = (c.busy_s, c.latency_s)
            except Exception:   # an opcode the cost model cannot price: count it as free
                c = (0.0, 0.0)
            self.cache[key] = c
        return c


def _block_graph(bsites, pairs, costs, streams):
    """Local indices: engine ids, costs, pred CSR with latencies, succ CSR."""
    n = len(bsites)
    local = {s.pos: i for i, s in enumerate(bsites)}
    sid = {}
    eng = np.array([sid.setdefault(streams[s.pos], len(sid)) for s in bsites], np.int64)
    busy = np.array([costs(s.instr)[0] for s in bsites], np.float64)
    lat_of = [costs(s.instr)[1] for s in bsites]
    edges = []
    for (a, b) in pairs:
        ia, ib = local[a], local[b]
        lat = lat_of[ia] if eng[ia] != eng[ib] else 0.0
        edges.append((ia, ib, lat))
    pred_ptr, pred_idx, pe = D.csr(n, edges, by=1)
    pred_lat = np.array([e[2] for e in pe], np.float64)
    succ_ptr, succ_idx, se = D.csr(n, edges, by=0)
    succ_lat = np.array([e[2] for e in se], np.float64)
    return eng, busy, pred_ptr, pred_idx, pred_lat, succ_ptr, succ_idx, succ_lat, len(sid)


def schedule(module, ctx, physical):
    """List-schedule every block in place. Returns (blocks reordered, estimated gain in s).

    The edges of a block are the dependence graph's (``depgraph``, shared through the
    pass manager's cache) between instructions of that block: every conflicting pair
    of the block is ordered by a path of them, so keeping them keeps every pair."""
    g = depgraph.analysis(ctx, module, physical)
    prog = g.prog
    edges = g.block_edges()
    costs = Costs(module, ctx.target)
    streams = g.streams
    changed = 0
    gain = 0.0
    for k, (owner, bsites) in enumerate(g.blocks()):
        if len(bsites) < 2:
            continue
        eng, busy, pp, pi, pl, sp, si, sl, ne = _block_graph(bsites, edges.get(k, ()), costs, streams)
        prio = _sched.critical_path(sp, si, sl, busy)
        order, start, makespan = _sched.list_schedule(eng, busy, pp, pi, pl, prio, ne)
        if len(order) != len(bsites):
            raise RuntimeError("dependence cycle in a straight-line block")
        before = _replay(eng, busy, pp, pi, pl, np.arange(len(bsites)), ne)
        force = ctx.options["sched_force"]
        if list(order) == list(range(len(bsites))) or (makespan >= before - 1e-15 and not force):
            continue        # keep the codegen's order unless the schedule is faster
        first = bsites[0].index
        new = [bsites[k].instr for k in order]
        owner[first:first + len(new)] = new
        changed += 1
        trips = prog.dynamic_count(bsites[0]) or 1
        gain += float(before - makespan) * trips
    if changed:
        module.renumber()
    return changed, gain


def _replay(eng, busy, pred_ptr, pred_idx, pred_lat, order, n_eng):
    """Makespan when each stream runs its instructions in ``order``."""
    n = len(busy)
    finish = np.zeros(n)
    free = np.zeros(max(n_eng, 1))
    done = 0.0
    for v in order:
        t = free[eng[v]]
        for k in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred_idx[k]
            t = max(t, finish[u] + pred_lat[k])
        finish[v] = t + busy[v]
        free[eng[v]] = finish[v]
        done = max(done, finish[v])
    return done


def estimate_time(module, ctx):
    """Estimated device seconds: per block, the replayed makespan x executions.

    Blocks are summed (no overlap across control nodes); a While body counts
    once per ``max_trips`` (1 when unknown).
    """
    physical = all(m.allocated for m in module.memlocs.values())
    g = depgraph.analysis(ctx, module, physical)
    edges = g.block_edges()
    costs = Costs(module, ctx.target)
    streams = g.streams
    total = 0.0
    per_engine = {}
    for k, (owner, bsites) in enumerate(g.blocks()):
        eng, busy, pp, pi, pl, sp, si, sl, ne = _block_graph(bsites, edges.get(k, ()), costs, streams)
        t = _replay(eng, busy, pp, pi, pl, np.arange(len(bsites)), ne)
        reps = 1
        for li in bsites[0].loops:
            reps *= li.trip if li.trip is not None else (getattr(li.node, "max_trips", None) or 1)
        total += t * reps
        for s, b in zip(bsites, busy):
            k = streams[s.pos]
            per_engine[k] = per_engine.get(k, 0.0) + b * reps
    return total, per_engine


class _Sched(WalrusPass):
    after_alloc = False

    def run(self, module, ctx):
        physical = all(m.allocated for m in module.memlocs.values()) if self.after_alloc else False
        had_waits = any(i.waits for i in module.instructions())
        n, gain = schedule(module, ctx, physical)
        log.info("%s: reordered %d blocks, estimated gain %.3f us", self.name, n, gain * 1e6)
        ctx.metrics.setdefault("scheduling", {})[self.name] = {"blocks_reordered": n, "estimated_gain_s": gain}
        if n and had_waits:
            D.synchronize(module, all(m.allocated for m in module.memlocs.values()), ctx=ctx)
        return n > 0


@register
class PreSched(_Sched):
    name = "pre_sched"


@register
class PostSched(_Sched):
    name = "post_sched"
    after_alloc = True
