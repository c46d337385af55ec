"""Row fusion: reductions along the last axis evaluated inside their consumer's tile.

Softmax, layernorm and rmsnorm reduce each row and broadcast the result back
over the same row. A ``reduce`` over the last axis (length N <= ROW_MAX) is
therefore kept lazy: its value is a leaf ``View`` over a virtual contiguous
tensor ``__row__<k>`` of the result's shape. A consumer kernel whose tiles
span whole rows (free axis = the reduced axis, stride 0 for the leaf) computes
the reduction inline: it re-indexes the reduce's input expression onto its
own tile (an affine map of the row index), reduces the [P, N] tile to a
[P, 1] column and uses it as the per-partition operand of ``tensor_scalar``.
Nested reductions (the sum of exp(x - max)) nest the same way, so a whole
softmax is one loop over row tiles. Every other use materialises the reduce
with the ordinary reduce kernel into a scratch tensor and renames the leaf's
base to it (the leaf's strides already address a contiguous tensor).
"""
from neuronxcc.starfish.penguin import mmleaf
from neuronxcc.starfish.penguin.expr import Node, apply_view, leaves
from neuronxcc.starfish.penguin.views import Splat, View, row_major_strides

ROW_MAX = 2048
ROW_SBUF_BUDGET = 96 * 1024         # bytes per partition the tiles of one row-fused kernel may take
ROW_WIDE_MAX = 8192                 # longer rows stay lazy when they fill the partitions (see lazy_width_ok)
ROW_PREFIX = "__row__"
ROW_REDUCERS = ("add", "max", "min")
PMAX = 128


class RowReduce:
    """What a lazy row reduction needs: its input expression, reducer, init, result dtype/shape."""

    def __init__(self, x, red, init, dtype, shape):
        self.x = x
        self.red = red
        self.init = init
        self.dtype = dtype
        self.shape = tuple(shape)
        self.n = x.shape[-1]
        self.tensor = None                  # set once materialised
        self._x2 = None

    def x2d(self):
        """The input as (rows, N) (rows = product of the result's dims)."""
        if self._x2 is None:
            rows = 1
            for d in self.shape:
                rows *= d
            self._x2 = apply_view(self.x, lambda v: v.reshape((rows, self.n)))
        return self._x2


def lazy_width_ok(n, rows):
    """Is a last-axis reduction of ROWS rows of N elements kept lazy? Up to ROW_MAX always; up to
    ROW_WIDE_MAX when there are rows for every partition (an RMSNorm over a 4096-wide hidden state
    of 2048 tokens: one kernel reads each row once), and then only in a consumer whose tiles fit
    (``wide_rows_fit``). One row of 4096 (a decode step) is left to the two-stage reduce, which
    spreads it over the partitions."""
    return 2 <= n <= ROW_MAX or (n <= ROW_WIDE_MAX and rows >= PMAX)


def wide_rows_fit(cg, x):
    """Do the tiles of a whole-row kernel evaluating x (rows longer than ROW_MAX) fit its budget?"""
    return peak_row_bytes(cg, x) <= ROW_SBUF_BUDGET


def is_row_leaf(v):
    return isinstance(v, View) and v.base.startswith(ROW_PREFIX)


def row_leaves(x):
    return [v for v in leaves(x) if is_row_leaf(v)]


def make_row_reduce(cg, op, args, outs):
    """The lazy leaf for an eligible reduce op, or None."""
    if not getattr(cg, "row_fusion", True) or len(outs) != 1:
        return None
    red = op.attrs.get("reducer")
    x, init = args
    dims = list(op.attrs["dimensions"])
    r = len(x.shape)
    o = outs[0]
    if red not in ROW_REDUCERS or not isinstance(init, Splat) or r < 2 or dims != [r - 1]:
        return None
    n = x.shape[-1]
    rows = 1
    for d in o.shape:
        rows *= d
    if not lazy_width_ok(n, rows) or not o.dtype.startswith("float") and o.dtype != "bfloat16":
        return None
    if any(d == 0 for d in x.shape):
        return None
    info = RowReduce(x, red, init.value, o.dtype, o.shape)
    if info.x2d() is None:
        return None
    base = "%s%d" % (ROW_PREFIX, len(cg.rowred))
    cg.rowred[base] = info
    return View(base, o.dtype, o.shape, row_major_strides(o.shape), 0)


def resolve(cg, x, keep=None, mm=True):
    """x with every row leaf not in KEEP (a set of bases) materialised and renamed to its tensor;
    with MM also every lazy matmul leaf (penguin/mmleaf.py), for kernels that do not evaluate
    matmuls inside their tiles."""
    if mm:
        x = mmleaf.resolve(cg, x)
    todo = {}
    for v in row_leaves(x):
        if keep is not None and v.base in keep:
            continue
        todo[v.base] = materialise_row(cg, v.base)
    if not todo:
        return x
    return apply_view(x, lambda v: View(todo[v.base], v.dtype, v.shape, v.strides, v.offset)
                      if v.base in todo else v)


def materialise_row(cg, base):
    info = cg.rowred[base]
    if info.tensor is None:
        acc_shape = info.shape
        t = cg.em.tensor("rowred", "scratch", info.dtype, acc_shape)
        target = View.contiguous(t, info.dtype, acc_shape)
        x = resolve(cg, info.x)
        cg.k.reduce_into([x], [Splat(info.init, info.x.dtype, ())], [len(info.x.shape) - 1], info.red,
                         [target], None)
        info.tensor = t
    return info.tensor


def inline_tiles(cg, x, seen=None):
    """Rough count of [P, N] tiles a kernel evaluating x with its row reductions inline allocates."""
    from neuronxcc.starfish.penguin.expr import count_ops
    seen = set() if seen is None else seen
    n = count_ops(x) + len(leaves(x))
    for v in row_leaves(x):
        if v.base not in seen:
            seen.add(v.base)
            n += 2 + inline_tiles(cg, cg.rowred[v.base].x, seen)
    return n


def inline_ok(cg, v, f_axis, shape):
    """Can row leaf v be computed inside a tile whose free axis f spans the whole extent?"""
    info = cg.rowred[v.base]
    return (f_axis is not None and shape[f_axis] == info.n and v.strides[f_axis] == 0
            and isinstance(v.offset, int))


def reindexed_input(cg, v, f_axis):
    """The reduce's input expression re-indexed onto the consumer's index space of leaf v."""
    info = cg.rowred[v.base]
    x2 = info.x2d()
    shape = v.shape

    def fn(w):
        a, b = w.strides
        strides = [s * a for s in v.strides]
        strides[f_axis] = b
        off = w.offset + v.offset * a
        return View(w.base, w.dtype, shape, strides, off)
    return apply_view(x2, fn)


def _wide(x, memo):
    """Does x vary along the last axis (a [P, N] tile in a whole-row kernel, not a [P, 1] column)?"""
    k = id(x)
    if k not in memo:
        if isinstance(x, Node):
            memo[k] = any(_wide(a, memo) for a in x.args)
        else:
            memo[k] = isinstance(x, View) and not is_row_leaf(x) and bool(x.shape) and x.strides[-1] != 0
    return memo[k]


def peak_row_bytes(cg, x):
    """Bytes per partition live at once while a kernel evaluates x over whole rows (x's last axis,
    N long) with its row reductions inline, in TileEval's order (arguments first, left to right):
    each value lives from when it is made to its last use; one that varies along the row takes N
    elements of its on-chip dtype (at least 4 bytes each: arithmetic is fp32), a [P, 1] column
    (a row reduction, a broadcast along the row, a scalar, anything made only of those) 4 bytes."""
    n = x.shape[-1] if x.shape else 1
    memo, made, last, size = {}, {}, {}, {}
    step = [0]

    def visit(y):
        k = id(y)
        if k in made:
            return k
        if isinstance(y, Node):
            ks = [visit(a) for a in y.args]
        elif is_row_leaf(y):
            k = y.base
            if k in made:
                return k
            ks = [visit(cg.rowred[y.base].x)]
        else:
            ks = []
        step[0] += 1
        for a in ks:
            last[a] = step[0]
        made[k] = last[k] = step[0]
        wide = isinstance(y, (Node, View)) and not is_row_leaf(y) and _wide(y, memo)
        size[k] = n * max(4, _itemsize(y.dtype)) if wide else 4
        return k
    last[visit(x)] = step[0] + 1
    return max(sum(size[k] for k in made if made[k] <= s <= last[k]) for s in range(1, step[0] + 2))


def _itemsize(dtype):
    from neuronxcc.common.dtypes import onchip_as
    from neuronxcc.starfish.birpy import dtypes as bdt
    return bdt.itemsize(onchip_as(dtype))


def load_columns(kern, g, K, TK, nk, m):
    """g[0, :K] (a vector broadcast over the rows) into SBUF columns, m[p, t] = g[t*TK + p]. A unit-step
    vector is loaded as one contiguous row (one descriptor) and turned into columns by PE transposes
    of its chunks ([1, kn] -> [kn, 1], at the PE's 64-column minimum each) and one PSUM eviction:
    loaded directly, every element would be a 4-byte descriptor of its own, a few hundred of them
    queued behind the weights' transfers on the DMA engines while the first tile's L^T waits."""
    em = kern.em
    sk, full = g.strides[1], K // TK
    if sk == 1 and nk * 4 <= em.tm.psum_bank_bytes:
        row = em.sbuf("grow", 1, K, "float32")
        em.dma(em.chip(row, "float32", 1, [[1, K]]), em.hbm(g.base, g.offset, [[K, 1], [1, K]]))
        ps = em.psum("psg", TK, nk)
        for t in range(nk):
            kn = min(TK, K - t * TK)
            em.inst("transpose", "PE", [em.chip(ps, "float32", kn, [[1, 1]], offset=t)],
                    [em.chip(row, "float32", 1, [[1, kn]], offset=t * TK)])
        if full:
            kern._evict_copy(em.chip(m, "float32", TK, [[1, full]]), em.chip(ps, "float32", TK, [[1, full]]))
        if full < nk:
            kn = K - full * TK
            kern._evict_copy(em.chip(m, "float32", kn, [[1, 1]], offset=full),
                             em.chip(ps, "float32", kn, [[1, 1]], offset=full))
        return
    if full:
        em.dma(em.chip(m, "float32", TK, [[1, full]]), em.hbm(g.base, g.offset, [[sk, TK], [TK * sk, full], [1, 1]]))
    if full < nk:
        em.dma(em.chip(m, "float32", K - full * TK, [[1, 1]], offset=full),
               em.hbm(g.base, g.offset + full * TK * sk, [[sk, K - full * TK], [1, 1]]))
