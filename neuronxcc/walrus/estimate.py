"""The whole-program device-time estimate from the dependence graph (print_metrics' figure) and
the per-block graph the schedulers and the estimate share.

Owns: ``Costs`` (each instruction's busy time and latency from ``birpy.cost``, cached),
``block_graph`` (one straight-line block as engine ids, costs and CSR predecessor / successor
lists with latencies), ``replay`` (the makespan when each stream runs its instructions in a given
order) and ``estimate_time`` (per block, the replayed makespan times its executions).
"""
import numpy as np

from neuronxcc.walrus import depgraph, deps as D


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


def block_graph(bsites, pairs, costs, streams):
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


def replay(eng, busy, pred_ptr, pred_idx, pred_lat, order, n_eng):
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
        eng, busy, pp, pi, pl, sp, si, sl, ne = block_graph(bsites, edges.get(k, ()), costs, streams)
        t = replay(eng, busy, pp, pi, pl, np.arange(len(bsites)), ne)
        reps = 1
        for li in bsites[0].loops:
            reps *= li.trip if li.trip is not None else (getattr(li.node, "max_trips", None) or 1)
        total += t * reps
        for s, b in zip(bsites, busy):
            k = streams[s.pos]
            per_engine[k] = per_engine.get(k, 0.0) + b * reps
    return total, per_engine
