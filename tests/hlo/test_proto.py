"""HloModuleProto reading/writing details: literals of every type, layouts, wrappers, ids."""
import os
import sys

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402

from neuronxcc.errors import HloParseError  # noqa: E402
from neuronxcc.hlo import Shape, load_module, parse_hlo_text, schema  # noqa: E402
from neuronxcc.hlo.compare import diff_modules  # noqa: E402
from neuronxcc.hlo.proto_io import literal_from_proto, literal_to_proto  # noqa: E402
from neuronxcc.hlo import clone_module, module_to_proto_bytes

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "mlp")

VALUES = {
    "pred": np.array([True, False, True]),
    "s8": np.array([-128, 127, 0], np.int8), "s16": np.array([-32768, 1], np.int16),
    "s32": np.array([[-2 ** 31, 2 ** 31 - 1]], np.int32), "s64": np.array([-2 ** 63, 2 ** 63 - 1], np.int64),
    "u8": np.array([0, 255], np.uint8), "u16": np.array([65535], np.uint16), "u32": np.array([2 ** 32 - 1], np.uint32),
    "u64": np.array([2 ** 64 - 1, 0], np.uint64),
    "f16": np.array([np.inf, -0.0, 6.1e-5], np.float16),
    "bf16": np.array([1.0078125, -3e38, np.nan], ml_dtypes.bfloat16),
    "f32": np.array([[np.float32(1e-45), np.nan], [-np.inf, 0.1]], np.float32),
    "f64": np.array([1e-300, np.pi], np.float64),
    "f8e4m3fn": np.array([448.0, -0.001953125, np.nan], ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.array([57344.0, -np.inf, 1.5e-5], ml_dtypes.float8_e5m2),
    "c64": np.array([1 + 2j, -3.5j], np.complex64), "c128": np.array([1e300 - 1j], np.complex128),
    "s4": np.array([-8, 7, -1], ml_dtypes.int4), "u4": np.array([0, 15], ml_dtypes.uint4),
}


def _bits(a):
    return np.ascontiguousarray(np.atleast_1d(a)).view(np.uint8).tobytes()


@pytest.mark.parametrize("et", sorted(VALUES))
def test_literal_round_trip_bit_exact(et):
    v = VALUES[et]
    shape = Shape(et, v.shape)
    lp = literal_to_proto(v, shape)
    lp2 = schema.LiteralProto()
    lp2.ParseFromString(lp.SerializeToString())
    back = literal_from_proto(lp2, shape)
    assert back.dtype == v.dtype and back.shape == v.shape
    assert _bits(back) == _bits(v)


def test_literal_stored_in_layout_order():
    """XLA stores a literal's data in the order of its layout (here column-major)."""
    _hlo = rc.xla_hlo()
    text = """HloModule m
ENTRY e {
  ROOT c = f32[2,3]{0,1} constant({{1,2,3},{4,5,6}})
}"""
    pb = _hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    mp = schema.HloModuleProto()
    mp.ParseFromString(pb)
    assert list(mp.computations[0].instructions[0].literal.f32s) == [1, 4, 2, 5, 3, 6]
    lit = load_module(pb).entry.root.literal
    np.testing.assert_array_equal(lit, [[1, 2, 3], [4, 5, 6]])
    assert diff_modules(parse_hlo_text(text), load_module(pb)) == []


def test_xla_low_bit_and_complex_literals():
    _hlo = rc.xla_hlo()
    text = """HloModule m
ENTRY e {
  z = c64[2]{0} constant({(1,2), (3,-4)})
  s = s4[4]{0} constant({-8,-1,0,7})
  ROOT t = (c64[2]{0}, s4[4]{0}) tuple(z, s)
}"""
    m = load_module(_hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto())
    np.testing.assert_array_equal(m.entry.instruction("z").literal, [1 + 2j, 3 - 4j])
    np.testing.assert_array_equal(m.entry.instruction("s").literal.astype(np.int8), [-8, -1, 0, 7])
    again = load_module(module_to_proto_bytes(m))
    assert diff_modules(m, again) == []


def test_literal_value_count_checked():
    lp = literal_to_proto(np.arange(6, dtype=np.float32), Shape("f32", (6,)))
    lp.shape.dimensions[0] = 7
    with pytest.raises(HloParseError, match="needs 7"):
        literal_from_proto(lp)
    lp = literal_to_proto(np.arange(6, dtype=ml_dtypes.bfloat16), Shape("bf16", (6,)))
    lp.bf16s = lp.bf16s[:-1]
    with pytest.raises(HloParseError, match="bytes"):
        literal_from_proto(lp)


def test_ids_and_program_shapes_written():
    m = load_module(rc.lowered("while")[0])
    mp = schema.HloModuleProto()
    mp.ParseFromString(module_to_proto_bytes(m))
    ids = [i.id for c in mp.computations for i in c.instructions]
    assert len(set(ids)) == len(ids) and 0 not in ids
    assert mp.entry_computation_name == m.entry.name
    assert mp.computations[-1].name == m.entry.name
    assert len(mp.host_program_shape.parameters) == len(m.entry.parameters)
    for c in mp.computations:
        assert c.root_id in {i.id for i in c.instructions}


def test_bundled_example_proto_and_text_agree():
    pb, txt = os.path.join(EXAMPLES, "model.hlo_module.pb"), os.path.join(EXAMPLES, "model.hlo")
    if not os.path.exists(pb):
        pytest.skip("examples/ not next to the tests")
    a, b = load_module(pb), load_module(txt)
    assert diff_modules(a, b, metadata=False) == []
    assert [p.shape.dims for p in a.entry.parameters] == [(64, 256), (256, 512), (512,), (512, 128), (128,)]
    assert a.entry.root.shape.dims == (64, 128)


def test_clone_is_independent():
    m = load_module(rc.lowered("mlp")[0])
    c = clone_module(m)
    assert diff_modules(m, c) == []
    c.entry.root.name = "changed"
    c.entry.instructions[0].attrs["x"] = 1
    assert m.entry.root.name != "changed" and "x" not in m.entry.instructions[0].attrs


def test_schema_descriptor_is_protobufs_own_encoding():
    """schema._file_bytes (the FileDescriptorProto written by hand, so that loading the schema
    needs no descriptor_pb2) is byte for byte what descriptor_pb2 serializes for the same schema,
    and the message classes round-trip against classes built through protobuf's Python layer."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    from neuronxcc.hlo import schema
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="neuronxcc_hlo_schema.proto", package=schema._PACKAGE,
                                             syntax="proto3")
    for ename, values in schema.ENUMS.items():
        e = fdp.enum_type.add(name=ename)
        for vname, num in values:
            e.value.add(name="%s_%s" % (ename, vname), number=num)
    for mname, fields in schema.MESSAGES.items():
        m = fdp.message_type.add(name=mname)
        for fname, num, ftype, repeated in fields:
            f = m.field.add(name=fname, number=num, json_name=fname)
            f.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
            if ftype.startswith("map<"):
                entry = m.nested_type.add(name=fname.capitalize() + "Entry")
                entry.options.map_entry = True
                entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
                entry.field.add(name="value", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
                f.label, f.type = F.LABEL_REPEATED, F.TYPE_MESSAGE
                f.type_name = ".%s.%s.%s" % (schema._PACKAGE, mname, entry.name)
            elif ftype in schema.ENUMS:
                f.type, f.type_name = F.TYPE_ENUM, ".%s.%s" % (schema._PACKAGE, ftype)
            elif ftype in schema.MESSAGES:
                f.type, f.type_name = F.TYPE_MESSAGE, ".%s.%s" % (schema._PACKAGE, ftype)
            else:
                f.type = schema._SCALARS[ftype]
    assert schema._file_bytes() == fdp.SerializeToString()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    ref = message_factory.GetMessageClass(pool.FindMessageTypeByName(schema._PACKAGE + ".HloModuleProto"))
    mine = schema.HloModuleProto(name="m", entry_computation_name="main")
    c = mine.computations.add(name="main")
    i = c.instructions.add(name="p", opcode="parameter")
    i.shape.element_type = 11
    i.shape.dimensions.extend([2, 3])
    data = mine.SerializeToString(deterministic=True)
    back = ref()
    back.ParseFromString(data)
    assert back.computations[0].instructions[0].shape.dimensions == [2, 3]
    assert back.SerializeToString(deterministic=True) == data


def test_reading_hlo_skips_protobufs_python_layer():
    """With protobuf's upb backend, a tool that reads HLO never imports descriptor_pb2 or the
    descriptor pool's Python layer (about 25 ms of start-up per process)."""
    import subprocess
    import sys

    from support.cli import _env
    code = ("import sys; from google.protobuf.internal import api_implementation as a; "
            "import neuronxcc.hlo.proto_io; "
            "print(a.Type(), sorted(m for m in ('google.protobuf.descriptor_pb2', 'google.protobuf.descriptor_pool')"
            " if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert r.returncode == 0, r.stderr
    kind, loaded = r.stdout.split(" ", 1)
    assert "descriptor_pb2" not in loaded
    if kind == "upb":
        assert loaded.strip() == "[]", loaded
