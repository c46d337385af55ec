"""birsim on N NeuronCores: one BIR program (or NEFF), one core per rank.

    res = simulate_ranks(module, inputs_per_rank, nranks=None, target=None, trace=False)
    res = simulate_neff_ranks(neff_path, inputs_per_rank, nranks=None, ...)
    res.outputs[rank]       # that rank's outputs (flattened result order)
    res.ranks[rank]         # its SimResult (timeline, busy per track)
    res.total_s             # the last core's end
    res.collective_s        # per rank: time on the collective engine (waiting + transfer)
    res.trace_json()        # one process (pid) per core, one track per engine / queue / CC

Every rank runs in its own thread (``neuronxcc.collectives.run_ranks``) with
its own machine state and timeline; the collective instructions meet through
one rendezvous and the shared interconnect model (``birsim.collective``).
The rank count is the module's (``module.attrs["rank_space"]``, which the
compiler writes and the NEFF carries), unless ``nranks`` gives it; a
disagreement is BirSimError. Inputs per rank are lists in module.inputs
order (or dicts by name).
"""
from neuronxcc.collectives import run_ranks
from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birsim.collective import RankContext

__all__ = ["MultiRankResult", "simulate_ranks", "simulate_neff_ranks", "module_ranks", "run_tool_ranks"]


def module_ranks(module):
    """The rank count the program was compiled for (1 when it names none)."""
    rs = (getattr(module, "attrs", None) or {}).get("rank_space")
    if not rs:
        return 1
    n = 1
    for x in rs:
        n *= int(x)
    return max(1, n)


class MultiRankResult:
    def __init__(self, results, contexts):
        self.ranks = results
        self.outputs = [r.outputs for r in results]
        self.total_s = max(r.total_s for r in results)
        self.collective_s = [c.wait_s + c.transfer_s for c in contexts]
        self.collective_wait_s = [c.wait_s for c in contexts]
        self.collective_transfer_s = [c.transfer_s for c in contexts]
        self.collectives = [c.count for c in contexts]

    def summary(self):
        return {"ranks": len(self.ranks), "total_s": self.total_s,
                "per_rank_total_s": [r.total_s for r in self.ranks],
                "collective_s": self.collective_s, "collective_wait_s": self.collective_wait_s,
                "collectives": self.collectives,
                "collective_share": [c / r.total_s if r.total_s > 0 else 0.0
                                     for c, r in zip(self.collective_s, self.ranks)]}

    def trace_json(self):
        events = []
        for k, r in enumerate(self.ranks):
            tj = r.trace_json()
            for ev in tj["traceEvents"]:
                ev = dict(ev)
                ev["pid"] = k + 1
                if ev.get("ph") == "M" and ev.get("name") == "process_name":
                    ev["args"] = {"name": "NeuronCore rank %d (birsim)" % k}
                events.append(ev)
        return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": self.summary()}

    def write_trace(self, path):
        import json
        with open(path, "w") as f:
            json.dump(self.trace_json(), f)


def _count(module, nranks):
    n = module_ranks(module)
    if nranks is None:
        return n
    nranks = int(nranks)
    if n > 1 and nranks != n:
        raise BirSimError("the program was compiled for %d ranks, --ranks says %d" % (n, nranks))
    if nranks < 1:
        raise BirSimError("--ranks must be at least 1")
    return nranks


def simulate_ranks(module, inputs_per_rank, nranks=None, target=None, trace=False, **kw):
    from neuronxcc.starfish.birsim.sim import simulate
    n = _count(module, nranks)
    if len(inputs_per_rank) != n:
        raise BirSimError("the program runs on %d ranks; inputs were given for %d" % (n, len(inputs_per_rank)))
    contexts = {}
    module.ensure_ids()      # once: the ranks share the (read-only) module

    def one(rank, rv):
        ctx = contexts[rank] = RankContext(rank, rv, n)
        return simulate(module, inputs_per_rank[rank], target=target, trace=trace, ranks=ctx, **kw)

    results = run_ranks(n, one)
    return MultiRankResult(results, [contexts[k] for k in range(n)])


def simulate_neff_ranks(neff, inputs_per_rank, nranks=None, target=None, trace=False, **kw):
    """NEFF: a path, or what ``neuronxcc.neff.read_neff`` returned."""
    import os

    from neuronxcc.starfish.birsim.sim import io_permutations, simulate, to_logical_layout, to_stored_layout
    if isinstance(neff, (str, bytes, os.PathLike)):
        from neuronxcc.neff import read_neff
        neff = read_neff(os.fspath(neff))
    module = neff.module
    n = _count(module, nranks)
    if len(inputs_per_rank) != n:
        raise BirSimError("the program runs on %d ranks; inputs were given for %d" % (n, len(inputs_per_rank)))
    perms = io_permutations(neff)
    libs = None
    if getattr(neff, "ucode_lib", None):
        raise BirSimError("multi-rank simulation of a NEFF with custom-op libraries is not supported yet")
    contexts = {}
    module.ensure_ids()

    def one(rank, rv):
        ctx = contexts[rank] = RankContext(rank, rv, n)
        ins = to_stored_layout(module, inputs_per_rank[rank], perms)
        res = simulate(module, ins, target=target, trace=trace, ranks=ctx, custom_op_libs=libs, **kw)
        return to_logical_layout(module, res, perms)

    results = run_ranks(n, one)
    return MultiRankResult(results, [contexts[k] for k in range(n)])


def run_tool_ranks(args, neff, given):
    """``birsim --ranks``: inputs / outputs with a leading rank axis (see ``birsim.tool``); the
    inputs pass the single-rank checks (``inputs.check_rank_inputs``) and every output file is
    written atomically, as on one rank."""
    import contextlib
    import json
    import sys

    import numpy as np

    from neuronxcc.common.toolshell import atomic_output
    from neuronxcc.starfish.birsim.inputs import check_rank_inputs
    from neuronxcc.starfish.birsim.sim import io_permutations

    module = neff.module
    n = _count(module, args.ranks)
    per_rank = check_rank_inputs(given, module, io_permutations(neff), args.inputs, n)
    res = simulate_neff_ranks(neff, per_rank, nranks=n, target=args.target, trace=bool(args.trace),
                              sync=args.sync, strict=args.strict, order=args.order)
    outs = {"output%d" % k: np.stack([res.outputs[d][k] for d in range(n)]) for k in range(len(res.outputs[0]))}
    s = res.summary()
    with contextlib.ExitStack() as stack:           # every file renamed into place only when all are written
        with open(stack.enter_context(atomic_output(args.output, suffix=".npz")), "wb") as f:
            np.savez(f, **outs)
        if args.trace:
            res.write_trace(stack.enter_context(atomic_output(args.trace)))
        if args.summary:
            with open(stack.enter_context(atomic_output(args.summary)), "w") as f:
                json.dump(s, f, indent=1)
    share = s["collective_share"]
    sys.stdout.write("birsim: %d ranks, estimated %.3f us (slowest core), %d collectives per rank, collective "
                     "share %.1f%%..%.1f%%\n" % (n, s["total_s"] * 1e6, max(s["collectives"]),
                                                 100 * min(share), 100 * max(share)))
    return 0
