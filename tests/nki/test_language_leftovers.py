"""nl.loop_reduce, nl.all_reduce (single-core), nisa.builtin_custom_op (the open builtin library) and
direct allocation of block tensors at non-consecutive addresses, against numpy."""
import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.nki import errors as E
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.common.tolerances import assert_close


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


# -- loop_reduce ----------------------------------------------------------------------------------
def test_loop_reduce_accumulates_into_the_assigned_tile():
    def k(a):
        out = nl.ndarray((2,) + a.shape[1:], dtype=nl.float32, buffer=nl.shared_hbm)
        mx = nl.full(a.shape[1:], -1e30, dtype=nl.float32)
        sm = nl.zeros(a.shape[1:], dtype=nl.float32, buffer=nl.sbuf)
        for k_i in nl.affine_range(a.shape[0]):
            x = nl.load(a[k_i])
            mx = nl.loop_reduce(x, op=np.maximum, loop_indices=[k_i], dtype=nl.float32)
            sm = nl.loop_reduce(x, op=nl.add, loop_indices=(k_i,))
        nl.store(out[0], mx)
        nl.store(out[1], sm)
        return out
    a = rand(6, 32, 16)
    r = nki.simulate_kernel(k, a)
    np.testing.assert_array_equal(r[0], a.max(axis=0))
    assert_close(r[1], a.sum(axis=0, dtype=np.float64), row="compiled")


def test_loop_reduce_into_a_subscripted_view():
    """flash_attn_bwd's ``acc[:, t] = nl.loop_reduce(...)`` and ``red[t, i, :, :] = nl.loop_reduce(...)``:
    the view the subscript selects accumulates, other columns / blocks keep their values."""
    def k(a, b):
        n, P, F = a.shape
        out_cols = nl.ndarray((P, 3), dtype=nl.float32, buffer=nl.shared_hbm)
        out_blk = nl.ndarray((2, P, F), dtype=nl.float32, buffer=nl.shared_hbm)
        cols = nl.full((nl.par_dim(P), 3), 5.0, dtype=nl.float32)
        blk = nl.zeros((2, nl.par_dim(P), F), dtype=nl.float32, buffer=nl.sbuf)
        for t in nl.affine_range(2):
            for k_i in nl.affine_range(n):
                x = nl.load(a[k_i])
                cols[:, t] = nl.loop_reduce(nl.sum(x, axis=1), op=np.add, loop_indices=(k_i,))
                blk[t, :, :] = nl.loop_reduce(nl.load(b[t, k_i]), op=np.maximum, loop_indices=[k_i])
        nl.store(out_cols, cols)
        nl.store(out_blk, blk)
        return out_cols, out_blk
    a, b = rand(4, 16, 8, seed=3), rand(2, 4, 16, 8, seed=6)
    cols, blk = nki.simulate_kernel(k, a, b)
    s = a.sum(axis=(0, 2), dtype=np.float64)
    assert_close(cols[:, 0], 5.0 + s, row="compiled")
    assert_close(cols[:, 1], 5.0 + s, row="compiled")
    np.testing.assert_array_equal(cols[:, 2], 5.0)
    np.testing.assert_array_equal(blk, np.maximum(b.max(axis=1), 0))


def test_load_of_one_hbm_element_is_a_1x1_tile():
    def k(s, a):
        out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        v = nl.load(s[1, 2])
        assert v.shape == (1, 1)
        nl.store(out, nl.add(nl.load(a), v))
        return out
    s, a = rand(2, 3, seed=4), rand(8, 4, seed=5)
    np.testing.assert_array_equal(nki.simulate_kernel(k, s, a), a + s[1, 2])


def test_loop_reduce_needs_an_assigned_existing_tile():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.loop_reduce(nl.load(a), op=np.add, loop_indices=[]))
        return out
    with pytest.raises(E.err_invalid_argument, match="assigned to"):
        nki.simulate_kernel(k, rand(8, 8))


# -- all_reduce -----------------------------------------------------------------------------------
def _all_reduce_kernel(a):
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nl.store(out, nl.all_reduce(nl.load(a), op=np.add, program_axes=[0], dtype=nl.bfloat16))
    return out


def test_all_reduce_over_one_program_is_the_value_cast():
    a = rand(16, 8, seed=1)
    r = nki.simulate_kernel(_all_reduce_kernel, a)
    assert r.dtype == nl.bfloat16
    np.testing.assert_array_equal(r, a.astype(nl.bfloat16))
    np.testing.assert_array_equal(nki.simulate_kernel(nki.jit(_all_reduce_kernel)[1], a), a.astype(nl.bfloat16))


def _all_reduce_grid(a):
    """A [2, 3] grid: each program loads its slice, keeps a tile live across the reduction, reduces over
    axis 1 (the 3 programs sharing pid0) and stores value - mean and the group max."""
    G0, G1, P, F = a.shape
    out = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    mx = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    i, j = nl.program_id(0), nl.program_id(1)
    x = nl.load(a[i, j])
    kept = nl.multiply(x, 1.0)                    # on chip across the cut
    s = nl.all_reduce(x, op=np.add, program_axes=[1])
    m = nl.all_reduce(x, op=np.maximum, program_axes=(1,))
    nl.store(out[i, j], nl.subtract(kept, nl.multiply(s, 1.0 / G1)))
    nl.store(mx[i, j], m)
    return out, mx


def test_all_reduce_over_several_programs():
    a = rand(2, 3, 16, 8, seed=2)
    out, mx = nki.simulate_kernel(nki.jit(_all_reduce_grid)[2, 3], a)
    assert_close(out, a - a.mean(axis=1, keepdims=True), row="compiled")
    np.testing.assert_array_equal(mx, np.broadcast_to(a.max(axis=1, keepdims=True), a.shape))
    _, mx2 = nki.baremetal(_all_reduce_grid)[2, 3](a)           # through walrus: the cut's order is kept
    np.testing.assert_array_equal(mx2, mx)
    both = nki.simulate_kernel(nki.jit(_all_reduce_kernel)[2], a[0, 0])
    np.testing.assert_array_equal(both, (2 * a[0, 0]).astype(nl.bfloat16))


def test_all_reduce_over_programs_inside_a_loop_is_refused_by_name():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for t in nl.affine_range(1):
            nl.store(out, nl.all_reduce(nl.load(a), op=np.add, program_axes=[0]))
        return out
    with pytest.raises(E.err_invalid_argument, match="top level"):
        nki.simulate_kernel(nki.jit(k)[2], rand(16, 8))


# -- builtin_custom_op -------------------------------------------------------------------------------
def test_builtin_custom_op_sort_and_topk_of_the_open_library():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        top = nl.ndarray((a.shape[0], 4), dtype=a.dtype, buffer=nl.shared_hbm)
        idx = nl.ndarray((a.shape[0], 4), dtype=nl.int32, buffer=nl.shared_hbm)
        x = nl.load(a)
        v = nl.ndarray(a.shape, dtype=nl.float32)
        t = nl.ndarray((a.shape[0], 4), dtype=nl.float32)
        i = nl.ndarray((a.shape[0], 4), dtype=nl.int32)
        nisa.builtin_custom_op("sort_f32", "libbuiltincustomop_cpu0.so", "1.0", "1.0", srcs=[x], dsts=[v],
                               descending=False)
        nisa.builtin_custom_op("topk_f32", "libbuiltincustomop_cpu0.so", "1.0", "1.0", srcs=[x], dsts=[t, i])
        nl.store(out, v)
        nl.store(top, t)
        nl.store(idx, i)
        return out, top, idx
    a = rand(48, 24, seed=2)
    s, t, i = nki.simulate_kernel(k, a)
    np.testing.assert_array_equal(s, np.sort(a, axis=1))
    order = np.argsort(-a, axis=1, kind="stable")[:, :4]
    np.testing.assert_array_equal(i, order)
    np.testing.assert_array_equal(t, np.take_along_axis(a, order, axis=1))


def test_builtin_custom_op_of_a_closed_library_is_one_precise_error():
    def k(a):
        x = nl.load(a)
        nisa.builtin_custom_op("my_kernel", "libmycustom.so", "2.1", "3.0", srcs=[x], dsts=[x])
    with pytest.raises(E.err_invalid_argument, match="'my_kernel' of library 'libmycustom.so'.*sort_f32"):
        nki.simulate_kernel(k, rand(8, 8))


# -- direct allocation at non-consecutive addresses ----------------------------------------------------
def _blocks_kernel(buffer):
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((a.shape[0], nl.par_dim(a.shape[1]), a.shape[2]), dtype=a.dtype, buffer=buffer)
        for i in nl.affine_range(a.shape[0]):
            t[i] = nl.load(a[i])
            nl.store(out[i], nl.multiply(t[i], 2.0))
        return out
    return k


@pytest.mark.parametrize("buffer,places", [
    (ncc.sbuf.mod_alloc(base_addr=512, num_free_tiles=(2,)), {(0, 512), (0, 768)}),          # rotating slots
    (ncc.sbuf.alloc(lambda idx, p, f: (0, 8192 - idx[0] * 2 * f)), {(0, 8192 - k * 512) for k in range(4)}),
    (ncc.sbuf.mod_alloc(base_addr=0, base_partition=0, num_par_tiles=(2,)), {(0, 0), (64, 0)}),
])
def test_block_tensor_at_non_consecutive_addresses(buffer, places):
    a = rand(4, 64, 64, seed=3)
    k = _blocks_kernel(buffer)
    tk = nki.jit(k).trace(a)
    got = {(m.start_partition, m.byte_offset) for m in tk.module.memlocs.values() if m.allocated}
    assert got == places
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a * np.float32(2.0))
    np.testing.assert_array_equal(nki.baremetal(k)(a), a * np.float32(2.0))


def test_psum_blocks_in_separate_banks():
    def k(a, b):
        out = nl.ndarray((2, 32, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.ndarray((2, nl.par_dim(32), 128), dtype=nl.float32,
                       buffer=ncc.psum.mod_alloc(base_bank=1, num_bank_tiles=(2,)))
        for i in nl.affine_range(2):
            p[i] = nisa.nc_matmul(nl.load(a[i]), nl.load(b[i]))
            nl.store(out[i], nl.copy(p[i]))
        return out
    a, b = rand(2, 16, 32, seed=4), rand(2, 16, 128, seed=5)
    tk = nki.jit(k).trace(a, b)
    assert {m.byte_offset for m in tk.module.memlocs.values() if m.memory == "PSUM"} == {2048, 4096}
    assert_close(nki.simulate_kernel(k, a, b), np.einsum("bkm,bkn->bmn", a, b), row="compiled")


def test_element_wise_ops_across_non_consecutive_blocks():
    """A tile spanning blocks placed apart (a [B, par_dim(P), F] tensor read through t[ib, ip, iw]) is copied,
    computed on and stored one block at a time; blocks sharing one place (num_free_tiles=(1,)) alias."""
    def k(a):
        B, P, F = a.shape
        out = nl.ndarray((P, B, F), dtype=a.dtype, buffer=nl.shared_hbm)
        col = nl.ndarray((P, B), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((B, nl.par_dim(P), F), dtype=a.dtype, buffer=ncc.sbuf.alloc(lambda idx, p, f: (0, 4096 - idx[0] * 2 * f)))
        s = nl.ndarray((B, nl.par_dim(P), F), dtype=a.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(1,)))
        for i in nl.affine_range(B):
            t[i] = nl.load(a[i])
            s[i] = nl.load(a[i])
        ib, ip, iw = nl.arange(B)[None, :, None], nl.arange(P)[:, None, None], nl.arange(F)[None, None, :]
        w = nl.multiply(nl.copy(t[ib, ip, iw]), 2.0)           # tensor_copy spanning both blocks
        nl.store(out, w)
        jp, jb = nl.arange(P)[:, None], nl.arange(B)[None, :]
        nl.store(col[jp, jb], s[jb, jp, 0])                   # one DMA reading both (aliased) blocks
        return out, col
    a = rand(2, 64, 64, seed=9)
    out, col = nki.simulate_kernel(k, a)
    np.testing.assert_array_equal(out, a.transpose(1, 0, 2) * np.float32(2.0))
    np.testing.assert_array_equal(col, np.stack([a[1, :, 0], a[1, :, 0]], axis=1))


def test_a_matmul_across_non_consecutive_blocks_is_refused():
    def k(a, b):
        out = nl.ndarray((2, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray((2, nl.par_dim(64), 32), dtype=a.dtype, buffer=ncc.sbuf.alloc(lambda idx, p, f: (0, 4096 - idx[0] * 2 * f)))
        for i in nl.affine_range(2):
            t[i] = nl.load(a[i])
        ip, ib = nl.arange(64)[:, None], nl.arange(2)[None, :]
        nl.store(out, nisa.nc_matmul(t[ib, ip, 0], nl.load(b)))       # the stationary side spans both blocks
        return out
    with pytest.raises(E.err_invalid_argument, match="spans several of its blocks"):
        nki.simulate_kernel(k, rand(2, 64, 32), rand(64, 128))


# -- nl.dropout, reversed commutative scan operands ----------------------------------------------------
def test_nl_dropout_zeroes_at_the_rate_and_keeps_the_rest():
    def k(a, r):
        out = nl.ndarray((2,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(out[0], nl.dropout(x, 0.25))
        nl.store(out[1], nl.dropout(x, nl.load(r)))        # a 1-element rate tile
        return out
    a = rand(128, 512, seed=6) + np.float32(3.0)               # no zeros of its own
    o = nki.simulate_kernel(k, a, np.full((1, 1), 0.75, np.float32))
    for got, rate in ((o[0], 0.25), (o[1], 0.75)):
        kept = got != 0
        assert abs((~kept).mean() - rate) < 0.02
        np.testing.assert_array_equal(got[kept], a[kept])


def test_tensor_tensor_scan_reversed_commutative_operands():
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nisa.tensor_tensor_scan(nl.load(a), nl.load(b), 0.0, np.multiply, np.add,
                                              reverse0=True, reverse1=True))
        return out
    a, b = rand(16, 32, seed=7) * np.float32(0.5), rand(16, 32, seed=8)
    want = np.empty_like(a)
    prev = np.zeros(16, np.float32)
    for i in range(32):
        prev = a[:, i] * prev + b[:, i]
        want[:, i] = prev
    assert_close(nki.simulate_kernel(k, a, b), want, row="compiled")

    def bad(a, b):
        nisa.tensor_tensor_scan(nl.load(a), nl.load(b), 0.0, np.subtract, np.add, reverse0=True)
    with pytest.raises(E.NkiNotImplementedError, match="subtract"):
        nki.simulate_kernel(bad, a, b)


def test_psum_accumulation_into_blocks_at_banks_one_and_five():
    """nki-samples' allocated_SD_attention shape: `acc[g] += nc_matmul(...)` into a PSUM block tensor placed by
    an allocation function (banks 1 and 5); the accumulator's zeroing at its creation covers both blocks and is
    split per block."""
    import functools

    def k(a, b):
        out = nl.ndarray((2, 128, 128), dtype=nl.float32, buffer=nl.shared_hbm)

        def psum_addr(bank_map, idx, pdim_size, fdim_size):
            return (bank_map[idx], 0, 0)
        acc = nl.ndarray((2, nl.par_dim(128), 128), dtype=np.float32,
                         buffer=ncc.psum.alloc(functools.partial(psum_addr, bank_map={(0,): 1, (1,): 5})))
        sb = nl.ndarray((2, nl.par_dim(128), 128), dtype=np.float32,
                        buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        ip, jf = nl.mgrid[0:128, 0:128]
        for g in nl.affine_range(2):
            for t in nl.affine_range(3):
                acc[g, ip, jf] += nisa.nc_matmul(moving=nl.load(b[g, t]), stationary=nl.load(a[g, t]))
            sb[g, ip, jf] = nisa.tensor_copy(acc[g, ip, jf], dtype=np.float32, engine=nisa.vector_engine)
            nl.store(out[g], value=sb[g, :, :])
        return out
    a, b = rand(2, 3, 128, 128, seed=9), rand(2, 3, 128, 128, seed=10)
    want = np.einsum("gtkm,gtkn->gmn", a.astype(np.float64), b)
    assert_close(nki.simulate_kernel(k, a, b), want, row="compiled")
