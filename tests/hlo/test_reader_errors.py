"""Bad input gets one clear error of the compiler's own types, never a traceback type."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402

from neuronxcc.errors import HloParseError, HloVerifyError, InputFileError, TensorTooLargeError  # noqa: E402
from neuronxcc.hlo import load_module, parse_hlo_text, model  # noqa: E402
from neuronxcc.hlo import module_to_proto_bytes, module_to_text

GOOD = """HloModule m, entry_computation_layout={(f32[2,3]{1,0}, f32[2,3]{1,0})->f32[2,3]{1,0}}

ENTRY main {
  p0 = f32[2,3]{1,0} parameter(0)
  p1 = f32[2,3]{1,0} parameter(1)
  ROOT add = f32[2,3]{1,0} add(p0, p1)
}
"""


def test_good_text_reads():
    m = parse_hlo_text(GOOD)
    assert m.entry.root.opcode == "add" and [p.name for p in m.entry.parameters] == ["p0", "p1"]


def test_empty_file(tmp_path):
    p = tmp_path / "model.hlo_module.pb"
    p.write_bytes(b"")
    with pytest.raises(HloParseError, match="empty"):
        load_module(str(p))


def test_missing_file(tmp_path):
    with pytest.raises(InputFileError, match="does not exist"):
        load_module(str(tmp_path / "nope.pb"))


def test_truncated_proto():
    pb = rc.lowered("mlp")[0]
    for cut in (1, 7, len(pb) // 3, len(pb) - 1):
        with pytest.raises((HloParseError, HloVerifyError)):
            load_module(pb[:cut])


def test_corrupt_proto():
    with pytest.raises(HloParseError, match="HloModuleProto"):
        load_module(b"\xff\xfe\x00garbage\x01\x02" * 10)


def test_hlo_proto_wrapper_is_accepted():
    from neuronxcc.hlo import schema
    mp = schema.HloModuleProto()
    mp.ParseFromString(rc.lowered("mlp")[0])
    wrapped = schema.HloProto(hlo_module=mp).SerializeToString()
    assert load_module(wrapped).entry.name == load_module(rc.lowered("mlp")[0]).entry.name


def test_unknown_proto_fields_are_ignored():
    pb = rc.lowered("mlp")[0]
    # field 999 (varint) on the module and a length-delimited field 500 are unknown to our schema
    extra = b"\xb8\x3e\x07" + b"\xa2\x1f\x03abc"
    m = load_module(pb + extra)
    assert m.entry.root.opcode == load_module(pb).entry.root.opcode


@pytest.mark.parametrize("text,line,col", [
    (GOOD.replace("add(p0, p1)", "add(p0, p1"), 6, len("  ROOT add = f32[2,3]{1,0} add(p0, p1") + 1),
    (GOOD.replace("f32[2,3]{1,0} parameter(1)", "f32[2,3}{1,0} parameter(1)"), 5, 15),
    (GOOD.replace("ROOT add =", "ROOT add"), 6, 12),
])
def test_text_syntax_error_has_line_and_column(text, line, col):
    with pytest.raises(HloParseError) as ei:
        parse_hlo_text(text)
    assert (ei.value.line, ei.value.column) == (line, col), ei.value.message
    assert "line %d, column %d" % (line, col) in ei.value.one_line()
    assert ei.value.one_line().startswith("[NCC_EHLO001] ")


def test_shapes_that_disagree():
    with pytest.raises(HloVerifyError, match="add"):
        parse_hlo_text(GOOD.replace("p1 = f32[2,3]{1,0}", "p1 = f32[3,2]{1,0}"))


def test_missing_parameter():
    with pytest.raises(HloVerifyError, match="missing parameter 1"):
        parse_hlo_text(GOOD.replace("parameter(1)", "parameter(2)"))


def test_unknown_operand():
    with pytest.raises(HloVerifyError, match="p9"):
        parse_hlo_text(GOOD.replace("add(p0, p1)", "add(p0, p9)"))


def test_unknown_operand_in_proto():
    from neuronxcc.hlo import schema
    mp = schema.HloModuleProto()
    mp.ParseFromString(module_to_proto_bytes(parse_hlo_text(GOOD)))
    mp.computations[0].instructions[2].operand_ids[1] = 12345
    with pytest.raises(HloVerifyError, match="unknown operand"):
        load_module(mp.SerializeToString())


def test_missing_entry_computation_in_proto():
    from neuronxcc.hlo import schema
    mp = schema.HloModuleProto()
    mp.ParseFromString(module_to_proto_bytes(parse_hlo_text(GOOD)))
    mp.entry_computation_id = 777
    mp.entry_computation_name = "not_there"
    with pytest.raises(HloVerifyError, match="entry computation not_there is not in the module"):
        load_module(mp.SerializeToString())
    mp.entry_computation_name = ""
    with pytest.raises(HloVerifyError, match="entry computation id 777 is not in the module"):
        load_module(mp.SerializeToString())
    mp.entry_computation_id = 0          # neither recorded: the last computation
    assert load_module(mp.SerializeToString()).entry.name == "main"


def test_literal_too_large(monkeypatch):
    monkeypatch.setattr(model, "MAX_LITERAL_BYTES", 1024)
    text = GOOD.replace("p1 = f32[2,3]{1,0} parameter(1)",
                        "p1 = f32[2,3]{1,0} parameter(1)\n  big = f32[1000]{0} constant({0})")
    with pytest.raises(TensorTooLargeError, match="limit"):
        parse_hlo_text(text)


def test_constant_value_count_must_match():
    text = GOOD.replace("p1 = f32[2,3]{1,0} parameter(1)",
                        "p1 = f32[2,3]{1,0} parameter(1)\n  c = f32[3]{0} constant({1, 2})")
    with pytest.raises(HloParseError, match="2 values"):
        parse_hlo_text(text)


def test_elided_constant_says_what_to_do():
    text = GOOD.replace("p1 = f32[2,3]{1,0} parameter(1)",
                        "p1 = f32[2,3]{1,0} parameter(1)\n  c = f32[300]{0} constant({...})")
    with pytest.raises(HloParseError, match="elided"):
        parse_hlo_text(text)


def test_format_is_found_from_content_not_name(tmp_path):
    pb, _, text = rc.lowered("reduce")
    (tmp_path / "file.code").write_bytes(pb)
    (tmp_path / "model.pb").write_text(text)
    a = load_module(str(tmp_path / "file.code"))
    b = load_module(str(tmp_path / "model.pb"))
    assert a.entry.name == b.entry.name


def test_special_floats_and_escapes_round_trip():
    text = GOOD.replace("p1 = f32[2,3]{1,0} parameter(1)", "p1 = f32[2,3]{1,0} parameter(1)\n"
                        "  c = f32[6]{0} constant({nan, -inf, inf, -0, 1e-40, 3.40282347e+38})\n"
                        "  b = bf16[2]{0} constant({-nan, 1.5})\n"
                        "  t = (s32[], pred[2]{0}) constant((7, {true, false}))\n"
                        '  cc = f32[2,3]{1,0} custom-call(p0), custom_call_target="x\\"y", '
                        'backend_config="\\000\\377\\n"')
    m = parse_hlo_text(text)
    c = m.entry.instruction("c").literal
    assert np.isnan(c[0]) and c[1] == -np.inf and c[2] == np.inf and np.signbit(c[3])
    assert c[4] == np.float32(1e-40) and c[5] == np.finfo(np.float32).max
    assert np.signbit(m.entry.instruction("b").literal[0])
    assert m.entry.instruction("t").literal[0] == 7
    cc = m.entry.instruction("cc")
    assert cc.custom_call_target == 'x"y' and cc.backend_config == b"\x00\xff\n"
    from neuronxcc.hlo.compare import diff_modules
    assert diff_modules(m, parse_hlo_text(module_to_text(m))) == []
    assert diff_modules(m, load_module(module_to_proto_bytes(m))) == []


def test_forward_references_and_sigils():
    text = """HloModule m

%add_f (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, f32[] %b)
}

ENTRY %main (x: f32[4]) -> f32[] {
  ROOT %r = f32[] reduce(f32[4]{0} %x, f32[] %z), dimensions={0}, to_apply=%add_f
  %z = f32[] constant(0)
  %x = f32[4]{0} parameter(0)
}
"""
    m = parse_hlo_text(text)
    assert [i.name for i in m.entry.instructions][-1] == "r"
    assert m.entry.root.attrs["to_apply"] is m.computations["add_f"]


def test_recursive_computations_are_rejected():
    text = """HloModule m

f {
  a = f32[] parameter(0)
  ROOT c = f32[] call(a), to_apply=g
}

g {
  b = f32[] parameter(0)
  ROOT d = f32[] call(b), to_apply=f
}

ENTRY main {
  x = f32[] parameter(0)
  ROOT y = f32[] call(x), to_apply=f
}
"""
    with pytest.raises(HloVerifyError, match="calls itself"):
        parse_hlo_text(text)


@pytest.mark.parametrize("line,match", [
    ("bad = f32[2,5]{1,0} pad(p0, z), padding=0_0x1_0", "pad of"),
    ("bad = f32[2,3]{1,0} iota(), iota_dimension=2", "iota_dimension"),
    ("bad = f32[1,2]{1,0} dynamic-slice(p0, i, i), dynamic_slice_sizes={1,3}", "dynamic-slice"),
    ("bad = f32[2,3]{1,0} dynamic-update-slice(p0, p1, i)", "dynamic-update-slice"),
    ("bad = f32[3,2]{1,0} reverse(p0), dimensions={0}", "reverse"),
    ("bad = f32[2,3]{1,0} compare(p0, p1), direction=LT", "pred"),
    ("bad = f32[2,3]{1,0} reshape(z)", "element count"),
    ("bad = f32[3,2]{1,0} transpose(p0), dimensions={0,1}", "transpose"),
    ("bad = f32[2,3]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}", "dot"),
    ("bad = f32[2,3]{1,0} dot(p0, p1), lhs_contracting_dims={1}, rhs_contracting_dims={1}", "dot"),
    ("bad = f32[2,2]{1,0} dot(p0, p1), lhs_contracting_dims={9}, rhs_contracting_dims={1}",
     "not distinct dimensions"),
    ("bad = f32[2,2]{1,0} dot(p0, p1), lhs_contracting_dims={1,1}, rhs_contracting_dims={1,1}",
     "not distinct dimensions"),
    ("bad = f32[4,3]{1,0} concatenate(p0, p1), dimensions={5}", "not a dimension of every operand"),
    ("bad = f32[2,3]{1,0} slice(p0), slice={[0:2], [0:4]}", "out of bounds"),
    ("bad = f32[2,3]{1,0} broadcast(z), dimensions={0}", "broadcast"),
    ("bad = (f32[2,3]{1,0}) tuple(p0, p1)", "tuple"),
    ("w = f32[3,4]{1,0} broadcast(z), dimensions={}\n  bad = f32[2,3]{1,0} convolution(p0, w), dim_labels=bf_io->bf",
     "convolution"),
    ("bad = f32[2,3]{1,0} reduce-window(p0, z), window={size=1x2}, to_apply=addf", "reduce-window"),
    ("ix = s32[4,1]{1,0} broadcast(i), dimensions={}\n  bad = f32[4,2]{1,0} gather(p0, ix), offset_dims={1}, "
     "collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,3}", "gather"),
])
def test_shape_errors(line, match):
    text = GOOD.replace("  ROOT add", "  z = f32[] constant(0)\n  i = s32[] constant(0)\n  %s\n  ROOT add" % line)
    text = text.replace("ENTRY main", "addf {\n  u = f32[] parameter(0)\n  v = f32[] parameter(1)\n"
                        "  ROOT uv = f32[] add(u, v)\n}\n\nENTRY main")
    with pytest.raises(HloVerifyError, match=match):
        parse_hlo_text(text)


def test_crlf_and_byte_order_mark_text():
    crlf = GOOD.replace("\n", "\r\n")
    for data in (crlf.encode(), b"\xef\xbb\xbf" + GOOD.encode(), "\ufeff" + GOOD):
        assert load_module(data).entry.root.name == "add"


def test_rank_above_numpy_limit():
    ones = ",".join(["1"] * 65)
    text = "HloModule m\n\nENTRY e {\n  p = f32[%s] parameter(0)\n  ROOT n = f32[%s] negate(p)\n}\n" % (ones, ones)
    with pytest.raises(HloParseError, match="rank 65; at most 64 dimensions"):
        load_module(text)
