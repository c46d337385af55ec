"""``neuronxcc.nki.language`` (nl): the high-level NKI API, traced to BIR.

Every function records instructions in the kernel being traced (see ``neuronxcc.nki._trace``):
element-wise math on VectorE (``tensor_tensor`` / ``tensor_scalar``) or ScalarE (``activation``),
reductions with ``tensor_reduce``, ``load`` / ``store`` as DMAs, ``matmul`` / ``transpose`` on the
TensorE. Arithmetic is fp32 inside the engines, cast on output; binary ops take the promoted dtype
(``nki.api.shared`` rules) unless ``dtype=`` is given. Names the original exports but this
implementation does not build yet raise ``NkiNotImplementedError`` naming the API.
"""
import builtins as _bi

import ml_dtypes as _mld
import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import dtypes as _D
from neuronxcc.nki._trace import elementwise as _ew
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.context import current as _current
from neuronxcc.nki._trace.context import loop_iter as _loop_iter
from neuronxcc.nki._trace.index import DynSlice as _DynSlice
from neuronxcc.nki._trace.index import Idx as _Idx
from neuronxcc.nki._trace.index import mgrid  # noqa: F401
from neuronxcc.nki._trace.movement import copy, load, store  # noqa: F401
from neuronxcc.nki._trace.tensor import Axis as _Axis
from neuronxcc.nki._trace.tensor import Tensor as _Tensor
from neuronxcc.nki._trace.tensor import whole as _whole
from neuronxcc.nki.language.buffers import (Buffer, ParDim, hbm, nc, par_dim, private_hbm, psum, sbuf,  # noqa: F401
                                            shared_hbm, spmd_dim)

# -- dtypes -----------------------------------------------------------------------------------
bool_ = np.bool_
int8, int16, int32 = np.int8, np.int16, np.int32
uint8, uint16, uint32 = np.uint8, np.uint16, np.uint32
float16, float32 = np.float16, np.float32
bfloat16, float8_e4m3, float8_e5m2, float8_e4m3fn = _D.BF16, _D.FP8E4, _D.FP8E5, _D.FP8E4FN   # the registry's
tfloat32 = _D.TFLOAT32


class fp32:
    """FP32 bit-pattern constants."""
    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


class bfp16:
    min = float(_mld.finfo(_mld.bfloat16).min)
    max = float(_mld.finfo(_mld.bfloat16).max)


def finfo(dtype):
    d = _D.np_dtype(dtype)
    return _mld.finfo(d) if d.kind == "V" or d in (bfloat16, float8_e4m3, float8_e5m2) else np.finfo(d)


class tile_size:
    """Architecture tile limits (NeuronCore-v2)."""
    pmax = 128
    psum_fmax = 512
    gemm_stationary_fmax = 128
    gemm_moving_fmax = 512
    bn_stats_fmax = 512
    psum_min_align = 4
    sbuf_min_align = 32
    total_available_sbuf_size = 192 * 1024


def _nyi(name, why=""):
    def f(*a, **k):
        raise _E.NkiNotImplementedError("nki.language.%s" % name, why)
    f.__name__ = name
    f.__qualname__ = name
    return f


# -- creation -----------------------------------------------------------------------------------
def _shape_pdim(shape):
    shape = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    pd = [i for i, s in enumerate(shape) if isinstance(s, ParDim)]
    return tuple(int(s) for s in shape), (pd[0] if pd else 0)


def ndarray(shape, dtype, *, buffer=None, name="", **kwargs):
    """A new tensor in BUFFER (default sbuf)."""
    ctx = _current()
    buffer = buffer if buffer is not None else sbuf
    if isinstance(buffer, type) or callable(buffer) and not isinstance(buffer, Buffer):
        buffer = buffer()
    shape, pdim = _shape_pdim(shape)
    dt = _D.np_dtype(dtype)
    if buffer.memory == "HBM":
        if buffer.hbm_kind == "shared" and (ctx.loops or getattr(ctx, "depth", 0)):
            raise _E.err_shared_hbm_must_in_kernel_level(
                "shared_hbm buffer can only be created top level kernel scope")
        b = ctx.new_buf(name or "hbm", "HBM", shape, dt, 0, buffer.hbm_kind)
    else:
        if len(shape) < 2:
            raise _E.err_insufficient_rank("Insufficient rank: an on-chip tensor needs a partition and a free "
                                           "dimension, got shape %s" % (shape,))
        if shape[pdim] > _ops.PMAX:
            raise _E.err_num_partition_exceed_arch_limit(
                "number of partitions %d exceed architecture limitation of %d" % (shape[pdim], _ops.PMAX))
        if buffer.memory == "PSUM" and pdim == 0:
            _ops.check_tile_shape(shape, "PSUM", dt)
        b = ctx.new_buf(name or ("psum" if buffer.memory == "PSUM" else "sb"), buffer.memory, shape, dt, pdim,
                        "ndarray")
        if buffer.alloc is not None:
            b.alloc = buffer.alloc(b)
            ctx.direct_alloc = True
    return _whole(b)


def _flat(t):
    b = t.buf
    return _Tensor(b, b.dtype, 0, 0, [_Axis(b.partitions, 1, 0), _Axis(b.free_elems, 0, 1)])


def full(shape, fill_value, dtype, *, buffer=None, name="", **kwargs):
    buffer = buffer if buffer is not None else sbuf
    if buffer.memory == "HBM":
        raise _E.err_hbm_tensor_with_init_value_not_supported("Creating HBM tensor with init value is not supported")
    if buffer.alloc is not None:
        raise _E.err_tensor_creation_on_scratchpad_with_init_value_not_supported(
            "Creating SBUF/PSUM tensor with init value is not supported in allocated NKI kernels")
    t = ndarray(shape, dtype, buffer=buffer, name=name)
    _ops.emit("memset", "DVE", [_flat(t)], [], {"value": float(fill_value)})
    return t


def zeros(shape, dtype, *, buffer=None, name="", **kwargs):
    return full(shape, 0.0, dtype, buffer=buffer, name=name)


def ones(shape, dtype, *, buffer=None, name="", **kwargs):
    return full(shape, 1.0, dtype, buffer=buffer, name=name)


def empty_like(a, dtype=None, *, buffer=None, name="", **kwargs):
    return ndarray(a.shape, dtype or a.dtype, buffer=buffer if buffer is not None else a.buffer, name=name)


def zeros_like(a, dtype=None, *, buffer=None, name="", **kwargs):
    return zeros(a.shape, dtype or a.dtype, buffer=buffer if buffer is not None else a.buffer, name=name)


def shared_constant(constant, dtype=None, **kwargs):
    ctx = _current()
    arr = np.asarray(constant)
    dt = _D.np_dtype(dtype) if dtype is not None else _D.np_dtype(arr.dtype)
    b = ctx.new_buf("const", "HBM", arr.shape, dt, 0, "const")
    b.data = np.ascontiguousarray(arr.astype(dt))
    return _whole(b)


def shared_identity_matrix(n, dtype=np.uint8, **kwargs):
    return shared_constant(np.eye(int(n)), dtype=dtype)


# -- iteration and indexing ----------------------------------------------------------------------
def _range_args(args):
    if len(args) == 1:
        return 0, int(args[0]), 1
    if len(args) == 2:
        return int(args[0]), int(args[1]), 1
    if len(args) == 3:
        return int(args[0]), int(args[1]), int(args[2])
    raise _E.err_invalid_argument("range takes 1 to 3 arguments")


def affine_range(*args, **kwargs):
    """A loop without loop-carried dependences (matmul accumulation into PSUM excepted); traced once."""
    s, e, st = _range_args(args)
    return _loop_iter(s, e, st, "affine", _E.kernel_location())


def sequential_range(*args, **kwargs):
    """A loop with loop-carried dependences; traced once, runs in order."""
    s, e, st = _range_args(args)
    return _loop_iter(s, e, st, "sequential", _E.kernel_location())


def static_range(*args):
    """Fully unrolled at trace time (the iterator is a Python int)."""
    return range(*_range_args(args))


def arange(*args):
    return _Idx.arange(*args)




def ds(start, size):
    return _DynSlice(start, size)


def program_id(axis):
    from neuronxcc import pelican as _pel
    ctx = _current()
    axis = int(axis)
    if not 0 <= axis < _bi.max(len(ctx.grid), 1):
        raise _E.err_invalid_argument("program_id(%d) outside a grid of rank %d" % (axis, len(ctx.grid)))
    if not ctx.grid:
        return 0
    return _Idx(_pel.var("pid%d" % axis))


def num_programs(axes=None):
    ctx = _current()
    g = ctx.grid or (1,)
    if axes is None:
        n = 1
        for x in g:
            n *= x
        return n
    if isinstance(axes, (tuple, list)):
        return tuple(g[a] for a in axes)
    return g[int(axes)]


def program_ndim():
    return len(_current().grid)


# -- memory (load, store, copy: the tracer's, imported above) --------------------------------------
def load_transpose2d(src, *, mask=None, dtype=None, **kwargs):
    """HBM [a, b] -> SBUF tile [b, a] (a strided DMA)."""
    _ops.hbm_operand(src, "load_transpose2d", "src")
    if len(src.shape) != 2:
        raise _E.err_exceed_max_supported_dimension("load_transpose2d takes a 2-D tensor, got %s" % (src.shape,))
    v = src.copy_view(axes=[src.axes[1].copy(), src.axes[0].copy()])
    out = _ops.new_tile(v.shape, dtype or src.dtype, "SBUF", "ldT")
    return _ops.mark_producer(out, _ops.dma(out, v, mask))


def broadcast_to(src, *, shape, **kwargs):
    return _ops.broadcast_to(src, tuple(shape))


def expand_dims(data, axis):
    axes = list(data.axes)
    for a in sorted([axis] if isinstance(axis, int) else list(axis)):
        a = a if a >= 0 else len(axes) + 1 + a
        axes.insert(a, _Axis(1, 0, 0))
    return data.copy_view(axes=axes)


from neuronxcc.nki.language._math import *  # noqa: E402,F401,F403

def device_print(prefix, x, *, mask=None, **kwargs):
    """Print PREFIX and the tile's values when the kernel is simulated (birsim prints them each time the
    instruction runs; a no-op for the device)."""
    if x.buf.memory == "HBM":
        x = load(x)
    _ops.tile_operand(x, "device_print", "x")
    _ops.emit("device_print", "DVE", [], [x], {"prefix": str(prefix)}, mask)


def gather_flattened(data, indices, *, mask=None, dtype=None, **kwargs):
    """out[p, j] = data[p, indices[p, j]] over each partition's flattened free elements (GpSimd)."""
    _ops.tile_operand(data, "gather_flattened", "data", ("SBUF",))
    _ops.tile_operand(indices, "gather_flattened", "indices", ("SBUF",))
    if data.shape[0] != indices.shape[0]:
        raise _E.err_num_partition_mismatch("gather_flattened: data and indices partitions differ")
    out = _ops.new_tile(indices.shape, data.dtype, "SBUF", "gather")
    inst = _ops.emit("gather_flat", "POOL", [out], [data, indices], {}, mask, [[(0, 0), (1, 0), (2, 0)]])
    if dtype is not None and _D.np_dtype(dtype) != data.dtype:
        return copy(_ops.mark_producer(out, inst), dtype=dtype)
    return _ops.mark_producer(out, inst)


def rand(shape, dtype=np.float32, **kwargs):
    """A tile of uniform [0, 1) values (birsim's counter-based generator; seeded by nl.random_seed)."""
    ctx = _current()
    seed = getattr(ctx, "_rand_seed", 0)
    ctx._rand_seed = seed + 1
    out = _ops.new_tile(tuple(shape), dtype, "SBUF", "rand")
    return _ops.mark_producer(out, _ops.emit("rand", "DVE", [out], [], {"seed": int(seed) * 7919 + 17}))


def random_seed(seed, *, mask=None, **kwargs):
    """Seed the following nl.rand / dropout calls (a compile-time integer here)."""
    if not _ops.is_scalar(seed):
        raise _E.NkiNotImplementedError("nki.language.random_seed with a tile seed")
    ctx = _current()
    ctx._rand_seed = int(seed) * 1000003
    ctx._dropout_seed = int(seed) * 1000003


def atomic_rmw(dst, value, op, *, mask=None, **kwargs):
    """dst op= value on HBM (indirect rows accumulate in order: a DMA scatter with add)."""
    from neuronxcc.nki._trace.indirect import IndirectTensor, atomic_rmw as _rmw
    if isinstance(dst, IndirectTensor):
        return _rmw(dst, value, op, mask)
    _ops.hbm_operand(dst, "atomic_rmw", "dst")
    cur = load(dst, mask=mask)
    store(dst, _ew.binary(_ew.op_name(op, "alu"), cur, value, dst.dtype, mask, "atomic_rmw"), mask=mask)


from neuronxcc.nki.language._reduce import all_reduce, loop_reduce  # noqa: E402,F401
gemm_grid = _nyi("gemm_grid")
gemm_stationary_grid = _nyi("gemm_stationary_grid")


def static_cast(input_data, dtype):
    """Host-side cast of a numpy array (round to nearest even), e.g. to bfloat16 / fp8."""
    return np.asarray(input_data).astype(_D.np_dtype(dtype))

