"""A concatenation along the last axis of elementwise pieces, built on chip (the rotary embedding).

``op_concatenate`` (penguin/kernels.py) writes each piece into its slice of the result as its
own elementwise kernel. Along a short last axis that kernel's tiles are [128 rows, the piece's
width], one per index of the middle axis, and each of its loads and stores moves runs of that
width: the Llama-3 rotary embedding (concatenate([x1 cos - x2 sin, x2 cos + x1 sin]) over 64 of
each head's 128 elements) took 3.2 ms for q in the prefill layer, bound by 128-256 byte
descriptors and a DMA per head and piece. Here, when the result is (T, H, D) with the
concatenated axis last and every piece is an elementwise expression of plain views that are
contiguous along it, one kernel runs per 128 rows of T:

  * each distinct source a piece reads (the projection's rows, the cos / sin table's rows) is
    loaded once per row tile, [rows, the columns its views span] as it lies (long runs);
  * each piece is evaluated once for all H heads by TileEval on [rows, H * width] tiles whose
    leaves are [rows, H, width] patterns over those loaded blocks (the head stride, 0 for a table
    broadcast over heads, then the piece's contiguous columns), and copied into its columns of one
    staging tile (an instruction per head at 64 columns was bound by the fixed instruction cost:
    rotary q took 1.1 ms of the prefill layer, now 0.5);
  * the staging tile [rows, H * D] is stored as whole rows.

The instruction count depends on the pieces, not on T or H.
"""
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.penguin.emit import Axis, pel
from neuronxcc.starfish.penguin.expr import Node, leaves
from neuronxcc.starfish.penguin.tiles import IOTA_BASE, TV, Space, TileEval, onchip_dtype
from neuronxcc.starfish.penguin.views import View

PMAX = 128
MAX_BLOCK_BYTES = 16 * 1024      # bytes per partition of one source block (SBUF, double-buffered)
MAX_STAGE_BYTES = 32 * 1024      # bytes per partition of the staging tile


def _row_major(view):
    return (isinstance(view, View) and isinstance(view.offset, int) and len(view.shape) == 3 and
            list(view.strides) == [view.shape[1] * view.shape[2], view.shape[2], 1])


def plan(kern, d, pieces, out):
    """{source key: (base, dtype, row stride, first column, width)} and each leaf's key, or None."""
    if not _row_major(out) or d != 2 or len(pieces) < 2:
        return None
    T, H, D = out.shape
    if H < 2 or T < 2 or H * D * bdt.itemsize(onchip_dtype(out.dtype)) > MAX_STAGE_BYTES:
        return None
    tensors = kern.em.m.tensors
    blocks, where = {}, {}
    for x in pieces:
        if not isinstance(x, (Node, View)) or tuple(x.shape[:2]) != (T, H):
            return None
        for v in leaves(x):
            t = tensors.get(v.base)
            if (t is None or v.base == IOTA_BASE or v.base.startswith("__") or not isinstance(v.offset, int)
                    or v.dtype != t.dtype or len(v.strides) != 3 or v.strides[2] != 1 or v.strides[1] < 0
                    or v.strides[0] <= 0):
                return None
            key = (v.base, v.strides[0], v.strides[1])
            lo = v.offset
            hi = v.offset + (H - 1) * v.strides[1] + v.shape[2]
            b = blocks.get(key)
            blocks[key] = (min(lo, b[0]), max(hi, b[1])) if b else (lo, hi)
            where[id(v)] = key
    out_blocks = {}
    for key, (lo, hi) in blocks.items():
        base, s0, _ = key
        dt = tensors[base].dtype
        if (hi - lo) * bdt.itemsize(dt) > MAX_BLOCK_BYTES or lo + (T - 1) * s0 < 0:
            return None
        out_blocks[key] = (base, dt, s0, lo, hi - lo)
    return out_blocks, where


def lower(kern, op, args, out):
    """Emit the concatenation of ARGS along the last axis into OUT; False when it does not apply."""
    d = op.attrs["dimension"]
    got = plan(kern, d, list(args), out)
    if got is None:
        return False
    blocks, where = got
    em, cg = kern.em, kern.cg
    P = pel()
    T, H, D = out.shape
    odt = onchip_dtype(out.dtype)
    offs = kern.offsets()

    def body(starts, sizes):
        t0, pn = starts[0], sizes[0]
        loaded = {}
        for key, (base, dt, s0, lo, width) in blocks.items():
            buf = em.sbuf("cat_src", pn, width, dt)
            em.dma(em.chip(buf, dt, pn, [[1, width]]), em.hbm(base, P.const(lo) + t0 * s0, [[s0, pn], [1, width]]))
            loaded[key] = buf
        stage = em.sbuf("cat_out", pn, H * D, odt)
        col = 0
        for x in args:
            # all H heads of this piece at once: its leaves are [rows, H, n] patterns over the loaded
            # blocks (head stride, then n contiguous columns), its tiles [rows, H * n]
            n = x.shape[2]
            te = TileEval(cg, Space(0, 2, [t0, P.const(0), P.const(0)], [pn, 1, H * n]))
            for v in leaves(x):
                key = where[id(v)]
                base, dt, s0, lo, width = blocks[key]
                te.memo[id(v)] = TV("tile", dt, ap=em.chip(loaded[key], dt, pn, [[key[2], H], [1, n]],
                                                           offset=v.offset - lo))
            tv = te.materialise(te.value(x), out.dtype)
            if tv.dtype != odt:
                tv = te.cast(tv, odt)
            kern._evict_copy(em.chip(stage, odt, pn, [[D, H], [1, n]], offset=col), tv.ap)
            col += n
        em.dma(em.hbm(out.base, offs(out, [t0, P.const(0), P.const(0)]), [[out.strides[0], pn], [1, H * D]]),
               em.chip(stage, odt, pn, [[1, H * D]]))

    em.nest([Axis(T, PMAX, "t")], body)
    return True
