"""Moving data between tensors: ``nl.load`` / ``nl.store`` (DMAs, indirect rows included), ``nl.copy``,
assignment (``dst[...] = value``) and the 2-D transpose ``nisa.nc_transpose``.

These are the tracer's because the ``Tensor`` methods need them (``t[...] = u``, ``t.astype``, ``t.T``);
``nki.language`` and ``nki.isa`` re-export them unchanged (names, signatures, error messages).
"""
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import elementwise
from neuronxcc.nki._trace import ops
from neuronxcc.nki._trace.engines import engine, engine_name
from neuronxcc.nki._trace.indirect import FreeGather, IndirectTensor, free_gather, gather, scatter
from neuronxcc.nki._trace.view import Axis, View

__all__ = ["load", "store", "copy", "assign", "nc_transpose", "dma_broadcast"]


def load(src, *, mask=None, dtype=None, **kwargs):
    """HBM -> SBUF (a DMA); the tile's first axis is the partition axis."""
    if isinstance(src, IndirectTensor):
        if src.buf.onchip:
            ops.hbm_operand(src.base, "load", "src")
        return gather(src, dtype, mask)
    if isinstance(src, FreeGather):
        return free_gather(src, dtype, mask)
    ops.hbm_operand(src, "load", "src")
    if not src.shape:
        # one element (t[b, h] of a [B, H] tensor): the [1, 1] tile holding it
        src = src.copy_view(axes=[Axis(1, 0, 0), Axis(1, 0, 0)])
    shape = src.shape
    out = ops.new_tile(shape, dtype or src.dtype, "SBUF", "ld")
    return ops.mark_producer(out, ops.dma(out, src, mask))


def store(dst, value, *, mask=None, **kwargs):
    """SBUF -> HBM (a DMA); PSUM values are copied to SBUF first; a scalar is memset first."""
    if isinstance(dst, IndirectTensor):
        return scatter(dst, value, mask)
    ops.hbm_operand(dst, "store", "dst")
    if ops.is_scalar(value):
        shape = dst.shape if len(dst.shape) >= 1 else (1,)
        t = ops.new_tile(shape, dst.dtype, "SBUF", "st")
        ops.emit("memset", "DVE", [t], [], {"value": float(value)}, mask)
        value = t
    elif not isinstance(value, View):
        raise E.err_invalid_argument("store value must be a tile or a scalar")
    if value.buf.memory == "PSUM":
        value = ops.copy_to_sbuf(value)
    elif value.buf.memory == "HBM":
        raise E.err_unsupported_memory("Expected operand 'value' of 'store' to be in 'sbuf|psum', got 'hbm'")
    if value.shape != dst.shape and ops.size_of(dst.shape) != ops.size_of(value.shape):
        if ops.size_of(dst.shape) < ops.size_of(value.shape):
            raise E.err_store_dst_shape_smaller_than_other_shape(
                "Illegal store destination shape %s is smaller than the value shape %s"
                % (list(dst.shape), list(value.shape)))
        value = dma_broadcast(value, dst.shape)
    if dst.buf.kind == "input" and not getattr(dst.buf, "mutable", True):
        raise E.err_cannot_update_immutable_parameter("Cannot update immutable parameter '%s'" % dst.buf.name)
    ops.dma(dst, value, mask)


def dma_broadcast(t, shape):
    """A stride-0 view of T over SHAPE (numpy rules, right-aligned) for a DMA source."""
    n = len(shape)
    axes = [Axis(1, 0, 0)] * (n - len(t.axes)) + list(t.axes)
    out = []
    for a, s in zip(axes, shape):
        if a.size == s:
            out.append(a.copy())
        elif a.size == 1:
            out.append(Axis(s, 0, 0))
        else:
            raise E.err_invalid_argument("cannot broadcast %s to %s" % (t.shape, tuple(shape)))
    return t.copy_view(axes=out)


def copy(src, *, mask=None, dtype=None, **kwargs):
    ops.tile_operand(src, "copy", "src")
    out = ops.new_tile(src.shape, dtype or src.dtype, "SBUF", "copy")
    return ops.mark_producer(out, ops.emit("tensor_copy", "DVE", [out], [src], {}, mask))


elementwise.OPS[copy] = {"alu": "bypass", "act": "copy", "reduce": None, "name": "copy"}


def assign(dst, value, mask=None):
    """dst[...] = value (a tile, or a scalar)."""
    if ops.is_scalar(value):
        if dst.buf.memory == "HBM":
            return store(dst, value, mask=mask)
        return ops.emit("memset", "DVE", [dst], [], {"value": float(value)}, mask)
    if isinstance(value, (IndirectTensor, FreeGather)):
        ops.tile_operand(value, "assign", "src")            # on chip: the original's copy-dynamic error
        return assign(dst, load(value, mask=mask, dtype=dst.dtype))
    if not isinstance(value, View):
        raise E.err_invalid_argument("cannot assign %r to a tensor" % (value,))
    if dst.buf.memory == "HBM":
        return store(dst, value, mask=mask)
    if value.buf.memory == "HBM":
        t = load(value, mask=mask, dtype=dst.dtype)
        return assign(dst, t)
    if ops.size_of(dst.shape) < ops.size_of(value.shape):
        raise E.err_store_dst_shape_smaller_than_other_shape(
            "Illegal assignment destination shape in 'a = b': shape %s of parameter 'a' is smaller than "
            "other parameter shapes b%s" % (list(dst.shape), list(value.shape)))
    if mask is None and ops.retarget(dst, value):
        return None
    if value.shape != dst.shape and not (ops.size_of(value.shape) == ops.size_of(dst.shape)
                                         and value.shape[:1] == dst.shape[:1]):
        value = ops.broadcast_to(value, dst.shape)
    ops.tile_operand(dst, "assign", "dst")
    ops.tile_operand(value, "assign", "src")
    return ops.emit("tensor_copy", "DVE", [dst], [value], {}, mask)


def nc_transpose(data, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """2-D partition/free transpose: TensorE (<= 128x128, into PSUM) or VectorE (<= 32x32)."""
    ops.tile_operand(data, "nc_transpose", "data")
    if len(data.shape) != 2:
        raise E.err_exceed_max_supported_dimension(
            "parameter 'data%s' of 'nc_transpose' exceed max supported number of dimensions of 2" % (list(data.shape),))
    P, F = data.shape
    eng = engine_name(engine, "PE" if (P > 32 or F > 32) else "DVE", ("PE", "DVE"))
    lim = 128 if eng == "PE" else 32
    for d, n in ((0, P), (1, F)):
        if n > lim:
            raise E.err_size_of_dimension_exceed_arch_limit(
                "size of dimension %d in 'data%s' of 'nc_transpose' exceed architecture limitation of %d"
                % (d, list(data.shape), lim))
    src = data
    if eng == "PE" and data.buf.memory != "SBUF":
        src = ops.copy_to_sbuf(data)
    out = ops.new_tile((F, P), dtype or data.dtype, "PSUM" if eng == "PE" else "SBUF", "tp")
    inst = ops.emit("transpose", eng, [out], [src], {}, mask, [[(0, 0), (1, 1)], [(0, 1), (1, 0)]])
    return ops.mark_producer(out, inst)
