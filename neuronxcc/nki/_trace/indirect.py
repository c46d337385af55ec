"""Indirect (tile-valued) indices: ``t[..., idx_tile, ...]`` in ``nl.load`` / ``nl.store`` /
``nl.atomic_rmw`` / ``nisa.dma_copy`` / ``nisa.tensor_copy_dynamic_src``. A single-element tile used in
an index expression is a dynamic scalar instead (see ``registers``).

* **Rows** (``IndirectTensor``): the index tile [K, 1] indexes dimension d and every dimension before d
  is a scalar (an int or a loop iterator): ``out[k, rest] = t[fixed..., idx[k], rest]``, one
  ``dma_gather`` / ``dma_scatter`` (a row per partition of the index tile at ``idx[k] * stride(d)``).
  d = 0 is the partition / block dimension of the original; d > 0 is the gather along a free dimension.
  On an on-chip tensor (``nisa.tensor_copy_dynamic_src(data[0, idx_tile, iz])``, the original's
  documented fix for err_copy_dynamic_indirect_indices_not_natively_supported) the rows come from one
  partition of SBUF; anywhere else an on-chip indirect view is that error.
* **Per-partition free-dim gather** (``FreeGather``): the partition dimension of an HBM tensor is indexed
  by an ``nl.arange`` / slice of P and the next dimension by an index tile [P, F]:
  ``out[p, f, rest] = t[p, idx[p, f], rest]`` (``nl.load`` only). The indices are clamped to the
  dimension, offset by ``p * stride(0) / stride(1)`` (an iota and an integer add on VectorE), then one
  ``dma_gather`` per index column in a loop over F.
"""
import numpy as np

from neuronxcc import pelican as _pel
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import ops
from neuronxcc.nki._trace.context import loop_iter
from neuronxcc.nki._trace.elementwise import op_name
from neuronxcc.nki._trace.index import DynSlice, Idx
from neuronxcc.nki._trace.view import Axis, View, slice_parts

__all__ = ["IndirectTensor", "FreeGather", "indirect_view", "gather", "scatter", "atomic_rmw", "free_gather"]


class IndirectTensor:
    """base[index[p], rest...]: a row per partition p of INDEX (a [P, 1] tile)."""

    def __init__(self, base, index, row, rest=()):
        self.base = base          # the whole-dim-0 view (Tensor)
        self.index = index        # [P, 1] on-chip Tensor
        self.row = row            # Tensor view of row 0 (dims after the indexed one)
        self.rest = rest          # the key of the dims after the indexed one
        self.dtype = base.dtype
        self.buf = base.buf

    @property
    def shape(self):
        return (self.index.shape[0],) + tuple(a.size for a in self.row.axes if a.size != 1 or len(self.row.axes) == 1)

    def __repr__(self):
        return "IndirectTensor(%s[%s, ...])" % (self.base.buf.name, self.index.buf.name)


class FreeGather:
    """t[i_p, idx[p, f], rest...] of an HBM tensor (see module doc)."""

    def __init__(self, base, index, prange):
        self.base, self.index, self.prange = base, index, prange    # prange: (start Expr, size) of dim 0
        self.dtype = base.dtype
        self.buf = base.buf

    @property
    def shape(self):
        return tuple(self.index.shape) + tuple(a.size for a in self.base.axes[2:])


def _is_scalar_index(k):
    return isinstance(k, (int, np.integer)) or (isinstance(k, Idx) and not k.shape)


def indirect_view(t, key):
    pos = [i for i, k in enumerate(key) if isinstance(k, View)]
    if len(pos) != 1:
        raise E.err_indirect_indices_free_dim(
            "Dynamic indexing for load/store takes one indirect index tile per access, got %d" % len(pos))
    d = pos[0]
    idx = key[d]
    if not idx.buf.onchip:
        raise E.err_invalid_argument("indirect indices must be in SBUF (nl.load them first)")
    pre, post = tuple(key[:d]), tuple(key[d + 1:])
    if all(_is_scalar_index(k) for k in pre) and not (t.buf.onchip and d == 0):
        if ops.size_of(idx.shape[1:]) != 1:
            raise E.err_invalid_argument("an indirect index tile has one index per partition, got shape %s"
                                         % (idx.shape,))
        base = t.select(pre) if pre else t
        row = base.select((0,) + post)
        return IndirectTensor(base, idx, row, post)
    if t.buf.onchip:
        raise E.err_copy_dynamic_indirect_indices_not_natively_supported(
            "indirect indices on an on-chip tensor need the dimensions before the indexed one to be scalars "
            "(use nisa.tensor_copy_dynamic_src(t[0, idx_tile, ...]))")
    if d == 1 and t.ndim >= 2:
        k0 = key[0]
        if isinstance(k0, Idx) and k0.shape and len(k0.shape) >= 1:
            terms = k0.expr.affine()
            vs = [v for v in k0.axes]
            if terms is not None and len(vs) == 1 and terms[0].get(vs[0]) == 1 and k0.shape[0] == idx.shape[0]:
                return FreeGather(t, idx, (_pel.const(terms[1]), k0.shape[0]))
        elif isinstance(k0, (slice, DynSlice)):
            start, size, step = slice_parts(k0, t.axes[0])
            if step == 1 and size == idx.shape[0]:
                return FreeGather(t, idx, (start, size))
    raise E.err_indirect_indices_free_dim(
        "Dynamic indexing for load/store supports an index tile on the partition or block dimension, on a "
        "free dimension after scalar indices, or on dimension 1 after nl.arange(P)[:, None] / a slice of P "
        "partitions")


def _index_i32(idx):
    if idx.dtype != np.dtype(np.int32) or idx.buf.memory != "SBUF":
        out = ops.new_tile((idx.shape[0], 1), np.int32, "SBUF", "idx32")
        ops.emit("tensor_copy", "DVE", [out], [idx])
        return out
    return idx.copy_view(axes=[idx.axes[0]] + [a for a in idx.axes[1:]])


def _attrs(it):
    a0 = it.base.axes[0]
    return {"index_stride": int(a0.fstep), "index_min": 0, "index_max": int(a0.size) - 1}


def _row_axes(it):
    axes = [a for a in it.row.axes if a.size != 1 and (a.fstep or a.pstep or a.var is not None)]
    return axes


def gather(it, dtype=None, mask=None, oob=None):
    """nl.load(base[idx, ...]): a new SBUF tile [P, row...]."""
    axes = _row_axes(it)
    P = it.index.shape[0]
    out = ops.new_tile((P,) + tuple(a.size for a in axes) if axes else (P, 1), dtype or it.dtype, "SBUF", "gather")
    row = it.row.copy_view(axes=axes or [it.row.axes[0]] if it.row.axes else [])
    if it.buf.onchip:               # rows of one partition: the partition axis first
        row = it.row.copy_view(axes=[Axis(1, 1, 0)] + axes)
    attrs = dict(_attrs(it), queue=ops.next_queue())
    if oob:
        attrs["oob"] = oob
    inst = ops.emit("dma_gather", "SP", [out], [row, _index_i32(it.index)], attrs, mask, [])
    return ops.mark_producer(out, inst)


def scatter(it, value, mask=None, accumulate=None, oob=None):
    if not isinstance(value, View):
        raise E.err_invalid_argument("an indirect store needs a tile value")
    if value.buf.memory == "PSUM":
        value = ops.copy_to_sbuf(value)
    axes = _row_axes(it)
    row = it.row.copy_view(axes=axes or [it.row.axes[0]] if it.row.axes else [])
    attrs = dict(_attrs(it), queue=ops.next_queue())
    if accumulate:
        attrs["accumulate"] = accumulate
    if oob:
        attrs["oob"] = oob
    ops.emit("dma_scatter", "SP", [row], [value, _index_i32(it.index)], attrs, mask, [])


def atomic_rmw(it, value, op, mask=None):
    if op_name(op, "alu") != "add":
        raise E.NkiNotImplementedError("nki.language.atomic_rmw", "only op=np.add / nl.add")
    scatter(it, value, mask, accumulate="add")


def free_gather(fg, dtype=None, mask=None):
    """nl.load(t[i_p, idx[p, f], rest]) (see module doc): a new SBUF tile [P, F, rest...]."""
    if mask is not None:
        raise E.err_invalid_argument("a mask on a per-partition free-dimension gather is not supported")
    t, idx = fg.base, fg.index
    P, F = idx.shape[0], ops.size_of(idx.shape[1:])
    a0, a1 = t.axes[0], t.axes[1]
    if a1.fstep <= 0 or a0.fstep % a1.fstep:
        raise E.err_indirect_indices_free_dim("a free-dimension gather needs dimension 0's stride to be a "
                                              "multiple of dimension 1's")
    ratio = a0.fstep // a1.fstep
    rest = tuple(a.size for a in t.axes[2:])
    out = ops.new_tile((P, F) + rest, dtype or t.dtype, "SBUF", "fgather")
    flat = idx.reshape((P, F)) if tuple(idx.shape) != (P, F) else idx
    i32 = ops.new_tile((P, F), np.int32, "SBUF", "sb", kind="ndarray")
    ops.emit("tensor_scalar", "DVE", [i32], [flat], {"op0": "max", "operand0": 0.0, "reverse0": False,
                                                    "op1": "min", "operand1": float(a1.size - 1),
                                                    "reverse1": False})
    rows = ops.new_tile((P, F), np.int32, "SBUF", "iota")          # ip * ratio: the row of partition p
    ops.emit("iota", "POOL", [rows], [], {"pattern": [[0, F]], "offset": 0, "channel_multiplier": int(ratio)})
    adj = ops.new_tile((P, F), np.int32, "SBUF", "sb", kind="ndarray")
    ops.emit("tensor_tensor", "DVE", [adj], [i32, rows], {"op": "add"})
    start, _ = fg.prange
    row = t[(start, 0) + (slice(None),) * len(rest)] if rest else t[start, 0]
    if not rest:
        row = row.copy_view(axes=[row.axes[0]] if row.axes else [])
    n_idx = P * ratio
    for f in loop_iter(0, F, 1, "affine", E.kernel_location()):
        col = adj[:, DynSlice(f, 1)]
        dst = out[:, f] if rest else out[:, DynSlice(f, 1)]
        ops.emit("dma_gather", "SP", [dst], [row, col],
                 {"index_stride": int(a1.fstep), "index_min": 0, "index_max": int(n_idx - 1),
                  "queue": ops.next_queue()}, None, [])
    out.buf.written = True
    return out
