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
``neuronxcc.hwm`` numbers); DMAs are timed as birsim times them (trigger in
the issuing engine's in-order stream, fixed latency, DMA engines shared by all
queues: ``_sched``'s module doc). Typed core: ``_sched.list_schedule`` /
``_sched.critical_path``.

pre_sched runs before allocation (dependences by memloc identity);
post_sched after (dependences by address, so the allocator's reuse of bytes
is respected) and then re-derives the semaphore waits for the new order when
the module had any.
"""
import logging

import numpy as np

from neuronxcc.walrus import _sched, depgraph, deps as D
from neuronxcc.walrus.estimate import Costs, block_graph, costs_of, replay
from neuronxcc.walrus.contract import WalrusPass

log = logging.getLogger("neuronxcc.walrus")


def schedule(module, ctx, physical):
    """List-schedule every block in place. Returns (blocks reordered, estimated gain in s).

    The edges of a block are the dependence graph's (``depgraph``, shared through the
    pass manager's cache) between instructions of that block: every conflicting pair
    of the block is ordered by a path of them, so keeping them keeps every pair."""
    g = depgraph.analysis(ctx, module, physical)
    prog = g.prog
    edges = g.block_edges()
    # before allocation the prices vn_splitter took (the ``costs`` analysis); after it, fresh ones
    # (an allocated value's start partition decides a DMA's engines)
    costs = (costs_of(ctx, module) if not physical and ctx is not None else None) or Costs(module, ctx.target)
    streams = g.streams
    changed = 0
    gain = 0.0
    for k, (owner, bsites) in enumerate(g.blocks()):
        if len(bsites) < 2:
            continue
        eng, busy, pp, pi, pl, sp, si, sl, ne, dma, ports = block_graph(bsites, edges.get(k, ()), costs, streams)
        prio = _sched.critical_path(sp, si, sl, busy)
        order, start, makespan = _sched.list_schedule(eng, busy, pp, pi, pl, prio, ne, dma, ports)
        if len(order) != len(bsites):
            raise RuntimeError("dependence cycle in a straight-line block")
        before = replay(eng, busy, pp, pi, pl, np.arange(len(bsites)), ne, dma, ports)
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


class PreSched(_Sched):
    name = "pre_sched"


class PostSched(_Sched):
    name = "post_sched"
    after_alloc = True
