"""HBM scratch by liveness (birpy/hbm.py): tensors whose lifetimes do not overlap share bytes of
the one scratch arena, overlapping ones never do, a reference in a loop keeps a tensor live over
the whole loop, birsim and walrus treat the shared bytes as one storage, and the layout
round-trips through BIR JSON."""
import numpy as np
import pytest

from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birpy import hbm

N = 256


def _module(*scratch):
    m = B.Module("arena", "trn1")
    m.add_tensor("x", "input", "float32", (N,))
    m.add_tensor("w", "input", "float32", (N,))
    m.add_tensor("y", "output", "float32", (N,))
    m.add_tensor("z", "output", "float32", (N,))
    for s in scratch:
        m.add_tensor(s, "scratch", "float32", (N,))
    return m, B.Builder(m)


def _copy(b, dst, src, q):
    return b.inst("dma_copy", "SP", [b.ap(dst)], [b.ap(src)], queue=q)


def _span(t):
    return t.arena_offset, t.arena_offset + t.nbytes


def _disjoint_program():
    m, b = _module("A", "B")
    _copy(b, "A", "x", "q0")
    _copy(b, "y", "A", "q1")
    _copy(b, "B", "w", "q2")         # A is dead here: B may take its bytes
    _copy(b, "z", "B", "q3")
    return m.renumber()


def test_disjoint_lifetimes_share_an_offset():
    m = _disjoint_program()
    assert hbm.assign(m) == N * 4
    a, b = m.tensors["A"], m.tensors["B"]
    assert a.arena_offset == b.arena_offset == 0
    assert hbm.footprint(m) == 4 * N * 4 + N * 4          # x, w, y, z + one shared scratch


def test_overlapping_lifetimes_do_not_share():
    m, b = _module("A", "B", "C")
    _copy(b, "A", "x", "q0")
    _copy(b, "B", "w", "q0")
    _copy(b, "y", "A", "q0")          # A and B are live together
    _copy(b, "C", "x", "q0")          # A is dead: C may reuse it, but not B's bytes
    _copy(b, "z", "B", "q0")
    _copy(b, "y", "C", "q0")
    m.renumber()
    hbm.assign(m)
    A, Bt, C = (m.tensors[n] for n in "ABC")
    assert max(_span(A)[0], _span(Bt)[0]) >= min(_span(A)[1], _span(Bt)[1])
    assert max(_span(C)[0], _span(Bt)[0]) >= min(_span(C)[1], _span(Bt)[1])
    assert C.arena_offset == A.arena_offset
    assert hbm.arena_bytes(m) == 2 * N * 4


def test_a_reference_inside_a_loop_keeps_the_tensor_live_over_the_whole_loop():
    """B is written before the loop and read at the top of its body; A is written and read
    later in the body. In program order their references do not overlap, but the second trip
    reads B after the first wrote A: they must not share."""
    m, b = _module("A", "B")
    _copy(b, "B", "w", "q0")
    with b.loop("i", 0, 3):
        _copy(b, "y", "B", "q0")
        _copy(b, "A", "x", "q0")
        _copy(b, "z", "A", "q0")
    m.renumber()
    iv = hbm.live_intervals(m)
    assert iv["A"][0] <= iv["B"][1]
    hbm.assign(m)
    a, bb = m.tensors["A"], m.tensors["B"]
    assert a.arena_offset != bb.arena_offset


def test_random_lifetimes_never_overlap_live_bytes():
    rng = np.random.default_rng(7)
    for trial in range(20):
        m = B.Module("r", "trn1")
        m.add_tensor("x", "input", "float32", (8192,))
        names = []
        for k in range(30):
            n = "s%d" % k
            m.add_tensor(n, "scratch", "float32", (int(rng.integers(1, 8192)),))
            names.append(n)
        b = B.Builder(m)
        uses = [names[int(rng.integers(0, len(names)))] for _ in range(120)]
        for n in uses:
            t = m.tensors[n]
            b.inst("dma_copy", "SP", [b.ap(n)], [B.AccessPattern("x", "float32", 0, [[1, t.shape[0]]])],
                   queue="q0")
        m.renumber()
        top = hbm.assign(m)
        iv = hbm.live_intervals(m)
        live = sorted(iv)
        for i, p in enumerate(live):
            for q in live[i + 1:]:
                if iv[p][1] < iv[q][0] or iv[q][1] < iv[p][0]:
                    continue
                (a0, a1), (b0, b1) = _span(m.tensors[p]), _span(m.tensors[q])
                assert a1 <= b0 or b1 <= a0, (trial, p, q)
        peak = max(sum(m.tensors[n].nbytes for n in live if iv[n][0] <= pos <= iv[n][1])
                   for pos in range(len(uses)))
        assert peak <= top <= sum(hbm._align(m.tensors[n].nbytes) for n in live)


def test_serde_printer_and_verifier_carry_the_offset():
    m = _disjoint_program()
    hbm.assign(m)
    back = B.module_from_json(B.module_to_json(m))
    assert back.tensors["B"].arena_offset == 0 and back == m
    assert "@arena+0" in B.format_module(m)
    B.verify(m)
    m.tensors["x"].arena_offset = 0
    with pytest.raises(Exception, match="scratch arena"):
        B.verify(m)


def test_birsim_runs_tensors_that_share_bytes():
    from neuronxcc.starfish import birsim
    m = _disjoint_program()
    hbm.assign(m)
    x = np.arange(N, dtype=np.float32)
    w = -x
    y, z = birsim.run_module(m, [x, w])
    np.testing.assert_array_equal(y, x)
    np.testing.assert_array_equal(z, w)


def test_walrus_orders_the_reuse_of_shared_bytes():
    """The write of B (queue q2) reuses A's bytes, which queue q1 still reads: walrus must order
    them although they are different tensors. Random interleavings honour only the semaphores
    (without the ordering about a third of them clobber y)."""
    from neuronxcc.walrus import deps
    from support.walrus_checks import run_interleaved
    m = _disjoint_program()
    hbm.assign(m)
    deps.synchronize(m, physical=True)
    write_b = [i for i in m.instructions() if i.dsts[0].target == "B"][0]
    assert write_b.waits, "the write into A's bytes does not wait for A's last read"
    x = np.arange(N, dtype=np.float32) + 1
    w = -x
    for seed in range(24):
        y, z = run_interleaved(m, [x, w], seed)
        np.testing.assert_array_equal(y, x)
        np.testing.assert_array_equal(z, w)
