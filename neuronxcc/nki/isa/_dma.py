"""nisa DMA instructions: ``dma_copy`` (direct and indirect), ``dma_transpose``, and the copies whose address depends
on a run-time value (``tensor_copy_dynamic_src`` / ``_dst``)."""
from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.elementwise import op_name as _op_name
from neuronxcc.nki._trace.engines import dge_mode, engine, oob_mode
from neuronxcc.nki._trace.engines import engine_name as _eng
from neuronxcc.nki._trace.movement import assign as _assign
from neuronxcc.nki._trace.tensor import Tensor as _Tensor
from neuronxcc.nki.isa._vector_engine import tensor_copy


_OOB_SKIP = oob_mode.skip


def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown):
    """A DMA between HBM and SBUF tensors (casting through fp32 when dtypes differ)."""
    from neuronxcc.nki._trace.indirect import IndirectTensor, gather, scatter
    skip = oob_mode == _OOB_SKIP
    src, dst = _hbm_to_hbm_at_a_register(src, dst, skip), _hbm_to_hbm_at_a_register(dst, src, skip)
    if isinstance(src, IndirectTensor):
        if not isinstance(dst, _Tensor) or dst.buf.memory != "SBUF" or dst_rmw_op is not None:
            raise _E.err_unsupported_memory("an indirect dma_copy source needs a plain SBUF destination")
        oob = "skip" if oob_mode == _OOB_SKIP else "error"
        if oob == "skip":
            # rows with an out-of-range index keep the destination's values: gather into a copy of dst
            t = _ops.copy_to_sbuf(dst)
            attrs_t = t
        else:
            attrs_t = None
        g = gather(src, dst.dtype, mask, oob=oob)
        if attrs_t is not None:
            g.buf.producer.dsts[0] = attrs_t
            g = attrs_t
        _assign(dst, g)
        return
    if isinstance(dst, IndirectTensor):
        acc = None
        if dst_rmw_op is not None:
            if _op_name(dst_rmw_op, "alu") != "add":
                raise _E.NkiNotImplementedError("nki.isa.dma_copy", "dst_rmw_op other than add")
            acc = "add"
        scatter(dst, src, mask, accumulate=acc, oob="skip" if oob_mode == _OOB_SKIP else "error")
        return
    for t, p in ((dst, "dst"), (src, "src")):
        if not isinstance(t, _Tensor) or t.buf.memory == "PSUM":
            raise _E.err_unsupported_memory("operand '%s' of 'dma_copy' must be an HBM or SBUF tensor" % p)
    if dst_rmw_op is not None:
        raise _E.NkiNotImplementedError("nki.isa.dma_copy", "dst_rmw_op on a direct (not indirect) destination")
    if src.shape != dst.shape:
        if _ops.size_of(src.shape) != _ops.size_of(dst.shape):
            raise _E.err_invalid_argument("dma_copy shapes %s and %s differ" % (dst.shape, src.shape))
    _ops.dma(dst, src, mask)


def _hbm_to_hbm_at_a_register(t, other, skip):
    """An HBM->HBM copy whose one side is indexed at dim 0 by a one-element tile (``K_prior[b, ...]`` with
    ``b = nl.load(batch_idx)``): that index becomes a register bounded to the dimension, as it does at the other
    dims, since a gather or scatter row per partition needs an on-chip side. A register clamps, so
    ``oob_mode=skip`` (an out-of-range row is not copied) is refused by name rather than copying a clamped row."""
    from neuronxcc.nki._trace.indirect import IndirectTensor
    from neuronxcc.nki._trace.registers import as_register
    if not isinstance(t, IndirectTensor) or t.index.size != 1 or getattr(other, "buf", None) is None or \
            other.buf.onchip:
        return t
    if skip:
        raise _E.NkiNotImplementedError("nki.isa.dma_copy", "an HBM->HBM copy at a run-time row index with "
                                        "oob_mode=skip (stage the rows through SBUF, or use oob_mode=error)")
    return t.base[(as_register(t.index, t.base.axes[0].size - 1),) + tuple(t.rest)]


def dma_transpose(src, *, axes=None, mask=None, dtype=None, **kwargs):
    """src with its axes permuted into a new SBUF tile, by one strided DMA."""
    if not isinstance(src, _Tensor) or src.buf.memory == "PSUM":
        raise _E.err_unsupported_memory("src of dma_transpose must be in HBM or SBUF")
    n = len(src.shape)
    axes = tuple(range(n - 1, -1, -1)) if axes is None else tuple(int(a) for a in axes)
    if sorted(axes) != list(range(n)):
        raise _E.err_invalid_argument("dma_transpose axes %s are not a permutation" % (axes,))
    v = src.copy_view(axes=[src.axes[a] for a in axes])
    out = _ops.new_tile(v.shape, dtype or src.dtype, "SBUF", "dmaT")
    return _ops.mark_producer(out, _ops.dma(out, v, mask))


def tensor_copy_dynamic_src(src, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """A copy whose source address depends on a run-time value: a tile element in the index expression
    (held in a register), or an index tile on a free dimension of one partition's rows (``src[0, idx, ...]``,
    a DMA gather on chip)."""
    from neuronxcc.nki._trace.indirect import IndirectTensor, gather
    if isinstance(src, IndirectTensor):
        return gather(src, dtype, mask)
    return tensor_copy(src, mask=mask, dtype=dtype, engine=engine)


def tensor_copy_dynamic_dst(*, dst, src, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """A copy into a destination whose address depends on a run-time value (see tensor_copy_dynamic_src)."""
    _ops.tile_operand(dst, "tensor_copy_dynamic_dst", "dst")
    _ops.tile_operand(src, "tensor_copy_dynamic_dst", "src")
    _ops.emit("tensor_copy", _eng(engine), [dst], [src], {}, mask)
    return dst
