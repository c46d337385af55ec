"""Property test of access-pattern addressing: random [step, num] patterns
(positive, zero and negative steps, 1-3 free dims, offsets, partition slices)
on fp32/bf16/int32 tiles, copied by DVE (raw), ACT (through fp32) and DMA,
against numpy indexing of the same bytes. Exact."""
import ml_dtypes
import numpy as np
from hypothesis import given, settings, strategies as st

from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import simulate

NPDT = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "int32": np.int32}


@st.composite
def programs(draw):
    dtype = draw(st.sampled_from(sorted(NPDT)))
    parts = draw(st.integers(1, 8))
    ndim = draw(st.integers(1, 3))
    pat = [[draw(st.integers(-4, 6)), draw(st.integers(1, 4))] for _ in range(ndim)]
    lo = sum(min(0, s * (n - 1)) for s, n in pat)
    hi = sum(max(0, s * (n - 1)) for s, n in pat)
    width = hi - lo + 1 + draw(st.integers(0, 5))
    off = -lo + draw(st.integers(0, width - (hi - lo + 1)))
    sp = draw(st.integers(0, 8 - parts))
    engine = draw(st.sampled_from(["DVE", "ACT", "DMA"]))
    return dtype, parts, pat, width, off, sp, engine


@settings(max_examples=60, deadline=None)
@given(programs())
def test_random_patterns_match_numpy(prog):
    dtype, parts, pat, width, off, sp, engine = prog
    npdt = NPDT[dtype]
    rng = np.random.default_rng(abs(hash(str(prog))) % 2**32)
    src = (rng.integers(-1000, 1000, (8, width)) / (1 if dtype == "int32" else 8)).astype(npdt)
    n = int(np.prod([k for _, k in pat]))
    m = B.Module("ap")
    m.add_tensor("src", "input", dtype, src.shape)
    m.add_tensor("out", "output", dtype, (parts, n))
    isz = np.dtype(npdt).itemsize
    m.add_memloc("a", "SBUF", 8, width * isz)
    m.add_memloc("o", "SBUF", parts, n * isz)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [B.AccessPattern("a", dtype, 0, [[1, width]], 0, 8)], [b.ap("src")])
    view = B.AccessPattern("a", dtype, off, pat, sp, parts)
    dst = B.AccessPattern("o", dtype, 0, [[1, n]], 0, parts)
    if engine == "DMA":
        b.inst("dma_copy", "SP", [dst], [view])
    elif engine == "ACT":
        b.inst("activation", "ACT", [dst], [view], func="copy")
    else:
        b.inst("tensor_copy", "DVE", [dst], [view])
    b.inst("dma_copy", "SP", [b.ap("out")], [dst])
    b.finish()      # not verified: partition starts outside the quadrant rule are fine for addressing
    got = simulate(m, [src]).outputs[0]
    idx = np.array([off + sum(i * s for i, (s, _) in zip(ix, pat)) for ix in np.ndindex(*[k for _, k in pat])])
    want = src[sp:sp + parts][:, idx]
    np.testing.assert_array_equal(got.astype(np.float64), want.astype(np.float64))


@st.composite
def looped(draw):
    start = draw(st.integers(0, 3))
    trips = draw(st.integers(1, 4))
    step = draw(st.integers(1, 3))
    a = draw(st.integers(-3, 5))
    c = draw(st.integers(-4, 12))
    s = draw(st.integers(-2, 3))
    k = draw(st.integers(1, 4))
    width = draw(st.integers(4, 24))
    return start, start + trips * step, step, a, c, s, k, width


@settings(max_examples=80, deadline=None)
@given(looped())
def test_verifier_bounds_agree_with_the_simulator(prog):
    """Static bounds (pelican over all loop iterations) reject exactly the programs that go
    out of bounds when run."""
    from neuronxcc.errors import BirSimError, BirVerifyError
    from neuronxcc.pelican import var
    start, stop, step, a, c, s, k, width = prog
    m = B.Module("bounds")
    m.add_memloc("t", "SBUF", 4, width * 4)
    b = B.Builder(m)
    b.inst("memset", "DVE", [B.AccessPattern("t", "float32", 0, [[1, width]], 0, 4)], [], value=0.0)
    with b.loop("i", start, stop, step):
        ap = B.AccessPattern("t", "float32", var("i") * a + c, [[s, k]], 0, 4)
        b.inst("tensor_scalar", "DVE", [ap], [ap], op0="add", operand0=1.0)
    b.finish()
    try:
        B.verify(m)
        static_ok = True
    except BirVerifyError:
        static_ok = False
    try:
        simulate(m, [])
        dynamic_ok = True
    except BirSimError:
        dynamic_ok = False
    assert static_ok == dynamic_ok, prog
