"""nisa GpSimd instructions: ``iota`` and ``affine_select`` (affine index expressions, a part depending on loop
iterators added at run time), partition reduce, local_gather, sequence_bounds."""
import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import dtypes as _D
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.elementwise import op_name as _op_name
from neuronxcc.nki._trace.index import Idx as _Idx
from neuronxcc.nki._trace.index import Pred as _Pred
from neuronxcc.nki.isa._common import in_sbuf


def tensor_partition_reduce(op, data, *, mask=None, dtype=None, **kwargs):
    """Reduce across partitions on GpSimd: (P, F) -> (1, F)."""
    _ops.tile_operand(data, "tensor_partition_reduce", "data", ("SBUF",))
    out = _ops.new_tile((1,) + tuple(data.shape[1:]), dtype or data.dtype, "SBUF", "pr")
    links = [[(0, r), (1, r)] for r in range(1, len(data.shape))]
    inst = _ops.emit("partition_reduce", "POOL", [out], [data], {"op": _op_name(op, "reduce")}, mask, links)
    return _ops.mark_producer(out, inst)


def _split_affine(expr, shape, api):
    """(channel_multiplier, [[step, num], ...], constant, dynamic Expr) of an affine index expression over
    a tile shape; the dynamic part holds the loop iterators / program ids (0 when none)."""
    from neuronxcc import pelican as _pel
    terms = expr.expr.affine() if isinstance(expr, _Idx) else None
    if terms is None:
        raise _E.err_invalid_argument("%s needs an affine expression of nl.arange / nl.mgrid indices" % api)
    coeffs, const = terms
    cm = 0
    steps = [0] * (len(shape) - 1)
    dyn = _pel.const(0)
    for v, c in coeffs.items():
        if v not in expr.axes:
            dyn = dyn + _pel.var(v) * c
            continue
        ax = expr.axes[v] + len(shape) - len(expr.shape)
        if ax == 0:
            cm += c
        else:
            steps[ax - 1] += c
    pat = [[s, n] for s, n in zip(steps, shape[1:])] or [[1, 1]]
    return cm, pat, const, dyn


def _dyn_column(dyn, P, api):
    """A [P, 1] int32 SBUF column holding the run-time value of DYN (loop iterators / program ids): one DMA
    from a constant table of DYN's values over the loop ranges, at offset DYN - min."""
    from neuronxcc.nki._trace.context import current
    from neuronxcc.nki._trace.tensor import Axis, whole
    ctx = current()
    ranges = ctx.var_ranges()
    for v in dyn.free_vars():
        if v not in ranges:
            raise _E.NkiNotImplementedError("nki.isa.%s" % api, "an offset depending on the run-time value %s" % v)
    lo, hi = dyn.bounds(ranges)
    if hi - lo + 1 > (1 << 20):
        raise _E.NkiNotImplementedError("nki.isa.%s" % api,
                                        "a loop-dependent offset spanning %d values" % (hi - lo + 1))
    tables = ctx.__dict__.setdefault("_iota_tables", {})
    b = tables.get((lo, hi))
    if b is None:
        b = ctx.new_buf("iota_table", "HBM", (hi - lo + 1,), np.int32, 0, "const")
        b.data = np.arange(lo, hi + 1, dtype=np.int32)
        tables[(lo, hi)] = b
    src = whole(b)
    src = src.copy_view(off=dyn - lo, axes=[Axis(P, 0, 0), Axis(1, 0, 1)])
    col = _ops.new_tile((P, 1), np.int32, "SBUF", "iota_dyn")
    _ops.dma(col, src)
    return col


def iota(expr, dtype, *, mask=None, **kwargs):
    """A constant tile from an affine expression of nl.arange / nl.mgrid indices (GpSimd, int32 math);
    a part depending on loop iterators / program ids is added at run time."""
    from neuronxcc import pelican as _pel
    if _ops.is_scalar(expr):
        expr = _Idx(_pel.const(int(expr)), (1, 1), {})
    elif isinstance(expr, _Idx) and not expr.shape:
        expr = _Idx(expr.expr, (1, 1), {})
    shape = expr.shape if len(expr.shape) >= 2 else (tuple(expr.shape) + (1,) * (2 - len(expr.shape)))
    cm, pat, off, dyn = _split_affine(expr, shape, "iota")
    attrs = {"pattern": pat, "offset": int(off), "channel_multiplier": int(cm)}
    if dyn.is_const():
        attrs["offset"] += int(dyn)
        out = _ops.new_tile(shape, dtype, "SBUF", "iota")
        return _ops.mark_producer(out, _ops.emit("iota", "POOL", [out], [], attrs, mask))
    base = _ops.new_tile(shape, np.int32, "SBUF", "iota")
    _ops.emit("iota", "POOL", [base], [], attrs, mask)
    col = _dyn_column(dyn, shape[0], "iota")
    out = _ops.new_tile(shape, dtype, "SBUF", "iota")
    inst = _ops.emit("tensor_scalar", "POOL" if not _D.is_float(dtype) else "DVE", [out], [base, col],
                     {"op0": "add", "operand0_ap": True}, mask,
                     [[(0, r), (1, r)] + ([(2, 0)] if r == 0 else []) for r in range(len(shape))])
    return _ops.mark_producer(out, inst)


_CMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kwargs):
    """on_true_tile where the affine predicate holds, else on_false_value (GpSimd); a predicate that
    depends on loop iterators compares the static part with the run-time part (iota, compare, select)."""
    _ops.tile_operand(on_true_tile, "affine_select", "on_true_tile", ("SBUF", "PSUM"))
    on_true_tile = in_sbuf(on_true_tile)
    if not isinstance(pred, _Pred) or len(pred.atoms) != 1:
        raise _E.err_invalid_argument("affine_select needs one affine comparison as pred")
    e, op = pred.atoms[0]
    from neuronxcc.nki._trace.index import is_index_var
    axes = {}
    for v in e.free_vars():
        if is_index_var(v):
            if v in pred.axes:
                axes[v] = pred.axes[v] + len(on_true_tile.shape) - len(pred.shape)
            else:
                axes[v] = _find_axis(on_true_tile, v)
    shape = on_true_tile.shape
    idx = _Idx(e, shape, axes)
    cm, pat, off, dyn = _split_affine(idx, shape, "affine_select")
    out = _ops.new_tile(shape, dtype or on_true_tile.dtype, "SBUF", "asel")
    if dyn.is_const():
        inst = _ops.emit("affine_select", "POOL", [out], [on_true_tile],
                         {"pattern": pat, "offset": int(off) + int(dyn), "channel_multiplier": int(cm),
                          "cmp": _CMP[op], "on_false": float(on_false_value)}, mask)
        return _ops.mark_producer(out, inst)
    # static(p, f) + dyn  op  0   <=>   static(p, f)  op  -dyn
    base = _ops.new_tile(shape, np.int32, "SBUF", "asel_iota")
    _ops.emit("iota", "POOL", [base], [], {"pattern": pat, "offset": int(off), "channel_multiplier": int(cm)})
    col = _dyn_column(-dyn, shape[0], "affine_select")
    keep = _ops.new_tile(shape, np.uint8, "SBUF", "asel_pred")
    links = [[(0, r), (1, r)] + ([(2, 0)] if r == 0 else []) for r in range(len(shape))]
    _ops.emit("tensor_scalar", "POOL", [keep], [base, col], {"op0": _CMP[op], "operand0_ap": True}, None, links)
    fill = _ops.new_tile(shape, out.dtype, "SBUF", "asel_false")
    _ops.emit("memset", "DVE", [fill], [], {"value": float(on_false_value)})
    inst = _ops.emit("select", "DVE", [out], [keep, on_true_tile, fill], {}, mask)
    return _ops.mark_producer(out, inst)


def _find_axis(t, v):
    from neuronxcc.nki._trace.index import index_var_size
    for r, a in enumerate(t.axes):
        if a.var == v:
            return r
    raise _E.err_invalid_argument("affine_select predicate index %s does not index the on_true tile (size %s)"
                                  % (v, index_var_size(v)))


def local_gather(src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, *, mask=None):
    """Per 16-partition GpSimd core: gather num_elem_per_idx elements at each (element) index."""
    _ops.tile_operand(src_buffer, "local_gather", "src_buffer", ("SBUF",))
    _ops.tile_operand(index, "local_gather", "index", ("SBUF",))
    P = src_buffer.shape[0]
    if P != index.shape[0] or P % 16:
        raise _E.err_invalid_argument("local_gather: src_buffer and index need the same partitions, a multiple of 16")
    e = int(num_elem_per_idx)
    if e not in (1, 2, 4, 8, 16, 32):
        raise _E.err_invalid_argument("num_elem_per_idx must be one of 1, 2, 4, 8, 16, 32")
    nv = _ops.size_of(index.shape[1:]) * 16 if num_valid_indices is None else int(num_valid_indices)
    if nv > 4096:
        raise _E.err_size_of_dimension_exceed_arch_limit("local_gather uses at most 4096 indices per core")
    out = _ops.new_tile((P, nv, e), src_buffer.dtype, "SBUF", "lgather")
    inst = _ops.emit("local_gather", "POOL", [out], [src_buffer, index],
                     {"num_elem_per_idx": e, "num_valid_indices": nv}, mask, [])
    return _ops.mark_producer(out, inst)


def sequence_bounds(*, segment_ids, dtype=None):
    """For each element: (start, end) of its segment; padding (id 0) gets (n, -1) (GpSimd)."""
    _ops.tile_operand(segment_ids, "sequence_bounds", "segment_ids", ("SBUF",))
    if segment_ids.shape[0] != 1:
        raise _E.err_invalid_argument("sequence_bounds takes one partition")
    n = _ops.size_of(segment_ids.shape[1:])
    out = _ops.new_tile((1, 2, n), dtype or segment_ids.dtype, "SBUF", "seqb")
    return _ops.mark_producer(out, _ops.emit("sequence_bounds", "POOL", [out], [segment_ids], {}, None, []))
