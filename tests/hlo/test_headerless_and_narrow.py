"""HLO text without its HloModule line is read as text (by content, as XLA's parser does);
s4 constants parse; a proto is still a proto."""
import numpy as np
import pytest

from neuronxcc.errors import HloParseError
from neuronxcc.hlo import detect_format, load_module

HEADERLESS = """// RUN: hlo-opt %s
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY main {
  p = f32[4,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[4] reduce(p, z), dimensions={1}, to_apply=add
}
"""


def test_headerless_text_is_text(tmp_path):
    f = tmp_path / "reduce.hlo"
    f.write_text(HEADERLESS)
    assert detect_format(HEADERLESS.encode()) == "text"
    m = load_module(str(f))
    assert m.entry.name == "main" and m.entry.root.opcode == "reduce"
    from neuronxcc.hlo.interpreter import evaluate
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(evaluate(m, [x])[0], x.sum(1))
    # printed back with a header, it reads again to the same module
    from neuronxcc.hlo.compare import diff_modules
    from neuronxcc.hlo import module_to_text
    assert diff_modules(load_module(module_to_text(m)), m, metadata=False) == []


@pytest.mark.parametrize("text", ["ENTRY e {\n  ROOT c = f32[] constant(1)\n}\n",
                                  "%e (p: f32[2]) -> f32[2] {\n  %p = f32[2] parameter(0)\n"
                                  "  ROOT %n = f32[2] negate(%p)\n}\n"])
def test_headerless_forms(text):
    assert detect_format(text.encode()) == "text"
    assert load_module(text.encode()).entry is not None


def test_a_proto_is_still_a_proto():
    import jax
    import jax.numpy as jnp
    pb = jax.jit(lambda x: jnp.sin(x)).lower(np.zeros(3, np.float32)).compiler_ir("hlo") \
        .as_serialized_hlo_module_proto()
    assert detect_format(pb) == "proto"
    assert load_module(pb).entry.root is not None


def test_garbage_text_is_one_parse_error():
    with pytest.raises(HloParseError) as ei:
        load_module(b"main {\n  this is not hlo\n}\n")
    assert ei.value.one_line().startswith("[NCC_")


def test_s4_u4_s2_constants_parse_with_a_clean_range_error():
    import ml_dtypes
    m = load_module(b"ENTRY e {\n  ROOT c = s4[3] constant({-8, 0, 7})\n}\n")
    lit = m.entry.root.literal
    assert lit.dtype == np.dtype(ml_dtypes.int4) and lit.astype(np.int8).tolist() == [-8, 0, 7]
    m = load_module(b"ENTRY e {\n  ROOT c = u4[2] constant({0, 15})\n}\n")
    assert m.entry.root.literal.astype(np.int8).tolist() == [0, 15]
    with pytest.raises(HloParseError) as ei:
        load_module(b"ENTRY e {\n  ROOT c = s4[1] constant({9})\n}\n")
    line = ei.value.one_line()
    assert "out of range for s4" in line and "Invalid integer" not in line
