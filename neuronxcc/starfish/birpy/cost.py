"""Static per-instruction cost model (the rules birsim's timeline uses).

Numbers come from ``neuronxcc.hwm``; formulas are the public v2 ones from the
hardware reference (nki.isa cost column, section 2 rules of thumb). N is the
free size (elements per partition) of the output AP unless stated.

  matmul          PE   max(min(64, Ns), Nm) cycles, x4 when the inputs are fp32
                       (Ns = stationary free size M, Nm = moving free size N)
  transpose       PE   max(P_in, min(64, F_in)); DVE: max(64, N) + 60
  activation      ACT  max(64, N) (+64 with reduce) + 60
  tensor_tensor   DVE  max(64, N) if an input is in PSUM or (all bf16, add/subtract/mult,
                       unit innermost steps) else max(64, 2N); + 60
  tensor_scalar, tensor_copy, select     DVE/ACT max(64, N) + 60
  scalar_tensor_tensor, tensor_tensor_scan  DVE max(64, 2N) + 60
  tensor_reduce   DVE  max(64, N_in) (N_in/2 for bf16 in+out with add/max) + 60
  memset          DVE  max(64, N/2) for zero into a 2-byte dtype, else max(64, N); + 60
  any POOL compute opcode                150 + N (N_in for reductions)
  custom_op       POOL 150 + ceil(P/8) * N * ceil(log2 N)   (our own estimate; no public rule)
  register_load   60 + 64 cycles of the issuing engine
  nop             0
  dma_copy, dma_gather, dma_scatter  queue "DMA:<queue>" busy bytes / (16 engines x per-engine bandwidth);
                  completes dma_fixed_latency later (latency overlaps the next transfer);
                  the issuing engine spends no time
60 = ``access_overhead_cycles`` (static SBUF/PSUM access overhead), 64 = ``min_ii``
(the PE's min(64, ...) is ``mm_init_latency``),
150 = ``pool_startup_cycles``. Clocks: PE pe_hz, ACT act_hz, DVE dve_hz, POOL
pool_hz, SP act_hz.
"""
import math
from dataclasses import dataclass

from neuronxcc.hwm import get_target
from neuronxcc.starfish.birpy import dtypes as _dt
from neuronxcc.starfish.birpy.opcodes import full_attrs

__all__ = ["Cost", "instruction_cost", "engine_hz"]


@dataclass(frozen=True)
class Cost:
    track: str          # engine name, or "DMA:<queue>"
    busy_s: float       # time the track is occupied
    latency_s: float    # extra time after busy until the result is visible (DMA fixed latency)
    cycles: float       # engine cycles (0 for DMA)


def engine_hz(engine, tm):
    return {"PE": tm.pe_hz, "ACT": tm.act_hz, "DVE": tm.dve_hz, "POOL": tm.pool_hz}.get(engine, tm.act_hz)


def _contig(ap):
    return not ap.pattern or ap.pattern[-1][0] == 1 or ap.pattern[-1][1] == 1


def instruction_cost(instr, module, target=None):
    """Cost of one execution of INSTR (see module doc)."""
    tm = target if hasattr(target, "pe_hz") else get_target(target or module.target or "trn1")
    op = instr.opcode
    eng = instr.engine
    attrs = full_attrs(instr)
    ovh = tm.access_overhead_cycles
    mi = tm.min_ii
    if op in ("dma_copy", "dma_gather", "dma_scatter"):
        nbytes = max(instr.dsts[0].num_elements * instr.dsts[0].itemsize,
                     instr.srcs[0].num_elements * instr.srcs[0].itemsize)
        return Cost("DMA:%s" % attrs.get("queue", "q0"), nbytes / tm.dma_bytes_per_sec, tm.dma_fixed_latency_s, 0)
    if op == "nop":
        return Cost(eng, 0.0, 0.0, 0)
    if op == "register_load":
        cyc = ovh + mi
        return Cost(eng, cyc / engine_hz(eng, tm), 0.0, cyc)
    out = instr.dsts[0] if instr.dsts else None
    n = out.free_size if out is not None else 1
    if op == "matmul":
        st, mv = instr.srcs
        cyc = max(min(tm.mm_init_latency, st.free_size), mv.free_size)
        if st.dtype == "float32" or mv.dtype == "float32":
            cyc *= tm.fp32_matmul_slowdown
        cyc = max(cyc, 1)
    elif op in ("tensor_reduce", "partition_reduce"):
        nin = instr.srcs[0].free_size
        if eng == "POOL":
            cyc = tm.pool_startup_cycles + nin
        else:
            fast = (instr.srcs[0].dtype == "bfloat16" and out.dtype == "bfloat16" and attrs["op"] in ("add", "max"))
            cyc = max(mi, nin // 2 if fast else nin) + ovh
    elif op == "custom_op":
        src = instr.srcs[0]
        rows_per_cpu = -(-src.num_partitions // tm.num_gpsimd_cpus)
        nin = src.free_size
        cyc = tm.pool_startup_cycles + rows_per_cpu * nin * max(1, math.ceil(math.log2(max(nin, 2))))
    elif eng == "POOL":
        cyc = tm.pool_startup_cycles + n
    elif op == "transpose":
        src = instr.srcs[0]
        if eng == "PE":
            cyc = max(src.num_partitions, min(tm.mm_init_latency, src.free_size))
        else:
            cyc = max(mi, n) + ovh
    elif op == "activation":
        cyc = max(mi, n) + (tm.act_accum_readout_cycles if attrs.get("reduce") else 0) + ovh
    elif op == "tensor_tensor":
        mems = [module.memory_of(a) for a in instr.srcs]
        allbf = all(a.dtype == "bfloat16" for a in instr.operands)
        single = "PSUM" in mems or (allbf and attrs["op"] in ("add", "subtract", "mult")
                                    and all(_contig(a) for a in instr.operands))
        cyc = max(mi, n if single else 2 * n) + ovh
    elif op in ("scalar_tensor_tensor", "tensor_tensor_scan"):
        cyc = max(mi, 2 * n) + ovh
    elif op == "memset":
        half = float(attrs.get("value", 0)) == 0.0 and _dt.itemsize(out.dtype) == 2
        cyc = max(mi, n // 2 if half else n) + ovh
    else:   # tensor_scalar, tensor_copy, select, iota/affine_select (POOL handled above)
        cyc = max(mi, n) + ovh
    return Cost(eng, cyc / engine_hz(eng, tm), 0.0, cyc)
