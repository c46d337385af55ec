"""birsim for an LNC=2 program (``module.attrs["lnc"] == 2``, penguin/lnc.py): the two physical
cores of one logical NeuronCore in two threads sharing one HBM, each with its own SBUF/PSUM and
timeline, meeting at the barriers (``birsim.collective``). ``sim.simulate`` hands such a module
here with itself as ``simulate`` (so this module does not import ``sim``)."""
import threading

from neuronxcc.collectives import run_ranks
from neuronxcc.starfish.birsim.collective import RankContext

__all__ = ["simulate_lnc"]


def simulate_lnc(simulate, module, inputs, **kw):
    """Core 0's SimResult with ``total_s`` the later core's end and ``lnc_cores`` both results;
    outputs are the shared HBM after the final barrier (the same on both cores)."""
    shared = {"lock": threading.Lock(), "targets": None}
    module.ensure_ids()

    def one(core, rv):
        ctx = RankContext(core, rv, 2)
        ctx.lnc_shared = shared
        return simulate(module, inputs, ranks=ctx, **kw)

    results = run_ranks(2, one)
    res = results[0]
    res.total_s = max(r.total_s for r in results)
    res.lnc_cores = results
    return res
