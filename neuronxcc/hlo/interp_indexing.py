"""Interpreter handlers for indexing: dynamic-slice, dynamic-update-slice,
gather, scatter.

Semantics (XLA operation semantics):
- dynamic-slice / dynamic-update-slice clamp each start index into
  [0, operand_dim - slice_dim].
- gather clamps each slice's start so the whole slice lies in the operand.
- scatter skips an update window whose start puts any part of the window
  outside the operand; duplicate targets are combined in update order.
Both support the batching dimensions (operand_batching_dims /
input_batching_dims) JAX emits for vmapped indexing.
"""
import numpy as np

from neuronxcc.errors import HloVerifyError
from neuronxcc.hlo.interp_attrs import computation, gather_dims, int_list, scatter_dims
from neuronxcc.hlo.interp_base import cast, dims_of, dtype_of, handler, is_tuple_shape
from neuronxcc.hlo.interp_reduce import scatter_combine, scatter_rounds


def _starts(args, dims, sizes):
    out = []
    for s, n, k in zip(args, dims, sizes):
        v = int(np.asarray(s).reshape(()))
        out.append(min(max(v, 0), n - k))
    return out


@handler("dynamic_slice")
def h_dynamic_slice(ev, inst, args):
    x = args[0]
    sizes = int_list(inst, "dynamic_slice_sizes") or list(dims_of(inst.shape))
    idx = args[1:]
    if len(idx) == 1 and np.ndim(idx[0]) == 1 and x.ndim != 1:
        idx = list(np.asarray(idx[0]))
    starts = _starts(idx, x.shape, sizes)
    return x[tuple(slice(s, s + k) for s, k in zip(starts, sizes))]


@handler("dynamic_update_slice")
def h_dynamic_update_slice(ev, inst, args):
    x, upd = args[0], np.asarray(args[1])
    idx = args[2:]
    if len(idx) == 1 and np.ndim(idx[0]) == 1 and x.ndim != 1:
        idx = list(np.asarray(idx[0]))
    starts = _starts(idx, x.shape, upd.shape)
    out = np.array(x, copy=True)
    out[tuple(slice(s, s + k) for s, k in zip(starts, upd.shape))] = upd
    return out


def _index_components(indices, index_vector_dim):
    """(batch-shaped index arrays per component, batch shape) of a start-indices array."""
    ind = np.asarray(indices).astype(np.int64)
    if index_vector_dim == ind.ndim:
        ind = ind[..., None]
    ind = np.moveaxis(ind, index_vector_dim, -1)
    return [ind[..., k] for k in range(ind.shape[-1])], ind.shape[:-1]


def _batch_axis_positions(indices_rank, index_vector_dim):
    """indices dim -> position among the batch dims (index_vector_dim removed)."""
    pos = {}
    k = 0
    for d in range(indices_rank):
        if d == index_vector_dim:
            continue
        pos[d] = k
        k += 1
    return pos


@handler("gather")
def h_gather(ev, inst, args):
    operand, indices = np.asarray(args[0]), np.asarray(args[1])
    g = gather_dims(inst)
    ivd = g["index_vector_dim"]
    sizes = g["slice_sizes"]
    comps, bshape = _index_components(indices, ivd)
    nb = len(bshape)
    collapsed = set(g["collapsed_slice_dims"])
    obatch = g["operand_batching_dims"]
    window_dims = [d for d in range(operand.ndim) if d not in collapsed and d not in obatch]
    nw = len(window_dims)
    bpos = _batch_axis_positions(indices.ndim if ivd < indices.ndim else indices.ndim + 1, ivd)
    idx = []
    for d in range(operand.ndim):
        shape_b = bshape + (1,) * nw
        if d in g["start_index_map"]:
            k = g["start_index_map"].index(d)
            start = np.clip(comps[k], 0, operand.shape[d] - sizes[d]).reshape(shape_b)
        elif d in obatch:
            j = obatch.index(d)
            axis = bpos[g["start_indices_batching_dims"][j]]
            start = np.arange(bshape[axis]).reshape([bshape[axis] if a == axis else 1 for a in range(nb)]
                                                    + [1] * nw)
        else:
            start = np.zeros((1,) * (nb + nw), np.int64)
        if d in window_dims:
            w = window_dims.index(d)
            off = np.arange(sizes[d]).reshape((1,) * nb + tuple(sizes[d] if a == w else 1 for a in range(nw)))
            start = start + off
        idx.append(start)
    res = operand[tuple(idx)] if operand.ndim else np.broadcast_to(operand, bshape)
    # res dims: batch dims then window dims; place window dims at offset_dims
    offset_dims = g["offset_dims"]
    out_rank = nb + nw
    perm = [0] * out_rank
    b = 0
    for o in range(out_rank):
        if o in offset_dims:
            perm[o] = nb + offset_dims.index(o)
        else:
            perm[o] = b
            b += 1
    return np.asarray(np.transpose(res, perm), order="C").astype(dtype_of(inst.shape), copy=False)


@handler("scatter")
def h_scatter(ev, inst, args):
    n = (len(args) - 1) // 2
    operands = [np.asarray(a) for a in args[:n]]
    indices = np.asarray(args[n])
    updates = [np.asarray(a) for a in args[n + 1:]]
    s = scatter_dims(inst)
    op0 = operands[0]
    upd0 = updates[0]
    ivd = s["index_vector_dim"]
    comps, bshape = _index_components(indices, ivd)
    uwd = s["update_window_dims"]
    inserted = set(s["inserted_window_dims"])
    ibatch = s["input_batching_dims"]
    window_dims = [d for d in range(op0.ndim) if d not in inserted and d not in ibatch]
    if len(window_dims) != len(uwd):
        raise HloVerifyError("scatter %s: %d window dims but %d update_window_dims"
                             % (inst.name, len(window_dims), len(uwd)))
    urank = upd0.ndim
    scatter_axes = [u for u in range(urank) if u not in uwd]
    if len(scatter_axes) != len(bshape):
        raise HloVerifyError("scatter %s: updates have %d scatter dims, indices %d batch dims"
                             % (inst.name, len(scatter_axes), len(bshape)))
    bpos = _batch_axis_positions(indices.ndim if ivd < indices.ndim else indices.ndim + 1, ivd)

    def to_update_shape(a):
        # a has the batch shape; place its axes at scatter_axes of the updates' rank
        shape = [1] * urank
        for k, u in enumerate(scatter_axes):
            shape[u] = bshape[k]
        return np.asarray(a).reshape(shape)

    valid = np.ones(bshape, bool)
    full_idx = []
    for d in range(op0.ndim):
        if d in window_dims:
            wsize = upd0.shape[uwd[window_dims.index(d)]]
        else:
            wsize = 1
        if d in s["scatter_dims_to_operand_dims"]:
            k = s["scatter_dims_to_operand_dims"].index(d)
            start = comps[k]
            valid &= (start >= 0) & (start <= op0.shape[d] - wsize)
        elif d in ibatch:
            j = ibatch.index(d)
            axis = bpos[s["scatter_indices_batching_dims"][j]]
            start = np.broadcast_to(np.arange(bshape[axis]).reshape(
                [bshape[axis] if a == axis else 1 for a in range(len(bshape))]), bshape)
        else:
            start = np.zeros(bshape, np.int64)
        start = to_update_shape(start)
        if d in window_dims:
            u = uwd[window_dims.index(d)]
            start = start + np.arange(wsize).reshape([wsize if a == u else 1 for a in range(urank)])
        full_idx.append(start)
    vmask = np.broadcast_to(to_update_shape(valid), upd0.shape)
    full_idx = [np.broadcast_to(ix, upd0.shape)[vmask] for ix in full_idx]
    flat = np.ravel_multi_index(full_idx, op0.shape) if op0.ndim else np.zeros(int(vmask.sum()), np.int64)
    vals = [u[vmask] for u in updates]
    comb = computation(ev, inst, "to_apply")
    outs = [np.array(o, copy=True).reshape(-1) for o in operands]
    if n == 1:
        scatter_combine(ev, comb, outs[0], flat, vals[0].astype(outs[0].dtype))
    else:
        scatter_rounds(ev, comb, outs, flat, vals)
    return _finish(outs, operands, inst)


def _finish(outs, operands, inst):
    res = [cast(o.reshape(op.shape), op.dtype) for o, op in zip(outs, operands)]
    if is_tuple_shape(inst.shape):
        return tuple(res)
    return res[0]
