"""print_metrics: fills ``ctx.metrics`` (written by walrus_driver to --metrics)
and logs: instructions per engine (static and executed), DMA bytes, SBUF and
PSUM peak bytes per partition (from the allocated addresses, else the sum of
the memlocs), semaphore waits, and the estimated device time from the cost
model (``estimate.estimate_time``).
"""
import logging

from neuronxcc.walrus.estimate import estimate_time
from neuronxcc.walrus.program import program
from neuronxcc.walrus.contract import WalrusPass

log = logging.getLogger("neuronxcc.walrus")


def peak_bytes(module, memory):
    mls = [m for m in module.memlocs.values() if m.memory == memory]
    if mls and all(m.allocated for m in mls):
        return max(m.byte_offset + m.bytes_per_partition for m in mls), True
    return sum(m.bytes_per_partition for m in mls), False


class PrintMetrics(WalrusPass):
    name = "print_metrics"

    def run(self, module, ctx):
        prog = program(module, ctx)
        static, dynamic = {}, {}
        dma_bytes = 0
        for s in prog.sites:
            e = s.instr.engine
            n = prog.dynamic_count(s)
            static[e] = static.get(e, 0) + 1
            dynamic[e] = dynamic.get(e, 0) + (n or 0)
            if s.instr.opcode == "dma_copy":
                ap = s.instr.dsts[0]
                dma_bytes += ap.num_elements * ap.itemsize * (n or 0)
        m = ctx.metrics
        m["instructions_per_engine"] = static
        m["executed_instructions_per_engine"] = dynamic
        m["instructions"] = len(prog.sites)
        m["dma_bytes"] = dma_bytes
        for mem in ("SBUF", "PSUM"):
            peak, alloc = peak_bytes(module, mem)
            m["%s_peak_bytes_per_partition" % mem.lower()] = peak
            m["%s_allocated" % mem.lower()] = alloc
        m["semaphore_waits"] = sum(len(s.instr.waits) for s in prog.sites)
        t, per_engine = estimate_time(module, ctx)
        m["estimated_time_s"] = float(t)
        m["estimated_busy_s_per_stream"] = {k: float(v) for k, v in per_engine.items()}
        m["target"] = ctx.target.name
        log.info("print_metrics: %d instructions %s; executed %s; SBUF peak %d B/partition, PSUM peak %d "
                 "B/partition; %d waits; estimated %.3f us", len(prog.sites), static, dynamic,
                 m["sbuf_peak_bytes_per_partition"], m["psum_peak_bytes_per_partition"],
                 m["semaphore_waits"], t * 1e6)
        return False
