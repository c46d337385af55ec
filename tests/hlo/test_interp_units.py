"""Interpreter semantics on hand-built modules (HLO text and the model
classes): expected values come from XLA's operation semantics, computed here
with numpy."""
import numpy as np
import pytest

import ml_dtypes

from neuronxcc.errors import HloVerifyError, TensorTooLargeError, UnsupportedOperatorError, UnknownCustomCallError
from neuronxcc.hlo import HloComputation, HloInstruction, HloModule, Shape, parse_hlo_text
from neuronxcc.hlo.interpreter import Evaluator, evaluate, is_implemented
from neuronxcc.common.tolerances import mismatch
from support.corpus import xla_run


def run(text, *inputs, xla=True):
    """The interpreter's outputs; with ``xla`` also checked against XLA:CPU running the same text."""
    outs = evaluate(parse_hlo_text(text), list(inputs), check=True)
    if xla:
        try:
            ref = xla_run(text, list(inputs))
        except NotImplementedError:
            return outs
        assert len(ref) == len(outs)
        for k, (a, b) in enumerate(zip(outs, ref)):
            why = mismatch(a, b)
            assert not why, "output%d differs from XLA:CPU: %s" % (k, why)
    return outs


def test_model_classes_add_and_broadcast():
    s = Shape.array("f32", (2, 3))
    p0 = HloInstruction("p0", "parameter", s, parameter_number=0)
    c = HloInstruction("c", "constant", Shape.array("f32", ()), literal=np.array(2.0, np.float32))
    b = HloInstruction("b", "broadcast", s, [c], attrs={"dimensions": ()})
    m = HloInstruction("m", "multiply", s, [p0, b])
    t = HloInstruction("t", "tuple", Shape.tuple_of([s, s]), [m, p0])
    comp = HloComputation("entry", [p0, c, b, m, t], t)
    mod = HloModule("m", [comp], comp)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    outs = evaluate(mod, [x], check=True)
    np.testing.assert_array_equal(outs[0], 2 * x)
    np.testing.assert_array_equal(outs[1], x)


def test_custom_call_topk_and_aws_neuron_topk():
    x = np.array([[1, 5, 5, 2, -1], [0, 0, 0, 0, 0]], np.float32)
    for target in ("TopK", "AwsNeuronTopK"):
        v, i = run("""HloModule m
ENTRY e {
  p = f32[2,5] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) custom-call(p), custom_call_target="%s"
}""" % target, x, xla=(target == "TopK"))
        np.testing.assert_array_equal(v, [[5, 5, 2], [0, 0, 0]])
        np.testing.assert_array_equal(i, [[1, 2, 3], [0, 1, 2]])


def test_topk_opcode_smallest():
    v, i = run("""HloModule m
ENTRY e {
  p = s32[6] parameter(0)
  ROOT t = (s32[2], s32[2]) topk(p), k=2, largest=false
}""", np.array([4, -1, 7, -1, 0, 3], np.int32))
    np.testing.assert_array_equal(v, [-1, -1])
    np.testing.assert_array_equal(i, [1, 3])


def test_conditional_pred_and_index():
    text = """HloModule m
t_br {
  a = f32[2] parameter(0)
  ROOT n = f32[2] negate(a)
}
f_br {
  b = f32[2] parameter(0)
  ROOT e = f32[2] exponential(b)
}
ENTRY e {
  p = pred[] parameter(0)
  x = f32[2] parameter(1)
  ROOT c = f32[2] conditional(p, x, x), true_computation=t_br, false_computation=f_br
}"""
    x = np.array([0.0, 1.0], np.float32)
    np.testing.assert_array_equal(run(text, np.bool_(True), x)[0], -x)
    assert not mismatch(run(text, np.bool_(False), x)[0], np.exp(x))
    text2 = text.replace("pred[] parameter(0)", "s32[] parameter(0)").replace(
        "true_computation=t_br, false_computation=f_br", "branch_computations={t_br, f_br}")
    np.testing.assert_array_equal(run(text2, np.int32(0), x)[0], -x)
    for out_of_range in (1, 2, -1):   # XLA: any index out of range runs the last branch
        assert not mismatch(run(text2, np.int32(out_of_range), x)[0], np.exp(x))


def test_integer_power_semantics():
    (r,) = run("""HloModule m
ENTRY e {
  a = s32[6] parameter(0)
  b = s32[6] parameter(1)
  ROOT r = s32[6] power(a, b)
}""", np.array([2, 3, 1, 2, -2, 5], np.int32), np.array([10, 0, -3, -1, 3, 20], np.int32))
    np.testing.assert_array_equal(r, [1024, 1, 1, 0, -8, np.int32(np.int64(5 ** 20) % 2 ** 32 - 2 ** 32)
                                      if (5 ** 20) % 2 ** 32 >= 2 ** 31 else (5 ** 20) % 2 ** 32])


def test_bitcast_layout_and_reduce_precision_shapes():
    (r,) = run("""HloModule m
ENTRY e {
  a = f32[2,3]{0,1} parameter(0)
  ROOT r = f32[3,2]{1,0} bitcast(a)
}""", np.arange(6, dtype=np.float32).reshape(2, 3), xla=False)   # XLA takes bitcast only after layout assignment
    # {0,1} is column-major: physical order is the transpose, read back row-major as [3,2]
    np.testing.assert_array_equal(r, np.arange(6, dtype=np.float32).reshape(2, 3).T)


def test_while_with_tuple_state():
    (n, acc) = run("""HloModule m
cond {
  cs = (s32[], f32[3]) parameter(0)
  ci = s32[] get-tuple-element(cs), index=0
  lim = s32[] constant(4)
  ROOT lt = pred[] compare(ci, lim), direction=LT
}
body {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[3] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i2 = s32[] add(i, one)
  v2 = f32[3] add(v, v)
  ROOT t = (s32[], f32[3]) tuple(i2, v2)
}
ENTRY e {
  x = f32[3] parameter(0)
  z = s32[] constant(0)
  t0 = (s32[], f32[3]) tuple(z, x)
  w = (s32[], f32[3]) while(t0), condition=cond, body=body
  ROOT r = (s32[], f32[3]) copy(w)
}""", np.ones(3, np.float32))
    assert n == 4
    np.testing.assert_array_equal(acc, np.full(3, 16, np.float32))


def test_non_liftable_reducer_falls_back_to_elementwise():
    # a reducer with a while loop inside cannot run on whole arrays; it runs per element
    (r,) = run("""HloModule m
wc {
  st1 = (s32[], f32[]) parameter(0)
  i1 = s32[] get-tuple-element(st1), index=0
  one1 = s32[] constant(1)
  ROOT lt1 = pred[] compare(i1, one1), direction=LT
}
wb {
  st2 = (s32[], f32[]) parameter(0)
  i2 = s32[] get-tuple-element(st2), index=0
  v2 = f32[] get-tuple-element(st2), index=1
  one2 = s32[] constant(1)
  i3 = s32[] add(i2, one2)
  ROOT t2 = (s32[], f32[]) tuple(i3, v2)
}
red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  st3 = f32[] add(a, b)
  z = s32[] constant(0)
  t3 = (s32[], f32[]) tuple(z, st3)
  w = (s32[], f32[]) while(t3), condition=wc, body=wb
  ROOT r3 = f32[] get-tuple-element(w), index=1
}
ENTRY e {
  x = f32[3,4] parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[3] reduce(x, c), dimensions={1}, to_apply=red
}""", np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(r, np.arange(12, dtype=np.float32).reshape(3, 4).sum(1))


def test_sort_general_comparator_matches_numpy_lexsort():
    rng = np.random.RandomState(0)
    a = rng.randint(0, 4, size=(3, 37)).astype(np.int32)
    b = rng.randn(3, 37).astype(np.float32)
    ra, rb = run("""HloModule m
cmp {
  a0 = s32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = f32[] parameter(2)
  b1 = f32[] parameter(3)
  gt = pred[] compare(a0, a1), direction=GT
  eq = pred[] compare(a0, a1), direction=EQ
  lt = pred[] compare(b0, b1), direction=LT
  el = pred[] and(eq, lt)
  ROOT r = pred[] or(gt, el)
}
ENTRY e {
  x = s32[3,37] parameter(0)
  y = f32[3,37] parameter(1)
  ROOT srt = (s32[3,37], f32[3,37]) sort(x, y), dimensions={1}, is_stable=true, to_apply=cmp
}""", a, b)
    for r in range(3):
        order = np.lexsort((b[r], -a[r]))
        np.testing.assert_array_equal(ra[r], a[r][order])
        np.testing.assert_array_equal(rb[r], b[r][order])


def test_scatter_general_combiner_applies_duplicates_in_order():
    # combiner new = old * 10 + upd is not associative: duplicates must apply in update order
    (r,) = run("""HloModule m
comb {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ten = s32[] constant(10)
  m = s32[] multiply(a, ten)
  ROOT sum = s32[] add(m, b)
}
ENTRY e {
  x = s32[4] parameter(0)
  i = s32[3,1] parameter(1)
  u = s32[3] parameter(2)
  ROOT sc = s32[4] scatter(x, i, u), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
}""", np.zeros(4, np.int32), np.array([[2], [0], [2]], np.int32), np.array([1, 5, 7], np.int32))
    np.testing.assert_array_equal(r, [5, 0, 17, 0])


def test_bf16_arithmetic_rounds_each_op():
    x = np.array([1.0, 256.0, 3.0], ml_dtypes.bfloat16)
    y = np.array([2.0 ** -9, 1.0, 1.0 / 3], ml_dtypes.bfloat16)
    (r,) = run("""HloModule m
ENTRY e {
  a = bf16[3] parameter(0)
  b = bf16[3] parameter(1)
  ROOT r = bf16[3] add(a, b)
}""", x, y)
    assert r.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(r, (x.astype(np.float32) + y.astype(np.float32)).astype(ml_dtypes.bfloat16))


def test_unsupported_op_names_op_instruction_and_source_line():
    text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] collective-broadcast(p), replica_groups={}, metadata={op_name="jit(f)/psum" source_file="/home/u/model.py" source_line=42}
}"""
    m = parse_hlo_text(text, verify=False)
    with pytest.raises(UnsupportedOperatorError) as ei:
        evaluate(m, [np.zeros(4, np.float32)])
    line = ei.value.one_line()
    assert line.startswith("[NCC_EVRF001]")
    assert "collective-broadcast" in line and "instruction r" in line and "/home/u/model.py:42" in line


def test_unknown_custom_call_rejected():
    m = parse_hlo_text("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] custom-call(p), custom_call_target="MyKernel"
}""")
    with pytest.raises(UnknownCustomCallError) as ei:
        evaluate(m, [np.zeros(4, np.float32)])
    assert "MyKernel" in ei.value.one_line()


def test_inputs_are_checked():
    text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  ROOT r = f32[4] add(p, q)
}"""
    with pytest.raises(HloVerifyError, match="missing input"):
        run(text, np.zeros(4, np.float32))
    with pytest.raises(HloVerifyError, match="shape"):
        run(text, np.zeros(4, np.float32), np.zeros(5, np.float32))
    with pytest.raises(HloVerifyError, match="2 input arrays, 3"):
        run(text, np.zeros(4, np.float32), np.zeros(4, np.float32), np.zeros(4, np.float32))


def test_tensor_too_large():
    m = parse_hlo_text("""HloModule m
ENTRY e {
  c = f32[] constant(1)
  ROOT b = f32[100000,100000] broadcast(c), dimensions={}
}""")
    with pytest.raises(TensorTooLargeError) as ei:
        Evaluator(m, max_tensor_bytes=1 << 30).evaluate_entry([])
    assert ei.value.one_line().startswith("[NCC_EOOM001]")


def test_is_implemented():
    assert is_implemented("add") and is_implemented("sort") and is_implemented("custom-call", "TopK")
    assert is_implemented("all-reduce") and not is_implemented("collective-broadcast")
    assert not is_implemented("custom-call", "MyKernel")


def test_sort_comparator_without_key_functions_uses_merge_sort():
    # compare(a0 + b0, a1 + b1): each side mixes two operands, so no key function exists
    rng = np.random.RandomState(2)
    a = rng.randint(0, 5, size=(4, 45)).astype(np.int32)
    b = rng.randint(0, 5, size=(4, 45)).astype(np.int32)
    ra, rb = run("""HloModule m
cmp {
  a0 = s32[] parameter(0)
  a1 = s32[] parameter(1)
  b0 = s32[] parameter(2)
  b1 = s32[] parameter(3)
  sum0 = s32[] add(a0, b0)
  sum1 = s32[] add(a1, b1)
  ROOT lt = pred[] compare(sum0, sum1), direction=LT
}
ENTRY e {
  x = s32[4,45] parameter(0)
  y = s32[4,45] parameter(1)
  ROOT srt = (s32[4,45], s32[4,45]) sort(x, y), dimensions={1}, is_stable=true, to_apply=cmp
}""", a, b)
    order = np.argsort(a + b, axis=1, kind="stable")
    np.testing.assert_array_equal(ra, np.take_along_axis(a, order, 1))
    np.testing.assert_array_equal(rb, np.take_along_axis(b, order, 1))


def test_topk_partition_path_matches_full_sort_with_ties():
    from neuronxcc.hlo.interp_sort import topk
    rng = np.random.RandomState(5)
    x = rng.randint(-3, 4, size=(6, 50)).astype(np.float32)
    x[0, 7] = np.nan
    for k in (1, 5, 12):
        v, i = topk(x, k)
        key = -np.where(np.isnan(x), np.inf, x)     # NaN first, then descending; stable ties
        ref = np.argsort(key, axis=1, kind="stable")[:, :k]
        np.testing.assert_array_equal(i, ref)
        np.testing.assert_array_equal(v, np.take_along_axis(x, ref, 1))


def test_tuple_parameter_takes_leaves_in_order():
    outs = run("""HloModule m
ENTRY e {
  p = (f32[2], (s32[], f32[2])) parameter(0)
  q = f32[2] parameter(1)
  a = f32[2] get-tuple-element(p), index=0
  inner = (s32[], f32[2]) get-tuple-element(p), index=1
  b = f32[2] get-tuple-element(inner), index=1
  i = s32[] get-tuple-element(inner), index=0
  s = f32[2] add(a, b)
  t = f32[2] add(s, q)
  ROOT r = (f32[2], s32[]) tuple(t, i)
}""", np.array([1, 2], np.float32), np.int32(7), np.array([10, 20], np.float32), np.array([100, 200], np.float32))
    np.testing.assert_array_equal(outs[0], [111, 222])
    assert outs[1] == 7 and outs[1].dtype == np.int32


def test_fusion_evaluates_fused_computation():
    (r,) = run("""HloModule m
fused {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  m = f32[3] multiply(a, b)
  ROOT s = f32[3] add(m, a)
}
ENTRY e {
  x = f32[3] parameter(0)
  y = f32[3] parameter(1)
  ROOT f = f32[3] fusion(x, y), kind=kLoop, calls=fused
}""", np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32))
    np.testing.assert_array_equal(r, [5, 12, 21])


def test_unverified_nonsense_raises_compiler_error_naming_instruction():
    from neuronxcc.errors import CompilerError
    m = parse_hlo_text("""HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  q = f32[3] parameter(1)
  ROOT bad = f32[3] add(p, q)
}""", verify=False)
    with pytest.raises(CompilerError) as ei:
        evaluate(m, [np.zeros(2, np.float32), np.zeros(3, np.float32)])
    assert "bad" in ei.value.one_line()


def test_tokens_ids_barriers_and_copies():
    outs = run("""HloModule m
ENTRY e {
  x = f32[3] parameter(0)
  t0 = token[] after-all()
  t1 = token[] after-all(t0)
  d = f32[3] add-dependency(x, t1)
  pid = u32[] partition-id()
  rid = u32[] replica-id()
  c = f32[3] copy(d)
  tp = (f32[3], u32[]) tuple(c, pid)
  b = (f32[3], u32[]) opt-barrier(tp)
  y = f32[3] get-tuple-element(b), index=0
  ROOT r = (f32[3], u32[], u32[], token[]) tuple(y, pid, rid, t1)
}""", np.array([1, 2, 3], np.float32), xla=False)   # XLA cannot hand back a token
    # tokens carry no data and are dropped from the flattened outputs
    assert len(outs) == 3
    np.testing.assert_array_equal(outs[0], [1, 2, 3])
    assert outs[1] == 0 and outs[1].dtype == np.uint32 and outs[2] == 0


@pytest.mark.parametrize("direction, ctype, want", [
    ("EQ", "SIGNED", [False, True, False]), ("NE", "SIGNED", [True, False, True]),
    ("LT", "SIGNED", [True, False, False]), ("LE", "SIGNED", [True, True, False]),
    ("GT", "SIGNED", [False, False, True]), ("GE", "SIGNED", [False, True, True]),
    ("LT", "UNSIGNED", [False, False, True]), ("GT", "UNSIGNED", [True, False, False]),
])
def test_compare_directions_and_integer_types(direction, ctype, want):
    et, dt = ("s32", np.int32) if ctype == "SIGNED" else ("u32", np.uint32)
    a = np.array([-1, 5, 7], np.int64).astype(dt)
    b = np.array([1, 5, -2], np.int64).astype(dt)
    (r,) = run("""HloModule m
ENTRY e {
  a = %s[3] parameter(0)
  b = %s[3] parameter(1)
  ROOT c = pred[3] compare(a, b), direction=%s, type=%s
}""" % (et, et, direction, ctype), a, b)
    np.testing.assert_array_equal(r, want)


def test_compare_float_vs_totalorder_on_nan_and_signed_zero():
    x = np.array([np.nan, -0.0, 1.0], np.float32)
    y = np.array([np.nan, 0.0, np.nan], np.float32)
    text = """HloModule m
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT c = pred[3] compare(a, b), direction=%s, type=%s
}"""
    np.testing.assert_array_equal(run(text % ("EQ", "FLOAT"), x, y)[0], [False, True, False])
    np.testing.assert_array_equal(run(text % ("EQ", "TOTALORDER"), x, y)[0], [True, False, False])
    np.testing.assert_array_equal(run(text % ("LT", "TOTALORDER"), x, y)[0], [False, True, True])


@pytest.mark.parametrize("fname", ["windows.hlo", "misc.hlo", "attrs_torch_xla.hlo"])
def test_hand_written_hlo_files_match_xla_or_name_the_unsupported_op(fname):
    import os
    from neuronxcc.hlo import load_module
    from neuronxcc.hlo.infergoldens import random_inputs
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", fname)
    text = open(path).read()
    m = load_module(text)
    inputs = random_inputs(m, 0)
    try:
        outs = evaluate(m, inputs)
    except UnsupportedOperatorError as e:
        assert "MyOp" in e.one_line()        # the file's unknown custom-call target
        return
    try:
        ref = xla_run(text, inputs)
    except NotImplementedError:
        pytest.skip("this jaxlib cannot run HLO text directly")
    assert len(outs) == len(ref)
    for a, b in zip(outs, ref):
        assert not mismatch(a, b)


def test_scatter_skips_partly_out_of_bounds_windows_gather_clamps():
    text = """HloModule m
comb {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT sum = f32[] add(a, b)
}
ENTRY e {
  x = f32[6,4] parameter(0)
  i = s32[4,1] parameter(1)
  u = f32[4,3,4] parameter(2)
  sc = f32[6,4] scatter(x, i, u), update_window_dims={1,2}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=comb
  g = f32[4,3,4] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={3,4}
  ROOT t = (f32[6,4], f32[4,3,4]) tuple(sc, g)
}"""
    x = np.arange(24, dtype=np.float32).reshape(6, 4)
    i = np.array([[0], [4], [-1], [3]], np.int32)
    sc, g = run(text, x, i, np.ones((4, 3, 4), np.float32))
    np.testing.assert_array_equal(sc, x + 1)          # windows at 4 and -1 stick out: skipped
    np.testing.assert_array_equal(g[1], x[3:6])       # start 4 clamped to 3
    np.testing.assert_array_equal(g[2], x[0:3])       # start -1 clamped to 0


def test_rank_zero_results_stay_rank_zero():
    # map, bitcast-convert and gather of scalars (np.ascontiguousarray would return 1-d arrays)
    text = """HloModule rank0

adder {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  v = f32[5] parameter(2)
  i = s32[1] parameter(3)
  m = f32[] map(p, q), dimensions={}, to_apply=adder
  b = u32[] bitcast-convert(m)
  g = f32[] gather(v, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=0, slice_sizes={1}
  ROOT t = (f32[], u32[], f32[]) tuple(m, b, g)
}
"""
    v = np.arange(5, dtype=np.float32) * 1.5
    m, b, g = run(text, np.float32(1.25), np.float32(2.0), v, np.array([3], np.int32))
    assert m.shape == b.shape == g.shape == ()
    assert m == 3.25 and b == np.float32(3.25).view(np.uint32) and g == 4.5


def test_erf_of_a_scalar():
    # jax.random.truncated_normal takes erf of its scalar bounds; math.erf through frompyfunc
    # returns a Python float for a 0-d operand, which the handler used to call .astype on
    text = """HloModule e
ENTRY e {
  lo = f32[] parameter(0)
  x = f32[3] parameter(1)
  a = f32[] erf(lo)
  b = f32[3] erf(x)
  ROOT t = (f32[], f32[3]) tuple(a, b)
}"""
    run(text, np.float32(-2.0), np.array([0.0, 0.5, -3.0], np.float32))
