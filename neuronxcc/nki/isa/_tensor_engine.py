"""nisa TensorE instructions: ``nc_matmul`` (``nc_transpose`` is the tracer's, ``_trace.movement``; ``nki.isa`` re-
exports it)."""
import numpy as np

from neuronxcc.nki import errors as _E
from neuronxcc.nki._trace import ops as _ops
from neuronxcc.nki.isa._common import in_sbuf


def nc_matmul(stationary, moving, *, is_stationary_onezero=False, is_moving_onezero=False, is_transpose=False,
              tile_position=(), tile_size=(), mask=None, **kwargs):
    """stationary.T @ moving on TensorE into a new PSUM fp32 tile (shape (M,) + moving.shape[1:]).
    perf_mode='double_row*' (v3 fp8): operands [K, 2, M] / [K, 2, N] contract over K and the pair."""
    _ops.tile_operand(stationary, "nc_matmul", "stationary", ("SBUF", "PSUM"))
    _ops.tile_operand(moving, "nc_matmul", "moving", ("SBUF", "PSUM"))
    stationary, moving = in_sbuf(stationary), in_sbuf(moving)
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
