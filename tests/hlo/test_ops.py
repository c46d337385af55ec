"""The op table: every row has an interpreter handler, list-operators prints
it, and check_supported rejects ops outside it with a useful line."""
import pytest

from neuronxcc.errors import UnsupportedOperatorError, UnknownCustomCallError
from neuronxcc.hlo import ops, parse_hlo_text
from neuronxcc.hlo.interp_base import HANDLERS
from neuronxcc.hlo.interpreter import PLAN_BOUND, is_implemented


def test_every_row_has_a_handler():
    for op in ops.OPS.values():
        assert op.handler in HANDLERS or op.opcode in PLAN_BOUND, op
        assert is_implemented(op.opcode)
    for target, name in ops.CUSTOM_CALL_TARGETS.items():
        assert name in HANDLERS, target


def test_supported_opcodes_sorted_unique_and_complete():
    names = ops.interpreted_opcodes()
    assert names == sorted(set(names))
    lowered = ops.supported_opcodes()
    assert lowered == sorted(set(lowered)) and set(lowered) == set(names) - set(ops.NOT_LOWERED)
    for required in ("parameter", "constant", "iota", "abs", "ceil", "floor", "round-nearest-afz",
                     "round-nearest-even", "sign", "negate", "not", "exponential", "exponential-minus-one", "log",
                     "log-plus-one", "logistic", "sqrt", "rsqrt", "cbrt", "tanh", "sine", "cosine", "tan", "erf",
                     "is-finite", "popcnt", "count-leading-zeros", "add", "subtract", "multiply", "divide",
                     "remainder", "power", "maximum", "minimum", "and", "or", "xor", "shift-left",
                     "shift-right-logical", "shift-right-arithmetic", "atan2", "compare", "select", "clamp",
                     "convert", "bitcast-convert", "broadcast", "reshape", "transpose", "slice", "dynamic-slice",
                     "dynamic-update-slice", "concatenate", "pad", "reverse", "reduce", "reduce-window",
                     "select-and-scatter", "dot", "convolution", "gather", "scatter", "sort", "call", "while",
                     "conditional", "tuple", "get-tuple-element", "map", "custom-call", "optimization-barrier",
                     "copy", "after-all", "add-dependency", "reduce-precision", "partition-id", "replica-id",
                     "batch-norm-training", "batch-norm-inference", "batch-norm-grad"):
        assert required in names, required


def test_categories_are_data():
    assert ops.category("add") == ops.BINARY
    assert ops.category("exponential") == ops.UNARY
    assert ops.category("dot") == ops.LINALG
    assert ops.category("while") == ops.CONTROL


def test_check_supported_accepts_supported_module():
    m = parse_hlo_text("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] exponential(p)
}""")
    ops.check_supported(m)


def test_check_supported_names_op_instruction_and_source():
    m = parse_hlo_text("""HloModule m
add_f {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] collective-broadcast(p), replica_groups={}, metadata={op_name="jit(step)/psum" source_file="/work/train.py" source_line=88}
}""", verify=False)
    with pytest.raises(UnsupportedOperatorError) as ei:
        ops.check_supported(m)
    line = ei.value.one_line()
    assert line.startswith("[NCC_EVRF001] ")
    assert "collective-broadcast" in line and "ar" in line and "/work/train.py:88" in line
    assert "list-operators" in line


def test_check_supported_without_metadata_and_custom_call():
    m = parse_hlo_text("""HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT r = f32[4] custom-call(p), custom_call_target="FancyAttention"
}""")
    with pytest.raises(UnknownCustomCallError) as ei:
        ops.check_supported(m)
    assert "FancyAttention" in ei.value.one_line() and ei.value.one_line().startswith("[NCC_EVRF015]")


def test_rng_bit_generator_unknown_algorithm_rejected():
    m = parse_hlo_text("""HloModule m
ENTRY e {
  s = u64[2] parameter(0)
  ROOT r = (u64[2], u32[4]) rng-bit-generator(s), algorithm=rng_three_fry
}""")
    m.entry.root.attrs["algorithm"] = "rng_future"
    with pytest.raises(UnsupportedOperatorError) as ei:
        ops.check_supported(m)
    assert "rng_future" in ei.value.one_line()
    from neuronxcc.hlo.interpreter import evaluate
    import numpy as np
    with pytest.raises(UnsupportedOperatorError):
        evaluate(m, [np.zeros(2, np.uint64)])
    m.entry.root.attrs["algorithm"] = "rng_three_fry"
    ops.check_supported(m)
