"""SBUF/PSUM allocation passes: coloring, coloring_allocator, linear_scan_allocator.

Owns: turning the Penguin codegen's unallocated memlocs into addresses
(``start_partition``, ``byte_offset``) so that no two memlocs live at the same
time share a byte of the same partition; spilling SBUF values to HBM scratch
when SBUF is short; ``OutOfMemoryError`` when spilling cannot help.

  coloring              builds live intervals (``liveness``) and the interference
                        graph per memory; logs its size (an analysis)
  coloring_allocator    places values against their placed neighbours in each of
                        ``placement.color_orders`` (decreasing size, start order,
                        decreasing size x partition quarters blocked) and keeps the
                        lowest peak (typed core: ``_alloc.color_allocate``)
  linear_scan_allocator places values in start order against the active set
                        (``_alloc.linear_scan_allocate``)

Rules (``neuronxcc.hwm`` numbers): SBUF bytes per partition = usable bytes
(192 KiB - 16 KiB reserved on v2); PSUM 16 KiB in 2 KiB banks, a value of at
most one bank never crosses a bank (a matmul accumulation group stays in one
bank), 4-byte alignment; partition starts follow the size rules (see
``_alloc``); values the PE touches start at partition 0.

Loop bodies: values private to one iteration of a loop first get intervals
widened to that loop's whole body (``liveness.pipelined_intervals``), so no
two values of one loop body share bytes and the semaphores let iterations
overlap; when that does not fit, the tight intervals are used (the stats say
which: ``intervals``; the max-live lower bound is that of the intervals used).

Reuse distance (option ``reuse_distance``, on by default; ``walrus_driver --no-reuse-distance``):
placing a value in the bytes another value freed just before makes its producer wait for the
old value's last reader, a write-after-read through the address only (at a kernel boundary the
next kernel's weight load waits for the previous kernel's last instruction). Once placed, the
values are placed again within the peak just reached, each in the bytes whose last use is
furthest in the past, uses no later than the last write of the producer's own inputs counting
as none (``_ready_positions``, ``placement.reuse_placement``); the peak never grows, and when
nothing fits under it the first placement stands (the stats say how many values moved:
``reuse_distance_moved``, None when it did not fit).

Spilling (SBUF only): the victim is the largest (bytes x live length) value
live where allocation failed; it moves to an HBM scratch tensor
``<name>.spill`` and every instruction that touches it gets a private SBUF
copy: a DMA reload before it and, if it writes, a DMA store after it (queue
``qSpillReload``). The new copies live a few positions only. Repeat until
everything fits.
"""
import bisect
import logging

import numpy as np

from neuronxcc import errors
from neuronxcc.walrus import _alloc, _bound, liveness
from neuronxcc.walrus.placement import MAX_INTERFERENCE_EDGES, arrays, memory_params, place
from neuronxcc.starfish import birpy as B
from neuronxcc.walrus.program import program
from neuronxcc.walrus.program import Program
from neuronxcc.walrus.contract import WalrusPass

log = logging.getLogger("neuronxcc.walrus")

SPILL_QUEUE = "qSpillReload"
MAX_SPILL_ROUNDS = 64
def _live_at(vals, v):
    return [u for u in vals if u.start <= v.end and v.start <= u.end]


def _oom(prog, memory, vals, failed, target, why):
    v = vals[failed]
    live = sorted(_live_at(vals, v), key=lambda u: -u.size)
    site = prog.sites[v.start].instr
    cap = memory_params(target, memory)[0]
    total = sum(u.size for u in live if u.nparts > target.num_partitions // 2)
    names = ", ".join("%s (%dx%d B)" % (u.name, u.nparts, u.size) for u in live[:4])
    return errors.OutOfMemoryError(
        "%s exhausted on %s: '%s' (%d partitions x %d bytes) does not fit at instruction #%s (%s on %s); "
        "%d values are live there (%s%s), %d bytes per partition of the %d usable; %s"
        % (memory, target.name, v.name, v.nparts, v.size, site.id, site.opcode, site.engine, len(live), names,
           ", ..." if len(live) > 4 else "", total, cap, why))


def spill_value(module, prog, v, temps):
    """Move memloc ``v`` to HBM scratch with reload/store DMAs around each use."""
    scratch = v.name + ".spill"
    k = 0
    while scratch in module.tensors or scratch in module.memlocs:
        k += 1
        scratch = "%s.spill%d" % (v.name, k)
    module.add_tensor(scratch, "scratch", "uint8", (v.nparts, v.size))
    hbm = B.AccessPattern(scratch, "uint8", 0, [[v.size, v.nparts], [1, v.size]])
    positions = sorted({p for p, _, _ in v.sites}, reverse=True)
    for n, pos in enumerate(positions):
        site = prog.sites[pos]
        ins = site.instr
        body = site.owner
        idx = next(i for i, x in enumerate(body) if x is ins)
        tmp = "%s.r%d" % (v.name, n)
        while tmp in module.tensors or tmp in module.memlocs:
            tmp += "_"
        module.add_memloc(tmp, "SBUF", v.nparts, v.size)
        temps.add(tmp)
        onchip = B.AccessPattern(tmp, "uint8", 0, [[1, v.size]], 0, v.nparts)
        writes = False
        for lst, is_dst in ((ins.dsts, True), (ins.srcs, False)):
            for j, ap in enumerate(lst):
                if ap.target == v.name:
                    lst[j] = ap.copy(target=tmp)
                    writes |= is_dst
        reload = B.Instruction("dma_copy", "SP", [onchip], [hbm.copy()], {"queue": SPILL_QUEUE},
                               name="spill-reload %s" % v.name)
        body.insert(idx, reload)
        if writes:
            store = B.Instruction("dma_copy", "SP", [hbm.copy()], [onchip.copy()], {"queue": SPILL_QUEUE},
                                  name="spill-store %s" % v.name)
            body.insert(idx + 2, store)
    del module.memlocs[v.name]
    module.renumber()


def _place_pipelined(vals, wide, method, target, memory, pack, ready, info):
    """Placement with every loop-private value owning its bytes over its whole loop body
    (``liveness.pipelined_intervals``), so iterations of a loop can overlap without false
    dependences through shared addresses. (offsets, pstarts, -1) or (None, None, 0) when
    it does not fit or changes nothing (the caller then places with the tight intervals)."""
    if not wide or all(wide[v.name] == (v.start, v.end) for v in vals):
        return None, None, 0
    tight = [(v.start, v.end) for v in vals]
    for v in vals:
        v.start, v.end = wide[v.name]
    off, ps, failed = place(vals, method, target, memory, pack, ready=ready, info=info)
    if failed >= 0:
        for v, (s0, e0) in zip(vals, tight):
            v.start, v.end = s0, e0
        return None, None, 0
    log.info("%s: %s placed with loop-body intervals (%d values)", method, memory, len(vals))
    return off, ps, -1


def _ready_positions(prog, values):
    """{memloc: the position of the last write, before the memloc's first access, of any input of
    the instruction making that access}: its producer cannot start before that writer, so bytes
    last read before it cost the producer no wait (-1: no such writer, e.g. a load from a program
    input). One pass over the program."""
    writes = {}
    for site in prog.sites:
        for ap in site.instr.dsts:
            w = writes.setdefault(ap.target, [])
            if not w or w[-1] != site.pos:
                w.append(site.pos)
    out = {}
    for name, v in values.items():
        if not v.sites:
            continue
        pos = v.sites[0][0]
        r = -1
        for ap in prog.sites[pos].instr.srcs:
            w = writes.get(ap.target)
            if ap.target != name and w:
                i = bisect.bisect_left(w, pos) - 1
                if i >= 0 and w[i] > r:
                    r = w[i]
        out[name] = r
    return out


def allocate(module, ctx, method):
    """Allocate every SBUF/PSUM memloc; spill or raise OutOfMemoryError. Returns stats."""
    target = ctx.target
    pack = ctx.options["partition_packing"]
    temps = set()
    spilled = []
    for _ in range(MAX_SPILL_ROUNDS + 1):
        module.ensure_ids()
        prog = Program(module)
        values = liveness.compute(prog)
        retry = False
        stats = {}
        wide = liveness.pipelined_intervals(values) if ctx.options["pipeline_intervals"] else {}
        ready = _ready_positions(prog, values) if ctx.options["reuse_distance"] else None
        for memory in ("PSUM", "SBUF"):
            vals = [v for v in values.values() if v.memory == memory and v.start is not None]
            info = {}
            off, ps, failed = _place_pipelined(vals, wide, method, target, memory, pack, ready, info)
            intervals = "loop-body" if failed < 0 else "tight"
            if failed >= 0:
                graph = ctx.cached(("interference", memory)) if method == "coloring" else None
                if graph is not None and graph[0] != [v.name for v in vals]:
                    graph = None
                off, ps, failed = place(vals, method, target, memory, pack, graph and graph[1], ready=ready,
                                        info=info)
            if failed >= 0:
                if memory == "PSUM":
                    raise _oom(prog, memory, vals, failed, target, "PSUM values cannot be spilled")
                if not ctx.options["allocator_spill"]:
                    raise _oom(prog, memory, vals, failed, target, "spilling is disabled (--no-spill)")
                cands = [u for u in _live_at(vals, vals[failed]) if u.name not in temps and u.end > u.start]
                if not cands or len(spilled) >= MAX_SPILL_ROUNDS:
                    raise _oom(prog, memory, vals, failed, target, "spilling to HBM cannot help "
                               "(one instruction's operands alone exceed it)")
                victim = max(cands, key=lambda u: (u.size * u.nparts * (u.end - u.start + 1), u.name))
                log.info("%s: %s short at instruction #%s; spilling '%s' (%dx%d B) to HBM",
                         method, memory, prog.sites[vals[failed].start].instr.id, victim.name,
                         victim.nparts, victim.size)
                spill_value(module, prog, victim, temps)
                spilled.append(victim.name)
                retry = True
                break
            for v, o, p in zip(vals, off.tolist(), ps.tolist()):
                ml = module.memlocs[v.name]
                ml.byte_offset, ml.start_partition = int(o), int(p)
            peak = int((off + np.array([v.size for v in vals], np.int64)).max()) if vals else 0
            lb = 0
            if vals:
                s, e, size, nparts, pin = arrays(vals, pack)
                lb = int(_bound.max_live_lower_bound(s, e, size, nparts, target.num_partitions, pin,
                                                     memory_params(target, memory)[2]))
            stats[memory] = {"values": len(vals), "peak_bytes_per_partition": peak, "max_live_lower_bound": lb,
                             "intervals": intervals}
            if ready is not None and vals:
                stats[memory]["reuse_distance_moved"] = info.get("reuse_distance_moved")
        if retry:
            continue
        for name, ml in module.memlocs.items():
            if ml.start_partition is None or ml.byte_offset is None or values.get(name) is None \
                    or values[name].start is None:
                ml.start_partition, ml.byte_offset = 0, 0   # never touched: any address will do
        stats["spilled"] = spilled
        return stats
    raise errors.OutOfMemoryError("SBUF allocation did not converge after %d spills" % MAX_SPILL_ROUNDS)


class Coloring(WalrusPass):
    name = "coloring"

    def run(self, module, ctx):
        prog = program(module, ctx)
        values = liveness.compute(prog)
        for memory in ("PSUM", "SBUF"):
            vals = [v for v in values.values() if v.memory == memory and v.start is not None]
            s = np.array([v.start for v in vals], np.int64)
            e = np.array([v.end for v in vals], np.int64)
            bound = _alloc.interference_edge_count(s, e)
            if bound > MAX_INTERFERENCE_EDGES:
                log.info("coloring: %s: %d values, up to %d interference edges: not built "
                         "(coloring_allocator will use the linear scan)", memory, len(vals), bound)
                continue
            g = _alloc.interference_graph(s, e)
            ctx.store(("interference", memory), ([v.name for v in vals], g))
            log.info("coloring: %s: %d values, %d interference edges", memory, len(vals), len(g[1]) // 2)
        return False


class _Allocator(WalrusPass):
    method = None

    def run(self, module, ctx):
        stats = allocate(module, ctx, self.method)
        ctx.metrics.setdefault("allocation", {})[self.method] = stats
        for mem in ("SBUF", "PSUM"):
            if mem in stats:
                log.info("%s: %s peak %d B/partition (max-live lower bound %d) over %d values",
                         self.name, mem, stats[mem]["peak_bytes_per_partition"],
                         stats[mem]["max_live_lower_bound"], stats[mem]["values"])
        return True


class ColoringAllocator(_Allocator):
    name = "coloring_allocator"
    method = "coloring"


class LinearScanAllocator(_Allocator):
    name = "linear_scan_allocator"
    method = "linear_scan"
