"""Interpreter handlers for data movement: broadcast, reshape, bitcast,
transpose, slice, concatenate, pad, reverse.

Values are logical (row-major) arrays; layouts matter only for ``bitcast``,
which reinterprets the operand's physical element order. Handlers may return
views of their operands; no handler ever writes into an operand.
"""
import numpy as np

from neuronxcc.errors import HloVerifyError
from neuronxcc.hlo.interp_attrs import int_list, padding_config, slice_spec
from neuronxcc.hlo.interp_base import cast, dims_of, dtype_of, handler, preparer


@handler("broadcast")
def h_broadcast(ev, inst, args):
    x = np.asarray(args[0])
    out_dims = dims_of(inst.shape)
    bdims = int_list(inst, "dimensions")
    if len(bdims) != x.ndim:
        raise HloVerifyError("broadcast %s: %d dimensions for a rank-%d operand" % (inst.name, len(bdims), x.ndim))
    order = sorted(range(len(bdims)), key=lambda k: bdims[k])
    if order != list(range(len(bdims))):
        x = np.transpose(x, order)
        bdims = [bdims[k] for k in order]
    shape = [1] * len(out_dims)
    for k, d in enumerate(bdims):
        shape[d] = x.shape[k]
    return np.broadcast_to(x.reshape(shape), out_dims)


@preparer("broadcast")
def p_broadcast(ev, inst):
    out_dims = dims_of(inst.shape)
    bdims = int_list(inst, "dimensions")
    in_dims = dims_of(inst.operands[0].shape)
    if len(bdims) != len(in_dims) or list(bdims) != sorted(bdims):
        return None
    shape = [1] * len(out_dims)
    for k, d in enumerate(bdims):
        shape[d] = in_dims[k]
    shape = tuple(shape)
    return lambda args: np.broadcast_to(args[0].reshape(shape), out_dims)


@preparer("reshape")
def p_reshape(ev, inst):
    if inst.opcode == "bitcast":
        return None
    out_dims = dims_of(inst.shape)
    return lambda args: args[0].reshape(out_dims)


@preparer("transpose")
def p_transpose(ev, inst):
    perm = tuple(int_list(inst, "dimensions"))
    return lambda args: np.transpose(args[0], perm)


@preparer("slice")
def p_slice(ev, inst):
    starts, limits, strides = slice_spec(inst, len(inst.operands[0].shape.dims))
    sl = tuple(slice(a, b, c) for a, b, c in zip(starts, limits, strides))
    return lambda args: args[0][sl]


@handler("reshape")
def h_reshape(ev, inst, args):
    x = np.asarray(args[0])
    out_dims = dims_of(inst.shape)
    if inst.opcode == "bitcast":
        return _bitcast(x, inst.operands[0].shape, inst.shape)
    if x.size != int(np.prod(out_dims, dtype=np.int64)):
        raise HloVerifyError("reshape %s: %s elements into %s" % (inst.name, x.shape, out_dims))
    return x.reshape(out_dims)


def _major_to_minor(shape):
    lay = shape.layout if shape.layout is not None else tuple(range(len(shape.dims) - 1, -1, -1))
    return list(reversed(lay))


def _bitcast(x, src_shape, dst_shape):
    dt = dtype_of(dst_shape)
    phys = np.transpose(x, _major_to_minor(src_shape)).reshape(-1)
    if phys.dtype != dt:
        phys = np.ascontiguousarray(phys).view(dt)
    m2m = _major_to_minor(dst_shape)
    dims = dims_of(dst_shape)
    y = phys.reshape([dims[d] for d in m2m])
    return np.transpose(y, np.argsort(m2m))


@handler("transpose")
def h_transpose(ev, inst, args):
    return np.transpose(args[0], int_list(inst, "dimensions"))


@handler("slice")
def h_slice(ev, inst, args):
    x = args[0]
    starts, limits, strides = slice_spec(inst, x.ndim)
    return x[tuple(slice(s, l, st) for s, l, st in zip(starts, limits, strides))]


@handler("concatenate")
def h_concatenate(ev, inst, args):
    d = int_list(inst, "dimensions")[0]
    return cast(np.concatenate([np.asarray(a) for a in args], axis=d), dtype_of(inst.shape))


@handler("reverse")
def h_reverse(ev, inst, args):
    dims = int_list(inst, "dimensions")
    x = args[0]
    if not dims:
        return x
    return np.flip(x, axis=tuple(dims))


def pad(x, value, config):
    """XLA pad: ``config`` is (low, high, interior) per dimension; edges may be negative."""
    x = np.asarray(x)
    if any(i for _, _, i in config):
        dil_shape = tuple(n + (n - 1) * i if n else 0 for n, (_, _, i) in zip(x.shape, config))
        d = np.empty(dil_shape, x.dtype)
        d[...] = value
        d[tuple(slice(None, None, i + 1) for _, _, i in config)] = x
        x = d
    out_shape = []
    src, dst = [], []
    for n, (lo, hi, _) in zip(x.shape, config):
        size = lo + n + hi
        if size < 0:
            raise HloVerifyError("pad gives a negative dimension")
        out_shape.append(size)
        dst_start = max(lo, 0)
        src_start = max(-lo, 0)
        length = max(min(n - src_start, size - dst_start), 0)
        src.append(slice(src_start, src_start + length))
        dst.append(slice(dst_start, dst_start + length))
    if all(lo == 0 and hi == 0 for lo, hi, _ in config):
        return x
    out = np.empty(out_shape, x.dtype)
    out[...] = value
    out[tuple(dst)] = x[tuple(src)]
    return out


@handler("pad")
def h_pad(ev, inst, args):
    x, v = args
    return pad(x, v, padding_config(inst, np.ndim(x)))
