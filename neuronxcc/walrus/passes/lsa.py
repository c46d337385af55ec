"""Passes lsa / experimental_loop_lsa, anti_dependency_analyzer and dep_reduction.

lsa builds the flat program view (``program.Program``) that the other passes
read from ``ctx.analyses['lsa']`` and logs the loop structure.
anti_dependency_analyzer recomputes every cross-stream dependence from the
current addresses and rewrites all waits/signals (walrus owns them: waits
from the input are replaced). dep_reduction does the same with the
transitively reduced set.
"""
import logging

from neuronxcc.walrus import deps as D
from neuronxcc.walrus.program import program
from neuronxcc.walrus.contract import WalrusPass

log = logging.getLogger("neuronxcc.walrus")


class LoopStructureAnalysis(WalrusPass):
    name = "lsa"

    def run(self, module, ctx):
        prog = program(module, ctx)
        loops = [li for li in prog.loops if li.kind == "loop"]
        depth = max((li.depth + 1 for li in prog.loops), default=0)
        dyn = sum(prog.dynamic_count(s) or 0 for s in prog.sites)
        ctx.metrics["static_instructions"] = len(prog.sites)
        ctx.metrics["dynamic_instructions"] = dyn
        ctx.metrics["loops"] = len(loops)
        log.info("lsa: %d instructions, %d loops (max depth %d), %d dynamic instructions",
                 len(prog.sites), len(loops), depth, dyn)
        return False


class ExperimentalLoopLSA(LoopStructureAnalysis):
    name = "experimental_loop_lsa"


def _physical(module):
    return all(m.allocated for m in module.memlocs.values())


class AntiDependencyAnalyzer(WalrusPass):
    name = "anti_dependency_analyzer"

    def run(self, module, ctx):
        found, used, n, nreg = D.synchronize(module, _physical(module), reduce=False, ctx=ctx)
        ctx.metrics["dependences"] = found
        ctx.metrics["semaphore_waits"] = n
        ctx.metrics["counted_regions"] = nreg
        log.info("anti_dependency_analyzer: %d cross-stream dependences -> %d waits (%d dynamic regions counted)",
                 found, n, nreg)
        return True


class DepReduction(WalrusPass):
    name = "dep_reduction"

    def run(self, module, ctx):
        found, used, n, nreg = D.synchronize(module, _physical(module), reduce=True, ctx=ctx)
        ctx.metrics["dependences_reduced"] = used
        ctx.metrics["semaphore_waits"] = n
        log.info("dep_reduction: %d -> %d dependences, %d waits", found, used, n)
        return True
