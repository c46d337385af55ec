"""nisa VectorE selection, search and statistics: max8 / find_index8 / match_replace8, bn_stats / bn_aggr, stream
shuffle, range_select / select_reduce / tensor_copy_predicated."""
import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import dtypes as _D
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.elementwise import op_name as _op_name
from neuronxcc.nki._trace.engines import reduce_cmd
from neuronxcc.nki._trace.tensor import Tensor as _Tensor
from neuronxcc.nki.isa._common import fp32, per_partition_out, scalar_or_col


def max8(*, src, mask=None, dtype=None, **kwargs):
    """The 8 largest values of each partition, descending (VectorE)."""
    _ops.tile_operand(src, "max8", "src")
    n = _ops.size_of(src.shape[1:])
    if not 8 <= n <= 16384:
        raise _E.err_size_of_dimension_exceed_arch_limit("max8 reads 8..16384 elements per partition, got %d" % n)
    out = per_partition_out(src, 8, dtype or src.dtype, "max8")
    return _ops.mark_producer(out, _ops.emit("max8", "DVE", [out], [src], {}, mask, [[(0, 0), (1, 0)]]))


def nc_find_index8(*, data, vals, mask=None, dtype=None, **kwargs):
    """Index of the first occurrence of each of the 8 vals in each partition of data (VectorE)."""
    _ops.tile_operand(data, "nc_find_index8", "data")
    _ops.tile_operand(vals, "nc_find_index8", "vals")
    if _ops.size_of(vals.shape[1:]) != 8:
        raise _E.err_invalid_argument("vals of nc_find_index8 must have 8 elements per partition")
    dt = _D.np_dtype(dtype) if dtype is not None else np.dtype(np.uint32)
    out = per_partition_out(data, 8, dt, "fidx8")
    inst = _ops.emit("find_index8", "DVE", [out], [data, vals], {}, mask, [[(0, 0), (1, 0), (2, 0)]])
    return _ops.mark_producer(out, inst)


def nc_match_replace8(*, data, vals, imm, dst_idx=None, mask=None, dtype=None, **kwargs):
    """data with the first occurrence of each of the 8 vals replaced by imm; indices into dst_idx."""
    _ops.tile_operand(data, "nc_match_replace8", "data")
    _ops.tile_operand(vals, "nc_match_replace8", "vals")
    out = _ops.new_tile(data.shape, dtype or data.dtype, "SBUF", "mrep8")
    dsts = [out]
    attrs = {"imm": float(imm)}
    if dst_idx is not None:
        _ops.tile_operand(dst_idx, "nc_match_replace8", "dst_idx")
        dsts.append(dst_idx)
        attrs["with_index"] = True
    nd = len(dsts)
    # partitions are shared by all operands; a mask on data's free axes cuts the output the same way
    links = [[(k, 0) for k in range(nd + 2)]] + [[(0, r), (nd, r)] for r in range(1, len(data.shape))]
    inst = _ops.emit("match_replace8", "DVE", dsts, [data, vals], attrs, mask, links)
    return _ops.mark_producer(out, inst)


def bn_stats(data, *, mask=None, dtype=None, **kwargs):
    """(count, mean, var*count) of the even and of the odd free elements per partition (VectorE)."""
    _ops.tile_operand(data, "bn_stats", "data")
    n = _ops.size_of(data.shape[1:])
    if n > 512:
        raise _E.err_size_of_dimension_exceed_arch_limit(
            "bn_stats reads at most 512 elements per partition (nl.tile_size.bn_stats_fmax), got %d" % n)
    out = per_partition_out(data, 6, dtype or data.dtype, "bnst")
    return _ops.mark_producer(out, _ops.emit("bn_stats", "DVE", [out], [data], {}, mask, [[(0, 0), (1, 0)]]))


def bn_aggr(data, *, mask=None, dtype=None, **kwargs):
    """(mean, variance) per partition from one or more bn_stats outputs (VectorE)."""
    _ops.tile_operand(data, "bn_aggr", "data")
    if _ops.size_of(data.shape[1:]) % 3:
        raise _E.err_invalid_argument("bn_aggr input must hold (count, mean, var*count) triples")
    out = per_partition_out(data, 2, dtype or data.dtype, "bnag")
    return _ops.mark_producer(out, _ops.emit("bn_aggr", "DVE", [out], [data], {}, mask, [[(0, 0), (1, 0)]]))


def nc_stream_shuffle(src, dst, shuffle_mask, *, dtype=None, mask=None, **kwargs):
    """Cross-partition move within each 32-partition quadrant: dst[i] = src[shuffle_mask[i]] (VectorE)."""
    _ops.tile_operand(src, "nc_stream_shuffle", "src")
    _ops.tile_operand(dst, "nc_stream_shuffle", "dst")
    if len(shuffle_mask) != 32:
        raise _E.err_invalid_argument("shuffle_mask must have 32 entries")
    if src.dtype != dst.dtype or _ops.size_of(src.shape[1:]) != _ops.size_of(dst.shape[1:]):
        raise _E.err_invalid_argument("nc_stream_shuffle needs equal dtypes and elements per partition")
    _ops.emit("shuffle", "DVE", [dst], [src], {"mask": [int(m) for m in shuffle_mask]}, mask, [])


_CMPS = {np.equal: "eq", np.less: "lt", np.less_equal: "le", np.greater: "gt", np.greater_equal: "ge"}


def _cmp_name(op):
    if op in _CMPS:
        return _CMPS[op]
    name = _op_name(op, "alu")
    if name not in ("eq", "lt", "le", "gt", "ge"):
        raise _E.err_invalid_argument("comparison operator expected, got %r" % (op,))
    return name


def range_select(*, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_cmd=reduce_cmd.idle, reduce_res=None,
                 reduce_op=np.amax, range_start=0, on_false_value=fp32.min, mask=None, dtype=None, **kwargs):
    """on_true where (free index + range_start) passes both comparisons with bound0/bound1, else on_false;
    the max of the result per partition into reduce_res (VectorE)."""
    _ops.tile_operand(on_true_tile, "range_select", "on_true_tile")
    for b, nm in ((bound0, "bound0"), (bound1, "bound1")):
        scalar_or_col(b, on_true_tile, "range_select", nm)
        if not isinstance(b, _Tensor):
            raise _E.err_invalid_argument("%s of range_select must be a (P, 1) tile" % nm)
    out = _ops.new_tile(on_true_tile.shape, dtype or on_true_tile.dtype, "SBUF", "rsel")
    attrs = {"cmp0": _cmp_name(comp_op0), "cmp1": _cmp_name(comp_op1), "start": int(range_start),
             "on_false": float(on_false_value)}
    dsts = [out]
    if reduce_res is not None:
        _ops.tile_operand(reduce_res, "range_select", "reduce_res")
        dsts.append(reduce_res)
        attrs["reduce"] = True
    nd = len(dsts)
    links = [[(k, 0) for k in range(nd + 3)]]
    inst = _ops.emit("range_select", "DVE", dsts, [on_true_tile, bound0, bound1], attrs, mask, links)
    return _ops.mark_producer(out, inst)


def select_reduce(*, dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=reduce_cmd.idle,
                  reduce_op=np.amax, reverse_pred=False, mask=None, dtype=None, **kwargs):
    """dst = where(predicate, on_true, on_false); the per-partition max into reduce_res."""
    for t, nm in ((dst, "dst"), (predicate, "predicate"), (on_true, "on_true")):
        _ops.tile_operand(t, "select_reduce", nm)
    if isinstance(on_false, _Tensor):
        f = _ops.expand(on_false, on_true.shape)
    else:
        f = _ops.new_tile(on_true.shape, np.float32, "SBUF", "selc")
        _ops.emit("memset", "DVE", [f], [], {"value": float(on_false)})
    t, fl = (f, on_true) if reverse_pred else (on_true, f)
    _ops.emit("select", "DVE", [dst], [predicate, t, fl], {}, mask)
    if reduce_res is not None:
        _ops.tile_operand(reduce_res, "select_reduce", "reduce_res")
        _ops.emit("tensor_reduce", "DVE", [reduce_res], [dst],
                  {"op": "max", "axes": max(1, len(dst.shape) - 1), "negate": False}, mask,
                  [[(0, 0), (1, 0)]])
    return dst


def tensor_copy_predicated(*, src, dst, predicate, reverse_pred=False, mask=None, dtype=None, **kwargs):
    """dst = src where predicate (dst unchanged elsewhere)."""
    _ops.tile_operand(dst, "tensor_copy_predicated", "dst")
    _ops.tile_operand(predicate, "tensor_copy_predicated", "predicate")
    if isinstance(src, _Tensor):
        _ops.tile_operand(src, "tensor_copy_predicated", "src")
        s = _ops.expand(src, dst.shape)
    else:
        s = _ops.new_tile(dst.shape, dst.dtype, "SBUF", "cpc")
        _ops.emit("memset", "DVE", [s], [], {"value": float(src)})
    t, f = (dst, s) if reverse_pred else (s, dst)
    _ops.emit("select", "DVE", [dst], [predicate, t, f], {}, mask)
    return dst
