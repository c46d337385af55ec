"""NKI's rank rule for scalar indices on on-chip tiles (nki-samples flash_fwd's ``l_buffer[:, i]``): a
scalar (int or loop iterator) on every free dimension keeps one free element, a scalar on the partition
dimension keeps one partition, block dimensions drop; HBM tensors follow numpy. Against numpy."""
import numpy as np

from neuronxcc import nki
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.common.tolerances import assert_close


def _column_update(col, x):
    """A helper handed a [P, 1] column view, as flash_fwd hands l_buffer[:, i] to its core."""
    e = nisa.activation(nl.exp, x, bias=col[:, 0], scale=1.0)
    col[:, 0] = nl.add(col[:, 0], nl.sum(e, axis=1))


def test_column_of_a_tile_by_iterator_is_a_p_by_1_tile():
    def k(x):
        n, P, F = x.shape
        out = nl.ndarray((P, n), nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((nl.par_dim(P), n), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(n):
            assert acc[:, i].shape == (P, 1)
            _column_update(acc[:, i], nl.load(x[i]))
        nl.store(out, acc)
        return out
    x = np.random.default_rng(0).standard_normal((3, 16, 8)).astype(np.float32)
    got = nki.simulate_kernel(k, x)
    want = np.exp(x).sum(axis=2).T
    assert_close(got, want, row="compiled")


def test_scalars_on_every_free_dim_and_on_the_partition():
    def k(x, y):
        P, A, B = x.shape
        o1 = nl.ndarray((P, 1), nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((1, y.shape[1]), nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((P, B), nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        v = t[:, 1, 2]
        assert v.shape == (P, 1)
        nl.store(o1, nl.multiply(v, 2.0))
        row = nl.load(y)
        assert row[0, :].shape == (1, y.shape[1])
        nl.store(o2, nl.add(row[0, :], 1.0))
        assert t[:, 1, :].shape == (P, B)                 # one scalar among free dims drops as in numpy
        nl.store(o3, t[:, 1, :])
        return o1, o2, o3
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 3, 4)).astype(np.float32)
    y = rng.standard_normal((1, 6)).astype(np.float32)
    o1, o2, o3 = nki.simulate_kernel(k, x, y)
    np.testing.assert_array_equal(o1, 2 * x[:, 1, 2:3])
    np.testing.assert_array_equal(o2, y + 1)
    np.testing.assert_array_equal(o3, x[:, 1, :])


def test_block_dims_drop_and_a_partition_only_result_indexes_as_p_by_1():
    def k(x):
        n, P, F = x.shape
        out = nl.ndarray((P, 1), nl.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((n, nl.par_dim(P), F), nl.float32, buffer=nl.sbuf)
        for i in nl.affine_range(n):
            buf[i] = nl.load(x[i])
        assert buf[1].shape == (P, F)
        r = nisa.tensor_reduce(np.add, buf[1], axis=(1,))
        nl.store(out, r[:, 0])
        return out
    x = np.random.default_rng(2).standard_normal((2, 8, 5)).astype(np.float32)
    assert_close(nki.simulate_kernel(k, x), x[1].sum(axis=1, keepdims=True), row="compiled")


def test_whole_block_tensor_loaded_and_stored_at_once():
    """A [B, par_dim(P), F] tensor moved by one DMA each way: the on-chip side's partition axis is its
    second, the HBM side's element order is kept."""
    def k(x):
        n, P, F = x.shape
        out = nl.ndarray((n, P, F), nl.float32, buffer=nl.shared_hbm)
        buf = nl.ndarray((n, nl.par_dim(P), F), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=buf, src=x)
        for i in nl.static_range(n):
            buf[i] = nl.multiply(buf[i], i + 1)
        nl.store(out, buf)
        return out
    x = np.random.default_rng(3).standard_normal((3, 8, 4)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(k, x), x * np.arange(1, 4, dtype=np.float32)[:, None, None])
