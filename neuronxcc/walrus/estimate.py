"""The whole-program device-time estimate from the dependence graph (print_metrics' figure) and
the per-block graph the schedulers and the estimate share.

Owns: ``Costs`` (each instruction's cost from ``birpy.cost``, cached), ``block_graph`` (one
straight-line block as engine ids, costs, CSR predecessor / successor lists with latencies, and
the DMAs' issuing streams, latencies and DMA-engine shares), ``replay`` (the makespan when each
stream runs its instructions in a given order) and ``estimate_time`` (per block, the replayed
makespan times its executions). DMAs are timed by birsim's rules (``_sched``'s module doc): the
trigger holds its issuing engine's in-order stream, the fixed latency comes before the transfer,
and all queues share the DMA engines.
"""
import numpy as np

from neuronxcc.walrus import _sched, depgraph, deps as D


class Costs:
    def __init__(self, module, target):
        from neuronxcc.starfish.birpy import cost as C
        self._C = C
        self.module = module
        self.target = target
        self.dma_engines = C.target_model(module, target).dma_engines
        self.cache = {}

    def full(self, instr):
        """The instruction's ``birpy.cost.Cost`` (None for an opcode the model cannot price)."""
        key = id(instr)
        c = self.cache.get(key, False)
        if c is False:
            try:
                c = self._C.instruction_cost(instr, self.module, self.target)
            except Exception:   # an opcode the cost model cannot price: count it as free
                c = None
            self.cache[key] = c
        return c

    def __call__(self, instr):
        """(busy seconds, latency seconds)."""
        c = self.full(instr)
        return (0.0, 0.0) if c is None else (c.busy_s, c.latency_s)


def costs_of(ctx, module):
    """The ``costs`` analysis: the ``Costs`` of the module as it is before allocation, shared by
    vn_splitter and pre_sched (a price reads an operand's dtype, pattern, partitions and memory,
    never its offset, which is all vn_splitter changes; the runner drops it after other changes)."""
    if ctx is None:
        return None
    c = ctx.analysis("costs", lambda: Costs(module, ctx.target))
    if c.module is not module:
        c = Costs(module, ctx.target)
        ctx.store("costs", c)
    return c


def block_graph(bsites, pairs, costs, streams):
    """Local indices: engine ids, costs, pred CSR with latencies, succ CSR, stream count and the
    DMA arrays (issuing stream or -1, fixed latency, width or -1 for fixed engines, per-engine
    durations; ``_sched``). A DMA's cost is its latency plus its transfer alone on its engines, and
    its result needs no further latency."""
    n = len(bsites)
    local = {s.pos: i for i, s in enumerate(bsites)}
    sid = {}
    eng = np.array([sid.setdefault(streams[s.pos], len(sid)) for s in bsites], np.int64)
    full = [costs.full(s.instr) for s in bsites]
    busy = np.array([0.0 if c is None else c.busy_s for c in full], np.float64)
    lat_of = [0.0 if c is None else c.latency_s for c in full]
    ne = costs.dma_engines
    issuer = np.full(n, -1, np.int64)
    dlat = np.zeros(n, np.float64)
    dwidth = np.zeros(n, np.int64)
    dur = np.zeros((n, ne), np.float64)
    for i, (s, c) in enumerate(zip(bsites, full)):
        if c is None or c.kind != "dma":
            continue
        # one in-order queue per queue id, whichever engine triggers (birsim's "DMA:<queue>" track)
        eng[i] = sid.setdefault(c.track, len(sid))
        issuer[i] = sid.setdefault("S_" + s.instr.engine, len(sid))
        dlat[i] = c.latency_s
        busy[i] = c.latency_s + c.busy_s
        lat_of[i] = 0.0
        if c.first_engine >= 0:
            dwidth[i] = -1
            for j, share in enumerate(c.shares):
                dur[i, (c.first_engine + j) % ne] += c.engine_s * share
        else:
            dwidth[i] = c.width
            dur[i, 0] = c.busy_s
    edges = []
    for (a, b) in pairs:
        ia, ib = local[a], local[b]
        lat = lat_of[ia] if eng[ia] != eng[ib] else 0.0
        edges.append((ia, ib, lat))
    pred_ptr, pred_idx, pe = D.csr(n, edges, by=1)
    pred_lat = np.array([e[2] for e in pe], np.float64)
    succ_ptr, succ_idx, se = D.csr(n, edges, by=0)
    succ_lat = np.array([e[2] for e in se], np.float64)
    ports = np.full((n, 2), -1, np.int64)       # the shared SBUF / PSUM port an instruction holds
    for i, c in enumerate(full):
        for j, p in enumerate((c.ports if c is not None else ())[:2]):
            ports[i, j] = PORTS.index(p) if p in PORTS else -1
    return (eng, busy, pred_ptr, pred_idx, pred_lat, succ_ptr, succ_idx, succ_lat, len(sid),
            (issuer, dlat, dwidth, dur), ports)


PORTS = ("PORT:SBUF", "PORT:PSUM")


def replay(eng, busy, pred_ptr, pred_idx, pred_lat, order, n_eng, dma=None, ports=None):
    """Makespan when each stream runs its instructions in ``order`` (DMAs as ``_sched.replay``)."""
    return _sched.replay(eng, busy, pred_ptr, pred_idx, pred_lat, np.asarray(order, np.int64), n_eng, dma, ports)


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
        eng, busy, pp, pi, pl, sp, si, sl, ne, dma, ports = block_graph(bsites, edges.get(k, ()), costs, streams)
        t = replay(eng, busy, pp, pi, pl, np.arange(len(bsites)), ne, dma, ports)
        reps = 1
        for li in bsites[0].loops:
            reps *= li.trip if li.trip is not None else (getattr(li.node, "max_trips", None) or 1)
        total += t * reps
        for s, b, d in zip(bsites, busy, dma[1]):
            k = streams[s.pos]
            per_engine[k] = per_engine.get(k, 0.0) + (b - d) * reps
    return total, per_engine
