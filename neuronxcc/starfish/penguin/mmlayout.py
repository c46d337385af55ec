"""A row-tile matmul (penguin/mmfuse.py) stored in the layout its consuming matmuls read.

A dot ``O[M, N] = L[M, K] @ R[K, N]`` that mmfuse materialises at once (its L a layernorm computed
on the row tiles, its result read by several kernels) is stored row-major. When its columns are
split (jax's ``split`` of a fused QKV projection) and a part only flows, through reshapes and
transposes, into another matmul that contracts over those columns (the scores ``Q @ K^T``), that
matmul wants the part with the contracted dim on the partitions and its free dim contiguous in
HBM: row-major, its loads put one row per partition and the PE transposes every tile
(penguin/kernels.py ``_lhsT``, penguin/resident.py), fp32 transposes at a quarter of the PE rate.

Here each part of the split gets an HBM tensor of its own in the layout its consumer reads:
  * a part whose consumer's free dim is its row axis M is stored transposed, ``T[n, M]``: computed
    transposed on the PE, R's columns stationary and the row tiles' L^T moving (the L^T chunks the
    row-form matmul needs anyway, so no extra PE work), all of M in one PSUM bank per 128 columns,
    stored as contiguous rows of M;
  * any other part is stored row-major, computed row tile by row tile as mmfuse does.
L (the layernorm and its PE transposes) is computed once per row tile for all the parts.

Only for M <= one PSUM bank of fp32 (512 rows) in at most ``mmfuse.UNROLL_TILES`` row tiles (the
tiles are emitted one by one, so every L^T chunk is live until the transposed parts are done);
otherwise mmfuse's row-major path runs unchanged. This module decides (``plan``); mmfuse emits
(``mmfuse.materialise_parts``).

The parts also stay in SBUF (``OnChip``): a consumer that reads them with constant offsets (the
fused attention over a few unrolled heads, penguin/attention.py) takes them from there
(``Handoff``), and when no instruction reads a part's HBM copy after all, its store and tensor are
dropped (``drop_dead``): the projection's result never goes through HBM. The fused attention's
own result is handed on to the row-tile matmul that reads it the same way. ``consumer_layout`` is the same idea
for the attention's own result (stored in the layout of the transposes/reshapes that read it).
"""
from neuronxcc.starfish.penguin import ir
from neuronxcc.starfish.penguin.tiles import onchip_dtype
from neuronxcc.starfish.penguin.views import View, row_major_strides

PMAX = 128
MAX_CHAIN = 6               # reshapes / transposes followed from a part to its consuming matmul


def _consumer(cg, name):
    """(dot op, operand index, view ops on the way) when value NAME flows only through reshapes and
    transposes into one operand of one dot; else None."""
    outs = set(cg.g.outputs)
    chain, cur = [], name
    while True:
        us = ir.distinct_ops(cg.users.get(cur, []))
        if cur in outs or len(us) != 1:
            return None
        u = us[0]
        if u.kind == "dot":
            idx = [i for i, x in enumerate(u.inputs) if x == cur]
            return (u, idx[0], chain) if len(idx) == 1 else None
        if u.kind not in ("reshape", "transpose") or len(chain) >= MAX_CHAIN:
            return None
        chain.append(u)
        cur = u.outputs[0]


def _free_stride(cg, dot, idx, chain, probe):
    """The stride, in PROBE's layout, of the consumer operand's one free dim (not batch, not
    contracted, longer than 1); None when there is not exactly one or a view cannot be replayed."""
    v = probe
    for op in chain:
        if op.kind == "transpose":
            v = v.transpose(op.attrs["permutation"])
        else:
            v = v.reshape(cg.g.values[op.outputs[0]].shape)
        if v is None:
            return None
    side = "lhs" if idx == 0 else "rhs"
    a = dot.attrs
    used = set(a[side + "_batch_dims"] or ()) | set(a[side + "_contracting_dims"] or ())
    free = [d for d in range(len(v.shape)) if d not in used and v.shape[d] > 1]
    return v.strides[free[0]] if len(free) == 1 else None


def wants_transposed(cg, name, M, n):
    """True when value NAME ([M, n]) is read by one matmul whose free dim is contiguous only if
    NAME is stored transposed (column-major)."""
    c = _consumer(cg, name)
    if c is None:
        return False
    dot, idx, chain = c
    row = _free_stride(cg, dot, idx, chain, View("__probe__", "float32", (M, n), (n, 1), 0))
    col = _free_stride(cg, dot, idx, chain, View("__probe__", "float32", (M, n), (1, M), 0))
    return row is not None and row != 1 and col == 1


def plan(kern, op, M, N, dtype, max_tiles):
    """[(slice op, column start, column end, transposed)] when dot OP's [M, N] result is only read
    through slices of its columns and some slice wants the transposed layout; else None."""
    cg = kern.cg
    o = op.outputs[0]
    if not getattr(cg, "mm_layout", True):
        return None
    if tuple(cg.g.values[o].shape) != (M, N) or o in cg.out_tensor or o in set(cg.g.outputs):
        return None
    if dtype not in ("float32", "bfloat16", "float16") or onchip_dtype(dtype) != dtype:
        return None
    if M * 4 > kern.em.tm.psum_bank_bytes or -(-M // PMAX) > max_tiles:
        return None
    users = ir.distinct_ops(cg.users.get(o, []))
    parts, cols = [], set()
    for u in users:
        if u.kind != "slice" or len(u.outputs) != 1:
            return None
        s, lim, st = list(u.attrs["starts"]), list(u.attrs["limits"]), list(u.attrs["strides"])
        if s[0] != 0 or lim[0] != M or st != [1, 1] or u.outputs[0] in cg.out_tensor:
            return None
        span = set(range(s[1], lim[1]))
        if span & cols:
            return None                     # overlapping slices: a column would be stored twice
        cols |= span
        parts.append((u, s[1], lim[1], wants_transposed(cg, u.outputs[0], M, lim[1] - s[1])))
    if not parts or not any(p[3] for p in parts):
        return None
    return parts


# -- on-chip hand-off ------------------------------------------------------------------------
class OnChip:
    """A 2-D scratch tensor [rows, row] whose value the kernel that computed it also leaves in SBUF:
    pieces (first row, rows, first column, columns, memloc), each holding that block with a row per
    partition, its first column at free offset 0. ``stores`` are the DMAs that write the HBM copy;
    ``drop_dead`` removes them (and the tensor) when no instruction reads the tensor."""

    def __init__(self, tensor, dtype, row):
        self.tensor, self.dtype, self.row = tensor, dtype, row
        self.pieces = []
        self.tpieces = []       # (first row, rows, first column, columns, memloc): the block transposed,
        self.stores = []        # a column per partition from partition 0, its first row at free offset 0

    def add(self, first, rows, memloc, store, body, col=0, cols=None):
        self.pieces.append((first, rows, col, self.row - col if cols is None else cols, memloc))
        self.stores.append((body, store))


def shareable(cg):
    """SBUF values may be handed from one kernel to a later one: the top-level graph (not a while
    body or a branch, whose kernels may not run) of a program on one core (with LNC=2 the kernels
    are split over two cores, each with its own SBUF)."""
    return cg.g is getattr(cg, "top", cg.g) and getattr(cg, "lnc", None) is None


def register(cg, oc):
    if not shareable(cg):
        return
    if not hasattr(cg, "onchip"):
        cg.onchip = {}
    cg.onchip[oc.tensor] = oc


def drop_dead(cg):
    """After codegen: the HBM copy of an ``OnChip`` tensor that no instruction reads (every reader
    took the SBUF pieces) is not stored, and the tensor goes."""
    ocs = getattr(cg, "onchip", {})
    if not ocs:
        return
    instrs = cg.m.instructions()
    read = {a.target for i in instrs for a in i.srcs}
    writes = {}
    for i in instrs:
        for a in i.dsts:
            writes[a.target] = writes.get(a.target, 0) + 1
    for base, oc in list(ocs.items()):
        if base not in read:
            gone = 0
            for body, ins in oc.stores:
                at = next((k for k, x in enumerate(body) if x is ins), None)
                if at is not None:
                    del body[at]
                    gone += 1
            if gone == len(oc.stores) and writes.get(base, 0) == gone:
                cg.m.tensors.pop(base, None)
    ocs.clear()


def keep(cg, tensor, dtype, off, row, fstride, rows, cols, memloc, store):
    """Record that MEMLOC holds rows x cols of 2-D scratch TENSOR [*, row] from element offset OFF
    (a constant; a row per partition), written to HBM by the DMA STORE just emitted."""
    got = _record_for(cg, tensor, dtype, off, row, cols) if fstride == 1 else None
    if got is not None:
        oc, r0, c0 = got
        oc.add(r0, rows, memloc, store, cg.em.b.body, col=c0, cols=cols)


def _record_for(cg, tensor, dtype, off, row, cols):
    """(the OnChip record of 2-D scratch TENSOR [*, row], first row, first column) for a block of
    COLS columns from constant element offset OFF, or None when the block cannot be shared."""
    t = cg.m.tensors.get(tensor)
    if t is None or t.kind != "scratch" or len(t.shape) != 2 or t.shape[1] != row or not shareable(cg):
        return None
    try:
        r0, c0 = divmod(int(off), row)
    except (TypeError, ValueError):
        return None
    if c0 + cols > row:
        return None
    oc = getattr(cg, "onchip", {}).get(tensor)
    if oc is None:
        oc = OnChip(tensor, dtype, row)
        register(cg, oc)
    return oc, r0, c0


def keep_transposed(cg, tensor, dtype, off, row, rows, cols, memloc, store):
    """Record that MEMLOC holds the TRANSPOSE of rows x cols of 2-D scratch TENSOR [*, row] from
    element offset OFF (a column per partition: the fused attention's O^T, penguin/attention.py),
    written to HBM by the DMA STORE just emitted."""
    got = _record_for(cg, tensor, dtype, off, row, cols)
    if got is None:
        return
    oc, r0, c0 = got
    oc.tpieces.append((r0, rows, c0, cols, memloc))
    oc.stores.append((cg.em.b.body, store))


class Handoff:
    """A consuming kernel's reads of tensors that are still in SBUF (``OnChip``): ``get`` gives
    (memloc, free offset) of the piece holding a [pn partitions (rows), fn contiguous columns]
    block at element offset OFF (a constant), or None (the caller reads HBM)."""

    def __init__(self, cg):
        self.cg = cg

    def get(self, base, dtype, off, pstride, pn, fstride, fn):
        oc = getattr(self.cg, "onchip", {}).get(base) if shareable(self.cg) else None
        if oc is None or dtype != oc.dtype or pstride != oc.row or not (fstride == 1 or fn == 1):
            return None
        try:
            r0, c0 = divmod(int(off), oc.row)
        except (TypeError, ValueError):
            return None                     # a loop variable: which piece is not known statically
        return next(((ml, c0 - pc) for a, rows, pc, cols, ml in oc.pieces
                     if a == r0 and pn <= rows and pc <= c0 and c0 + fn <= pc + cols), None)

    def get_transposed(self, base, dtype, off, pstride, rows, cols):
        """(memloc, free offset) of a transposed piece (``keep_transposed``) holding the block of
        ROWS x COLS at element offset OFF with its first column on partition 0, or None."""
        oc = getattr(self.cg, "onchip", {}).get(base) if shareable(self.cg) else None
        if oc is None or dtype != oc.dtype or pstride != oc.row:
            return None
        try:
            r0, c0 = divmod(int(off), oc.row)
        except (TypeError, ValueError):
            return None
        return next(((ml, r0 - a) for a, n, pc, w, ml in oc.tpieces
                     if pc == c0 and cols <= w and a <= r0 and r0 + rows <= a + n), None)


def rows_on_chip(kern, info, row0, pn, TK, nk):
    """The K chunks [pn, kn] of L's row tile as APs of the SBUF tiles an earlier kernel left them in
    (the fused attention's result), when L is a plain view of such a tensor
    and the tile's rows are a constant; else None (L is loaded)."""
    L, cg = info.L, kern.cg
    if not (isinstance(L, View) and getattr(cg, "onchip", None) and L.base in cg.onchip and L.strides[1] == 1):
        return None
    try:
        off = int(L.offset + row0 * L.strides[0])
    except (TypeError, ValueError):
        return None
    hand = Handoff(cg)
    out = []
    for t in range(nk):
        kn = min(TK, info.K - t * TK)
        hit = hand.get(L.base, info.cdt, off + t * TK, L.strides[0], pn, 1, kn)
        if hit is None:
            return None
        out.append(kern.em.chip(hit[0], info.cdt, pn, [[1, kn]], offset=hit[1]))
    return out


def cols_on_chip(kern, info, row0, pn):
    """L^T's K chunks [kn, pn] as APs of SBUF tiles an earlier kernel left transposed
    (``keep_transposed``: the fused attention's O^T), when L is a plain view of such a
    tensor and the tile's rows are a constant; else None."""
    L, cg = info.L, kern.cg
    if not (isinstance(L, View) and getattr(cg, "onchip", None) and L.base in cg.onchip and L.strides[1] == 1):
        return None
    try:
        off = int(L.offset + row0 * L.strides[0])
    except (TypeError, ValueError):
        return None
    hand = Handoff(cg)
    TK = kern.k_tile(info.K)
    out = []
    for t in range(-(-info.K // TK)):
        kn = min(TK, info.K - t * TK)
        hit = hand.get_transposed(L.base, info.cdt, off + t * TK, L.strides[0], pn, kn)
        if hit is None:
            return None
        out.append(kern.em.chip(hit[0], info.cdt, kn, [[1, pn]], offset=hit[1]))
    return out


def resident_kv(hand, offs, P, KX, VX, nb, bs, dims, one_block, kdt, vdt):
    """Fused attention's (penguin/attention.py) resident operands of batch element BS still in SBUF:
    (K^T memloc or None, [(memloc, column)] per 128-key tile of V or None). dims = (K, N, Dv)."""
    K, N, Dv = dims
    z = P.const(0)
    kr = hand.get(KX.base, kdt, offs(KX, bs + [z, z]), KX.strides[nb], K, KX.strides[nb + 1], N) if K <= PMAX else None
    if kr is not None and kr[1] != 0:
        kr = None                           # in SBUF but not from column 0: loaded
    vr = [hand.get(VX.base, vdt, offs(VX, bs + [P.const(j), z]), VX.strides[nb], min(PMAX, N - j),
                   VX.strides[nb + 1], Dv) for j in range(0, N, PMAX)] if one_block else [None]
    return (kr[0] if kr else None), (vr if all(v is not None for v in vr) else None)


def transposed_consumer(cg, o):
    """The dot op when fused attention result O flows (through transposes/reshapes) into one dot
    only, as its L contracting the last axis (the attention's output projection, a matmul that wants
    O^T chunks), else None."""
    g = cg.g
    cur = o
    while True:
        us = ir.distinct_ops(cg.users.get(cur, []))
        if len(us) != 1:
            return None
        u = us[0]
        if u.kind in ("transpose", "reshape"):
            cur = u.outputs[0]
            continue
        break
    if cur in set(g.outputs) or u.kind != "dot" or u.inputs[0] != cur or u.inputs[1] == cur:
        return None
    a = u.attrs
    if list(a.get("lhs_batch_dims") or ()) or list(a["lhs_contracting_dims"]) != [len(g.values[cur].shape) - 1]:
        return None
    return u


def consumer_layout(cg, o):
    """When value O (a fused attention's result, penguin/attention.py) only flows through a chain of
    transposes/reshapes (jax's einsum puts the heads back in place: [k, d, g, t] -> [t, k, g, d] ->
    [t, H]), a View in o's shape over the target of the chain's end, so the kernel stores straight
    into the layout the consumer reads (otherwise the chain would be an element-strided copy).
    None when there is no such chain."""
    g = cg.g
    outs = set(g.outputs)
    chain, cur = [], o
    while cur not in outs:
        us = ir.distinct_ops(cg.users.get(cur, []))
        if len(us) != 1 or us[0].kind not in ("transpose", "reshape") or len(chain) >= 6:
            break
        chain.append(us[0])
        cur = us[0].outputs[0]
    if not chain:
        return None
    end = g.values[cur]
    # the inverse of the chain applied to a contiguous View of the end's shape
    v = View("__probe__", end.dtype, end.shape, row_major_strides(end.shape), 0)
    for op in reversed(chain):
        src = g.values[op.inputs[0]]
        if op.kind == "transpose":
            perm = list(op.attrs["permutation"])
            inv = [perm.index(i) for i in range(len(perm))]
            v = v.transpose(inv)
        else:
            v = v.reshape(src.shape)
        if v is None:
            return None
    t = cg.target_for(cur)
    return View(t.base, g.values[o].dtype, v.shape, v.strides, 0)
