"""Indirect (tile-valued) indices: ``t[idx_tile, i_f]`` in ``nl.load`` / ``nl.store`` /
``nl.atomic_rmw``, lowered to ``dma_gather`` / ``dma_scatter`` (one row per partition of the index
tile, at ``index[p] * stride(dim 0)``). A single-element tile used in an index expression is a
dynamic scalar instead (see ``registers``)."""
import numpy as np

from neuronxcc import pelican as _pel
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import ops
from neuronxcc.nki._trace.tensor import Tensor

__all__ = ["IndirectTensor", "indirect_view", "gather", "scatter", "atomic_rmw"]


class IndirectTensor:
    """base[index[p], rest...]: a row per partition p of INDEX (a [P, 1] tile)."""

    def __init__(self, base, index, row):
        self.base = base          # the whole-dim-0 view (Tensor)
        self.index = index        # [P, 1] on-chip Tensor
        self.row = row            # Tensor view of row 0 (dims after the indexed one)
        self.dtype = base.dtype
        self.buf = base.buf

    @property
    def shape(self):
        return (self.index.shape[0],) + tuple(a.size for a in self.row.axes if a.size != 1 or len(self.row.axes) == 1)

    def __repr__(self):
        return "IndirectTensor(%s[%s, ...])" % (self.base.buf.name, self.index.buf.name)


def indirect_view(t, key):
    pos = [i for i, k in enumerate(key) if isinstance(k, Tensor)]
    if len(pos) != 1 or pos[0] != 0:
        raise E.err_indirect_indices_free_dim(
            "Dynamic indexing for load/store only supports the indirect indexing to be on the partition or "
            "block dimension (the first index)")
    if t.buf.memory != "HBM":
        raise E.err_copy_dynamic_indirect_indices_not_natively_supported(
            "indirect indices on an on-chip tensor are not supported (use nisa.tensor_copy_dynamic_src)")
    idx = key[0]
    if not idx.buf.onchip:
        raise E.err_invalid_argument("indirect indices must be in SBUF (nl.load them first)")
    if ops._size(idx.shape[1:]) != 1:
        raise E.err_invalid_argument("an indirect index tile has one index per partition, got shape %s"
                                     % (idx.shape,))
    row = t[(0,) + tuple(key[1:])]
    return IndirectTensor(t, idx, row)


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
    attrs = dict(_attrs(it), queue=ops.next_queue())
    if oob:
        attrs["oob"] = oob
    inst = ops.emit("dma_gather", "SP", [out], [row, _index_i32(it.index)], attrs, mask, [])
    return ops.mark_producer(out, inst)


def scatter(it, value, mask=None, accumulate=None, oob=None):
    if not isinstance(value, Tensor):
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
    from neuronxcc.nki.language._math import op_name
    if op_name(op, "alu") != "add":
        raise E.NkiNotImplementedError("nki.language.atomic_rmw", "only op=np.add / nl.add")
    scatter(it, value, mask, accumulate="add")


def _unused():
    return _pel
