"""nisa ALU instructions on VectorE (GpSimd / ScalarE with ``engine=``): element-wise, scalar and scan forms,
reductions, copies, memset, dropout."""
from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.elementwise import op_name as _op_name
from neuronxcc.nki._trace.elementwise import reduce as _reduce
from neuronxcc.nki._trace.engines import engine
from neuronxcc.nki._trace.engines import engine_name as _eng
from neuronxcc.nki.isa._common import scalar_or_col


def tensor_tensor(data1, data2, op, *, dtype=None, mask=None, engine=engine.unknown, **kwargs):
    """data1 op data2 element-wise (VectorE; GpSimd with engine=gpsimd or for power)."""
    _ops.tile_operand(data1, "tensor_tensor", "data1")
    _ops.tile_operand(data2, "tensor_tensor", "data2")
    alu = _op_name(op, "alu")
    if data1.shape[0] != data2.shape[0]:
        raise _E.err_num_partition_mismatch(
            "number of partitions (dimension 0 size of a tile) mismatch in parameters (data1%s, data2%s) of "
            "'tensor_tensor'" % (list(data1.shape), list(data2.shape)))
    eng = _eng(engine, "POOL" if alu == "pow" else "DVE", ("DVE", "POOL"))
    out = _ops.new_tile(data1.shape, dtype or data1.dtype, "SBUF", "tt")
    inst = _ops.emit("tensor_tensor", eng, [out], [data1, _ops.expand(data2, data1.shape)], {"op": alu}, mask)
    return _ops.mark_producer(out, inst)


def tensor_scalar(data, op0, operand0, reverse0=False, op1=None, operand1=None, reverse1=False, *, dtype=None,
                  mask=None, engine=engine.unknown, **kwargs):
    """(data op0 operand0) op1 operand1; operands are scalars or (P, 1) vectors broadcast along free."""
    _ops.tile_operand(data, "tensor_scalar", "data")
    attrs = {"op0": _op_name(op0, "alu"), "reverse0": bool(reverse0)}
    srcs = [data]
    v0, t0 = scalar_or_col(operand0, data, "tensor_scalar", "operand0")
    if t0 is None:
        attrs["operand0"] = v0
    else:
        attrs["operand0_ap"] = True
        srcs.append(t0)
    if op1 is not None:
        attrs["op1"] = _op_name(op1, "alu")
        attrs["reverse1"] = bool(reverse1)
        v1, t1 = scalar_or_col(operand1, data, "tensor_scalar", "operand1")
        if t1 is None:
            attrs["operand1"] = v1
        else:
            attrs["operand1_ap"] = True
            srcs.append(t1)
    out = _ops.new_tile(data.shape, dtype or data.dtype, "SBUF", "ts")
    links = [[(0, r), (1, r)] for r in range(len(data.shape))]
    links[0].extend((k, 0) for k in range(2, len(srcs) + 1))
    inst = _ops.emit("tensor_scalar", _eng(engine), [out], srcs, attrs, mask, links)
    return _ops.mark_producer(out, inst)


def scalar_tensor_tensor(*, data, op0, operand0, op1, operand1, reverse0=False, reverse1=False, dtype=None,
                         mask=None, **kwargs):
    """(data op0 operand0) op1 operand1 on VectorE; operand0 a scalar or (P, 1) vector, operand1 a tile."""
    _ops.tile_operand(data, "scalar_tensor_tensor", "data")
    _ops.tile_operand(operand1, "scalar_tensor_tensor", "operand1")
    o1 = _op_name(op1, "alu")
    if reverse1:
        if o1 == "subtract":
            o1 = "rsub"
        elif o1 not in ("add", "mult", "max", "min"):
            raise _E.NkiNotImplementedError("nki.isa.scalar_tensor_tensor", "reverse1 with %s" % o1)
    attrs = {"op0": _op_name(op0, "alu"), "op1": o1, "reverse0": bool(reverse0)}
    srcs = [data, _ops.expand(operand1, data.shape)]
    v0, t0 = scalar_or_col(operand0, data, "scalar_tensor_tensor", "operand0")
    if t0 is None:
        attrs["operand0"] = v0
    else:
        attrs["operand0_ap"] = True
        srcs.append(t0)
    out = _ops.new_tile(data.shape, dtype or data.dtype, "SBUF", "stt")
    links = [[(0, r), (1, r), (2, r)] for r in range(len(data.shape))]
    if t0 is not None:
        links[0].append((3, 0))
    inst = _ops.emit("scalar_tensor_tensor", "DVE", [out], srcs, attrs, mask, links)
    return _ops.mark_producer(out, inst)


def tensor_reduce(op, data, axis, *, mask=None, dtype=None, negate=False, keepdims=False, **kwargs):
    return _reduce(_op_name(op, "reduce"), data, axis, dtype, mask, keepdims, "tensor_reduce", negate=negate)


def tensor_copy(src, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """A copy (cast to dtype) on VectorE / ScalarE / GpSimd; bit exact on VectorE/GpSimd for equal dtypes."""
    _ops.tile_operand(src, "tensor_copy", "src")
    eng = _eng(engine)
    out = _ops.new_tile(src.shape, dtype or src.dtype, "SBUF", "cp")
    return _ops.mark_producer(out, _ops.emit("tensor_copy", eng, [out], [src], {}, mask))


def reciprocal(data, *, dtype=None, mask=None, **kwargs):
    """1 / data on VectorE."""
    _ops.tile_operand(data, "reciprocal", "data")
    out = _ops.new_tile(data.shape, dtype or data.dtype, "SBUF", "rcp")
    inst = _ops.emit("tensor_scalar", "DVE", [out], [data], {"op0": "divide", "operand0": 1.0, "reverse0": True},
                     mask)
    return _ops.mark_producer(out, inst)


def tensor_tensor_scan(data0, data1, initial, op0, op1, reverse0=False, reverse1=False, *, dtype=None, mask=None,
                       **kwargs):
    """out[i] = (data0[i] op0 out[i-1]) op1 data1[i] along the free axis, out[-1] = initial."""
    _ops.tile_operand(data0, "tensor_tensor_scan", "data0")
    _ops.tile_operand(data1, "tensor_tensor_scan", "data1")
    attrs = {"op0": _op_name(op0, "alu"), "op1": _op_name(op1, "alu")}
    for rev, key in ((reverse0, "op0"), (reverse1, "op1")):
        if rev and attrs[key] not in ("add", "mult", "max", "min"):      # reversing a commutative op is a no-op
            raise _E.NkiNotImplementedError("nki.isa.tensor_tensor_scan", "reversed operands of %s" % attrs[key])
    srcs = [data0, data1]
    v, t = scalar_or_col(initial, data0, "tensor_tensor_scan", "initial")
    if t is None:
        attrs["initial"] = v
    else:
        attrs["initial_ap"] = True
        srcs.append(t)
    out = _ops.new_tile(data0.shape, dtype or data0.dtype, "SBUF", "scan")
    links = [[(0, r), (1, r), (2, r)] for r in range(len(data0.shape))]
    if t is not None:
        links[0].append((3, 0))
    inst = _ops.emit("tensor_tensor_scan", "DVE", [out], srcs, attrs, mask, links)
    return _ops.mark_producer(out, inst)


def memset(shape, value, dtype, *, mask=None, engine=engine.unknown, **kwargs):
    out = _ops.new_tile(tuple(shape), dtype, "SBUF", "ms")
    return _ops.mark_producer(out, _ops.emit("memset", _eng(engine, "DVE", ("DVE", "POOL")), [out], [],
                                             {"value": float(value)}, mask))


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None,
                         **kwargs):
    """tensor_scalar with one operator, plus its free-axes reduction into reduce_res."""
    out = tensor_scalar(data, op0, operand0, reverse0=reverse0, dtype=dtype, mask=mask)
    _ops.tile_operand(reduce_res, "tensor_scalar_reduce", "reduce_res")
    _ops.emit("tensor_reduce", "DVE", [reduce_res], [out],
              {"op": _op_name(reduce_op, "reduce"), "axes": max(1, len(out.shape) - 1), "negate": False}, mask,
              [[(0, 0), (1, 0)]])
    return out


def dropout(data, prob, *, mask=None, dtype=None, **kwargs):
    """Zero elements with probability prob (VectorE; birsim's counter-based generator)."""
    from neuronxcc.nki._trace.context import current
    _ops.tile_operand(data, "dropout", "data")
    ctx = current()
    seed = getattr(ctx, "_dropout_seed", 0)
    ctx._dropout_seed = seed + 1
    attrs = {"seed": seed}
    srcs = [data]
    v, t = scalar_or_col(prob, data, "dropout", "prob")
    if t is None:
        attrs["prob"] = v
    else:
        attrs["prob_ap"] = True
        srcs.append(t)
    out = _ops.new_tile(data.shape, dtype or data.dtype, "SBUF", "drop")
    links = [[(0, r), (1, r)] for r in range(len(data.shape))]
    if t is not None:
        links[0].append((2, 0))
    return _ops.mark_producer(out, _ops.emit("dropout", "DVE", [out], srcs, attrs, mask, links))
