"""unroll and dma_optimization keep results bit-exact (birsim) and do their job."""
import numpy as np

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_module
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_checks import raw_equal, run_interleaved


def _split_transfers():
    m = B.Module("halves")
    m.add_tensor("x", "input", "float32", (256, 64))
    m.add_tensor("y", "output", "float32", (128, 128))
    m.add_memloc("a", "SBUF", 128, 512)
    b = B.Builder(m)
    with b.loop("i", 0, 2) as i:
        # rows 0..63 and 64..127 of a tile: one transfer along the partitions
        b.inst("dma_copy", "SP", [b.ap("a", num_partitions=64, free=64)],
               [B.AccessPattern("x", "float32", i * 128 * 64, [[64, 64], [1, 64]])])
        b.inst("dma_copy", "SP", [b.ap("a", start_partition=64, num_partitions=64, free=64)],
               [B.AccessPattern("x", "float32", i * 128 * 64 + 64 * 64, [[64, 64], [1, 64]])])
        b.inst("tensor_scalar", "DVE", [b.ap("a", free=64)], [b.ap("a", free=64)], op0="mult", operand0=2.0)
        # columns 0..31 and 32..63 of each row: one transfer along the free dim
        b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * 64, [[128, 128], [1, 32]])],
               [b.ap("a", free=32)], queue="q1")
        b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * 64 + 32, [[128, 128], [1, 32]])],
               [b.ap("a", free=32, offset=32)], queue="q1")
    b.finish()
    return m


def test_dma_optimization_coalesces_and_keeps_results():
    m = _split_transfers()
    x = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float32)
    ref = run_module(B.from_json(B.to_json(m)), [x])
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["dma_optimization", "anti_dependency_analyzer", "birverifier"], ctx)
    assert ctx.metrics["dma_coalesced"] == 2
    assert sum(1 for i in m.instructions() if i.opcode == "dma_copy") == 2
    assert all(raw_equal(a, b) for a, b in zip(ref, run_module(m, [x])))
    for s in range(3):
        assert all(raw_equal(a, b) for a, b in zip(ref, run_interleaved(m, [x], s)))


def test_dma_optimization_leaves_non_adjacent_transfers():
    m = _split_transfers()
    loop = m.body[0]
    loop.body[1].srcs[0].offset = loop.body[1].srcs[0].offset + 1   # no longer contiguous
    m.renumber()
    ctx = PassContext(get_target("trn1"))
    run_passes(m, ["dma_optimization"], ctx)
    assert ctx.metrics["dma_coalesced"] == 1


def test_unroll_small_loops_only():
    m = _split_transfers()
    x = np.random.default_rng(1).standard_normal((256, 64)).astype(np.float32)
    ref = run_module(B.from_json(B.to_json(m)), [x])
    run_passes(m, ["unroll"], PassContext(get_target("trn1")))        # default: 1-trip loops only
    assert any(n.kind == "loop" for n in m.walk())
    run_passes(m, ["unroll"], PassContext(get_target("trn1"), options={"unroll_max_trip": 4}))
    assert not any(n.kind == "loop" for n in m.walk())
    assert len(m.instructions()) == 10
    assert all(raw_equal(a, b) for a, b in zip(ref, run_module(m, [x])))


def test_default_unroll_keeps_instruction_count_independent_of_trip_counts():
    # the same program with 2 and with 32 tiles: same number of instructions after unroll
    counts = []
    for tiles in (2, 32):
        m = B.Module("t%d" % tiles)
        m.add_tensor("x", "input", "float32", (128, 64 * tiles))
        m.add_tensor("y", "output", "float32", (128, 64 * tiles))
        m.add_memloc("a", "SBUF", 128, 256)
        b = B.Builder(m)
        with b.loop("one", 0, 1):
            b.inst("memset", "DVE", [b.ap("a", free=64)], value=0.0)
        with b.loop("i", 0, tiles) as i:
            b.inst("dma_copy", "SP", [b.ap("a", free=64)], [B.AccessPattern("x", "float32", i * 64, [[64 * tiles, 128], [1, 64]])])
            b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * 64, [[64 * tiles, 128], [1, 64]])], [b.ap("a", free=64)])
        b.finish()
        run_passes(m, ["unroll"], PassContext(get_target("trn1")))
        assert sum(1 for n in m.walk() if n.kind == "loop") == 1      # the 1-trip loop went
        counts.append(len(m.instructions()))
    assert counts[0] == counts[1] == 3
