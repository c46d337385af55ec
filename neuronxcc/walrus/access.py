"""What each instruction touches: its stream and its accesses as boxes over memories.

Owns: ``stream_of`` (the in-order stream an instruction runs on: its engine, or for a DMA-kind
opcode the queue it is issued to from that engine) and ``accesses`` (every read and write of every
site of a ``Program`` as (memory, write, site, partition range, byte range) rows; registers,
including the condition registers the ``walrus.cond`` nops guard, are memories of their own).
Read by the dependence graph (``depgraph``) and through it by ``deps``; the names of the
instructions walrus inserts (``COND_NAME``, ``BALANCE_NAME``, ``COUNTER_NAME``) are declared here
because both sides read them.
"""
import numpy as np

from neuronxcc.starfish import birpy as B
from neuronxcc.walrus.program import operands, tensor_bytes

COUNTER_NAME = "walrus.counter"
COND_NAME = "walrus.cond"
BALANCE_NAME = "walrus.balance"


def _dma_queue_default(opcode):
    """The default queue of a DMA-kind opcode (dma_copy, dma_gather, dma_scatter, collective: every
    opcode the BIR table runs on a DMA queue), None for the others."""
    q = _DMA_QUEUE.get(opcode, _DMA_QUEUE)
    if q is _DMA_QUEUE:
        info = B.opcodes.OPCODES.get(opcode)
        q = info.attrs.get("queue", "q0") if info is not None and info.kind == "dma" else None
        _DMA_QUEUE[opcode] = q
    return q


_DMA_QUEUE = {}


def stream_of(instr):
    if instr.name == BALANCE_NAME and instr.signals:
        return instr.signals[0][0]        # a nop standing for that stream's signals
    q = _dma_queue_default(instr.opcode)
    if q is not None:
        # asynchronous on its queue, whatever the opcode (a gather on the issuing engine's
        # stream let the next instruction's wait be met before the gather ended)
        return "Q_%s_%s" % (instr.engine, instr.attrs.get("queue", q))
    return "S_" + instr.engine


def site_streams(prog):
    """``stream_of`` every site of ``prog``, in position order; computed once per ``Program``
    (the passes never change an instruction's engine, queue or a balance nop's semaphore)."""
    st = getattr(prog, "_streams", None)
    if st is None or len(st) != len(prog.sites):
        st = [stream_of(s.instr) for s in prog.sites]
        prog._streams = st
    return st


def _register_names(prog):
    regs = set()
    for site in prog.sites:
        if site.instr.opcode == "register_load":
            r = site.instr.attrs.get("register")
            if r is not None:
                regs.add(str(r))
    return regs


def accesses(prog, physical=True, aps=None):
    """Arrays (mem, write, site, plo, phi, blo, bhi) over every operand of every site.

    ``aps``, a list, receives each row's access pattern (None for register rows)."""
    regs = _register_names(prog)
    memids = {}
    rows = []
    box = prog.box_in
    ranges_of = {}      # id(site.loops) -> the loop variables' ranges (sites of one nest share the tuple)
    for site in prog.sites:
        ins = site.instr
        pos = site.pos
        if ins.name == COND_NAME:
            r = _guarded_cond(site)
            if r is not None:
                rows.append((memids.setdefault(("REG", r), len(memids)), 0, pos, 0, 1, 0, 1))
                if aps is not None:
                    aps.append(None)
        idx = _indexed(ins)
        loops = site.loops
        ranges = ranges_of.get(id(loops))
        if ranges is None:
            ranges = ranges_of[id(loops)] = prog.var_ranges(loops)
        for w, ops in ((1, ins.dsts), (0, ins.srcs)):
            for ap in ops:
                key, plo, phi, blo, bhi = box(ap, ranges, physical)
                if idx is not None and ap is idx[0]:
                    blo, bhi = _widen(prog, ap, key, blo, bhi, idx[1], idx[2], physical)
                mid = memids.get(key)
                if mid is None:
                    mid = memids[key] = len(memids)
                rows.append((mid, w, pos, plo, phi, blo, bhi))
                if aps is not None:
                    aps.append(ap)
                if regs and not isinstance(ap.offset, int):
                    for v in ap.offset.free_vars():
                        if v in regs:
                            rows.append((memids.setdefault(("REG", v), len(memids)), 0, pos, 0, 1, 0, 1))
                            if aps is not None:
                                aps.append(None)
        for _, v in ins.waits:
            if not isinstance(v, int):
                for r in v.free_vars():
                    if r in regs:
                        rows.append((memids.setdefault(("REG", r), len(memids)), 0, site.pos, 0, 1, 0, 1))
                        if aps is not None:
                            aps.append(None)
        if ins.opcode == "register_load" and ins.attrs.get("register") is not None:
            r = str(ins.attrs["register"])
            rows.append((memids.setdefault(("REG", r), len(memids)), 1, site.pos, 0, 1, 0, 1))
            if aps is not None:
                aps.append(None)
    if not rows:
        z = np.zeros(0, np.int64)
        return z, z, z, z, z, z, z
    a = np.array(rows, dtype=np.int64)
    return tuple(np.ascontiguousarray(a[:, k]) for k in range(7))


def _indexed(ins):
    if ins.opcode not in ("dma_gather", "dma_scatter"):
        return None
    return B.opcodes.indexed_operand(ins)


def _widen(prog, ap, key, blo, bhi, lo, hi, physical):
    """The byte range of a gather/scatter's indexed operand: its box moved by every element
    delta in [lo, hi] the run-time index may give, inside its memloc or tensor."""
    isz = B.dtypes.itemsize(ap.dtype)
    ml = prog.memlocs.get(ap.target)
    if ml is not None:
        start = int(ml.byte_offset) if physical and ml.byte_offset is not None and key == ml.memory else 0
        end = start + int(ml.bytes_per_partition)
    else:
        t = prog.tensors.get(ap.target)
        start, end = 0, (tensor_bytes(t) if t is not None else 1 << 62)
        if getattr(t, "arena_offset", None) is not None:
            start, end = t.arena_offset, t.arena_offset + end
    return max(start, blo + lo * isz), min(end, bhi + hi * isz)


def _guarded_cond(site):
    """The condition register a ``walrus.cond`` nop guards: of the If/While it
    stands before, or of the While whose body it ends."""
    for node in site.owner[site.index + 1:]:
        if node.kind in ("if", "while"):
            return str(node.cond)
        if not (node.kind == "inst" and node.name == COND_NAME):
            return None
    if site.loops and site.loops[-1].kind == "while":
        return str(site.loops[-1].node.cond)
    return None
