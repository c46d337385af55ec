"""vn_splitter: rotate loop-private buffers over K copies (modulo variable expansion).

Owns: giving an on-chip value that is defined afresh in every iteration of
a loop (``liveness``: its private loop) K copies, iteration F of that loop
using copy F mod K, so that iteration F+1 can fill its copy while iteration
F still reads its own: the write-after-read between consecutive iterations
disappears and the DMA of the next tile overlaps the compute on this one.

F is the loop's iteration index flattened over its enclosing loops
(sum of idx_j * product of the inner trip counts), so consecutive
executions of the loop body use different copies even where an inner loop
restarts. The memloc grows to K x stride bytes per partition (stride: the
value's size rounded to 8 bytes; in PSUM one 2 KiB bank, so an
accumulation group never crosses a bank) and every access's offset gets
``stride/itemsize * (F mod K)`` elements. The module attr
``walrus.rotations`` records {memloc: {"copies": K, "loop": var,
"stride_bytes": S}}; the dependence analysis (``carried``) reads it: two
accesses of a rotated memloc in its loop conflict only K iterations apart.

PSUM values that a matmul writes are not rotated: birpy's verifier checks
that a matmul's output bytes over *all* iterations lie in one bank.

Only values whose private loop and every enclosing region are counted
``Loop``s (no While/If) are rotated, and only when every value still fits:
the pass runs the allocator's placement on the rotated sizes first (PSUM and
SBUF separately) and rotates nothing in a memory where that fails.
"""
import logging

from neuronxcc.walrus import liveness
from neuronxcc.starfish import birpy as B
from neuronxcc.walrus.carried import ROTATIONS
import numpy as np

from neuronxcc.walrus import _alloc, placement
from neuronxcc.walrus.program import program
from neuronxcc.walrus.contract import WalrusPass
from neuronxcc.walrus.estimate import costs_of

log = logging.getLogger("neuronxcc.walrus")

COPIES = 2


def _pel():
    from neuronxcc import pelican
    return pelican


def flat_index(loops):
    """Flattened iteration index (pelican Expr) over ``loops`` (outermost first)."""
    pel = _pel()
    f = pel.const(0)
    for li in loops:
        v = pel.var(li.var)
        idx = (v - li.start) // li.step if li.step > 0 else (pel.const(li.start) - v) // (-li.step)
        f = f * li.trip + idx
    return f


def _stride(v, memory, target):
    if memory == "PSUM":
        bank = target.psum_bank_bytes
        return -(-v.size // bank) * bank
    return -(-v.size // 8) * 8


def candidates(prog, values, target):
    """[(value, loop, enclosing loops, stride)] of the values that can rotate."""
    out = []
    for v in values.values():
        li = v.private
        if v.start is None or li is None or li.kind != "loop" or (li.trip or 0) < 2 or li.var is None:
            continue
        if v.memory == "PSUM" and any(prog.sites[p].instr.opcode == "matmul" for p, _, _ in v.sites):
            # birpy.verify bounds a matmul's PSUM output over all iterations and requires one bank,
            # so an accumulation group cannot alternate between banks by iteration (yet)
            continue
        encl = list(prog.sites[li.first].loops)
        encl = encl[:encl.index(li) + 1] if li in encl else None
        if not encl or any(x.kind != "loop" or not x.trip or x.var is None or not x.step for x in encl):
            continue
        stride = _stride(v, v.memory, target)
        if any(stride % B.dtypes.itemsize(ap.dtype) for _, _, ap in v.sites):
            continue
        out.append((v, li, encl, stride))
    return out


class _FitCheck:
    """Does the allocator's linear-scan placement (``placement``) still fit ``vals`` when some
    values take rotated sizes? Every value at its pipelined interval (``wide``); the arrays are
    built once, so a probe costs the typed placement alone."""

    def __init__(self, vals, wide, target, memory):
        self.target, self.memory = target, memory
        self.index = {v.name: i for i, v in enumerate(vals)}
        saved = [(v.start, v.end) for v in vals]
        try:
            for v in vals:
                v.start, v.end = wide.get(v.name, (v.start, v.end))
            self.start, self.end, self.size, self.nparts, self.pin = placement.arrays(vals, True)
        finally:
            for v, (s, e) in zip(vals, saved):
                v.start, v.end = s, e
        self.ok = not (self.nparts > target.num_partitions).any()

    def fits(self, sizes):
        """``sizes``: {value name: bytes per partition} replacing those values' sizes."""
        if not self.ok or not len(self.start):
            return self.ok
        size = self.size.copy()
        for name, z in sizes.items():
            size[self.index[name]] = z
        cap, align, bank = placement.memory_params(self.target, self.memory)
        n = len(size)
        off, ps = np.zeros(n, np.int64), np.zeros(n, np.int64)
        return _alloc.linear_scan_allocate(self.start, self.end, size, self.nparts, self.pin, cap, align, bank,
                                           self.target.num_partitions, off, ps) < 0


def _engine_times(prog, module, ctx):
    """(DMA engine seconds over the DMA engines, the compute engines' busy seconds summed) of the
    whole program: each instruction's ``birpy.cost`` times its executions (While bodies once).
    Instructions of one shape (opcode, engine, attributes, operands' dtypes, patterns, partitions
    and memories: all a price reads) are priced once, as the unrolled layers of a model repeat
    them; the prices go into the ``costs`` analysis, which pre_sched reads next."""
    from neuronxcc.starfish.birpy import cost as C
    costs = costs_of(ctx, module)
    tm = C.target_model(module, ctx.target)
    memo = {}
    busy, dma = {}, 0.0
    for site in prog.sites:
        ins = site.instr
        c = costs.cache.get(id(ins), False)
        if c is False:
            key = (ins.opcode, ins.engine, repr(sorted(ins.attrs.items())),
                   tuple((ap.dtype, repr(ap.pattern), ap.start_partition, ap.num_partitions, module.memory_of(ap),
                          getattr(module.target_of(ap), "start_partition", None)) for ap in ins.operands))
            c = memo.get(key, memo)
            if c is memo:
                c = memo[key] = costs.full(ins)
            costs.cache[id(ins)] = c
        if c is None:
            continue
        n = prog.dynamic_count(site) or 1
        if c.kind == "dma":
            dma += c.engine_s * n
        else:
            busy[c.track] = busy.get(c.track, 0.0) + c.busy_s * n
    return dma / max(1, tm.dma_engines), sum(busy.values())


def _priority(prog, cand):
    """Sort key of a candidate (lower rotates first): values a DMA writes (the load of the next
    tile is what overlaps the compute on this one), then the smaller footprint (bytes x
    partitions: more rotations in the same bytes), then program order."""
    v, _, _, stride = cand
    loaded = any(w and _is_dma(prog.sites[p].instr.opcode) for p, w, _ in v.sites)
    return (0 if loaded else 1, stride * v.nparts, v.start)


def _is_dma(opcode):
    info = B.opcodes.OPCODES.get(opcode)
    return info is not None and info.kind == "dma"


def _largest_fitting_prefix(check, mc, copies):
    """A k such that rotating ``mc[:k]`` still fits: all of them when they fit, else a binary
    search over the prefix length (log2(len(mc)) placements, each linear in the values). Fitting
    need not be monotone in k (first-fit placement), so k is one that was checked to fit, not
    always the largest that would."""
    def fits(k):
        return check.fits({v.name: stride * copies for v, _, _, stride in mc[:k]})
    if fits(len(mc)):
        return len(mc)
    lo, hi = 0, len(mc)         # no rotation fits (the values fit as they are); all of them do not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid
    return lo


def rotate(module, ctx, copies=COPIES):
    """Rotate what can rotate; returns the number of memlocs rotated."""
    if any(m.allocated for m in module.memlocs.values()) and all(m.allocated for m in module.memlocs.values()):
        return 0      # after allocation addresses are fixed; rotation is a pre-allocation pass
    prog = program(module, ctx)
    values = liveness.compute(prog)
    rot = dict(module.attrs.get(ROTATIONS) or {})
    cands = [c for c in candidates(prog, values, ctx.target) if c[0].name not in rot]
    if not cands:
        return 0
    dma_s, compute_s = _engine_times(prog, module, ctx)
    if dma_s >= compute_s:
        log.info("vn_splitter: the transfers outweigh all compute (%.3f us over the DMA engines, %.3f us on the "
                 "compute engines together): nothing rotated", dma_s * 1e6, compute_s * 1e6)
        return 0
    wide = liveness.pipelined_intervals(values)
    chosen = []
    for memory in ("PSUM", "SBUF"):
        mc = [c for c in cands if c[0].memory == memory]
        if not mc:
            continue
        vals = [v for v in values.values() if v.memory == memory and v.start is not None]
        mc = sorted(mc, key=lambda c: _priority(prog, c))
        k = _largest_fitting_prefix(_FitCheck(vals, wide, ctx.target, memory), mc, copies)
        chosen.extend(mc[:k])
        if k < len(mc):
            log.info("vn_splitter: %s: %d of %d rotations fit", memory, k, len(mc))
    pel = _pel()
    for v, li, encl, stride in chosen:
        sel = flat_index(encl) % copies
        for _, _, ap in v.sites:
            step = stride // B.dtypes.itemsize(ap.dtype)
            ap.offset = pel.as_expr(ap.offset) + sel * step
        ml = module.memlocs[v.name]
        ml.bytes_per_partition = stride * copies
        rot[v.name] = {"copies": copies, "loop": li.var, "stride_bytes": stride}
    if chosen:
        module.attrs[ROTATIONS] = rot
    return len(chosen)


class VnSplitter(WalrusPass):
    name = "vn_splitter"

    def run(self, module, ctx):
        n = rotate(module, ctx, int(ctx.options["rotate_copies"]))
        ctx.metrics["rotated_buffers"] = n
        log.info("vn_splitter: %d loop-private buffers rotated over %d copies", n,
                 int(ctx.options["rotate_copies"]))
        return n > 0
