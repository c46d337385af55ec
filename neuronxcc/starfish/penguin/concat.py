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
  * the pieces share one TileEval per row tile (x1 and x2 are read once), and a narrow float
    leaf read as fp32 is used as loaded: the engines compute in fp32, so the exact widening needs
    no copy;
  * the staging tile [rows, H * D] is stored as whole rows, triggered by the engine that filled
    it last, so SP runs ahead with the next tiles' loads;
  * a loop step takes two row tiles with their own buffers, so one tile's loads and store run
    under the other's compute (rotary q 0.51 -> 0.26 ms).

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
PAIR = 2                         # row tiles per loop step
NARROW_FLOATS = ("bfloat16", "float16")


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

    def load(t0, pn):
        loaded = {}
        for key, (base, dt, s0, lo, width) in blocks.items():
            buf = em.sbuf("cat_src", pn, width, dt)
            em.dma(em.chip(buf, dt, pn, [[1, width]]), em.hbm(base, P.const(lo) + t0 * s0, [[s0, pn], [1, width]]))
            loaded[key] = buf
        return loaded

    def compute(t0, pn, loaded):
        stage = em.sbuf("cat_out", pn, H * D, odt)
        # one TileEval for all pieces: what they share (x1, x2 as fp32) is computed once
        te = TileEval(cg, Space(0, 2, [t0, P.const(0), P.const(0)], [pn, 1, H * D // len(args)]))
        col, eng = 0, "ACT"
        for x in args:
            # all H heads of this piece at once: its leaves are [rows, H, n] patterns over the loaded
            # blocks (head stride, then n contiguous columns), its tiles [rows, H * n]
            n = x.shape[2]
            te.s = Space(0, 2, [t0, P.const(0), P.const(0)], [pn, 1, H * n])
            for v in leaves(x):
                key = where[id(v)]
                base, dt, s0, lo, width = blocks[key]
                te.memo[id(v)] = TV("tile", dt, ap=em.chip(loaded[key], dt, pn, [[key[2], H], [1, n]],
                                                           offset=v.offset - lo))
            for c in _widening_converts(x):
                # a narrow float read as fp32: the engines read the narrow tile and compute in fp32,
                # so the exact widening needs no copy of its own
                te.memo[id(c)] = TV("tile", onchip_dtype(c.dtype), ap=te.memo[id(c.args[0])].ap)
            tv = te.materialise(te.value(x), out.dtype)
            if tv.dtype != odt:
                tv = te.cast(tv, odt)
            dst = em.chip(stage, odt, pn, [[D, H], [1, n]], offset=col)
            load = em.engine_load
            eng = "ACT" if load["ACT"] <= load["DVE"] * em.ghz("DVE") / em.ghz("ACT") else "DVE"
            if eng == "ACT":
                em.inst("activation", "ACT", [dst], [tv.ap], func="identity")
            else:
                em.inst("tensor_copy", "DVE", [dst], [tv.ap])
            col += n
        return stage, eng

    def store(t0, pn, stage, eng):
        # triggered by the engine that made the last piece: on SP it would hold back the next row
        # tiles' loads behind this tile's compute
        em.dma(em.hbm(out.base, offs(out, [t0, P.const(0), P.const(0)]), [[out.strides[0], pn], [1, H * D]]),
               em.chip(stage, odt, pn, [[1, H * D]]), engine=eng)

    def body(starts, sizes):
        # two row tiles per step, each with its own buffers: the second's loads run under the
        # first's compute and the first's store under the second's
        t0, pn = starts[0], sizes[0]
        tiles = [(t0 + a, min(PMAX, pn - a)) for a in range(0, pn, PMAX)]
        srcs = [load(t, n) for t, n in tiles]
        outs = [compute(t, n, src) for (t, n), src in zip(tiles, srcs)]
        for (t, n), (stage, eng) in zip(tiles, outs):
            store(t, n, stage, eng)

    em.nest([Axis(T, PAIR * PMAX, "t")], body)
    return True


def _widening_converts(x):
    """The converts in x of a leaf view of a narrow float to fp32."""
    out, seen, todo = [], set(), [x]
    while todo:
        y = todo.pop()
        if id(y) in seen or not isinstance(y, Node):
            continue
        seen.add(id(y))
        if (y.op == "convert" and y.dtype == "float32" and len(y.args) == 1 and isinstance(y.args[0], View)
                and y.args[0].dtype in NARROW_FLOATS):
            out.append(y)
        todo.extend(y.args)
    return out
