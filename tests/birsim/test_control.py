"""Loops with pelican offsets, registers, While/If, allocation, run-time errors, custom ops."""
import numpy as np
import pytest

from neuronxcc.errors import BirSimError, CompilerError
from neuronxcc.pelican import var
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_module, simulate
from birsim.birsim_helpers import rand


def _tiled_exp_module(alloc=None):
    """y = exp(x) * 2 over a [256, 96] input, in 2 partition tiles x 3 column tiles."""
    m = B.Module("tiled")
    m.add_tensor("x", "input", "float32", (256, 96))
    m.add_tensor("y", "output", "float32", (256, 96))
    m.add_memloc("a", "SBUF", 128, 2 * 96 * 4)      # two column-tile slots per partition
    m.add_memloc("b", "SBUF", 128, 32 * 4)
    if alloc:
        for name, (sp, off) in alloc.items():
            m.memlocs[name].start_partition = sp
            m.memlocs[name].byte_offset = off
    b = B.Builder(m)
    with b.loop("r", 0, 2) as r:
        with b.loop("c", 0, 3) as c:
            slot = (r * 3 + c) % 2 * 96 + c * 32      # pelican: mod in the address
            a = B.AccessPattern("a", "float32", slot, [[1, 32]], 0, 128)
            b.inst("dma_copy", "SP", [a], [B.AccessPattern("x", "float32", r * 128 * 96 + c * 32, [[96, 128], [1, 32]])])
            tb = B.AccessPattern("b", "float32", 0, [[1, 32]], 0, 128)
            b.inst("activation", "ACT", [tb], [a], func="exp")
            b.inst("tensor_scalar", "DVE", [a], [tb], op0="mult", operand0=2.0)
            b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", r * 128 * 96 + c * 32, [[96, 128], [1, 32]])], [a])
    return b.finish()


def test_loops_with_pelican_offsets():
    m = _tiled_exp_module()
    B.verify(m)
    assert len(m.instructions()) == 4           # loops stay loops
    x = rand((256, 96), 1)
    res = simulate(m, [x])
    np.testing.assert_array_equal(res.outputs[0], np.exp(x) * np.float32(2))
    assert res.instructions == 24


def _add_zero_module(b_alloc):
    """y = x + zeros, where the zeros are memset after x is loaded (so a clobber of x shows)."""
    m = B.Module("alloc")
    m.add_tensor("x", "input", "float32", (128, 64))
    m.add_tensor("y", "output", "float32", (128, 64))
    m.add_memloc("A", "SBUF", 128, 256, 0, 1024)
    m.add_memloc("Z", "SBUF", 64, 256, *b_alloc)
    m.add_memloc("O", "SBUF", 128, 256)        # unallocated: private storage, mixed with allocated ones
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("A")], [b.ap("x")])
    b.inst("memset", "DVE", [b.ap("Z")], [], value=0.0)
    b.inst("tensor_tensor", "DVE", [b.ap("O", num_partitions=64)], [b.ap("A", num_partitions=64), b.ap("Z")], op="add")
    b.inst("tensor_copy", "DVE", [b.ap("O", start_partition=64, num_partitions=64)],
           [b.ap("A", start_partition=64, num_partitions=64)])
    b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("O")])
    return b.finish()


def test_allocated_memlocs_share_sbuf_and_overlap_shows():
    x = rand((128, 64), 2)
    for alloc in [(0, 0), (64, 2048), (0, 1024 + 256)]:      # disjoint placements
        m = _add_zero_module(alloc)
        B.verify(m)
        np.testing.assert_array_equal(run_module(m, [x])[0], x)
    bad = _add_zero_module((0, 1024 + 128))                    # Z overlaps A's bytes 128..256 in partitions 0..63
    B.verify(bad)                                               # in bounds, so legal BIR...
    y = run_module(bad, [x])[0]                                 # ...but the clobber shows
    np.testing.assert_array_equal(y[:64, :32], x[:64, :32])
    assert (y[:64, 32:] == 0).all()
    np.testing.assert_array_equal(y[64:], x[64:])


def test_register_dynamic_slice_with_clamp():
    m = B.Module("dyn")
    m.add_tensor("x", "input", "float32", (10, 8))
    m.add_tensor("i", "input", "int32", (1,))
    m.add_tensor("y", "output", "float32", (3, 8))
    m.add_memloc("s", "SBUF", 1, 4)
    m.add_memloc("t", "SBUF", 3, 32)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [B.AccessPattern("s", "int32", 0, [[1, 1]], 0, 1)], [b.ap("i")])
    b.inst("register_load", "SP", [], [B.AccessPattern("s", "int32", 0, [[1, 1]], 0, 1)], register="r0", min=0, max=7)
    b.inst("dma_copy", "SP", [B.AccessPattern("t", "float32", 0, [[1, 8]], 0, 3)],
           [B.AccessPattern("x", "float32", var("r0") * 8, [[8, 3], [1, 8]])])
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("t", "float32", 0, [[1, 8]], 0, 3)])
    b.finish()
    B.verify(m)
    x = rand((10, 8), 3)
    for start, want in [(2, 2), (9, 7), (-4, 0)]:
        np.testing.assert_array_equal(run_module(m, [x, np.array([start], np.int32)])[0], x[want:want + 3])


def _counting_while(limit_value):
    """acc = 0; n = N; while n: acc += 3; n -= 1  (n in SBUF, reloaded into r_n); then If(acc > 10)."""
    m = B.Module("while")
    m.add_tensor("n", "input", "int32", (1,))
    m.add_tensor("out", "output", "int32", (1, 2))
    m.add_memloc("s", "SBUF", 1, 16)
    b = B.Builder(m)

    def sap(k):
        return B.AccessPattern("s", "int32", k, [[1, 1]], 0, 1)
    b.inst("dma_copy", "SP", [sap(0)], [b.ap("n")])
    b.inst("memset", "POOL", [sap(1)], [], value=0)
    b.inst("register_load", "POOL", [], [sap(0)], register="r_n", min=0, max=1000)
    with b.while_("r_n", max_trips=limit_value):
        b.inst("tensor_scalar", "POOL", [sap(1)], [sap(1)], op0="add", operand0=3)
        b.inst("tensor_scalar", "POOL", [sap(0)], [sap(0)], op0="subtract", operand0=1)
        b.inst("register_load", "POOL", [], [sap(0)], register="r_n", min=0, max=1000)
    b.inst("tensor_scalar", "POOL", [sap(2)], [sap(1)], op0="gt", operand0=10)
    b.inst("register_load", "POOL", [], [sap(2)], register="big", min=0, max=1)
    with b.if_("big"):
        b.inst("memset", "POOL", [sap(3)], [], value=111)
    with b.else_():
        b.inst("memset", "POOL", [sap(3)], [], value=222)
    b.inst("dma_copy", "SP", [b.ap("out")], [B.AccessPattern("s", "int32", 1, [[2, 2]], 0, 1)])
    return b.finish()


def test_while_and_if_with_registers():
    m = _counting_while(None)
    B.verify(m)
    for n, want in [(0, [0, 222]), (3, [9, 222]), (5, [15, 111])]:
        assert run_module(m, [np.array([n], np.int32)])[0].tolist() == [want]
    m2 = _counting_while(4)
    with pytest.raises(BirSimError, match="more than 4 trips"):
        run_module(m2, [np.array([5], np.int32)])


def test_runtime_errors_are_compiler_errors():
    m = B.Module("oob")
    m.add_tensor("x", "input", "int32", (1,))
    m.add_tensor("y", "output", "float32", (4,))
    m.add_memloc("s", "SBUF", 1, 16)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [B.AccessPattern("s", "int32", 0, [[1, 1]], 0, 1)], [b.ap("x")])
    b.inst("register_load", "SP", [], [B.AccessPattern("s", "int32", 0, [[1, 1]], 0, 1)], register="r")
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("s", "float32", var("r"), [[1, 4]], 0, 1)])
    b.finish()
    assert run_module(m, [np.array([0], np.int32)])[0].shape == (4,)
    with pytest.raises(BirSimError, match="reaches elements 1..4") as e:
        run_module(m, [np.array([1], np.int32)])
    assert isinstance(e.value, CompilerError) and e.value.code.startswith("NCC_")
    m.body = m.body[2:]
    m.renumber()
    with pytest.raises(BirSimError, match="no value here"):
        run_module(m, [np.array([1], np.int32)])


@pytest.mark.parametrize("fn", ["sort_f32", "topk_f32"])
def test_custom_op_through_the_builtin_libraries(fn):
    x = rand((20, 33), 4, -10, 10)
    x[3, 5] = x[3, 6]      # ties
    k = 5 if fn == "topk_f32" else 33
    m = B.Module("co")
    m.add_tensor("x", "input", "float32", x.shape)
    m.add_tensor("v", "output", "float32", (20, k))
    m.add_tensor("i", "output", "int32", (20, k))
    m.add_memloc("a", "SBUF", 20, 33 * 4)
    m.add_memloc("vv", "SBUF", 20, k * 4)
    m.add_memloc("ii", "SBUF", 20, k * 4)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("a")], [b.ap("x")])
    b.inst("custom_op", "POOL", [b.ap("vv"), b.ap("ii", dtype="int32")], [b.ap("a")], function=fn, sub_opcode=0,
           k=k, descending=True)
    b.inst("dma_copy", "SP", [b.ap("v")], [b.ap("vv")])
    b.inst("dma_copy", "SP", [b.ap("i")], [b.ap("ii", dtype="int32")])
    b.finish()
    B.verify(m)
    v, i = run_module(m, [x])
    order = np.argsort(-x, axis=1, kind="stable")[:, :k]
    np.testing.assert_array_equal(v, np.take_along_axis(x, order, 1))
    np.testing.assert_array_equal(np.take_along_axis(x, i.astype(np.int64), 1), v)


def test_dma_gather_and_scatter_add_with_clamped_indices():
    rng = np.random.default_rng(9)
    table = rand((50, 16), 5)
    idx = rng.integers(-3, 55, (20, 1)).astype(np.int32)
    upd = rand((20, 16), 6)
    m = B.Module("gs")
    m.add_tensor("table", "input", "float32", table.shape)
    m.add_tensor("idx", "input", "int32", idx.shape)
    m.add_tensor("upd", "input", "float32", upd.shape)
    m.add_tensor("g", "output", "bfloat16", (20, 16))
    m.add_tensor("acc", "output", "float32", (50, 16))
    m.add_memloc("ix", "SBUF", 20, 4)
    m.add_memloc("rows", "SBUF", 20, 32)
    m.add_memloc("u", "SBUF", 20, 64)
    b = B.Builder(m)
    ix = b.ap("ix", dtype="int32")
    b.inst("dma_copy", "SP", [ix], [b.ap("idx")])
    b.inst("dma_copy", "SP", [b.ap("u")], [b.ap("upd")])
    b.inst("dma_gather", "SP", [b.ap("rows", dtype="bfloat16")], [B.AccessPattern("table", "float32", 0, [[1, 16]]), ix],
           index_stride=16, index_min=0, index_max=49)
    b.inst("dma_copy", "SP", [b.ap("g")], [b.ap("rows", dtype="bfloat16")])
    b.inst("dma_copy", "SP", [b.ap("acc")], [b.ap("table")])
    b.inst("dma_scatter", "SP", [B.AccessPattern("acc", "float32", 0, [[1, 16]])], [b.ap("u"), ix],
           index_stride=16, index_min=0, index_max=49, accumulate="add")
    b.finish()
    B.verify(m)
    g, acc = run_module(m, [table, idx, upd])
    ci = np.clip(idx[:, 0], 0, 49)
    import ml_dtypes
    np.testing.assert_array_equal(g.astype(np.float32), table[ci].astype(ml_dtypes.bfloat16).astype(np.float32))
    ref = table.copy()
    for p in range(20):
        ref[ci[p]] += upd[p]
    np.testing.assert_array_equal(acc, ref)
    m.instructions()[2].attrs["index_max"] = 50
    with pytest.raises(CompilerError, match="reaches elements"):
        B.verify(m)


def test_result_exposes_final_memlocs_and_tensors():
    x = rand((128, 64), 2)
    m = _add_zero_module((64, 2048))
    res = simulate(m, [x])
    np.testing.assert_array_equal(res.memloc("A"), x)
    assert (res.memloc("Z")[:, :64] == 0).all()
    np.testing.assert_array_equal(res.tensor("x"), x)


def test_a_row_scatter_from_hbm_is_one_birsim_error():
    # dma_scatter moves one row per partition of an on-chip side; an HBM data side was a raw TypeError.
    m = B.Module("gs_hbm")
    m.add_tensor("idx", "input", "int32", (1, 1))
    m.add_tensor("upd", "input", "float32", (1, 16))
    m.add_tensor("acc", "output", "float32", (4, 16))
    m.add_memloc("ix", "SBUF", 1, 4)
    b = B.Builder(m)
    ix = b.ap("ix", dtype="int32")
    b.inst("dma_copy", "SP", [ix], [b.ap("idx")])
    b.inst("dma_scatter", "SP", [B.AccessPattern("acc", "float32", 0, [[1, 16]])], [b.ap("upd"), ix],
           index_stride=16, index_min=0, index_max=3)
    b.finish()
    with pytest.raises(BirSimError, match="must be on chip"):
        run_module(m, [np.array([[2]], np.int32), rand((1, 16), 3)])
