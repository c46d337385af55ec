"""Every trace-time rule the tracer checks raises the original's err_* class at the kernel's line,
and the traceback stops at the API call (no frames of the tracer)."""
import traceback

import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.nki import errors as E
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

A = np.zeros((128, 64), np.float32)


def _transpose_too_big(a):
    nisa.nc_transpose(nl.load(a), engine=nisa.vector_engine)          # 128 x 64 > 32 x 32 on VectorE


def _rank1(a):
    nl.zeros((128,), nl.float32)


def _bn_stats_wide(a):
    nisa.bn_stats(nl.zeros((8, 1024), nl.float32))


def _hbm_init(a):
    nl.full((4, 4), 1.0, nl.float32, buffer=nl.shared_hbm)


def _shared_hbm_in_loop(a):
    for i in nl.affine_range(2):
        nl.ndarray((4, 4), nl.float32, buffer=nl.shared_hbm)


def _store_smaller(a):
    y = nl.zeros((128, 1), nl.float32)
    y[...] = nl.load(a)


def _arange_1d(a):
    t = nl.load(a)
    nl.exp(t[nl.arange(64), 0])


def _exp_of_hbm(a):
    nl.exp(a)


def _load_of_sbuf(a):
    nl.load(nl.zeros((4, 4), nl.float32))


def _bias_int(a):
    t = nl.load(a)
    nisa.activation(op=nl.exp, data=t, bias=nl.zeros((128, 1), nl.int8))


def _scale_matrix(a):
    t = nl.load(a)
    nisa.activation(op=nl.exp, data=t, scale=nl.zeros((128, 64), nl.float32))


def _partition_mismatch(a):
    nisa.tensor_tensor(nl.load(a), nl.zeros((1, 64), nl.float32), op=nl.add)


def _par_dim_not_first(a):
    t = nl.zeros((4, nl.par_dim(8), 8), nl.float32)
    nl.add(t, 32)


def _mask_or(a):
    i = nl.arange(8)[:, None]
    nl.store(nl.ndarray((8, 1), nl.float32, buffer=nl.shared_hbm), 0.0, mask=(i < 2) | (i > 5))


def _alloc_with_init(a):
    nl.zeros((128, 4), nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))


def _stationary_3d(a):
    nisa.nc_matmul(nl.zeros((128, 2, 64), nl.float32), nl.load(a))


CASES = [
    (_transpose_too_big, E.err_size_of_dimension_exceed_arch_limit),
    (_rank1, E.err_insufficient_rank),
    (_bn_stats_wide, E.err_size_of_dimension_exceed_arch_limit),
    (_hbm_init, E.err_hbm_tensor_with_init_value_not_supported),
    (_shared_hbm_in_loop, E.err_shared_hbm_must_in_kernel_level),
    (_store_smaller, E.err_store_dst_shape_smaller_than_other_shape),
    (_arange_1d, E.err_1d_arange_not_supported),
    (_exp_of_hbm, E.err_unsupported_memory),
    (_load_of_sbuf, E.err_unsupported_memory),
    (_bias_int, E.err_activation_bias_invalid_type),
    (_scale_matrix, E.err_activation_scale_scalar_or_vector),
    (_partition_mismatch, E.err_num_partition_mismatch),
    (_par_dim_not_first, E.err_failed_to_infer_tile_from_local_tensor),
    (_mask_or, E.err_unsupported_expression_in_mask),
    (_alloc_with_init, E.err_tensor_creation_on_scratchpad_with_init_value_not_supported),
    (_stationary_3d, E.err_exceed_max_supported_dimension),
]


@pytest.mark.parametrize("kernel,err", CASES, ids=[c[0].__name__ for c in CASES])
def test_rule(kernel, err):
    with pytest.raises(err) as ei:
        nki.simulate_kernel(kernel, A)
    e = ei.value
    assert e.code.startswith("NCC_ENKI")
    assert e.location.startswith(__file__ + ":"), e.location
    line = int(e.location.rsplit(":", 1)[1])
    assert kernel.__code__.co_firstlineno < line <= kernel.__code__.co_firstlineno + 4
    frames = traceback.extract_tb(e.__traceback__)
    assert not any("/_trace/" in f.filename or "/language/" in f.filename for f in frames)


def test_jit_call_error_has_no_tracer_frames():
    k = nki.jit(_rank1, mode="simulation")
    with pytest.raises(E.err_insufficient_rank) as ei:
        k(A)
    assert not any("/_trace/" in f.filename for f in traceback.extract_tb(ei.value.__traceback__))


def _iterator_times_float(a):
    for i in nl.affine_range(2):
        nl.multiply(nl.load(a), i + 1.0)


def test_an_iterator_in_float_arithmetic_is_refused_at_the_kernel_line():
    # An iterator is an integer index expression while tracing: mixing it with a float is refused
    # by name (it was a raw TypeError from the index class).
    with pytest.raises(E.NkiNotImplementedError) as ei:
        nki.simulate_kernel(_iterator_times_float, A)
    assert "loop iterator" in str(ei.value)
    assert "%s:%d" % (__file__, _iterator_times_float.__code__.co_firstlineno + 2) in str(ei.value)
