"""Penguin IR serde and views; hlo2penguin: inlining, tuple flattening, constant folding, errors."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from penguin_helpers import hlo_bytes, penguin_of
from neuronxcc.errors import TensorTooLargeError, UnsupportedOperatorError
from neuronxcc.starfish.penguin import ir
from neuronxcc.starfish.penguin.views import View, collapse, reshape_strides


def test_graph_json_round_trip_keeps_everything():
    g = ir.Graph("t")
    x = g.add_input("x", (4, 8), "float32")
    (c,) = g.add_op("constant", [], [("c", (3,), "bfloat16")], {"data": np.array([1, 2, 3], ir.np_dtype("bfloat16"))})
    (s,) = g.add_op("constant", [], [("s", (), "float32")], {"value": float("-inf")})
    (y,) = g.add_op("add", [x, x], [("y", (4, 8), "float32")], loc={"hlo": "add.1", "source_file": "m.py",
                                                                      "source_line": 3})
    g.outputs = [y, c, s]
    g2 = ir.Graph.from_json(json.loads(json.dumps(g.to_json())))
    assert str(g2) == str(g)
    assert g2.ops[0].attrs["data"].dtype == ir.np_dtype("bfloat16")
    assert g2.ops[1].attrs["value"] == float("-inf")
    assert g2.ops[2].where() == "instruction add.1 at m.py:3"


def test_verify_rejects_use_before_definition():
    g = ir.Graph()
    g.values["a"] = ir.Value("a", (2,), "float32")
    g.ops.append(ir.Op("negate", ["a"], ["b"]))
    g.values["b"] = ir.Value("b", (2,), "float32")
    g.outputs = ["b"]
    with pytest.raises(ValueError):
        g.verify()


def test_reshape_strides_and_collapse():
    assert reshape_strides((64, 512), (512, 1), (64, 8, 64)) == (512, 64, 1)
    assert reshape_strides((4, 6), (1, 4), (2, 12)) is None          # a transposed view cannot merge
    assert reshape_strides((64, 1), (1, 1), (64,)) == (1,)
    shape, strides = collapse((4, 6, 8), [(48, 8, 1), (0, 8, 1)])
    assert shape == (4, 48) and strides == [(48, 1), (0, 1)]
    v = View.contiguous("t", "float32", (3, 4)).transpose([1, 0]).slice([1, 0], [4, 3], [2, 1])
    assert v.shape == (2, 3) and v.element((1, 2)) == 3 + 2 * 4


def test_hlo2penguin_inlines_flattens_and_folds():
    def f(x, y):
        h = jax.jit(lambda a: jnp.tanh(a) * 2.0)(x)          # a call, inlined
        return {"a": h + y, "b": (x.sum(), 3.0 * jnp.ones((2, 2)))}
    g = penguin_of(f, np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    kinds = [op.kind for op in g.ops]
    assert "call" not in kinds and "tuple" not in kinds
    assert len(g.outputs) == 3
    consts = [op for op in g.ops if op.kind == "constant"]
    assert all("value" in op.attrs for op in consts)            # splats stay splats, no data
    for op in g.ops:
        for o in op.outputs:
            assert g.values[o].dtype and g.values[o].shape is not None
        assert op.loc.get("hlo")


def test_hlo2penguin_unsupported_op_names_op_instruction_and_source(tmp_path):
    from neuronxcc.starfish.penguin import hlo2penguin

    def f(x):           # complex numbers have no on-chip dtype
        return jnp.real(x.astype(jnp.complex64) * 2)
    data = hlo_bytes(f, np.ones(8, np.float32))
    p = tmp_path / "m.pb"
    p.write_bytes(data)
    with pytest.raises(UnsupportedOperatorError) as ei:
        from neuronxcc.hlo import load_module
        hlo2penguin.hlo_to_penguin(load_module(str(p)))
    msg = ei.value.one_line()
    assert msg.startswith("[NCC_EVRF001]") and "complex" in msg and "instruction" in msg
    assert "test_ir_and_hlo2penguin.py:" in msg
    rc = hlo2penguin.main([str(p), "--output", str(tmp_path / "p.json")])
    assert rc == 70 and not (tmp_path / "p.json").exists()


def test_hlo2penguin_tensor_too_large():
    s = jax.ShapeDtypeStruct((100000, 100000), jnp.float32)       # 40 GB, more than one core's HBM
    with pytest.raises(TensorTooLargeError) as ei:
        penguin_of(lambda a: a * 2.0, s)
    assert ei.value.one_line().startswith("[NCC_EOOM001]")


def test_hlo2penguin_tool_writes_a_loadable_file(tmp_path):
    from neuronxcc.starfish.penguin import hlo2penguin
    p = tmp_path / "m.pb"
    p.write_bytes(hlo_bytes(lambda a, b: a @ b, np.ones((4, 3), np.float32), np.ones((3, 5), np.float32)))
    out = tmp_path / "penguin.json"
    assert hlo2penguin.main([str(p), "--output", str(out), "--target", "trn2"]) == 0
    g = ir.load(str(out))
    assert [op.kind for op in g.ops] == ["dot"] and g.attrs["target"] == "trn2"


def test_lowered_opcodes_come_from_the_one_op_table():
    from neuronxcc.hlo import ops
    from neuronxcc.starfish.penguin import hlo2penguin as h
    assert h.LOWERED_OPCODES <= set(ops.OPS)
    assert set(h.NOT_LOWERED) <= set(ops.OPS)
    assert h.LOWERED_OPCODES | set(h.NOT_LOWERED) == set(ops.OPS)
    assert set(h.LOWERED_CUSTOM_CALLS) <= {t.lower() for t in ops.CUSTOM_CALL_TARGETS}
    assert {"dot", "reduce", "while", "custom-call"} <= h.LOWERED_OPCODES


def test_hlo2penguin_refuses_ops_outside_the_table_through_check_supported():
    from neuronxcc.errors import UnknownCustomCallError
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish.penguin import hlo2penguin
    text = """HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(p), custom_call_target="NotARealTarget", metadata={source_file="model.py" source_line=7}
}
"""
    with pytest.raises(UnknownCustomCallError) as ei:
        hlo2penguin.hlo_to_penguin(parse_hlo_text(text))
    msg = ei.value.one_line()
    assert msg.startswith("[NCC_EVRF015]") and "NotARealTarget" in msg and "instruction c" in msg
    assert "model.py:7" in msg
