"""Indirect indices on free dimensions: rows gathered / scattered along a free dimension after scalar
indices (HBM, and one partition's rows on chip through nisa.tensor_copy_dynamic_src), and the
per-partition gather t[i_p, idx[p, f]] of nl.load, against numpy; the unsupported forms by name."""
import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.nki import errors as E
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl


def rng(seed):
    return np.random.default_rng(seed)


def test_on_chip_rows_through_tensor_copy_dynamic_src():
    def k(data_tensor, idx_tensor):
        out = nl.ndarray([8, 4], dtype=data_tensor.dtype, buffer=nl.shared_hbm)
        data = nl.load(data_tensor)
        idx_tile = nl.load(idx_tensor)
        out_sbuf = nl.ndarray([8, 4], dtype=data_tensor.dtype, buffer=nl.sbuf)
        iy, iz = nl.mgrid[0:8, 0:4]
        out_sbuf[iy, iz] = nisa.tensor_copy_dynamic_src(data[0, idx_tile, iz])
        nl.store(out, out_sbuf)
        return out
    d = rng(0).random((128, 8, 4), dtype=np.float32)
    idx = np.array([3, 1, 7, 0, 2, 2, 5, 6], np.int32)[:, None]
    np.testing.assert_array_equal(nki.simulate_kernel(k, d, idx), d[0, idx[:, 0], :])


def test_plain_assignment_through_on_chip_indirect_indices_is_the_originals_error():
    def k(data_tensor, idx_tensor):
        data = nl.load(data_tensor)
        idx_tile = nl.load(idx_tensor)
        out_sbuf = nl.ndarray([8, 4], dtype=data_tensor.dtype, buffer=nl.sbuf)
        iy, iz = nl.mgrid[0:8, 0:4]
        out_sbuf[iy, iz] = data[0, idx_tile, iz]
    with pytest.raises(E.err_copy_dynamic_indirect_indices_not_natively_supported):
        nki.simulate_kernel(k, np.zeros((128, 8, 4), np.float32), np.zeros((8, 1), np.int32))


def test_hbm_rows_along_a_free_dimension_after_scalar_indices():
    def k(t, idx_tensor, upd):
        out = nl.ndarray([3, 16, 4], dtype=t.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        idx = nl.load(idx_tensor)
        for i in nl.affine_range(3):
            nl.store(out[i], nl.load(t[i, idx, :]))
            nl.store(dst[i], nl.load(t[i]))
        nl.store(dst[1, idx, :], nl.load(upd))          # scatter rows of dim 1 of block 1
        return out, dst
    r = rng(1)
    t = r.random((3, 10, 4), dtype=np.float32)
    idx = r.choice(10, (16, 1)).astype(np.int32)           # repeats: rows are written in order
    upd = r.random((16, 4), dtype=np.float32)
    out, dst = nki.simulate_kernel(k, t, idx, upd)
    np.testing.assert_array_equal(out, t[:, idx[:, 0]])
    want = t.copy()
    for j in range(16):                                   # rows in order: the last write of an index wins
        want[1, idx[j, 0]] = upd[j]
    np.testing.assert_array_equal(dst, want)


def test_per_partition_gather_along_the_free_dimension():
    def k(t, idx_tensor, u, uidx_tensor):
        out = nl.ndarray([64, 5], dtype=t.dtype, buffer=nl.shared_hbm)
        out3 = nl.ndarray([32, 3, 4], dtype=u.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(64)[:, None]
        nl.store(out, nl.load(t[i_p, nl.load(idx_tensor)]))
        nl.store(out3, nl.load(u[32:64, nl.load(uidx_tensor), :]))
        return out, out3
    r = rng(2)
    t, idx = r.random((64, 30), dtype=np.float32), r.integers(0, 30, (64, 5)).astype(np.int32)
    u, uidx = r.random((64, 9, 4), dtype=np.float32), r.integers(0, 9, (32, 3)).astype(np.int32)
    a, b = nki.simulate_kernel(k, t, idx, u, uidx)
    np.testing.assert_array_equal(a, np.take_along_axis(t, idx, axis=1))
    np.testing.assert_array_equal(b, u[32:64][np.arange(32)[:, None], uidx])


def test_index_tile_after_a_partition_range_on_a_later_dimension_is_refused():
    def k(t, idx_tensor):
        i_p = nl.arange(8)[:, None]
        nl.load(t[i_p, 0, nl.load(idx_tensor)])
    with pytest.raises(E.err_indirect_indices_free_dim):
        nki.simulate_kernel(k, np.zeros((8, 2, 6), np.float32), np.zeros((8, 2), np.int32))


def _kv_write(K, K_prior, batch_idx):
    b = nl.load(batch_idx)
    i_h, i_s, i_d = nl.mgrid[0:2, 0:4, 0:8]
    nisa.dma_copy(src=K[0, i_h, i_s, i_d], dst=K_prior[b, i_h, i_s, i_d])


def _kv_write_skip(K, K_prior, batch_idx):
    b = nl.load(batch_idx)
    i_h, i_s, i_d = nl.mgrid[0:2, 0:4, 0:8]
    nisa.dma_copy(src=K[0, i_h, i_s, i_d], dst=K_prior[b, i_h, i_s, i_d], oob_mode=nisa.oob_mode.skip)


def test_hbm_to_hbm_dma_copy_at_a_run_time_row():
    # NxD-Inference's KV-cache write: an HBM->HBM dma_copy into the row a loaded [1, 1] tile names (it ended
    # in a raw TypeError in birsim: the tracer made it an indirect scatter, which needs an on-chip side).
    K = np.arange(64, dtype=np.float32).reshape(1, 2, 4, 8)
    for row in (0, 2):
        KP = np.full((3, 2, 4, 8), -1.0, np.float32)
        nki.simulate_kernel(_kv_write, K, KP, np.array([[row]], np.int32))
        want = np.full_like(KP, -1.0)
        want[row] = K[0]
        np.testing.assert_array_equal(KP, want)      # a copy: exact
    with pytest.raises(E.NkiNotImplementedError, match="oob_mode=skip"):
        nki.simulate_kernel(_kv_write_skip, K, np.zeros((3, 2, 4, 8), np.float32), np.array([[1]], np.int32))
