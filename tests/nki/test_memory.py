"""Indirect DMA (gather / scatter / atomic add, out-of-bound modes), dynamic scalars in index
expressions (registers), direct allocation, device_print, nl.rand / gather_flattened, returned
on-chip tensors and double-row matmul - each against numpy."""
import numpy as np
import pytest

from neuronxcc import nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.common.tolerances import assert_close

RNG = np.random.default_rng(3)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def test_indirect_load_store_and_atomic_add():
    def k(data, idx, upd):
        o1 = nl.ndarray((64, 32), dtype=data.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(data.shape, dtype=data.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(64)[:, None]
        i_f = nl.arange(32)[None, :]
        it = nl.load(idx[i_p])
        nl.store(o1, nl.load(data[it[i_p, 0], i_f]))
        nl.store(o2, nl.load(data))
        nl.atomic_rmw(o2[it, i_f], value=nl.load(upd), op=np.add)
        return o1, o2
    data, upd = rand(128, 32), rand(64, 32)
    idx = RNG.permutation(128)[:64].astype(np.int32)
    o1, o2 = nki.simulate_kernel(k, data, idx, upd)
    np.testing.assert_array_equal(o1, data[idx])
    ref = data.copy()
    ref[idx] += upd
    np.testing.assert_array_equal(o2, ref)


def test_indirect_oob_modes():
    def k(data):
        out = nl.ndarray((64, 16), dtype=data.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:64, 0:16]
        idx = nisa.iota(3 * nl.arange(64)[:, None], dtype=np.int32)
        t = nisa.memset((64, 16), -1.0, nl.float32)
        nisa.dma_copy(src=data[idx, iy], dst=t[ix, iy], oob_mode=nisa.oob_mode.skip)
        nl.store(out, t)
        return out
    data = rand(128, 16)
    got = nki.simulate_kernel(k, data)
    rows = 3 * np.arange(64)
    ref = np.full((64, 16), -1, np.float32)
    ref[rows < 128] = data[rows[rows < 128]]
    np.testing.assert_array_equal(got, ref)

    def k2(data):
        out = nl.ndarray((64, 16), dtype=data.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:64, 0:16]
        idx = nisa.iota(3 * nl.arange(64)[:, None], dtype=np.int32)
        t = nl.ndarray((64, 16), dtype=nl.float32)
        nisa.dma_copy(src=data[idx, iy], dst=t[ix, iy], oob_mode=nisa.oob_mode.error)
        nl.store(out, t)
        return out
    with pytest.raises(IndexError, match="out of bounds for axis 0"):
        nki.simulate_kernel(k2, data)


def test_dynamic_scalar_index_is_a_register():
    def k(src, offs):
        out = nl.ndarray((32, 8), dtype=src.dtype, buffer=nl.shared_hbm)
        s = nl.load(src)
        o = nl.load(offs)
        res = nl.ndarray((32, 8), dtype=src.dtype)
        ix, iy = nl.mgrid[0:32, 0:1]
        for j in nl.affine_range(8):
            res[ix, j] = nisa.tensor_copy_dynamic_src(s[ix, o[0, j] + iy])
        nl.store(out, res)
        return out
    src = rand(32, 100)
    offs = RNG.integers(0, 100, (1, 8)).astype(np.int32)
    tk = nki.jit(k).trace(src, offs)
    assert any(i.opcode == "register_load" for i in tk.module.instructions())
    np.testing.assert_array_equal(nki.simulate_kernel(k, src, offs), src[:, offs[0]])


def test_direct_allocation_addresses_shared_sbuf():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
        x[...] = nl.load(a)
        y[...] = nl.multiply(x, 2.0)
        nl.store(out, y)
        return out
    a = rand(128, 64)
    tk = nki.jit(k).trace(a)
    placed = {m.byte_offset for m in tk.module.memlocs.values() if m.allocated}
    assert {0, 4096} <= placed
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a * 2)

    def clash(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.ndarray(a.shape, dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        y = nl.ndarray(a.shape, dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
        x[...] = nl.load(a)
        y[...] = nl.multiply(x, 0.0)         # same address: overwrites x
        nl.store(out, x)
        return out
    np.testing.assert_array_equal(nki.simulate_kernel(clash, a), np.zeros_like(a))


def test_psum_alloc_function():
    def k(a, b):
        out = nl.ndarray((64, 32), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.ndarray((64, 32), dtype=nl.float32,
                       buffer=ncc.psum.alloc(lambda idx, pdim, fdim: (2, 0, 0)))
        p[...] = nisa.nc_matmul(nl.load(a), nl.load(b))
        nl.store(out, p)
        return out
    a, b = rand(16, 64), rand(16, 32)
    tk = nki.jit(k).trace(a, b)
    assert any(m.memory == "PSUM" and m.byte_offset == 2 * 2048 for m in tk.module.memlocs.values())
    assert_close(nki.simulate_kernel(k, a, b), a.T @ b, row="compiled")


def test_device_print_prints_simulated_values(capfd):
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.device_print("tile=", t)
        nl.store(out, t)
        return out
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    nki.simulate_kernel(k, a)
    assert "tile= [[0. 1. 2.]" in capfd.readouterr().out


def test_rand_and_gather_flattened():
    def k(idx):
        data = nl.rand((16, 64), dtype=nl.float32)
        i = nl.load(idx)
        o1 = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((16, 10), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(o1, data)
        nl.store(o2, nl.gather_flattened(data=data, indices=i))
        return o1, o2
    idx = RNG.integers(0, 64, (16, 10)).astype(np.uint32)
    d, g = nki.simulate_kernel(k, idx)
    assert 0 <= d.min() and d.max() < 1 and 0.3 < d.mean() < 0.7
    np.testing.assert_array_equal(g, np.take_along_axis(d, idx.astype(np.int64), axis=1))


def test_returning_an_sbuf_tensor_and_double_row_matmul():
    def k(a, b):
        r = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.sbuf)
        r[...] = nisa.nc_matmul(nl.load(a), nl.load(b), perf_mode="double_row_gen3")
        return r
    a, b = rand(64, 2, 32), rand(64, 2, 16)
    ref = np.einsum("ktm,ktn->mn", a, b)
    assert_close(nki.simulate_kernel(k, a, b), ref, row="compiled")
