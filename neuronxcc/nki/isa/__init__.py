"""``neuronxcc.nki.isa`` (nisa): NeuronCore instructions, each traced to (nearly) one BIR instruction.

Engines: ``nc_matmul`` / PE ``nc_transpose`` on TensorE (SBUF in, PSUM fp32 out), ``activation`` on
ScalarE (``func(data * scale + bias)``, optional add-reduce into ``reduce_res``), ALU instructions on
VectorE unless ``engine=`` says otherwise, ``iota`` / ``affine_select`` on GpSimd, ``dma_copy`` on a
DMA queue. Output dtype defaults to the (first) input tile's dtype. Instructions not built yet
raise ``NkiNotImplementedError`` naming the instruction.
"""
from enum import IntEnum

import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import dtypes as _D
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.index import Idx as _Idx
from neuronxcc.nki._trace.index import Pred as _Pred
from neuronxcc.nki._trace.tensor import Tensor as _Tensor
from neuronxcc.nki.language._math import op_name as _op_name


class dge_mode(IntEnum):
    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class engine(IntEnum):
    tensor = 1
    vector = 5
    scalar = 2
    gpsimd = 3
    sync = 6
    unknown = 0


class nc_version(IntEnum):
    gen2 = 2
    gen3 = 3


class oob_mode(IntEnum):
    error = 0
    skip = 1


class reduce_cmd(IntEnum):
    idle = 0
    reset = 1
    reset_reduce = 3
    reduce = 2


class fp32:
    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


tensor_engine = engine.tensor
vector_engine = engine.vector
scalar_engine = engine.scalar
gpsimd_engine = engine.gpsimd
dma_engine = engine.sync
unknown_engine = engine.unknown

_ENG = {engine.tensor: "PE", engine.vector: "DVE", engine.scalar: "ACT", engine.gpsimd: "POOL",
        engine.sync: "SP"}


def get_nc_version():
    from neuronxcc.nki._trace.context import current_or_none
    ctx = current_or_none()
    target = ctx.target if ctx is not None else "trn1"
    return nc_version.gen3 if target in ("trn2", "trn3") else nc_version.gen2


def _eng(e, default="DVE", allowed=("DVE", "ACT", "POOL")):
    if e is None or e == engine.unknown:
        return default
    name = _ENG.get(e, e if isinstance(e, str) else None)
    if name not in allowed:
        raise _E.err_invalid_argument("engine %r is not supported here (allowed: %s)" % (e, ", ".join(allowed)))
    return name


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


# -- TensorE -----------------------------------------------------------------------------------------
def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None, **kwargs):
    """stationary.T @ moving on TensorE into a new PSUM fp32 tile (shape (M,) + moving.shape[1:])."""
    _ops.tile_operand(stationary, "nc_matmul", "stationary", ("SBUF",))
    _ops.tile_operand(moving, "nc_matmul", "moving", ("SBUF",))
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


def nc_transpose(data, *, mask=None, dtype=None, engine=engine.unknown, **kwargs):
    """2-D partition/free transpose: TensorE (<= 128x128, into PSUM) or VectorE (<= 32x32)."""
    _ops.tile_operand(data, "nc_transpose", "data")
    if len(data.shape) != 2:
        raise _E.err_exceed_max_supported_dimension(
            "parameter 'data%s' of 'nc_transpose' exceed max supported number of dimensions of 2" % (list(data.shape),))
    P, F = data.shape
    eng = _eng(engine, "PE" if (P > 32 or F > 32) else "DVE", ("PE", "DVE"))
    lim = 128 if eng == "PE" else 32
    for d, n in ((0, P), (1, F)):
        if n > lim:
            raise _E.err_size_of_dimension_exceed_arch_limit(
                "size of dimension %d in 'data%s' of 'nc_transpose' exceed architecture limitation of %d"
                % (d, list(data.shape), lim))
    src = data
    if eng == "PE" and data.buf.memory != "SBUF":
        src = _ops.copy_to_sbuf(data)
    out = _ops.new_tile((F, P), dtype or data.dtype, "PSUM" if eng == "PE" else "SBUF", "tp")
    inst = _ops.emit("transpose", eng, [out], [src], {}, mask, [[(0, 0), (1, 1)], [(0, 1), (1, 0)]])
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
    from neuronxcc.nki.language._math import reduce
    return reduce(_op_name(op, "reduce"), data, axis, dtype, mask, keepdims, "tensor_reduce", negate=negate)


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
    if reverse0 or reverse1:
        raise _E.NkiNotImplementedError("nki.isa.tensor_tensor_scan", "reverse0/reverse1")
    attrs = {"op0": _op_name(op0, "alu"), "op1": _op_name(op1, "alu")}
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


def _affine_pattern(expr, shape, api):
    """(channel_multiplier, [[step, num], ...], offset) of an affine index expression over a tile shape."""
    terms = expr.expr.affine() if isinstance(expr, _Idx) else None
    if terms is None:
        raise _E.err_invalid_argument("%s needs an affine expression of nl.arange / nl.mgrid indices" % api)
    coeffs, const = terms
    cm = 0
    steps = [0] * (len(shape) - 1)
    for v, c in coeffs.items():
        if v not in expr.axes:
            raise _E.NkiNotImplementedError("nki.isa.%s" % api, "expressions with loop iterators (%s)" % v)
        ax = expr.axes[v] + len(shape) - len(expr.shape)
        if ax == 0:
            cm += c
        else:
            steps[ax - 1] += c
    pat = [[s, n] for s, n in zip(steps, shape[1:])] or [[1, 1]]
    return cm, pat, const


def iota(expr, dtype, *, mask=None, **kwargs):
    """A constant tile from an affine expression of nl.arange / nl.mgrid indices (GpSimd, int32 math)."""
    if _ops.is_scalar(expr):
        expr = _Idx(__import__("neuronxcc.pelican", fromlist=["const"]).const(int(expr)), (1, 1), {})
    shape = expr.shape if len(expr.shape) >= 2 else (tuple(expr.shape) + (1,) * (2 - len(expr.shape)))
    cm, pat, off = _affine_pattern(expr, shape, "iota")
    out = _ops.new_tile(shape, dtype, "SBUF", "iota")
    inst = _ops.emit("iota", "POOL", [out], [], {"pattern": pat, "offset": int(off), "channel_multiplier": int(cm)},
                     mask)
    return _ops.mark_producer(out, inst)


_CMP = {"lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "eq": "eq", "ne": "ne"}


def affine_select(pred, on_true_tile, on_false_value, *, mask=None, dtype=None, **kwargs):
    """on_true_tile where the affine predicate holds, else on_false_value (GpSimd)."""
    _ops.tile_operand(on_true_tile, "affine_select", "on_true_tile", ("SBUF",))
    if not isinstance(pred, _Pred) or len(pred.atoms) != 1:
        raise _E.err_invalid_argument("affine_select needs one affine comparison as pred")
    e, op = pred.atoms[0]
    from neuronxcc.nki._trace.index import is_index_var
    axes = {}
    for v in e.free_vars():
        if is_index_var(v):
            axes[v] = _find_axis(on_true_tile, v)
    idx = _Idx(e, on_true_tile.shape, axes)
    cm, pat, off = _affine_pattern(idx, on_true_tile.shape, "affine_select")
    out = _ops.new_tile(on_true_tile.shape, dtype or on_true_tile.dtype, "SBUF", "asel")
    inst = _ops.emit("affine_select", "POOL", [out], [on_true_tile],
                     {"pattern": pat, "offset": int(off), "channel_multiplier": int(cm), "cmp": _CMP[op],
                      "on_false": float(on_false_value)}, mask)
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
    for t, p in ((dst, "dst"), (src, "src")):
        if not isinstance(t, _Tensor) or t.buf.memory == "PSUM":
            raise _E.err_unsupported_memory("operand '%s' of 'dma_copy' must be an HBM or SBUF tensor" % p)
    if dst_rmw_op is not None:
        raise _E.NkiNotImplementedError("nki.isa.dma_copy", "dst_rmw_op")
    if src.shape != dst.shape:
        if _ops._size(src.shape) != _ops._size(dst.shape):
            raise _E.err_invalid_argument("dma_copy shapes %s and %s differ" % (dst.shape, src.shape))
    _ops.dma(dst, src, mask)


dma_transpose = _nyi("dma_transpose")
bn_stats = _nyi("bn_stats")
bn_aggr = _nyi("bn_aggr")
max8 = _nyi("max8")
nc_find_index8 = _nyi("nc_find_index8")
nc_match_replace8 = _nyi("nc_match_replace8")
local_gather = _nyi("local_gather")
nc_stream_shuffle = _nyi("nc_stream_shuffle")
dropout = _nyi("dropout")
range_select = _nyi("range_select")
select_reduce = _nyi("select_reduce")
sequence_bounds = _nyi("sequence_bounds")
tensor_scalar_reduce = _nyi("tensor_scalar_reduce")
tensor_copy_dynamic_src = _nyi("tensor_copy_dynamic_src")
tensor_copy_dynamic_dst = _nyi("tensor_copy_dynamic_dst")
tensor_copy_predicated = _nyi("tensor_copy_predicated")
builtin_custom_op = _nyi("builtin_custom_op")
