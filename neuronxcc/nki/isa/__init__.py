"""``neuronxcc.nki.isa`` (nisa): NeuronCore instructions, each traced to (nearly) one BIR instruction.

Engines: ``nc_matmul`` / PE ``nc_transpose`` on TensorE (SBUF in, PSUM fp32 out), ``activation`` on
ScalarE (``func(data * scale + bias)``, optional add-reduce into ``reduce_res``), ALU instructions on
VectorE unless ``engine=`` says otherwise, ``iota`` / ``affine_select`` on GpSimd, ``dma_copy`` on a
DMA queue. Output dtype defaults to the (first) input tile's dtype. Instructions not built yet
raise ``NkiNotImplementedError`` naming the instruction.
"""
import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import dtypes as _D
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.elementwise import cast as _cast
from neuronxcc.nki._trace.elementwise import op_name as _op_name
from neuronxcc.nki._trace.elementwise import reduce as _reduce
from neuronxcc.nki._trace.engines import dge_mode, engine, nc_version, oob_mode, reduce_cmd  # noqa: F401
from neuronxcc.nki._trace.engines import engine_name as _eng
from neuronxcc.nki._trace.index import Idx as _Idx
from neuronxcc.nki._trace.index import Pred as _Pred
from neuronxcc.nki._trace.movement import assign as _assign
from neuronxcc.nki._trace.movement import nc_transpose  # noqa: F401
from neuronxcc.nki._trace.tensor import Tensor as _Tensor

_OOB_SKIP = oob_mode.skip


class fp32:
    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
dma_engine = engine.sync
unknown_engine = engine.unknown


def get_nc_version():
    from neuronxcc.nki._trace.context import current_or_none
    ctx = current_or_none()
    target = ctx.target if ctx is not None else "trn1"
    return nc_version.gen3 if target in ("trn2", "trn3") else nc_version.gen2


def _nyi(name, why=""):
    def f(*a, **k):
        raise _E.NkiNotImplementedError("nki.isa.%s" % name, why)
    f.__name__ = f.__qualname__ = name
    return f


def _scalar_or_col(v, data, api, param):
    """(attrs for a scalar, or the [P,1] column tile)."""
    if _ops.is_scalar(v):
        return float(v), None
    _ops.tile_operand(v, api, param)
    if v.shape[0] != data.shape[0] or any(s != 1 for s in v.shape[1:]):
        raise _E.err_invalid_argument("'%s' of '%s' must be a scalar or a (%d, 1) vector, got %s"
                                      % (param, api, data.shape[0], v.shape))
    return 0.0, v


def _in_sbuf(t):
    """T, or for a PSUM tile its copy in SBUF (VectorE, same dtype): the TensorE and GpSimd read SBUF, and
    kernels pass PSUM results straight on (nki-samples' flash_attn_bwd: an nc_transpose result as a matmul
    operand, a score tile into affine_select), which the original accepts."""
    if t.buf.memory != "PSUM":
        return t
    return _cast(t, t.dtype)


# -- TensorE -----------------------------------------------------------------------------------------
def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None, **kwargs):
    """stationary.T @ moving on TensorE into a new PSUM fp32 tile (shape (M,) + moving.shape[1:]).
    perf_mode='double_row*' (v3 fp8): operands [K, 2, M] / [K, 2, N] contract over K and the pair."""
    _ops.tile_operand(stationary, "nc_matmul", "stationary", ("SBUF", "PSUM"))
    _ops.tile_operand(moving, "nc_matmul", "moving", ("SBUF", "PSUM"))
    stationary, moving = _in_sbuf(stationary), _in_sbuf(moving)
    pm = kwargs.get("perf_mode")
    if pm is not None and "double_row" in str(pm):
        if len(stationary.shape) != 3 or len(moving.shape) != 3 or stationary.shape[1] != 2 or moving.shape[1] != 2:
            raise _E.err_invalid_argument("double-row nc_matmul takes [K, 2, M] and [K, 2, N] operands")
        out = None
        for t in range(2):
            st = stationary.copy_view(axes=[stationary.axes[0], stationary.axes[2]])
            st.off = st.off + stationary.axes[1].fstep * t
            mv = moving.copy_view(axes=[moving.axes[0], moving.axes[2]])
            mv.off = mv.off + moving.axes[1].fstep * t
            r = nc_matmul(st, mv, mask=mask)
            if out is None:
                out = r
            else:
                _ops.update_inplace(out, r, "add")
        return out
    K, M = stationary.shape[0], int(np.prod(stationary.shape[1:], dtype=np.int64))
    N = int(np.prod(moving.shape[1:], dtype=np.int64))
    if moving.shape[0] != K:
        raise _E.err_num_partition_mismatch(
            "number of partitions (contraction dimension) mismatch in parameters (stationary%s, moving%s) of "
            "'nc_matmul'" % (list(stationary.shape), list(moving.shape)))
    if M > 128:
        raise _E.err_size_of_dimension_exceed_arch_limit(
            "size of free dimension %d of 'stationary%s' of 'nc_matmul' exceed architecture limitation of 128"
            % (M, list(stationary.shape)))
    if N > 512:
        raise _E.err_size_of_dimension_exceed_arch_limit(
            "size of free dimension %d of 'moving%s' of 'nc_matmul' exceed architecture limitation of 512"
            % (N, list(moving.shape)))
    if len(stationary.shape) != 2:
        raise _E.err_exceed_max_supported_dimension("stationary of nc_matmul must be 2-D, got %s"
                                                    % (stationary.shape,))
    out = _ops.new_tile((M,) + tuple(moving.shape[1:]), np.float32, "PSUM", "mm")
    links = [[(0, 0), (1, 1)], [(1, 0), (2, 0)]] + [[(0, r), (2, r)] for r in range(1, len(moving.shape))]
    inst = _ops.emit("matmul", "PE", [out], [stationary, moving], {"psum_zero": True}, mask, links)
    return _ops.mark_producer(out, inst)


# -- ScalarE -----------------------------------------------------------------------------------------
def activation(op, data, *, bias=None, scale=1.0, reduce_op=None, reduce_res=None, reduce_cmd=reduce_cmd.idle,
               mask=None, dtype=None, **kwargs):
    """func(data * scale + bias) on ScalarE; with reduce_op=add also writes the free-axis sum to reduce_res."""
    _ops.tile_operand(data, "activation", "data")
    func = _op_name(op, "act")
    out = _ops.new_tile(data.shape, dtype or data.dtype, "SBUF", "act")
    attrs = {"func": func}
    dsts, srcs = [out], [data]
    if reduce_res is not None or reduce_op is not None:
        if reduce_res is None or _op_name(reduce_op, "reduce") != "add":
            raise _E.err_invalid_argument("activation reduce needs reduce_op=nl.add and a reduce_res tile")
        _ops.tile_operand(reduce_res, "activation", "reduce_res")
        attrs["reduce"] = "add"
        dsts.append(reduce_res)
    if bias is not None:
        if not isinstance(bias, _Tensor):
            attrs["bias"] = float(bias)
        else:
            _ops.tile_operand(bias, "activation", "bias")
            if bias.dtype not in (np.dtype(np.float32), np.dtype(np.float16), _D.BF16):
                raise _E.err_activation_bias_invalid_type(
                    "Bias parameter of activation must be a vector of type float32, float16, or bfloat16")
            if bias.shape[0] != data.shape[0] or any(s != 1 for s in bias.shape[1:]):
                raise _E.err_invalid_argument("bias of activation must be a (%d, 1) vector" % data.shape[0])
            attrs["bias_ap"] = True
            srcs.append(bias)
    if isinstance(scale, _Tensor):
        _ops.tile_operand(scale, "activation", "scale")
        if scale.shape[0] != data.shape[0] or any(s != 1 for s in scale.shape[1:]):
            raise _E.err_activation_scale_scalar_or_vector(
                "Scale parameter of activation must be either a scalar value or a 1D vector spanning the "
                "partition dimension")
        if scale.dtype != np.dtype(np.float32):
            raise _E.err_activation_scale_invalid_type(
                "Scale parameter of activation must be a scalar or vector of type float32")
        attrs["scale_ap"] = True
        srcs.append(scale)
    else:
        attrs["scale"] = float(scale)
    nd = len(dsts)
    links = [[(0, r), (nd, r)] for r in range(len(data.shape))]
    for k in range(1, len(dsts) + len(srcs)):
        if k != nd:
            links[0].append((k, 0))
    inst = _ops.emit("activation", "ACT", dsts, srcs, attrs, mask, links)
    return _ops.mark_producer(out, inst)


def activation_reduce(op, data, *, reduce_op, reduce_res, bias=None, scale=1.0, mask=None, dtype=None, **kwargs):
    return activation(op, data, bias=bias, scale=scale, reduce_op=reduce_op, reduce_res=reduce_res, mask=mask,
                      dtype=dtype)


# -- VectorE / GpSimd ALU ---------------------------------------------------------------------------
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
    v0, t0 = _scalar_or_col(operand0, data, "tensor_scalar", "operand0")
    if t0 is None:
        attrs["operand0"] = v0
    else:
        attrs["operand0_ap"] = True
        srcs.append(t0)
    if op1 is not None:
        attrs["op1"] = _op_name(op1, "alu")
        attrs["reverse1"] = bool(reverse1)
        v1, t1 = _scalar_or_col(operand1, data, "tensor_scalar", "operand1")
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
    v0, t0 = _scalar_or_col(operand0, data, "scalar_tensor_tensor", "operand0")
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


def tensor_partition_reduce(op, data, *, mask=None, dtype=None, **kwargs):
    """Reduce across partitions on GpSimd: (P, F) -> (1, F)."""
    _ops.tile_operand(data, "tensor_partition_reduce", "data", ("SBUF",))
    out = _ops.new_tile((1,) + tuple(data.shape[1:]), dtype or data.dtype, "SBUF", "pr")
    links = [[(0, r), (1, r)] for r in range(1, len(data.shape))]
    inst = _ops.emit("partition_reduce", "POOL", [out], [data], {"op": _op_name(op, "reduce")}, mask, links)
    return _ops.mark_producer(out, inst)


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
    v, t = _scalar_or_col(initial, data0, "tensor_tensor_scan", "initial")
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
        raise _E.NkiNotImplementedError("nki.isa.%s" % api, "a loop-dependent offset spanning %d values" % (hi - lo + 1))
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


def _affine_pattern(expr, shape, api):
    cm, pat, const, dyn = _split_affine(expr, shape, api)
    if not dyn.is_const():
        raise _E.NkiNotImplementedError("nki.isa.%s" % api, "expressions with loop iterators (%s)" % dyn)
    return cm, pat, const + int(dyn)


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
    on_true_tile = _in_sbuf(on_true_tile)
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


def dma_copy(*, dst, src, mask=None, dst_rmw_op=None, oob_mode=oob_mode.error, dge_mode=dge_mode.unknown):
    """A DMA between HBM and SBUF tensors (casting through fp32 when dtypes differ)."""
    from neuronxcc.nki._trace.indirect import IndirectTensor, gather, scatter
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


def _flat_free(t):
    """T seen as [P, F] when its free axes are one contiguous run (else T)."""
    return t


def _out2(data, n, dtype, prefix):
    return _ops.new_tile((data.shape[0], n), dtype, "SBUF", prefix)


def max8(*, src, mask=None, dtype=None, **kwargs):
    """The 8 largest values of each partition, descending (VectorE)."""
    _ops.tile_operand(src, "max8", "src")
    n = _ops.size_of(src.shape[1:])
    if not 8 <= n <= 16384:
        raise _E.err_size_of_dimension_exceed_arch_limit("max8 reads 8..16384 elements per partition, got %d" % n)
    out = _out2(src, 8, dtype or src.dtype, "max8")
    return _ops.mark_producer(out, _ops.emit("max8", "DVE", [out], [src], {}, mask, [[(0, 0), (1, 0)]]))


def nc_find_index8(*, data, vals, mask=None, dtype=None, **kwargs):
    """Index of the first occurrence of each of the 8 vals in each partition of data (VectorE)."""
    _ops.tile_operand(data, "nc_find_index8", "data")
    _ops.tile_operand(vals, "nc_find_index8", "vals")
    if _ops.size_of(vals.shape[1:]) != 8:
        raise _E.err_invalid_argument("vals of nc_find_index8 must have 8 elements per partition")
    dt = _D.np_dtype(dtype) if dtype is not None else np.dtype(np.uint32)
    out = _out2(data, 8, dt, "fidx8")
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
    out = _out2(data, 6, dtype or data.dtype, "bnst")
    return _ops.mark_producer(out, _ops.emit("bn_stats", "DVE", [out], [data], {}, mask, [[(0, 0), (1, 0)]]))


def bn_aggr(data, *, mask=None, dtype=None, **kwargs):
    """(mean, variance) per partition from one or more bn_stats outputs (VectorE)."""
    _ops.tile_operand(data, "bn_aggr", "data")
    if _ops.size_of(data.shape[1:]) % 3:
        raise _E.err_invalid_argument("bn_aggr input must hold (count, mean, var*count) triples")
    out = _out2(data, 2, dtype or data.dtype, "bnag")
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


def dropout(data, prob, *, mask=None, dtype=None, **kwargs):
    """Zero elements with probability prob (VectorE; birsim's counter-based generator)."""
    from neuronxcc.nki._trace.context import current
    _ops.tile_operand(data, "dropout", "data")
    ctx = current()
    seed = getattr(ctx, "_dropout_seed", 0)
    ctx._dropout_seed = seed + 1
    attrs = {"seed": seed}
    srcs = [data]
    v, t = _scalar_or_col(prob, data, "dropout", "prob")
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
        _scalar_or_col(b, on_true_tile, "range_select", nm)
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


def tensor_scalar_reduce(*, data, op0, operand0, reduce_op, reduce_res, reverse0=False, dtype=None, mask=None,
                         **kwargs):
    """tensor_scalar with one operator, plus its free-axes reduction into reduce_res."""
    out = tensor_scalar(data, op0, operand0, reverse0=reverse0, dtype=dtype, mask=mask)
    _ops.tile_operand(reduce_res, "tensor_scalar_reduce", "reduce_res")
    _ops.emit("tensor_reduce", "DVE", [reduce_res], [out],
              {"op": _op_name(reduce_op, "reduce"), "axes": max(1, len(out.shape) - 1), "negate": False}, mask,
              [[(0, 0), (1, 0)]])
    return out


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


def sequence_bounds(*, segment_ids, dtype=None):
    """For each element: (start, end) of its segment; padding (id 0) gets (n, -1) (GpSimd)."""
    _ops.tile_operand(segment_ids, "sequence_bounds", "segment_ids", ("SBUF",))
    if segment_ids.shape[0] != 1:
        raise _E.err_invalid_argument("sequence_bounds takes one partition")
    n = _ops.size_of(segment_ids.shape[1:])
    out = _ops.new_tile((1, 2, n), dtype or segment_ids.dtype, "SBUF", "seqb")
    return _ops.mark_producer(out, _ops.emit("sequence_bounds", "POOL", [out], [segment_ids], {}, None, []))


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
from neuronxcc.nki.isa._custom import builtin_custom_op  # noqa: E402,F401
