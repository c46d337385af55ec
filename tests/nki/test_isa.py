"""nki.isa instructions traced, simulated on birsim and compared with numpy (exact where exact)."""
import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.common.tolerances import assert_close
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

RNG = np.random.default_rng(5)


def rand(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def run1(body, *arrays, out_shape=None, out_dtype=np.float32):
    """Simulate a kernel whose BODY(tiles...) returns one tile, stored to a new output."""
    def k(*ins):
        tiles = [nl.load(a) for a in ins]
        r = body(*tiles)
        out = nl.ndarray(r.shape, dtype=r.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out
    k.__name__ = body.__name__ if hasattr(body, "__name__") else "k"
    return nki.simulate_kernel(k, *arrays)


def test_nc_matmul_and_psum_fp32():
    a, b = rand(128, 64), rand(128, 300)
    got = run1(lambda x, y: nisa.nc_matmul(x, y), a, b)
    assert got.dtype == np.float32
    assert_close(got, a.T @ b)


@pytest.mark.parametrize("shape,engine", [((128, 96), nisa.tensor_engine), ((32, 16), nisa.vector_engine),
                                          ((20, 30), nisa.unknown_engine)])
def test_nc_transpose(shape, engine):
    a = rand(*shape)
    np.testing.assert_array_equal(run1(lambda x: nisa.nc_transpose(x, engine=engine), a), a.T)


def test_activation_scale_bias_and_reduce():
    a, bias = rand(64, 40), rand(64, 1)

    def k(x_t, b_t):
        x, b = nl.load(x_t), nl.load(b_t)
        out = nl.ndarray(x_t.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        red_out = nl.ndarray((64, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        red = nl.ndarray((64, 1), dtype=nl.float32)
        y = nisa.activation(op=nl.exp, data=x, bias=b, scale=0.5, reduce_op=nl.add, reduce_res=red)
        nl.store(out, y)
        nl.store(red_out, red)
        return out, red_out
    y, r = nki.simulate_kernel(k, a, bias)
    ref = np.exp(a * np.float32(0.5) + bias)
    assert_close(y, ref)
    assert_close(r, ref.sum(axis=1, keepdims=True))


def test_activation_scale_vector_and_np_function():
    a, s = rand(16, 8), rand(16, 1)
    got = run1(lambda x, sc: nisa.activation(op=np.tanh, data=x, scale=sc), a, s)
    assert_close(got, np.tanh(a * s))


def test_tensor_tensor_engines_and_dtype():
    a, b = rand(32, 64), rand(32, 64)
    got = run1(lambda x, y: nisa.tensor_tensor(x, y, op=nl.subtract, dtype=nl.bfloat16), a, b)
    assert got.dtype == nl.bfloat16
    np.testing.assert_array_equal(got.view(np.uint16), (a - b).astype(nl.bfloat16).view(np.uint16))
    ai = RNG.integers(-1000, 1000, (16, 8)).astype(np.int32)
    bi = RNG.integers(-1000, 1000, (16, 8)).astype(np.int32)
    got = run1(lambda x, y: nisa.tensor_tensor(x, y, op=np.multiply, engine=nisa.gpsimd_engine), ai, bi)
    np.testing.assert_array_equal(got, ai * bi)


def test_tensor_scalar_two_ops_and_vector_operand():
    a, v = rand(32, 20), rand(32, 1)
    got = run1(lambda x, c: nisa.tensor_scalar(x, np.multiply, c, op1=np.add, operand1=2.0), a, v)
    assert_close(got, a * v + np.float32(2.0))
    got = run1(lambda x: nisa.tensor_scalar(x, np.subtract, 1.0, reverse0=True), a)
    np.testing.assert_array_equal(got, np.float32(1.0) - a)


def test_scalar_tensor_tensor():
    a, b = rand(16, 24), rand(16, 24)
    got = run1(lambda x, y: nisa.scalar_tensor_tensor(data=x, op0=np.multiply, operand0=3.0, op1=np.add,
                                                      operand1=y), a, b)
    assert_close(got, a * np.float32(3.0) + b)
    got = run1(lambda x, y: nisa.scalar_tensor_tensor(data=x, op0=np.add, operand0=1.0, op1=np.subtract,
                                                      operand1=y, reverse1=True), a, b)
    assert_close(got, b - (a + np.float32(1.0)))


@pytest.mark.parametrize("op,ref", [(np.add, np.sum), (np.max, np.max), (np.min, np.min)])
def test_tensor_reduce_negate(op, ref):
    a = rand(64, 4, 32)
    got = run1(lambda x: nisa.tensor_reduce(op, x, axis=(1, 2), negate=True, keepdims=True), a)
    assert_close(got, -ref(a, axis=(1, 2), keepdims=True))


def test_tensor_partition_reduce_and_copy_engines():
    a = rand(64, 16)
    assert_close(run1(lambda x: nisa.tensor_partition_reduce(np.add, x), a), a.sum(axis=0, keepdims=True))
    for eng in (nisa.vector_engine, nisa.scalar_engine, nisa.gpsimd_engine):
        np.testing.assert_array_equal(run1(lambda x: nisa.tensor_copy(x, engine=eng), a), a)


def test_reciprocal_and_scan():
    a, b = rand(8, 32, lo=0.5, hi=2.0), rand(8, 32)
    assert_close(run1(lambda x: nisa.reciprocal(x), a), 1 / a)
    got = run1(lambda x, y: nisa.tensor_tensor_scan(x, y, 0.0, np.multiply, np.add), a, b)
    ref = np.zeros_like(a)
    prev = np.zeros(8, np.float32)
    for i in range(32):
        prev = a[:, i] * prev + b[:, i]
        ref[:, i] = prev
    assert_close(got, ref)


def test_iota_memset_affine_select():
    def k(a):
        o1 = nl.ndarray((64, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        o2 = nl.ndarray((16, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        o3 = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        ip, jf = nl.mgrid[0:64, 0:8]
        nl.store(o1, nisa.iota(ip * 100 + jf * 3 - 5, dtype=nl.int32))
        nl.store(o2, nisa.memset((16, 4), 7.5, nl.float32))
        ix, iy = nl.mgrid[0:64, 0:64]
        nl.store(o3, nisa.affine_select(ix - iy >= 0, nl.load(a), -1e9))
        return o1, o2, o3
    a = rand(64, 64)
    o1, o2, o3 = nki.simulate_kernel(k, a)
    p, j = np.mgrid[0:64, 0:8]
    np.testing.assert_array_equal(o1, p * 100 + j * 3 - 5)
    np.testing.assert_array_equal(o2, np.full((16, 4), 7.5, np.float32))
    np.testing.assert_array_equal(o3, np.where(np.tril(np.ones((64, 64), bool)), a, np.float32(-1e9)))


def test_dma_copy_and_dma_transpose():
    def k(a):
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape[::-1], dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=o1, src=a)
        nl.store(o2, nisa.dma_transpose(a))
        return o1, o2
    a = rand(32, 48)
    o1, o2 = nki.simulate_kernel(k, a)
    np.testing.assert_array_equal(o1, a)
    np.testing.assert_array_equal(o2, a.T)


def test_max8_find_index8_match_replace8():
    a = RNG.permutation(128 * 64).reshape(128, 64).astype(np.float32)

    def k(x_t):
        x = nl.load(x_t)
        m = nisa.max8(src=x)
        idx = nisa.nc_find_index8(data=x, vals=m)
        o_idx = nl.ndarray((128, 8), dtype=nl.uint32, buffer=nl.shared_hbm)
        o_m = nl.ndarray((128, 8), dtype=x_t.dtype, buffer=nl.shared_hbm)
        o_r = nl.ndarray(x_t.shape, dtype=x_t.dtype, buffer=nl.shared_hbm)
        nl.store(o_m, m)
        nl.store(o_idx, idx)
        nl.store(o_r, nisa.nc_match_replace8(data=x, vals=m, imm=-1.0))
        return o_m, o_idx, o_r
    m, idx, r = nki.simulate_kernel(k, a)
    ref_idx = np.argsort(-a, axis=1, kind="stable")[:, :8]
    np.testing.assert_array_equal(m, np.take_along_axis(a, ref_idx, axis=1))
    np.testing.assert_array_equal(idx, ref_idx.astype(np.uint32))
    ref_r = a.copy()
    np.put_along_axis(ref_r, ref_idx, -1.0, axis=1)
    np.testing.assert_array_equal(r, ref_r)


def test_bn_stats_bn_aggr():
    a = rand(64, 1024)

    def k(x_t):
        stats = nl.ndarray((64, 12), dtype=nl.float32)
        for i in nl.affine_range(2):
            stats[:, nl.ds(i * 6, 6)] = nisa.bn_stats(nl.load(x_t[:, nl.ds(i * 512, 512)]))
        out = nl.ndarray((64, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nisa.bn_aggr(stats))
        return out
    got = nki.simulate_kernel(k, a)
    assert_close(got, np.stack([a.mean(axis=1), a.var(axis=1)], axis=1))


def test_stream_shuffle_local_gather_range_select():
    a = rand(64, 8)
    perm = list(RNG.permutation(32))

    def k(x_t):
        x = nl.load(x_t)
        d = nl.ndarray(x_t.shape, dtype=x_t.dtype)
        nisa.nc_stream_shuffle(src=x, dst=d, shuffle_mask=perm)
        out = nl.ndarray(x_t.shape, dtype=x_t.dtype, buffer=nl.shared_hbm)
        nl.store(out, d)
        return out
    got = nki.simulate_kernel(k, a)
    ref = np.concatenate([a[np.array(perm)], a[32 + np.array(perm)]])
    np.testing.assert_array_equal(got, ref)

    src = rand(32, 64)
    index = np.tile(RNG.integers(0, 60, (16, 2)), (2, 1)).astype(np.uint16)

    def g(s_t, i_t):
        out = nl.ndarray((32, 32, 4), dtype=s_t.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.local_gather(nl.load(s_t), nl.load(i_t), num_elem_per_idx=4))
        return out
    got = nki.simulate_kernel(g, src, index)
    for c in range(2):
        flat = index[c * 16:(c + 1) * 16].flatten(order="F")
        cols = (flat[:, None] + np.arange(4)).reshape(-1)
        np.testing.assert_array_equal(got[c * 16:(c + 1) * 16].reshape(16, -1), src[c * 16:(c + 1) * 16][:, cols])

    x, lo, hi = rand(16, 40), np.full((16, 1), 5, np.float32), np.full((16, 1), 20, np.float32)

    def r(x_t, l_t, h_t):
        red = nl.ndarray((16, 1), dtype=nl.float32)
        y = nisa.range_select(on_true_tile=nl.load(x_t), comp_op0=np.greater_equal, comp_op1=np.less,
                              bound0=nl.load(l_t), bound1=nl.load(h_t), reduce_res=red, range_start=2)
        o1 = nl.ndarray(x_t.shape, dtype=x_t.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray((16, 1), dtype=x_t.dtype, buffer=nl.shared_hbm)
        nl.store(o1, y)
        nl.store(o2, red)
        return o1, o2
    y, red = nki.simulate_kernel(r, x, lo, hi)
    j = np.arange(40) + 2
    ref = np.where((j >= 5) & (j < 20), x, np.float32(nl.fp32.min))
    np.testing.assert_array_equal(y, ref)
    np.testing.assert_array_equal(red, ref.max(axis=1, keepdims=True))


def test_select_reduce_copy_predicated_scalar_reduce_dropout():
    x, p = rand(16, 32), (RNG.random((16, 32)) > 0.5).astype(np.uint8)

    def k(x_t, p_t):
        xs, ps = nl.load(x_t), nl.load(p_t)
        dst = nl.ndarray(x_t.shape, dtype=nl.float32)
        red = nl.ndarray((16, 1), dtype=nl.float32)
        nisa.select_reduce(dst=dst, predicate=ps, on_true=xs, on_false=-5.0, reduce_res=red)
        cp = nl.zeros(x_t.shape, nl.float32)
        nisa.tensor_copy_predicated(src=xs, dst=cp, predicate=ps)
        red2 = nl.ndarray((16, 1), dtype=nl.float32)
        sc = nisa.tensor_scalar_reduce(data=xs, op0=np.multiply, operand0=2.0, reduce_op=np.add, reduce_res=red2)
        dr = nisa.dropout(xs, 0.5)
        outs = [nl.ndarray(t.shape, dtype=nl.float32, buffer=nl.shared_hbm) for t in (dst, red, cp, red2, sc, dr)]
        for o, t in zip(outs, (dst, red, cp, red2, sc, dr)):
            nl.store(o, t)
        return tuple(outs)
    dst, red, cp, red2, sc, dr = nki.simulate_kernel(k, x, p)
    sel = np.where(p != 0, x, np.float32(-5.0))
    np.testing.assert_array_equal(dst, sel)
    np.testing.assert_array_equal(red, sel.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(cp, np.where(p != 0, x, 0))
    np.testing.assert_array_equal(sc, x * 2)
    assert_close(red2, (x * 2).sum(axis=1, keepdims=True))
    kept = dr != 0
    np.testing.assert_array_equal(dr[kept], x[kept])
    assert 0.3 < kept.mean() < 0.7


def test_sequence_bounds():
    ids = np.array([[0, 1, 1, 2, 2, 2, 0, 3]], np.float32)

    def k(s_t):
        out = nl.ndarray((1, 2, 8), dtype=s_t.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.sequence_bounds(segment_ids=nl.load(s_t)))
        return out
    got = nki.simulate_kernel(k, ids)
    np.testing.assert_array_equal(got[0], [[8, 1, 1, 3, 3, 3, 8, 7], [-1, 3, 3, 6, 6, 6, -1, 8]])


def test_get_nc_version_and_enums():
    assert nisa.get_nc_version() == nisa.nc_version.gen2
    assert nisa.reduce_cmd.reset_reduce == 3 and nisa.engine.vector == 5


def test_iota_and_affine_select_with_loop_iterators():
    def k(a):
        o1 = nl.ndarray((4, 64, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            ip, jf = nl.mgrid[0:64, 0:8]
            nl.store(o1[i], nisa.iota(ip + jf * 10 + i * 1000, dtype=nl.int32))
        for qi in nl.affine_range(a.shape[0] // 32):
            for kj in nl.affine_range(a.shape[1] // 16):
                iq = nl.arange(32)[:, None]
                ik = nl.arange(16)[None, :]
                t = nl.load(a[qi * 32 + iq, kj * 16 + ik])
                r = nisa.affine_select(qi * 32 + iq - kj * 16 - ik >= 0, t, -9.0)
                nl.store(o2[qi * 32 + iq, kj * 16 + ik], r)
        return o1, o2
    a = rand(64, 64)
    o1, o2 = nki.simulate_kernel(k, a)
    i, p, j = np.mgrid[0:4, 0:64, 0:8]
    np.testing.assert_array_equal(o1, p + 10 * j + 1000 * i)
    np.testing.assert_array_equal(o2, np.where(np.tril(np.ones((64, 64), bool)), a, np.float32(-9.0)))


def test_opcode_codes_are_unique():
    from neuronxcc.starfish.birpy.opcodes import _TABLE
    codes = [o.code for o in _TABLE]
    assert len(codes) == len(set(codes))
