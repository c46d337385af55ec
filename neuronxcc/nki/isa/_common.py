"""Helpers the nisa instruction modules share: scalar-or-column operands, PSUM operands copied to SBUF, per-partition
outputs."""
import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki._trace.elementwise import cast as _cast


class fp32:
    """FP32 limits (``nisa.fp32``; range_select's default on_false_value)."""
    min = float(np.finfo(np.float32).min)
    max = float(np.finfo(np.float32).max)


def scalar_or_col(v, data, api, param):
    """(attrs for a scalar, or the [P,1] column tile)."""
    if _ops.is_scalar(v):
        return float(v), None
    _ops.tile_operand(v, api, param)
    if v.shape[0] != data.shape[0] or any(s != 1 for s in v.shape[1:]):
        raise _E.err_invalid_argument("'%s' of '%s' must be a scalar or a (%d, 1) vector, got %s"
                                      % (param, api, data.shape[0], v.shape))
    return 0.0, v


def in_sbuf(t):
    """T, or for a PSUM tile its copy in SBUF (VectorE, same dtype): the TensorE and GpSimd read SBUF, and
    kernels pass PSUM results straight on (nki-samples' flash_attn_bwd: an nc_transpose result as a matmul
    operand, a score tile into affine_select), which the original accepts."""
    if t.buf.memory != "PSUM":
        return t
    return _cast(t, t.dtype)


def per_partition_out(data, n, dtype, prefix):
    """A new SBUF tile of N elements on each of DATA's partitions."""
    return _ops.new_tile((data.shape[0], n), dtype, "SBUF", prefix)
