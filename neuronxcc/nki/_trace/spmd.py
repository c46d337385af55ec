"""The SPMD grid around a traced kernel body, and reductions across its programs (``nl.all_reduce``).

The programs of a grid ``kernel[g0, g1, ...]`` run one after another on one NeuronCore: the body is
wrapped in nested loops over ``pid<axis>``. A reduction across programs needs every program's value
before any program goes on, so ``all_reduce`` (at the top level of the kernel body) cuts the body
there (a ``TSplit``): the grid loop runs the part before the cut for every program, each program
storing its value into an HBM slot ``[pid0, pid1, ...]``; then the reduction runs once over the
slots (per group of programs that share the axes not reduced) and writes the result to every
member's slot; then a second grid loop runs the rest, each program loading its group's result.
On-chip buffers a program wrote before the cut and uses after it are saved per program to HBM at
the end of the first loop and restored at the start of the second (PSUM state across a cut is
refused by name).
"""
import itertools

import numpy as np

from neuronxcc import pelican as _pel
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import ops
from neuronxcc.nki._trace.context import TLoop, current
from neuronxcc.nki._trace.index import Idx
from neuronxcc.nki._trace.view import Axis, View

__all__ = ["TSplit", "all_reduce_programs", "wrap_grid"]


class TSplit:
    """A cut of the kernel body between grid loops; ``body`` runs once, between them."""
    kind = "split"

    def __init__(self, loc):
        self.loc = loc
        self.body = []


def _pids(grid):
    return tuple(Idx(_pel.var("pid%d" % k)) for k in range(len(grid)))


def _slot(hbm, idx):
    return hbm[tuple(idx)]


def all_reduce_programs(x, alu, axes, dtype, loc):
    """X reduced with ALU over the programs along AXES of the current grid (see module doc)."""
    from neuronxcc.nki._trace.movement import load, store
    ctx = current()
    grid = ctx.grid
    if len(ctx._stack) != 1 or getattr(ctx, "cond_guards", None) or getattr(ctx, "guards", None):
        raise E.err_invalid_argument(
            "nl.all_reduce over several programs is supported at the top level of the kernel body (outside "
            "loops and ifs): every program must reach it once")
    shape = tuple(x.shape)
    slots = ops.new_tile(grid + shape, x.dtype, "HBM", "all_reduce_in", kind="shared")
    store(_slot(slots, _pids(grid)), x)
    cut = TSplit(loc)
    ctx.emit(cut)
    red = ops.new_tile(grid + shape, dtype, "HBM", "all_reduce_out", kind="shared")
    ints = np.dtype(dtype).kind in "iub" and x.dtype.kind in "iub"
    acc_dt = np.dtype(dtype) if ints else np.dtype(np.float32)      # ALU math in fp32, cast on write
    ctx._stack.append(cut.body)
    try:
        keep = [range(g) if k not in axes else [None] for k, g in enumerate(grid)]
        for group in itertools.product(*keep):
            members = list(itertools.product(*[range(grid[k]) if k in axes else [group[k]]
                                               for k in range(len(grid))]))
            acc = ops.new_tile(shape, acc_dt, "SBUF", "all_reduce_acc")
            ops.emit("tensor_copy", "DVE", [acc], [load(_slot(slots, members[0]))], {}, None)
            for m in members[1:]:
                ops.emit("tensor_tensor", "DVE", [acc], [acc, load(_slot(slots, m))], {"op": alu}, None)
            res = acc
            if np.dtype(dtype) != acc_dt:
                res = ops.new_tile(shape, dtype, "SBUF", "all_reduce_res")
                ops.emit("tensor_copy", "DVE", [res], [acc], {}, None)
            for m in members:
                store(_slot(red, m), res)
    finally:
        ctx._stack.pop()
    return load(_slot(red, _pids(grid)), dtype=dtype)


def _bufs(nodes, written_only):
    out = set()
    for n in nodes:
        if n.kind == "loop" or n.kind == "split":
            out |= _bufs(n.body, written_only)
            continue
        for v in (n.dsts if written_only else n.operands):
            b = getattr(v, "buf", None)
            if b is not None and b.onchip:
                out.add(b)
    return out


def wrap_grid(ctx, grid, loc):
    """CTX.body wrapped in the grid's loops, cut at every top-level TSplit (see module doc)."""
    segs, cuts, cur = [], [], []
    for n in ctx.body:
        if n.kind == "split":
            segs.append(cur)
            cuts.append(n)
            cur = []
        else:
            cur.append(n)
    segs.append(cur)
    for k, cut in enumerate(cuts):
        before = [n for s in segs[:k + 1] for n in s]
        after = [n for s in segs[k + 1:] for n in s]
        live = sorted(_bufs(before, True) & _bufs(after, False), key=lambda b: b.name)
        for b in live:
            if b.memory == "PSUM":
                raise E.err_invalid_argument(
                    "PSUM tensor '%s' holds a value across nl.all_reduce over several programs; copy it to SBUF "
                    "first" % b.name, location=cut.loc)
            save, restore = _save_restore(ctx, grid, b)
            save.loc = restore.loc = cut.loc or save.loc
            segs[k].append(save)
            segs[k + 1].insert(0, restore)
    body = []
    for k, seg in enumerate(segs):
        if seg or k == 0:
            body.extend(_grid_loops(grid, seg, loc))
        if k < len(cuts):
            body.extend(cuts[k].body)
    ctx.body = body


def _grid_loops(grid, seg, loc):
    body = seg
    for k in range(len(grid) - 1, -1, -1):
        lp = TLoop("pid%d" % k, 0, grid[k], 1, "spmd", loc)
        lp.body = body
        body = [lp]
    return body


def _save_restore(ctx, grid, b):
    """(dma saving on-chip buffer B to this program's HBM slot, dma restoring it), as TInsts."""
    flat = View(b, b.dtype, 0, _pel.const(0), [Axis(b.partitions, 1, 0), Axis(b.free_elems, 0, 1)])
    tmp = []
    with ctx:
        ctx._stack.append(tmp)
        try:
            slots = ops.new_tile(grid + (b.partitions, b.free_elems), b.dtype, "HBM", "spmd_save_" + b.name,
                                 kind="shared")
            slot = _slot(slots, _pids(grid))
            ops.dma(slot, flat)
            ops.dma(flat, slot)
        finally:
            ctx._stack.pop()
    return tmp[0], tmp[1]
