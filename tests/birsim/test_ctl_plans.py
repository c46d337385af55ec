"""The typed plans of the small per-trip instructions (birsim._ctlplans): register_load and the
same-dtype dma_scatter, against the reference path (every instruction through its handler):
the same memory bytes, the same simulated times, the same errors."""
import numpy as np
from hypothesis import given, settings, strategies as st

from neuronxcc.errors import BirSimError
from neuronxcc.hwm import get_target
from neuronxcc.pelican import var
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import _ctlplans
from neuronxcc.starfish.birsim.executor import Executor
from neuronxcc.starfish.birsim.state import MachineState
from neuronxcc.starfish.birsim.timeline import Timeline

from birsim.test_plans import _run


def _plan(m, inst):
    tm = get_target("trn1")
    return Executor(m, MachineState(m, tm), Timeline(m, tm))._prepare(inst)[1]


def _both(m, ins):
    got = []
    for plans in (True, False):
        try:
            got.append(_run(m, ins, plans))
        except BirSimError as e:        # an access outside its target: the same error on both paths
            got.append(e.message)
    if isinstance(got[0], str) or isinstance(got[1], str):
        assert got[0] == got[1]
        return None
    (fast, s1), (ref, s2) = got
    for x, y in zip(fast, ref):
        assert x.tobytes() == y.tobytes()
    assert s1 == s2
    return fast


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["int32", "uint32", "int8", "uint16", "float32", "bfloat16", "int64"]),
       st.sampled_from([None, -5, 0, 3]), st.sampled_from([None, 2, 9, 2 ** 40]), st.integers(0, 4),
       st.integers(0, 99))
def test_register_load_plan_matches_the_handler(dtype, lo, hi, trips, seed):
    """A register loaded from every dtype (values past int32 wrap, floats truncate), clamped or not,
    driving a while loop's trips and a dynamic offset: outputs and times as the handler's."""
    from neuronxcc.starfish.birpy import dtypes as _dt
    m = B.Module("regload")
    m.add_tensor("v", "input", dtype, (1, 4))
    m.add_tensor("x", "input", "float32", (16, 4))
    m.add_tensor("y", "output", "float32", (8, 4))
    m.add_memloc("s", "SBUF", 1, 32)
    m.add_memloc("c", "SBUF", 1, 4)
    m.add_memloc("t", "SBUF", 8, 16)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [B.AccessPattern("s", dtype, 0, [[1, 4]], 0, 1)], [b.ap("v")])
    b.inst("memset", "POOL", [B.AccessPattern("c", "int32", 0, [[1, 1]], 0, 1)], [], value=float(trips))
    b.inst("memset", "DVE", [B.AccessPattern("t", "float32", 0, [[1, 4]], 0, 8)], [], value=0.0)
    r = b.inst("register_load", "SP", [], [B.AccessPattern("s", dtype, 1, [[1, 1]], 0, 1)], register="r0", min=lo, max=hi)
    b.inst("register_load", "POOL", [], [B.AccessPattern("c", "int32", 0, [[1, 1]], 0, 1)], register="n")
    with b.while_("n", max_trips=8):
        b.inst("tensor_scalar", "POOL", [B.AccessPattern("c", "int32", 0, [[1, 1]], 0, 1)],
               [B.AccessPattern("c", "int32", 0, [[1, 1]], 0, 1)], op0="subtract", operand0=1.0)
        b.inst("register_load", "POOL", [], [B.AccessPattern("c", "int32", 0, [[1, 1]], 0, 1)], register="n")
        b.inst("dma_copy", "SP", [B.AccessPattern("t", "float32", 0, [[1, 4]], 0, 8)],
               [B.AccessPattern("x", "float32", var("r0") * 4, [[4, 8], [1, 4]])])
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("t", "float32", 0, [[1, 4]], 0, 8)])
    b.finish()
    m.ensure_ids()
    assert isinstance(_plan(m, r), _ctlplans.RegisterLoad)
    rng = np.random.default_rng(seed)
    raw = rng.integers(-2 ** 35, 2 ** 35, (1, 4)).astype(np.float64)
    raw[0, 1] = rng.choice([0, 1, 3, 5, 7, 10, -3, 2 ** 32 + 2, 2 ** 31 + 5, 300.7, -1.5])
    with np.errstate(invalid="ignore"):
        v = raw.astype(_dt.np_dtype(dtype)) if dtype != "bfloat16" else raw.astype(np.float32).astype(_dt.np_dtype(dtype))
    x = rng.uniform(-1, 1, (16, 4)).astype(np.float32)
    _both(m, [v, x])


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["float32", "bfloat16", "int32", "int8"]), st.integers(1, 12), st.integers(1, 6),
       st.integers(-4, 14), st.integers(0, 3), st.integers(0, 2), st.integers(0, 99))
def test_typed_scatter_matches_the_handler(dtype, parts, width, index_max, extra, trips, seed):
    """Same-dtype dma_scatter (the typed Scatter plan) against the handler, in a loop whose variable
    moves the table and the on-chip rows: indices clamped to [index_min, index_max], repeated
    indices (the later partition wins), rows of WIDTH elements at index * stride; an index_max past
    the table is the same bounds error on both paths."""
    from neuronxcc.starfish.birpy import dtypes as _dt
    rows = 10
    stride = width + extra
    rng = np.random.default_rng(seed)
    m = B.Module("scatter")
    m.add_tensor("table", "input", dtype, (rows * stride + 4 * width,))
    m.add_tensor("src", "input", dtype, (parts, 4 * width))
    m.add_tensor("idx", "input", "int32", (parts, 1))
    m.add_tensor("out", "output", dtype, (rows * stride + 4 * width,))
    m.add_memloc("ix", "SBUF", parts, 4)
    m.add_memloc("r", "SBUF", parts, 4 * 4 * width)
    b = B.Builder(m)
    ix = B.AccessPattern("ix", "int32", 0, [[1, 1]], 0, parts)
    b.inst("dma_copy", "SP", [ix], [b.ap("idx")])
    b.inst("dma_copy", "SP", [B.AccessPattern("r", dtype, 0, [[1, 4 * width]], 0, parts)], [b.ap("src")])
    b.inst("dma_copy", "SP", [b.ap("out")], [b.ap("table")])
    insts = []
    with b.loop("t", 0, trips + 1) as t:
        insts.append(b.inst("dma_scatter", "SP", [B.AccessPattern("out", dtype, t, [[1, width]])],
                            [B.AccessPattern("r", dtype, t * width, [[1, width]], 0, parts), ix],
                            index_stride=stride, index_min=0, index_max=index_max))
    b.finish()
    m.ensure_ids()
    assert isinstance(_plan(m, insts[0]), _ctlplans.Scatter)
    table = rng.integers(-100, 100, rows * stride + 4 * width).astype(_dt.np_dtype(dtype))
    src = rng.integers(-100, 100, (parts, 4 * width)).astype(_dt.np_dtype(dtype))
    idx = rng.integers(-3, rows + 3, (parts, 1)).astype(np.int32)
    if parts > 2:
        idx[1] = idx[2]             # two partitions to one row
    _both(m, [table, src, idx])


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["float32", "int32", "bfloat16", "int8"]), st.integers(1, 9), st.integers(1, 4),
       st.booleans(), st.integers(1, 4), st.integers(-2, 12), st.integers(0, 99))
def test_gather_with_a_shared_non_affine_row_offset_matches_the_handler(dtype, parts, width, strided, trips,
                                                                       index_max, seed):
    """The typed gather when its on-chip rows sit at a non-affine offset (a double buffer picked by
    t % 2, as the sort kernels' gathers are: the offset evaluated once for all partitions) and are
    one contiguous run each (a memmove) or strided (the copy kernel): bytes, times and bounds errors
    as the handler's."""
    from neuronxcc.starfish.birpy import dtypes as _dt
    from neuronxcc.starfish.birsim._plans import Gather
    rows = 8
    rng = np.random.default_rng(seed)
    m = B.Module("gather_mod")
    m.add_tensor("table", "input", dtype, (rows * width + width,))
    m.add_tensor("idx", "input", "int32", (parts, 1))
    m.add_tensor("g", "output", dtype, (parts, 4 * width))
    m.add_memloc("ix", "SBUF", parts, 4)
    m.add_memloc("r", "SBUF", parts, 4 * 4 * width)
    b = B.Builder(m)
    ix = B.AccessPattern("ix", "int32", 0, [[1, 1]], 0, parts)
    b.inst("dma_copy", "SP", [ix], [b.ap("idx")])
    b.inst("memset", "POOL", [B.AccessPattern("r", dtype, 0, [[1, 4 * width]], 0, parts)], [], value=0.0)
    gs = []
    with b.loop("t", 0, trips) as t:
        pat = [[2, width]] if strided else [[1, width]]
        gs.append(b.inst("dma_gather", "SP", [B.AccessPattern("r", dtype, (t % 2) * (2 * width) + (t // 2), pat, 0,
                                                              parts)],
                         [B.AccessPattern("table", dtype, 0, [[1, width]]), ix],
                         index_stride=width, index_min=0, index_max=index_max))
    b.inst("dma_copy", "SP", [b.ap("g")], [B.AccessPattern("r", dtype, 0, [[1, 4 * width]], 0, parts)])
    b.finish()
    m.ensure_ids()
    assert isinstance(_plan(m, gs[0]), Gather)
    table = rng.integers(-100, 100, rows * width + width).astype(_dt.np_dtype(dtype))
    _both(m, [table, rng.integers(-2, rows + 3, (parts, 1)).astype(np.int32)])
