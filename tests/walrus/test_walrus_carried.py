"""Exact loop-carried dependences and rotated (double-buffered) loop values.

A loop whose iterations touch disjoint ranges of a buffer gets no
loop-carried wait; one whose iterations reuse the same bytes still does;
a loop-private buffer that vn_splitter rotates over two copies is waited
for two iterations back. Every variant is also executed in adversarial
interleavings that honour only the semaphores and must match program order.
"""
import numpy as np
import pytest

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_module
from neuronxcc.walrus.carried import ROTATIONS
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_checks import raw_equal, run_interleaved

F = 16
T = 4


def _program(disjoint, private=False, acts=1):
    """loop i: t[slot] <- x[:, i] (SP DMA); u[slot] <- act(t[slot]), then ``acts - 1`` more activations
    of u in place; y[:, i] <- u[slot] (POOL DMA)."""
    m = B.Module("carried")
    m.add_tensor("x", "input", "float32", (128, T * F))
    m.add_tensor("y", "output", "float32", (128, T * F))
    size = F if (private or not disjoint) else T * F
    m.add_memloc("t", "SBUF", 128, size * 4)
    m.add_memloc("u", "SBUF", 128, size * 4)
    bld = B.Builder(m)

    def chip(name, off):
        return B.AccessPattern(name, "float32", off, [[1, F]], 0, 128)

    with bld.loop("i", 0, T) as i:
        slot = i * F if (disjoint and not private) else 0 * i
        bld.inst("dma_copy", "SP", [chip("t", slot)], [B.AccessPattern("x", "float32", i * F, [[T * F, 128], [1, F]])],
                 queue="q0")
        bld.inst("activation", "ACT", [chip("u", slot)], [chip("t", slot)], func="identity", scale=2.0, bias=1.0)
        for _ in range(acts - 1):
            bld.inst("activation", "ACT", [chip("u", slot)], [chip("u", slot)], func="identity", scale=0.5, bias=1.0)
        bld.inst("dma_copy", "POOL", [B.AccessPattern("y", "float32", i * F, [[T * F, 128], [1, F]])], [chip("u", slot)],
                 queue="q1")
    bld.finish()
    return m


def _run(m, passes):
    x = [np.arange(128 * T * F, dtype=np.float32).reshape(128, T * F) % 97]
    ref = run_module(B.from_json(B.to_json(m)), x)
    run_passes(m, passes, PassContext(get_target("trn1")))
    B.verify(m, "trn1")
    for k in range(4):
        got = run_interleaved(m, x, k)
        assert all(raw_equal(a, b) for a, b in zip(ref, got)), "interleaving %d differs from program order" % k
    return m


def _load(m):
    return next(i for i in m.instructions() if i.opcode == "dma_copy" and i.dsts[0].target == "t")


def _waits_on(ins, sem):
    return [v for s, v in ins.waits if s == sem]


def _at(v, i):
    return v if isinstance(v, int) else int(v.eval({"i": i}))


@pytest.mark.parametrize("passes", [["lsa", "anti_dependency_analyzer"],
                                    ["lsa", "coloring", "coloring_allocator", "anti_dependency_analyzer",
                                     "dep_reduction"]])
def test_disjoint_iterations_get_no_carried_wait(passes):
    m = _run(_program(disjoint=True), passes)
    # iteration i writes t[i*F:(i+1)*F]; earlier iterations' reads of t touch other bytes
    assert _waits_on(_load(m), "S_ACT") == []


@pytest.mark.parametrize("passes", [["lsa", "anti_dependency_analyzer"],
                                    ["lsa", "coloring", "coloring_allocator", "anti_dependency_analyzer",
                                     "dep_reduction"]])
def test_overlapping_iterations_wait_one_back(passes):
    m = _run(_program(disjoint=False), passes)
    ws = _waits_on(_load(m), "S_ACT")
    assert ws, "the load into a reused buffer must wait for the previous iteration's read"
    # the activation signals S_ACT once per iteration: iteration i waits for count i (iteration i-1)
    assert max(_at(v, 3) for v in ws) == 3


def test_rotated_buffer_waits_two_back():
    passes = ["lsa", "vn_splitter", "coloring", "coloring_allocator", "anti_dependency_analyzer", "post_sched",
              "dep_reduction", "birverifier"]
    m = _run(_program(disjoint=False, private=True, acts=8), passes)   # compute-bound: rotation can pay
    rot = m.attrs.get(ROTATIONS)
    assert rot and set(rot) == {"t", "u"} and all(r["copies"] == 2 for r in rot.values())
    assert m.memlocs["t"].bytes_per_partition == 2 * F * 4
    ws = _waits_on(_load(m), "S_ACT")
    # copy i % 2: the load of iteration i only waits for the read of iteration i - 2. ACT signals twice
    # an iteration (the read of t, which the next load awaits; the last activation, which the store
    # awaits), so iteration 1's read is count 3 (one back would be iteration 2's: count 5)
    assert ws and max(_at(v, 3) for v in ws) == 3
    # the two copies of one buffer never overlap another live buffer
    t, u = m.memlocs["t"], m.memlocs["u"]
    assert t.byte_offset + t.bytes_per_partition <= u.byte_offset or \
        u.byte_offset + u.bytes_per_partition <= t.byte_offset


def test_rotation_not_applied_to_values_carried_across_iterations():
    # t and u are the same bytes every iteration but the load does not define all of t... here it does;
    # a value read before it is written in an iteration (accumulator) is carried and never rotated
    m = B.Module("acc")
    m.add_tensor("x", "input", "float32", (128, T * F))
    m.add_tensor("y", "output", "float32", (128, F))
    m.add_memloc("acc", "SBUF", 128, F * 4)
    m.add_memloc("t", "SBUF", 128, F * 4)
    bld = B.Builder(m)
    chip = lambda n: B.AccessPattern(n, "float32", 0, [[1, F]], 0, 128)  # noqa: E731
    bld.inst("memset", "DVE", [chip("acc")], value=0.0)
    with bld.loop("i", 0, T) as i:
        bld.inst("dma_copy", "SP", [chip("t")], [B.AccessPattern("x", "float32", i * F, [[T * F, 128], [1, F]])],
                 queue="q0")
        for _ in range(8):      # enough compute that the transfers do not bind (else nothing rotates)
            bld.inst("tensor_tensor", "DVE", [chip("acc")], [chip("acc"), chip("t")], op="add")
    bld.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", 0, [[F, 128], [1, F]])], [chip("acc")], queue="q1")
    bld.finish()
    m = _run(m, ["lsa", "vn_splitter", "coloring", "coloring_allocator", "anti_dependency_analyzer",
                 "dep_reduction", "birverifier"])
    assert set(m.attrs.get(ROTATIONS, {})) == {"t"}
    assert m.memlocs["acc"].bytes_per_partition == F * 4
