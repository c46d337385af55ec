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
from neuronxcc.walrus.placement import place
from neuronxcc.walrus.program import program
from neuronxcc.walrus.contract import WalrusPass

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


def _fits(vals, wide, sizes, target, memory):
    saved = [(v.start, v.end, v.size) for v in vals]
    try:
        for v in vals:
            v.start, v.end = wide.get(v.name, (v.start, v.end))
            v.size = sizes.get(v.name, v.size)
        _, _, failed = place(vals, "linear_scan", target, memory)
        return failed < 0
    finally:
        for v, (s, e, z) in zip(vals, saved):
            v.start, v.end, v.size = s, e, z


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
    wide = liveness.pipelined_intervals(values)
    chosen = []
    for memory in ("PSUM", "SBUF"):
        mc = [c for c in cands if c[0].memory == memory]
        if not mc:
            continue
        vals = [v for v in values.values() if v.memory == memory and v.start is not None]
        sizes = {v.name: stride * copies for v, _, _, stride in mc}
        if _fits(vals, wide, sizes, ctx.target, memory):
            chosen.extend(mc)
        else:
            log.info("vn_splitter: %s: %d rotations would not fit; none done", memory, len(mc))
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
