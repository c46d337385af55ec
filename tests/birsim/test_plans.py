"""The cached execution plans (birsim.plans, the default fast path) against the
reference path (every instruction through its ``Executor.op_*`` handler):
random looped programs must give bit-identical outputs and the same timeline;
and the one-pass ``copy_raw`` kernel against gather_raw + scatter_raw."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from neuronxcc.errors import BirSimError
from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import _rawcopy as RC
from neuronxcc.starfish.birsim.executor import Executor
from neuronxcc.starfish.birsim.state import MachineState
from neuronxcc.starfish.birsim.timeline import Timeline

P, F = 8, 16
DT = ["float32", "bfloat16", "float16", "int32", "int8"]


def _run(m, inputs, plans):
    tm = get_target("trn1")
    state = MachineState(m, tm)
    for n, v in zip(m.inputs, inputs):
        state.set_input(n, v)
    tl = Timeline(m, tm)
    ex = Executor(m, state, tl, plans=plans)
    ex.run()
    return [state.targets[n].buf.copy() for n in m.outputs], tl.summary()


def _op(draw, b, i, ap):
    kind = draw(st.sampled_from(["ts", "tt", "act", "copy", "memset", "matmul", "dma", "ts_pool", "iota", "asel", "sel",
                                 "transpose", "ts_ap", "act_ap", "reduce"]))
    d0 = draw(st.sampled_from(DT))
    off = draw(st.integers(0, F))
    t0 = ap("t0", d0, off)
    t1 = ap("t1", draw(st.sampled_from(DT)), draw(st.integers(0, F)))
    if kind in ("ts", "ts_pool"):
        ops = ["add", "mult", "max", "min", "subtract", "divide", "bitwise_and", "arith_shift_left", "lt", "eq", "ge"]
        b.inst("tensor_scalar", "POOL" if kind == "ts_pool" else "DVE", [t1], [t0], op0=draw(st.sampled_from(ops)),
               operand0=float(draw(st.integers(-3, 3))), op1=draw(st.sampled_from(["add", "mult", None])),
               operand1=1.5, reverse0=draw(st.booleans()))
    elif kind == "ts_ap":
        # per-partition scalar operands ([P, 1] APs) for op0 and/or op1
        def scal():
            return B.AccessPattern("t1", draw(st.sampled_from(DT)), draw(st.integers(0, 2 * F - 1)), [[1, 1]], 0, P)
        ap1 = draw(st.booleans())
        op1 = draw(st.sampled_from(["add", "mult", "subtract", None]))
        srcs = [t0, scal()] + ([scal()] if ap1 else [])
        b.inst("tensor_scalar", draw(st.sampled_from(["DVE", "ACT", "POOL"])), [t1], srcs, operand0_ap=True,
               op0=draw(st.sampled_from(["add", "mult", "subtract", "divide", "max", "rsub"])),
               reverse0=draw(st.booleans()), op1=op1, operand1=-0.5, operand1_ap=ap1, reverse1=draw(st.booleans()))
    elif kind == "tt":
        b.inst("tensor_tensor", draw(st.sampled_from(["DVE", "POOL"])), [t1], [t0, ap("t1", t1.dtype, 0)],
               op=draw(st.sampled_from(["add", "mult", "max", "min", "subtract", "bitwise_or", "gt", "ne", "le"])))
    elif kind == "act":
        b.inst("activation", "ACT", [t1], [t0], func=draw(st.sampled_from(["exp", "tanh", "relu", "copy", "identity", "abs",
                                                                         "sqrt", "square", "rsqrt", "reciprocal", "sign"])),
               scale=draw(st.sampled_from([1.0, 0.5])), bias=draw(st.sampled_from([0.0, -1.0])))
    elif kind == "act_ap":
        # [P, 1] bias and/or scale operands, the row sum into a [P, 1] accumulator
        def col():
            return B.AccessPattern("t1", draw(st.sampled_from(DT)), draw(st.integers(0, 2 * F - 1)), [[1, 1]], 0, P)
        bias_ap, scale_ap, red = draw(st.booleans()), draw(st.booleans()), draw(st.booleans())
        srcs = [t0] + ([col()] if bias_ap else []) + ([col()] if scale_ap else [])
        dsts = [t1] + ([B.AccessPattern("t0", "float32", draw(st.integers(0, 2 * F - 1)), [[1, 1]], 0, P)] if red else [])
        b.inst("activation", "ACT", dsts, srcs, func=draw(st.sampled_from(["exp", "square", "identity", "rsqrt"])),
               bias_ap=bias_ap, scale_ap=scale_ap, reduce=red, scale=draw(st.sampled_from([1.0, 0.5])),
               bias=draw(st.sampled_from([0.0, -1.0])))
    elif kind == "reduce":
        b.inst("tensor_reduce", draw(st.sampled_from(["DVE", "POOL"])),
               [B.AccessPattern("t1", d0, draw(st.integers(0, 2 * F - 1)), [[1, 1]], 0, P)], [t0],
               op=draw(st.sampled_from(["add", "max", "min"])), axes=1, negate=draw(st.booleans()))
    elif kind == "copy":
        b.inst("tensor_copy", draw(st.sampled_from(["DVE", "ACT", "POOL"])), [t1], [t0])
    elif kind == "sel":
        pred = ap("t0", draw(st.sampled_from(DT + ["bool"])), draw(st.integers(0, F)))
        b.inst("select", draw(st.sampled_from(["DVE", "POOL"])), [t1], [pred, t0, ap("t1", draw(st.sampled_from(DT)), 0)])
    elif kind == "iota":
        b.inst("iota", "POOL", [t1], [], pattern=[[draw(st.integers(-2, 3)), F]], offset=draw(st.integers(-5, 5)),
               channel_multiplier=draw(st.integers(-2, 2)))
    elif kind == "asel":
        b.inst("affine_select", "POOL", [t1], [t0], pattern=[[draw(st.integers(-1, 1)), F]], offset=draw(st.integers(-5, 5)),
               channel_multiplier=draw(st.integers(-1, 1)), cmp=draw(st.sampled_from(["ge", "gt", "eq"])),
               on_false=draw(st.sampled_from([0.0, -3.0, -1e4])))
    elif kind == "memset":
        b.inst("memset", draw(st.sampled_from(["DVE", "POOL"])), [t1], [], value=draw(st.sampled_from([0.0, 3.0, -2.5])))
    elif kind == "matmul":
        s = B.AccessPattern("t0", "float32", off, [[1, 4]], 0, P)
        mv = B.AccessPattern("t1", "bfloat16", 0, [[1, F]], 0, P)
        out = B.AccessPattern("ps", "float32", 0, [[1, F]], 0, 4)
        b.inst("matmul", "PE", [out], [s, mv], psum_zero=draw(st.booleans()))
        b.inst("tensor_copy", "DVE", [ap("t1", "float32", 0).copy(num_partitions=4)], [out])
    elif kind == "transpose":
        # a P x P block, same dtype (the typed raw plan) or converting (the handler)
        src = B.AccessPattern("t0", d0, off, [[1, P]], 0, P)
        d1 = draw(st.sampled_from([d0, d0, "float32", "int32"]))
        b.inst("transpose", draw(st.sampled_from(["DVE", "PE"])), [B.AccessPattern("t1", d1, draw(st.integers(0, F)),
                                                                                   [[1, P]], 0, P)], [src])
    else:
        # SBUF -> SBUF DMA, overlapping within t0 when the offsets are close
        b.inst("dma_copy", "SP", [ap("t0", d0, draw(st.integers(0, F)))], [t0], queue="qx")


@st.composite
def programs(draw):
    m = B.Module("plans")
    iters = draw(st.integers(1, 3))
    m.add_tensor("x", "input", "float32", (iters, P, F))
    m.add_tensor("y", "output", "float32", (iters, P, F))
    for name in ("t0", "t1"):
        m.add_memloc(name, "SBUF", P, 2 * F * 4)
    m.add_memloc("ps", "PSUM", 4, F * 4)
    b = B.Builder(m)

    def ap(name, dtype, off):
        return B.AccessPattern(name, dtype, off, [[1, F]], 0, P)
    with b.loop("i", 0, iters) as i:
        b.inst("dma_copy", "SP", [ap("t0", "float32", 0)], [B.AccessPattern("x", "float32", i * (P * F), [[F, P], [1, F]])],
               queue="q0")
        for _ in range(draw(st.integers(1, 6))):
            _op(draw, b, i, ap)
        b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * (P * F), [[F, P], [1, F]])],
               [ap("t1", "float32", draw(st.integers(0, F)))], queue="q1")
    b.finish()
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    x = rng.uniform(-4, 4, (iters, P, F)).astype(np.float32)
    if draw(st.booleans()):
        # values where max / min, comparisons and the exact functions have their edge cases
        special = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, -1.0], np.float32)
        mask = rng.random(x.shape) < 0.3
        x[mask] = rng.choice(special, int(mask.sum()))
    return m, x


def _check(prog):
    m, x = prog
    m.ensure_ids()
    fast, s1 = _run(m, [x], True)
    ref, s2 = _run(m, [x], False)
    for a, b in zip(fast, ref):
        assert np.array_equal(a, b)
    assert s1 == s2


@settings(max_examples=60, deadline=None)
@given(programs())
def test_plans_match_the_handlers(prog):
    _check(prog)


@settings(max_examples=30, deadline=None)
@given(programs())
def test_numpy_plans_match_the_handlers(prog):
    # the plans large tiles take: element-wise ops through numpy instead of the typed loop
    from neuronxcc.starfish.birsim import plans
    saved = plans.EW_MAX, plans.EW_ROWS
    plans.EW_MAX, plans.EW_ROWS = 0, False
    try:
        _check(prog)
    finally:
        plans.EW_MAX, plans.EW_ROWS = saved


@settings(max_examples=30, deadline=None)
@given(programs())
def test_row_at_a_time_plans_match_the_handlers(prog):
    # large tiles through the typed plan a row at a time (ElementWise.rowwise), whatever their size
    from neuronxcc.starfish.birsim import plans
    saved = plans.EW_MAX
    plans.EW_MAX = 0
    try:
        _check(prog)
    finally:
        plans.EW_MAX = saved


@st.composite
def copies(draw):
    isz = draw(st.sampled_from([1, 2, 4]))
    n = draw(st.integers(1, 40))

    def nums():
        out, left = [], n
        for _ in range(5):
            divs = [d for d in range(1, left + 1) if left % d == 0]
            d = draw(st.sampled_from(divs))
            out.append(d)
            left //= d
        return out + [left]

    def ap():
        ns = nums()
        strides = [draw(st.integers(-3, 4)) * isz for _ in range(6)]
        lo = sum(min(0, s * (k - 1)) for s, k in zip(strides, ns))
        hi = sum(max(0, s * (k - 1)) for s, k in zip(strides, ns))
        base = draw(st.integers(-lo, 2048 - hi - isz))
        return base, np.array(strides, np.intp), np.array(ns, np.intp)
    return isz, n, ap(), ap(), draw(st.booleans()), draw(st.integers(0, 99))


@settings(max_examples=200, deadline=None)
@given(copies())
def test_copy_raw_matches_gather_scatter(case):
    isz, n, s, d, same, seed = case
    rng = np.random.default_rng(seed)
    sb = rng.integers(0, 256, 2048, dtype=np.uint8)
    db = sb if same else rng.integers(0, 256, 2048, dtype=np.uint8)
    ref_d = db.copy()
    ref_s = ref_d if same else sb.copy()
    tmp = np.empty(n * isz, np.uint8)
    RC.gather_raw(ref_s, isz, s[0], s[1], s[2], tmp)
    RC.scatter_raw(tmp, ref_d, isz, d[0], d[1], d[2])
    RC.copy_raw(sb, s[0], s[1], s[2], db, d[0], d[1], d[2], isz)
    assert np.array_equal(db, ref_d)


@settings(max_examples=100, deadline=None)
@given(st.integers(32, 70), st.integers(32, 70), st.sampled_from([1, 2, 4, 8]), st.booleans(), st.booleans(),
       st.booleans(), st.integers(0, 99))
def test_blocked_transposing_copies_match_gather_scatter(a, b, isz, s_rowmajor, d_rowmajor, negate, seed):
    """Large 2-D copies whose sides are laid out differently take the blocked kernel."""
    rng = np.random.default_rng(seed)
    pad = int(rng.integers(0, 3))

    def layout(rowmajor, sign):
        sa, sb = ((b + pad) * isz, isz) if rowmajor else (isz, (a + pad) * isz)
        strides = np.array([0, 0, 0, 0, sign * sa, sb], np.intp)
        base = (a - 1) * sa if sign < 0 else 0
        return base, strides, np.array([1, 1, 1, 1, a, b], np.intp)
    size = (a + pad) * (b + pad) * isz + 64
    s = layout(s_rowmajor, -1 if negate else 1)
    d = layout(d_rowmajor, 1)
    sb = rng.integers(0, 256, size, dtype=np.uint8)
    db = rng.integers(0, 256, size, dtype=np.uint8)
    ref = db.copy()
    tmp = np.empty(a * b * isz, np.uint8)
    RC.gather_raw(sb, isz, s[0], s[1], s[2], tmp)
    RC.scatter_raw(tmp, ref, isz, d[0], d[1], d[2])
    RC.copy_raw(sb, s[0], s[1], s[2], db, d[0], d[1], d[2], isz)
    assert np.array_equal(db, ref)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["add", "subtract", "rsub", "mult", "max", "min", "bitwise_and", "bitwise_or", "bitwise_xor"]),
       st.sampled_from(["int8", "int16", "int32", "uint8", "uint32"]), st.sampled_from(["int8", "int32", "uint16"]),
       st.sampled_from(["POOL", "DVE"]), st.integers(0, 99))
def test_integer_tensor_tensor_plans_match_the_handlers(op, dt_in, dt_out, engine, seed):
    m = B.Module("ints")
    m.add_tensor("x", "input", "int32", (P, 2 * F))
    m.add_tensor("y", "output", "int32", (P, F))
    m.add_memloc("a", "SBUF", P, 2 * F * 4)
    m.add_memloc("o", "SBUF", P, F * 4)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [B.AccessPattern("a", "int32", 0, [[1, 2 * F]], 0, P)], [b.ap("x")], queue="q0")
    if dt_in != "int32":
        b.inst("tensor_copy", "POOL", [B.AccessPattern("a", dt_in, 0, [[1, 2 * F]], 0, P)],
               [B.AccessPattern("a", "int32", 0, [[1, 2 * F]], 0, P)])
    lhs = B.AccessPattern("a", dt_in, 0, [[1, F]], 0, P)
    rhs = B.AccessPattern("a", dt_in, F, [[1, F]], 0, P)
    b.inst("tensor_tensor", engine, [B.AccessPattern("o", dt_out, 0, [[1, F]], 0, P)], [lhs, rhs], op=op)
    b.inst("tensor_copy", "POOL", [B.AccessPattern("o", "int32", 0, [[1, F]], 0, P)],
           [B.AccessPattern("o", dt_out, 0, [[1, F]], 0, P)])
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("o", "int32", 0, [[1, F]], 0, P)], queue="q1")
    b.finish()
    x = np.random.default_rng(seed).integers(-2 ** 31, 2 ** 31, (P, 2 * F)).astype(np.int32)
    _check((m, x))


_ALL_INT_OPS = ["add", "subtract", "rsub", "mult", "max", "min", "bitwise_and", "bitwise_or", "bitwise_xor",
                "arith_shift_left", "logical_shift_left", "arith_shift_right", "logical_shift_right",
                "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor", "average",
                "bypass", "abs_max", "divide", "mod"]


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(_ALL_INT_OPS), st.sampled_from(_ALL_INT_OPS + [None]),
       st.sampled_from(["int8", "int16", "int32", "uint8", "uint16", "uint32"]),
       st.sampled_from(["int8", "int32", "uint16", "uint32", "float32"]),
       st.integers(-40, 40), st.integers(-3, 33), st.booleans(), st.booleans(), st.integers(0, 99))
def test_integer_scalar_select_and_converting_plans_match_the_handlers(op0, op1, dt_in, dt_out, s0, s1, rev0, rev1,
                                                                       seed):
    """The exact int64 plans (IntElementWise, IntSelect, Fill) against the handlers: tensor_scalar on POOL
    with every alu_i op (two ops, reversed operands, shift counts past the width), tensor_tensor with
    shifts and tests, integer select, converting int->int copies and DMAs, memset and iota."""
    m = B.Module("ints2")
    m.add_tensor("x", "input", "int32", (P, 2 * F))
    m.add_tensor("y", "output", "int32", (P, 4 * F))
    m.add_memloc("a", "SBUF", P, 2 * F * 4)
    m.add_memloc("o", "SBUF", P, 4 * F * 4)
    b = B.Builder(m)

    def a(dt, off, n=F):
        return B.AccessPattern("a", dt, off, [[1, n]], 0, P)

    def o(dt, off, n=F):
        return B.AccessPattern("o", dt, off, [[1, n]], 0, P)
    b.inst("dma_copy", "SP", [a("int32", 0, 2 * F)], [b.ap("x")], queue="q0")
    if dt_in != "int32":
        b.inst("tensor_copy", "POOL", [a(dt_in, 0, 2 * F)], [a("int32", 0, 2 * F)])
    ints = dt_out != "float32"
    b.inst("tensor_scalar", "POOL", [o(dt_out, 0)], [a(dt_in, 0)], op0=op0, operand0=float(s0), reverse0=rev0,
           op1=op1, operand1=float(s1), reverse1=rev1)
    b.inst("tensor_tensor", "POOL", [o(dt_out, F)], [a(dt_in, 0), a(dt_in, F)], op=op0)
    if ints:
        b.inst("select", "POOL", [o(dt_out, 2 * F)], [a(dt_in, F), o(dt_out, 0), o(dt_out, F)])
    else:
        b.inst("memset", "POOL", [o("int32", 2 * F)], [], value=float(s0))
    b.inst("dma_copy", "SP", [o("int16", 6 * F)], [a(dt_in, 0)], queue="q2")          # converting DMA
    b.inst("iota", "POOL", [o(dt_out, 3 * F, F // 2)], [], pattern=[[s1, F // 2]], offset=s0, channel_multiplier=3)
    for k in range(4):
        if dt_out != "int32" and k < 2:
            b.inst("tensor_copy", "POOL", [o("int32", k * F)], [o(dt_out, k * F)])
    b.inst("dma_copy", "SP", [b.ap("y")], [o("int32", 0, 4 * F)], queue="q1")
    b.finish()
    x = np.random.default_rng(seed).integers(-2 ** 31, 2 ** 31, (P, 2 * F)).astype(np.int32)
    x[:, :4] = [0, -1, 31, 32]                  # shift counts at the edges
    _check((m, x))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "uint8", "int16", "float8_e4m3", "bool"])
@pytest.mark.parametrize("free", [[[1, 12]], [[4, 3], [1, 4]]])
def test_transpose_plan_matches_the_handler(dtype, free):
    # a 5-partition tile with one or two free dims transposed into 12 partitions x 5
    from neuronxcc.starfish.birsim import _peplans, _plans
    from neuronxcc.starfish.birpy import dtypes as _dt
    m = B.Module("tr")
    m.add_tensor("x", "input", "uint8", (5, 64))
    m.add_tensor("y", "output", "uint8", (12, 64))
    m.add_memloc("a", "SBUF", 5, 64)
    m.add_memloc("o", "SBUF", 12, 64)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("a", dtype="uint8")], [b.ap("x")], queue="q0")
    b.inst("transpose", "DVE", [B.AccessPattern("o", dtype, 1, [[1, 5]], 0, 12)], [B.AccessPattern("a", dtype, 2, free, 0, 5)])
    b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("o", dtype="uint8")], queue="q0")
    b.finish()
    m.ensure_ids()
    x = np.random.default_rng(3).integers(0, 256, (5, 64)).astype(np.uint8)
    fast, s1 = _run(m, [x], True)
    ref, s2 = _run(m, [x], False)
    assert np.array_equal(fast[0], ref[0]) and s1 == s2
    tm = get_target("trn1")
    ex = Executor(m, MachineState(m, tm), Timeline(m, tm))
    typed = isinstance(ex._prepare(m.instructions()[1])[1], (_plans.RawCopy, _peplans.Transpose32))
    assert typed == (dtype != "bool")


def test_per_partition_scalar_operands_take_the_typed_plan():
    """tensor_scalar with [P, 1] operands (x * rstd[p] - mean[p]) runs the typed ElementWise plan,
    bit-identical to the handler; an op that is not one IEEE operation keeps the handler."""
    from neuronxcc.starfish.birsim._elementwise import ElementWise
    m = B.Module("tsap")
    m.add_tensor("x", "input", "float32", (P, F))
    m.add_tensor("s", "input", "float32", (P, 2))
    m.add_tensor("y", "output", "float32", (2, P, F))
    m.add_memloc("a", "SBUF", P, F * 4)
    m.add_memloc("c", "SBUF", P, 8)
    m.add_memloc("o", "SBUF", P, 2 * F * 4)
    b = B.Builder(m)
    a = B.AccessPattern("a", "float32", 0, [[1, F]], 0, P)
    b.inst("dma_copy", "SP", [a], [b.ap("x")], queue="q0")
    b.inst("dma_copy", "SP", [B.AccessPattern("c", "float32", 0, [[1, 2]], 0, P)], [b.ap("s")], queue="q0")
    s0 = B.AccessPattern("c", "float32", 0, [[1, 1]], 0, P)
    s1 = B.AccessPattern("c", "bfloat16", 2, [[1, 1]], 0, P)
    o0 = B.AccessPattern("o", "float32", 0, [[1, F]], 0, P)
    o1 = B.AccessPattern("o", "bfloat16", 2 * F, [[1, F]], 0, P)
    typed = b.inst("tensor_scalar", "DVE", [o0], [a, s0, s1], op0="mult", operand0_ap=True, op1="subtract",
                   operand1_ap=True, reverse1=True)
    handled = b.inst("tensor_scalar", "DVE", [o1], [a, s0], op0="pow", operand0_ap=True)
    b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", 0, [[F, P], [1, F]])], [o0], queue="q1")
    b.inst("tensor_copy", "DVE", [o0], [o1])
    b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", P * F, [[F, P], [1, F]])], [o0], queue="q1")
    b.finish()
    m.ensure_ids()
    rng = np.random.default_rng(3)
    ins = [rng.uniform(-4, 4, (P, F)).astype(np.float32), rng.uniform(0.5, 2, (P, 2)).astype(np.float32)]
    tm = get_target("trn1")
    state = MachineState(m, tm)
    ex = Executor(m, state, Timeline(m, tm))
    assert isinstance(ex._prepare(typed)[1], ElementWise)
    assert not isinstance(ex._prepare(handled)[1], ElementWise)
    fast, s1_ = _run(m, ins, True)
    ref, s2_ = _run(m, ins, False)
    for x, y in zip(fast, ref):
        assert np.array_equal(x, y)
    assert s1_ == s2_


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["float32", "bfloat16", "int32", "int8"]), st.integers(1, 12), st.integers(1, 6),
       st.integers(-4, 14), st.integers(0, 3), st.integers(0, 99))
def test_typed_gather_matches_the_handler(dtype, parts, width, index_max, extra, seed):
    """Same-dtype dma_gather (the typed Gather plan) against the handler: indices clamped to
    [index_min, index_max], rows of WIDTH elements at index * stride; an index_max past the
    table is the same bounds error on both paths."""
    from neuronxcc.starfish.birsim._plans import Gather
    from neuronxcc.starfish.birpy import dtypes as _dt
    rows = 10
    stride = width + extra
    rng = np.random.default_rng(seed)
    m = B.Module("gather")
    m.add_tensor("table", "input", dtype, (rows * stride + width,))
    m.add_tensor("idx", "input", "int32", (parts, 1))
    m.add_tensor("g", "output", dtype, (parts, width))
    m.add_memloc("ix", "SBUF", parts, 4)
    m.add_memloc("r", "SBUF", parts, 4 * width)
    b = B.Builder(m)
    ix = B.AccessPattern("ix", "int32", 0, [[1, 1]], 0, parts)
    r = B.AccessPattern("r", dtype, 0, [[1, width]], 0, parts)
    b.inst("dma_copy", "SP", [ix], [b.ap("idx")])
    g = b.inst("dma_gather", "SP", [r], [B.AccessPattern("table", dtype, 0, [[1, width]]), ix],
               index_stride=stride, index_min=0, index_max=index_max)
    b.inst("dma_copy", "SP", [b.ap("g")], [r])
    b.finish()
    m.ensure_ids()
    table = rng.integers(-100, 100, rows * stride + width).astype(_dt.np_dtype(dtype))
    ins = [table, rng.integers(-3, rows + 3, (parts, 1)).astype(np.int32)]
    tm = get_target("trn1")
    ex = Executor(m, MachineState(m, tm), Timeline(m, tm))
    assert isinstance(ex._prepare(g)[1], Gather)
    got = []
    for plans in (True, False):
        try:
            got.append(_run(m, ins, plans))
        except BirSimError as e:        # a clamp bound outside the table: the same error on both paths
            got.append(e.message)
    if isinstance(got[0], str) or isinstance(got[1], str):
        assert got[0] == got[1]
    else:
        (fast, s1), (ref, s2) = got
        for x, y in zip(fast, ref):
            assert np.array_equal(x, y)
        assert s1 == s2


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["float32", "int32", "bfloat16"]), st.integers(1, 9), st.integers(1, 5), st.integers(0, 3),
       st.integers(0, 99))
def test_typed_gather_in_a_loop_matches_the_handler(dtype, parts, width, trips, seed):
    """The typed gather with the table's offset and the on-chip rows moving with a loop variable (the
    row offset evaluated once per execution, each row's delta added): bytes and simulated times as
    the handler's, and the same bounds error when a late trip's rows run past the table."""
    rows = 6
    rng = np.random.default_rng(seed)
    m = B.Module("gather_loop")
    m.add_tensor("table", "input", dtype, (rows * width + 2 * width,))
    m.add_tensor("idx", "input", "int32", (parts, 1))
    m.add_tensor("g", "output", dtype, (parts, 4 * width))
    m.add_memloc("ix", "SBUF", parts, 4)
    m.add_memloc("r", "SBUF", parts, 4 * 4 * width)
    b = B.Builder(m)
    ix = B.AccessPattern("ix", "int32", 0, [[1, 1]], 0, parts)
    b.inst("dma_copy", "SP", [ix], [b.ap("idx")])
    with b.loop("t", 0, trips + 1) as t:
        b.inst("dma_gather", "SP", [B.AccessPattern("r", dtype, t * width, [[1, width]], 0, parts)],
               [B.AccessPattern("table", dtype, t, [[1, width]]), ix],
               index_stride=width, index_min=0, index_max=rows + 1)
    b.inst("dma_copy", "SP", [b.ap("g")], [B.AccessPattern("r", dtype, 0, [[1, 4 * width]], 0, parts)])
    b.finish()
    from neuronxcc.starfish.birpy import dtypes as _dt
    table = rng.integers(-100, 100, rows * width + 2 * width).astype(_dt.np_dtype(dtype))
    ins = [table, rng.integers(-2, rows + 3, (parts, 1)).astype(np.int32)]
    got = []
    for plans in (True, False):
        try:
            got.append(_run(m, ins, plans))
        except BirSimError as e:
            got.append(e.message)
    if isinstance(got[0], str) or isinstance(got[1], str):
        assert got[0] == got[1]
    else:
        (fast, s1), (ref, s2) = got
        for x, y in zip(fast, ref):
            assert np.array_equal(x, y)
        assert s1 == s2


@pytest.mark.parametrize("op", ["max", "min", "lt", "ge", "eq", "ne"])
@pytest.mark.parametrize("special", [False, True])
def test_typed_max_min_and_comparisons_match_the_handler(op, special):
    """fp32 max / min / comparisons in the typed ElementWise against the handler's numpy, with NaNs,
    +0 against -0 and infinities in both operands (max / min hand those executions to the handler)."""
    from neuronxcc.starfish.birsim._elementwise import ElementWise
    m = B.Module("mm")
    m.add_tensor("x", "input", "float32", (P, 2 * F))
    m.add_tensor("y", "output", "float32", (P, 4 * F))
    m.add_memloc("a", "SBUF", P, 2 * F * 4)
    m.add_memloc("o", "SBUF", P, 4 * F * 4)
    b = B.Builder(m)

    def a(off):
        return B.AccessPattern("a", "float32", off, [[1, F]], 0, P)

    def o(off):
        return B.AccessPattern("o", "float32", off, [[1, F]], 0, P)
    b.inst("dma_copy", "SP", [B.AccessPattern("a", "float32", 0, [[1, 2 * F]], 0, P)], [b.ap("x")], queue="q0")
    typed = [b.inst("tensor_tensor", "DVE", [o(0)], [a(0), a(F)], op=op),
             b.inst("tensor_scalar", "DVE", [o(F)], [a(0)], op0=op, operand0=0.0),
             b.inst("tensor_scalar", "DVE", [o(2 * F)], [a(F)], op0=op, operand0=-0.0, reverse0=True, op1="add",
                    operand1=1.0),
             b.inst("tensor_scalar", "POOL", [o(3 * F)], [a(0)], op0="mult", operand0=2.0, op1=op, operand1=1.0)]
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("o", "float32", 0, [[1, 4 * F]], 0, P)], queue="q1")
    b.finish()
    m.ensure_ids()
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (P, 2 * F)).astype(np.float32)
    if special:
        vals = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, 0.5], np.float32)
        x = rng.choice(vals, x.shape).astype(np.float32)
        x[0, 0], x[0, F] = np.nan, 1.0          # NaN first, then second
        x[1, 0], x[1, F] = 1.0, np.nan
        x[2, 0], x[2, F] = 0.0, -0.0
        x[3, 0], x[3, F] = -0.0, 0.0
    tm = get_target("trn1")
    ex = Executor(m, MachineState(m, tm), Timeline(m, tm))
    for i in typed:
        assert isinstance(ex._prepare(i)[1], ElementWise)
    fast, s1 = _run(m, [x], True)
    ref, s2 = _run(m, [x], False)
    for u, v in zip(fast, ref):
        assert u.tobytes() == v.tobytes()
    assert s1 == s2


def test_nan_scalar_operands_keep_the_handlers_nan_bits():
    """A [P, 1] scalar that is NaN (here never-written, poisoned memory) meeting NaN elements: the
    surviving NaN payload is numpy's choice, so the typed plan hands such an execution to the
    handler; the bytes must be the handler's."""
    m = B.Module("nanscalar")
    m.add_tensor("x", "input", "float32", (1, P, F))
    m.add_tensor("y", "output", "float32", (1, P, F))
    for name in ("t0", "t1"):
        m.add_memloc(name, "SBUF", P, 2 * F * 4)
    b = B.Builder(m)

    def ap(name, dtype, off):
        return B.AccessPattern(name, dtype, off, [[1, F]], 0, P)
    b.inst("dma_copy", "SP", [ap("t0", "float32", 0)], [B.AccessPattern("x", "float32", 0, [[F, P], [1, F]])],
           queue="q0")
    for rev in (False, True):
        b.inst("tensor_scalar", "DVE", [ap("t1", "float32", 2)],
               [ap("t0", "float32", 3), B.AccessPattern("t1", "bfloat16", 5, [[1, 1]], 0, P)], operand0_ap=True,
               op0="mult", reverse0=rev, op1="add", operand1=-0.5)
    b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", 0, [[F, P], [1, F]])], [ap("t1", "float32", 0)],
           queue="q1")
    b.finish()
    m.ensure_ids()
    x = np.random.default_rng(1).uniform(-4, 4, (1, P, F)).astype(np.float32)
    fast, s1 = _run(m, [x], True)
    ref, s2 = _run(m, [x], False)
    for a, c in zip(fast, ref):
        assert np.array_equal(a, c)
    assert s1 == s2


@pytest.mark.parametrize("layout", ["disjoint", "out_is_a", "out_is_b", "all_one", "shifted", "broadcast_out"])
@pytest.mark.parametrize("op", ["subtract", "max", "divide"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_row_at_a_time_plans_with_aliased_operands_match_the_handler(layout, op, dtype):
    """ElementWise a row at a time (and straight from the input rows for fp32) against the handler
    on a tile larger than the whole-tile limit, with the output being an input, both inputs, an
    overlapping shift of one (the whole-tile pass must take that one), or writing a row twice: the
    bytes of the handler's read-all-then-write semantics, NaNs and signed zeros included."""
    from neuronxcc.starfish.birsim import plans
    from neuronxcc.starfish.birsim._elementwise import ElementWise
    n, f = 64, 300                               # 19200 elements > plans.EW_MAX
    assert n * f > plans.EW_MAX
    m = B.Module("alias")
    m.add_tensor("x", "input", "float32", (n, 3 * f))
    m.add_tensor("y", "output", "float32", (n, 3 * f))
    m.add_memloc("a", "SBUF", n, 3 * f * 4)
    b = B.Builder(m)

    def t(off, pat=None):
        return B.AccessPattern("a", dtype, off, pat or [[1, f]], 0, n)
    b.inst("dma_copy", "SP", [B.AccessPattern("a", "float32", 0, [[1, 3 * f]], 0, n)], [b.ap("x")], queue="q0")
    if dtype != "float32":
        b.inst("tensor_copy", "DVE", [t(0, [[1, 3 * f]])], [B.AccessPattern("a", "float32", 0, [[1, 3 * f]], 0, n)])
    out, x, y = {"disjoint": (t(2 * f), t(0), t(f)), "out_is_a": (t(0), t(0), t(f)), "out_is_b": (t(f), t(0), t(f)),
                 "all_one": (t(f), t(f), t(f)), "shifted": (t(1), t(0), t(f)),
                 "broadcast_out": (t(0, [[0, 2], [1, f // 2]]), t(0, [[1, 2], [1, f // 2]]),
                                   t(f, [[1, 2], [1, f // 2]]))}[layout]
    typed = [b.inst("tensor_tensor", "DVE", [out], [x, y], op=op),
             b.inst("tensor_scalar", "DVE", [out], [x], op0=op, operand0=-0.0, op1="mult", operand1=1.5)]
    if dtype != "float32":
        b.inst("tensor_copy", "DVE", [B.AccessPattern("a", "float32", 0, [[1, 3 * f]], 0, n)], [t(0, [[1, 3 * f]])])
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("a", "float32", 0, [[1, 3 * f]], 0, n)], queue="q1")
    b.finish()
    m.ensure_ids()
    rng = np.random.default_rng(11)
    xv = rng.uniform(-2, 2, (n, 3 * f)).astype(np.float32)
    vals = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0], np.float32)
    mask = rng.random(xv.shape) < 0.05
    xv[mask] = rng.choice(vals, int(mask.sum()))
    tm = get_target("trn1")
    ex = Executor(m, MachineState(m, tm), Timeline(m, tm))
    for i in typed:
        p = ex._prepare(i)[1]
        assert isinstance(p, ElementWise) and p.rowwise
    fast, s1 = _run(m, [xv], True)
    ref, s2 = _run(m, [xv], False)
    for u, v in zip(fast, ref):
        assert u.tobytes() == v.tobytes()
    assert s1 == s2


@pytest.mark.parametrize("op1", ["divide", "mod"])
@pytest.mark.parametrize("k", [3, 2 ** 22 + 1, 2 ** 31 - 1])
def test_integer_divide_and_mod_past_the_exact_double_range_match_the_handler(op1, k):
    """divide / mod in the int64 plan (a double quotient while both operands are below 2**53, the
    integer division past it) against the handler's numpy: int32 values times K reach up to 2**62,
    so both sides of the 2**53 boundary, and every sign, are met."""
    m = B.Module("divmod")
    m.add_tensor("x", "input", "int32", (P, 2 * F))
    m.add_tensor("y", "output", "int32", (P, 2 * F))
    m.add_memloc("a", "SBUF", P, 2 * F * 4)
    m.add_memloc("o", "SBUF", P, 2 * F * 4)
    b = B.Builder(m)

    def a(off):
        return B.AccessPattern("a", "int32", off, [[1, F]], 0, P)

    def o(off):
        return B.AccessPattern("o", "int32", off, [[1, F]], 0, P)
    b.inst("dma_copy", "SP", [B.AccessPattern("a", "int32", 0, [[1, 2 * F]], 0, P)], [b.ap("x")], queue="q0")
    b.inst("tensor_scalar", "POOL", [o(0)], [a(0)], op0="mult", operand0=float(k), op1=op1, operand1=-7.0)
    b.inst("tensor_scalar", "POOL", [o(F)], [a(0)], op0="mult", operand0=float(k), op1=op1, operand1=float(k - 2),
           reverse1=True)
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("o", "int32", 0, [[1, 2 * F]], 0, P)], queue="q1")
    b.finish()
    x = np.random.default_rng(k).integers(-2 ** 31, 2 ** 31, (P, 2 * F)).astype(np.int32)
    x[0, :6] = [-2 ** 31, 2 ** 31 - 1, 0, 1, -1, 2 ** 22]
    _check((m, x))
