"""Static per-instruction cost model (the rules birsim's timeline uses).

Numbers come from ``neuronxcc.hwm`` (each field there cites its public
source); formulas are the public v2 ones from the hardware reference (the
nki.isa cost column of its section 3, the rules of thumb of its section 2).
N is the free size (elements per partition) of the output AP unless stated.
"+ 60" is ``access_overhead_cycles`` (the static overhead of starting an
SBUF/PSUM access), 64 ``min_ii`` (the PE's min(64, ...) is
``mm_init_latency``), 150 ``pool_startup_cycles``.

  matmul          PE   max(min(64, Ns), Nm) cycles, x4 when the inputs are fp32
                       (Ns = stationary free size M, Nm = moving free size N)
  transpose       PE   max(P_in, min(64, F_in)), x fp32_transpose_slowdown for fp32 (4 on v2: a PE
                       transpose is a matmul with the identity; 2 on v3's transpose mode);
                  DVE  max(64, N) + 60
  activation      ACT  max(64, N) (+64 with reduce) + 60
  tensor_tensor   DVE  max(64, N) if an input is in PSUM or (all bf16, add/subtract/mult,
                       unit innermost steps) else max(64, 2N); + 60
  tensor_scalar, tensor_copy            DVE/ACT max(64, N) + 60
  select          DVE  max(64, k N) + 60, k = the larger of its SBUF and its PSUM input counts
                       ([ARCH2]'s rule of thumb, one input tensor ~N cycles, two ~2N, with [ISA226]'s
                       tensor_copy_predicated: N with one input in PSUM, 2N with both in SBUF; a
                       select streams pred, on_true and on_false: 3N all in SBUF)
  scalar_tensor_tensor, tensor_tensor_scan  DVE max(64, 2N) + 60
  tensor_reduce   DVE  max(64, N_in) (N_in/2 for bf16 in+out with add/max) + 60
  memset          DVE  max(64, N/2) for zero into a 2-byte dtype, else max(64, N); + 60
  v3 DVE performance modes ([ARCH3]): tensor_copy/tensor_scalar with every operand bf16/fp16 run
                  N/4 (all SBUF, unit innermost steps) or N/2 (otherwise); tensor_tensor with both
                  inputs in SBUF and every operand bf16/fp16 runs N instead of 2N
  any POOL compute opcode                150 + N (N_in for reductions)
  custom_op       POOL 150 + ceil(P/8) * N * ceil(log2 N)   (our own estimate; no public rule)
  register_load   60 + 64 cycles of the issuing engine
  nop             0
  collective      track "CC" (the collective engine) busy ``hwm.interconnect.collective_time``
                  (ring/tree per op over the group); multi-rank birsim adds the wait for the last
                  member; the issuing engine spends no time

Strided access (``strided_access_slowdown``, ref §5 "Bandwidth effect", [ARCH2]): when an
SBUF/PSUM operand's most-minor free step (its innermost dimension of more than one element)
exceeds 16 bytes, its read/write interface runs at half the peak bandwidth, "roughly 50%
performance hit on the instructions": the element count N of the formulas above (N_in, Ns
and Nm, the transpose's F) is doubled for every compute instruction with such an operand
(custom_op excepted; the fixed overheads and the 64-cycle floors stay).

Dependent results (``Cost.latency_s``): an ACT result is visible
``act_dependency_cycles`` after the instruction's II ends, a DVE result
``dve_dependency_cycles`` after; the engine itself is free at the end of the
II (independent instructions pipeline back to back).

Ports (``Cost.ports``): on v2 VectorE and GpSimd share the SBUF port, and
VectorE and ScalarE the PSUM port; an instruction holds the shared port it
uses for its whole II (v3 frees the PSUM one).

DMA (dma_copy, dma_gather, dma_scatter): the transfer is split into
descriptors, one per contiguous run (a run never crosses an SBUF/PSUM
partition; on HBM it follows the access pattern's unit steps). The engines
spend ``bytes / rate + runs * dma_descriptor_overhead_s`` engine-seconds on it
(``Cost.engine_s``), where rate is one engine's peak capped at its share of
the HBM bandwidth for each HBM side (``TargetModel.dma_engine_rate``: the 16
engines together never exceed the core's HBM bandwidth, reads and writes
counted together). Which engines move it:
  * a transfer with an SBUF/PSUM side (the destination's if it is on chip,
    else the source's) runs on the engines of the ``dma_partitions_per_engine``
    (8) partition groups its physical partitions touch -- engine k serves
    partitions [8k, 8k + 8) -- each engine's share of engine_s being its
    share of the partitions (``Cost.first_engine``, ``Cost.shares``): a
    [4, F] load runs on one engine, a [128, F] one on all 16;
  * an HBM->HBM transfer spreads over ``Cost.width`` = min(16, pieces) engines
    (a run longer than ``dma_min_piece_bytes`` splits into pieces of at least
    that size), whichever are free first (``first_engine`` -1).
Alone on the engines it takes ``busy_s`` (the largest engine's share) on its
queue, starting ``dma_fixed_latency_s`` after it is issued (``latency_s``; the
latency of transfers issued back to back overlaps, as on the hardware); the
timeline shares the 16 engines between all queues, each engine serving the
queues round-robin one descriptor (a contiguous run, at most
``dma_queue_chunk_bytes``) a turn ([DMA]). The issuing engine spends
no time on it, but its trigger is an instruction of that engine's in-order
stream (birsim.timeline).
"""
import math
from dataclasses import dataclass

from neuronxcc.hwm import get_target
from neuronxcc.starfish.birpy import dtypes as _dt
from neuronxcc.starfish.birpy.opcodes import full_attrs

__all__ = ["Cost", "instruction_cost", "engine_hz", "dma_shape", "dma_engine_shares", "strided_factor",
           "target_model"]

_LOWP16 = ("bfloat16", "float16")


@dataclass(frozen=True)
class Cost:
    track: str          # engine name, or "DMA:<queue>"
    busy_s: float       # time the track is occupied (a DMA: its transfer alone on the engines)
    latency_s: float    # extra time after busy until the result is visible (DMA: before the transfer starts)
    cycles: float       # engine cycles (0 for DMA)
    ports: tuple = ()   # shared ports held for busy_s ("PORT:SBUF", "PORT:PSUM")
    engine_s: float = 0.0   # DMA: engine-seconds over all engines
    width: int = 0          # DMA: engines the transfer spreads over
    kind: str = ""          # "dma", "matmul", "pe_transpose", "psum_eviction" or ""
    first_engine: int = -1  # DMA: the first of the width engines it runs on (-1: whichever are free first)
    shares: tuple = ()      # DMA with first_engine >= 0: each engine's fraction of engine_s


def engine_hz(engine, tm):
    return {"PE": tm.pe_hz, "ACT": tm.act_hz, "DVE": tm.dve_hz, "POOL": tm.pool_hz}.get(engine, tm.act_hz)


def _contig(ap):
    return not ap.pattern or ap.pattern[-1][0] == 1 or ap.pattern[-1][1] == 1


def _run_elems(ap):
    """Elements in the innermost contiguous run of AP (within one partition on chip)."""
    run = 1
    for s, n in reversed(ap.pattern):
        if n == 1:
            continue
        if s != run:
            break
        run *= n
    return run


def strided_factor(instr, mems, tm):
    """``tm.strided_access_slowdown`` when an on-chip operand's innermost stepping dimension steps more
    than ``tm.sbuf_fast_stride_bytes``, else 1 (module doc)."""
    for ap, mem in zip(instr.operands, mems):
        if mem not in ("SBUF", "PSUM"):
            continue
        for step, num in reversed(ap.pattern):
            if num > 1:
                if abs(step) * ap.itemsize > tm.sbuf_fast_stride_bytes:
                    return tm.strided_access_slowdown
                break
    return 1


def dma_shape(instr, module, tm):
    """(bytes, contiguous runs, pieces, HBM sides) of a DMA instruction."""
    dst, src = instr.dsts[0], instr.srcs[0]
    nbytes = max(dst.num_elements * dst.itemsize, src.num_elements * src.itemsize)
    runs = 1
    sides = 0
    for ap in (dst, src):
        r = max(1, ap.num_elements // max(1, _run_elems(ap)))
        runs = max(runs, r)
        if module.memory_of(ap) == "HBM":
            sides += 1
    run_bytes = nbytes / runs
    pieces = runs * max(1, int(run_bytes // tm.dma_min_piece_bytes))
    return nbytes, runs, pieces, sides


def dma_engine_shares(instr, module, tm):
    """(first engine, per-engine fractions) of a DMA with an on-chip side (module doc), else None."""
    ap = instr.dsts[0]
    if ap.num_partitions is None:
        ap = instr.srcs[0]
        if ap.num_partitions is None:
            return None
    loc = module.target_of(ap)
    p0 = (getattr(loc, "start_partition", None) or 0) + (ap.start_partition or 0)
    p1 = p0 + max(1, ap.num_partitions)
    per = tm.dma_partitions_per_engine
    g0, g1 = p0 // per, (p1 - 1) // per
    shares = tuple((min(p1, (g + 1) * per) - max(p0, g * per)) / (p1 - p0) for g in range(g0, g1 + 1))
    return g0 % tm.dma_engines, shares


def target_model(module, target=None):
    """The ``hwm.TargetModel`` costs are computed for: TARGET (a model or a name), else the module's."""
    return target if hasattr(target, "pe_hz") else get_target(target or module.target or "trn1")



def instruction_cost(instr, module, target=None):
    """Cost of one execution of INSTR (see module doc)."""
    tm = target_model(module, target)
    op = instr.opcode
    eng = instr.engine
    attrs = full_attrs(instr)
    ovh = tm.access_overhead_cycles
    mi = tm.min_ii
    if op in ("dma_copy", "dma_gather", "dma_scatter"):
        nbytes, runs, pieces, sides = dma_shape(instr, module, tm)
        engine_s = nbytes / tm.dma_engine_rate(sides) + runs * tm.dma_descriptor_overhead_s
        queue = "DMA:%s" % attrs.get("queue", "q0")
        fixed = dma_engine_shares(instr, module, tm)
        if fixed is not None:
            first, shares = fixed
            return Cost(queue, engine_s * max(shares), tm.dma_fixed_latency_s, 0, engine_s=engine_s,
                        width=len(shares), kind="dma", first_engine=first, shares=shares)
        width = max(1, min(tm.dma_engines, pieces))
        return Cost(queue, engine_s / width, tm.dma_fixed_latency_s, 0, engine_s=engine_s, width=width, kind="dma")
    if op == "collective":
        from neuronxcc.hwm.interconnect import collective_time
        src, dst = instr.srcs[0], instr.dsts[0]
        kind = attrs.get("op")
        nbytes = (dst if kind == "all_gather" else src).num_elements * src.itemsize
        return Cost("CC", collective_time(kind, nbytes, _my_group(attrs), tm), 0.0, 0)
    if op == "nop":
        return Cost(eng, 0.0, 0.0, 0)
    if op == "register_load":
        cyc = ovh + mi
        return Cost(eng, cyc / engine_hz(eng, tm), 0.0, cyc)
    out = instr.dsts[0] if instr.dsts else None
    mems = [module.memory_of(a) for a in instr.operands]
    sw = strided_factor(instr, mems, tm) if op != "custom_op" else 1
    n = (out.free_size if out is not None else 1) * sw
    kind = ""
    if eng in ("ACT", "DVE") and out is not None and "PSUM" in mems[len(instr.dsts):] \
            and mems[0] == "SBUF" and op != "transpose":
        kind = "psum_eviction"
    if op == "matmul":
        st, mv = instr.srcs
        cyc = max(min(tm.mm_init_latency, st.free_size * sw), mv.free_size * sw)
        if st.dtype == "float32" or mv.dtype == "float32":
            cyc *= tm.fp32_matmul_slowdown
        cyc = max(cyc, 1)
        kind = "matmul"
    elif op in ("tensor_reduce", "partition_reduce"):
        nin = instr.srcs[0].free_size * sw
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
            cyc = max(src.num_partitions, min(tm.mm_init_latency, src.free_size * sw))
            if src.dtype == "float32":
                cyc *= tm.fp32_transpose_slowdown
            kind = "pe_transpose"
        else:
            cyc = max(mi, n) + ovh
    elif op == "activation":
        cyc = max(mi, n) + (tm.act_accum_readout_cycles if attrs.get("reduce") else 0) + ovh
    elif op == "tensor_tensor":
        smems = mems[len(instr.dsts):]
        allbf = all(a.dtype == "bfloat16" for a in instr.operands)
        single = "PSUM" in smems or (allbf and attrs["op"] in ("add", "subtract", "mult")
                                     and all(_contig(a) for a in instr.operands))
        if not single and tm.dve_perf_modes and eng == "DVE" and all(m == "SBUF" for m in smems) \
                and all(a.dtype in _LOWP16 for a in instr.operands):
            single = True
        cyc = max(mi, n if single else 2 * n) + ovh
    elif op in ("scalar_tensor_tensor", "tensor_tensor_scan"):
        cyc = max(mi, 2 * n) + ovh
    elif op == "memset":
        half = float(attrs.get("value", 0)) == 0.0 and _dt.itemsize(out.dtype) == 2
        cyc = max(mi, n // 2 if half else n) + ovh
    elif op == "select":
        smems = mems[len(instr.dsts):]
        k = max(1, smems.count("SBUF"), smems.count("PSUM"))
        cyc = max(mi, k * n) + ovh
    else:   # tensor_scalar, tensor_copy, iota/affine_select (POOL handled above)
        work = n
        if tm.dve_perf_modes and eng == "DVE" and op in ("tensor_copy", "tensor_scalar") \
                and all(a.dtype in _LOWP16 for a in instr.operands):
            fast4 = all(m == "SBUF" for m in mems) and all(_contig(a) for a in instr.operands)
            work = n // 4 if fast4 else n // 2
        cyc = max(mi, work) + ovh
    hz = engine_hz(eng, tm)
    lat = {"ACT": tm.act_dependency_cycles, "DVE": tm.dve_dependency_cycles}.get(eng, 0)
    ports = []
    if tm.dve_pool_share_sbuf_port and (eng == "POOL" or (eng == "DVE" and "SBUF" in mems)):
        ports.append("PORT:SBUF")
    if tm.dve_act_share_psum_port and eng in ("DVE", "ACT") and "PSUM" in mems:
        ports.append("PORT:PSUM")
    return Cost(eng, cyc / hz, lat / hz, cyc, tuple(ports), kind=kind)


def _my_group(attrs):
    """The largest group of a collective (every group of one instruction has the same size)."""
    if attrs.get("op") == "permute":
        pairs = attrs.get("pairs") or []
        return pairs[0] if pairs else [0]
    groups = attrs.get("groups") or [[0]]
    return max(groups, key=len)
