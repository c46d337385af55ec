"""HLO text in the forms torch-xla and hand-written tests use, checked against XLA's own parser.

For every text here: our parse equals what XLA's parser makes of it (read
through XLA's proto); XLA reads our printed text and our proto back to the
same module; and our printer round-trips through our parser.
"""
import glob
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus  # noqa: E402

from neuronxcc.hlo import load_module, parse_hlo_text  # noqa: E402
from neuronxcc.hlo.compare import diff_modules  # noqa: E402
from neuronxcc.hlo import module_to_proto_bytes, module_to_text  # noqa: E402

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
FILES = sorted(glob.glob(os.path.join(DATA, "*.hlo")))


def _xla():
    return reader_corpus.xla_hlo()


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_text_matches_xla_parser(path):
    text = open(path).read()
    ours = parse_hlo_text(text)
    xla = _xla().hlo_module_from_text(text)
    assert diff_modules(ours, load_module(xla.as_serialized_hlo_module_proto())) == []


@pytest.mark.parametrize("path", FILES, ids=os.path.basename)
def test_xla_reads_our_writers(path):
    _hlo = _xla()
    ours = parse_hlo_text(open(path).read())
    from_text = _hlo.hlo_module_from_text(module_to_text(ours))
    from_proto = _hlo.HloModule.from_serialized_hlo_module_proto(module_to_proto_bytes(ours))
    assert diff_modules(ours, load_module(from_text.as_serialized_hlo_module_proto())) == []
    assert diff_modules(ours, load_module(from_proto.as_serialized_hlo_module_proto())) == []
    assert diff_modules(ours, parse_hlo_text(module_to_text(ours))) == []


def test_torch_xla_details():
    m = parse_hlo_text(open(os.path.join(DATA, "attrs_torch_xla.hlo")).read())
    e = m.entry
    p0 = e.instruction("p0.1")
    assert p0.frontend_attributes == {"neff_input_names": "input0"}
    assert p0.metadata == {"op_type": "xla__device_data", "op_name": "xla__device_data",
                           "source_file": "/home/user/model.py", "source_line": 44}
    assert e.root.frontend_attributes["neff_output_names"].split(",") == ["output%d" % i for i in range(5)]
    assert m.input_output_alias == [((0,), 1, (), "must-alias"), ((1,), 2, (), "may-alias")]
    assert m.frontend_attributes == {"fa": "module level"}
    w = e.instruction("while.29")
    assert w.attrs["condition"].name == "cond.13" and w.attrs["body"].name == "body.18"
    assert w.attrs["backend_config"] == '{"known_trip_count":{"n":"3"}}'
    c = e.instruction("cond.36")
    assert [b.name for b in c.attrs["branch_computations"]] == ["on_true.40", "on_false.42"]
    assert [p.name for p in e.instruction("mul.34").control_predecessors] == ["sorted.32"]
    cc = e.instruction("cc.45")
    assert cc.attrs["custom_call_target"] == "MyOp" and cc.backend_config == b'k=2;"q"'
    assert cc.attrs["api_version"] == "API_VERSION_STATUS_RETURNING" and cc.attrs["custom_call_has_side_effect"]
    assert [s.layout for s in cc.attrs["operand_layout_constraints"]] == [(1, 0), (0, 1)]
    assert e.instruction("ar.39").attrs["replica_groups"] == ((0,),)
    assert e.instruction("rng.48").attrs["distribution"] == "rng_normal"
    assert e.instruction("p1.2").attrs["sharding"] == "{replicated}"
    tc = e.instruction("tc.49").literal
    assert tc[0] == np.float32(1.5) and tc[1][0] == -7 and tc[1][1].tolist() == [True, False]
    assert e.instruction("sorted.32").attrs["is_stable"] is True
    assert e.instruction("iota.37").attrs["iota_dimension"] == 1


def test_window_and_conv_attributes():
    m = parse_hlo_text(open(os.path.join(DATA, "windows.hlo")).read())
    conv = m.entry.instruction("conv")
    dl = conv.attrs["dim_labels"]
    assert str(dl) == "b01f_01io->b01f"
    assert (dl.input_batch_dimension, dl.input_feature_dimension, tuple(dl.input_spatial_dimensions)) == (0, 3, (1, 2))
    assert (dl.kernel_input_feature_dimension, dl.kernel_output_feature_dimension) == (2, 3)
    assert [(w.size, w.stride, w.padding_low, w.padding_high) for w in conv.attrs["window"]] == [(3, 2, 1, 1)] * 2
    assert conv.attrs["operand_precision"] == ("highest", "highest")
    assert conv.attrs["feature_group_count"] == 1 and conv.attrs["batch_group_count"] == 1
    assert m.entry.instruction("p").attrs["padding"] == ((0, 1, 0), (-17, 0, 0))
    assert [w.window_reversal for w in m.entry.instruction("g2").attrs["window"]] == [True, False]
    dil = m.entry.instruction("dil").attrs["window"]
    assert [w.window_dilation for w in dil] == [1, 2, 2, 1] and dil[1].padding_low == 1
    sas = m.entry.instruction("sas")
    assert sas.attrs["select"].name == "ge_f" and sas.attrs["scatter"].name == "add_f"
    assert m.entry.instruction("xt").shape.layout == (0, 3, 2, 1)


def test_misc_attributes():
    m = parse_hlo_text(open(os.path.join(DATA, "misc.hlo")).read())
    e = m.entry
    d = e.instruction("d")
    assert (d.attrs["lhs_batch_dims"], d.attrs["lhs_contracting_dims"]) == ((0,), (2,))
    assert d.attrs["operand_precision"] == ("default", "high")
    g = e.instruction("g")
    assert g.attrs["operand_batching_dims"] == (0,) and g.attrs["slice_sizes"] == (1, 1, 4)
    assert g.attrs["indices_are_sorted"] is True and g.attrs["collapsed_slice_dims"] == (1,)
    assert e.instruction("f").attrs["calls"].name == "fused_add" and e.instruction("f").attrs["kind"] == "kLoop"
    assert e.instruction("sc").attrs["unique_indices"] is True
    assert e.instruction("topk").attrs["k"] == 2
    assert e.instruction("tk").shape.is_token
    assert e.instruction("sh").attrs["sharding"] == "{devices=[2]0,1}"


def test_layout_tiles_dynamic_dims_and_thread():
    text = """HloModule t

ENTRY e {
  a = f32[8,128]{1,0:T(8,128)} parameter(0)
  b = f32[<=4]{0} parameter(1)
  ROOT c = f32[8,128]{0,1:T(8,128)S(1)} copy(a)
}
"""
    m = parse_hlo_text(text)
    assert m.entry.instruction("a").shape.layout == (1, 0)
    assert m.entry.root.shape.layout == (0, 1)
    assert m.entry.instruction("b").shape.dynamic_dims == (True,)
    assert diff_modules(m, load_module(module_to_proto_bytes(m))) == []
    assert diff_modules(m, parse_hlo_text(module_to_text(m))) == []


# -- property: every literal value survives text and proto -------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

_PROP_TYPES = ["pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64",
               "f8e4m3fn", "f8e5m2"]


@st.composite
def _literals(draw):
    from neuronxcc.hlo.model import dtype_of
    et = draw(st.sampled_from(_PROP_TYPES))
    dt = dtype_of(et)
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4))
    raw = draw(hnp.arrays(np.uint8, (int(np.prod(shape, dtype=np.int64)) * dt.itemsize,)))
    arr = np.frombuffer(raw.tobytes(), dtype=dt).reshape(shape).copy() if et != "pred" else \
        (np.frombuffer(raw.tobytes(), np.uint8) & 1).astype(bool).reshape(shape)
    return et, arr


@settings(max_examples=200, deadline=3000, derandomize=True)
@given(_literals())
def test_any_literal_round_trips_bit_exact(lit):
    from neuronxcc.hlo import HloComputation, HloInstruction, HloModule, Shape
    et, arr = lit
    shape = Shape(et, arr.shape)
    c = HloInstruction("c", "constant", shape, literal=arr)
    comp = HloComputation("main", [c], root=c)
    m = HloModule("m", [comp], comp)
    for back in (parse_hlo_text(module_to_text(m)), load_module(module_to_proto_bytes(m))):
        got = back.entry.root.literal
        assert got.dtype == arr.dtype and got.shape == arr.shape
        # bit-exact, NaN signs and payloads included (the text form writes them as nan(0x...))
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(arr).tobytes()


def test_older_torch_xla_quirks():
    """Forms older torch-xla dumps carry that today's XLA parser rejects or reads differently."""
    text = """HloModule SyncTensorsGraph.7

%AddComputation.1 (x.2: f32[], y.3: f32[]) -> f32[] {
  %x.2 = f32[] parameter(0)
  %y.3 = f32[] parameter(1)
  ROOT %add.4 = f32[] add(f32[] %x.2, f32[] %y.3)
}

ENTRY %SyncTensorsGraph.7 (p0.1: f32[16]) -> (f32[16], f32[]) {
  %p0.1 = f32[16]{0} parameter(0), frontend_attributes={neff_input_names="input0"}
  %custom-call.5 = f32[16]{0} custom-call(f32[16]{0} %p0.1), custom_call_target="AwsNeuronTransferWithStaticRing", api_version=API_VERSION_UNSPECIFIED
  %all-reduce.6 = f32[16]{0} all-reduce(f32[16]{0} %custom-call.5), replica_groups={}, to_apply=%AddComputation.1
  %constant.8 = f32[] constant(-0)
  ROOT %tuple.9 = (f32[16]{0}, f32[]) tuple(f32[16]{0} %all-reduce.6, f32[] %constant.8)
}
"""
    m = parse_hlo_text(text)
    e = m.entry
    assert e.instruction("custom-call.5").attrs["api_version"] == "API_VERSION_ORIGINAL"
    assert "replica_groups" not in e.instruction("all-reduce.6").attrs
    zero = e.instruction("constant.8").literal
    assert zero == 0 and np.signbit(zero)  # the sign of a -0 constant is kept (XLA's own parser drops it)
    xla = _xla().hlo_module_from_text(text.replace(", api_version=API_VERSION_UNSPECIFIED", ""))
    d = diff_modules(m, load_module(xla.as_serialized_hlo_module_proto()))
    assert d == ["constant.8: literal array(-0., dtype=float32) vs array(0., dtype=float32)"]


def test_names_are_scoped_per_computation_like_xla():
    # XLA's parser accepts a name reused in another computation and makes it unique (b -> b.1)
    text = """HloModule scoped

adder {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY e {
  p = f32[4] parameter(0)
  b = f32[4] parameter(1)
  b.2 = f32[4] negate(b)
  ROOT s = f32[4] map(p, b.2), dimensions={0}, to_apply=adder
}
"""
    ours = parse_hlo_text(text)
    names = [i.name for c in ours.computations.values() for i in c.instructions]
    assert len(names) == len(set(names))
    xla = _xla().hlo_module_from_text(text)
    assert diff_modules(ours, load_module(xla.as_serialized_hlo_module_proto())) == []
    from neuronxcc.errors import HloParseError
    with pytest.raises(HloParseError, match="used twice in computation e"):
        parse_hlo_text(text.replace("b.2 = f32[4] negate(b)", "p = f32[4] negate(b)"))


@pytest.mark.parametrize("dims", [(0,), (2, 0), (0, 3), (2, 3, 0), (1, 0, 2)])
def test_zero_size_constants_print_as_xla_reads_them(dims):
    from neuronxcc.hlo import HloComputation, HloInstruction, HloModule, Shape
    c = HloInstruction("c", "constant", Shape("f32", dims), literal=np.zeros(dims, np.float32))
    comp = HloComputation("main", [c], root=c)
    text = module_to_text(HloModule("m", [comp], comp))
    xla = _xla().hlo_module_from_text(text)        # XLA's parser refuses f32[2,0] {}
    assert load_module(xla.as_serialized_hlo_module_proto()).entry.root.literal.shape == dims
    assert parse_hlo_text(text).entry.root.literal.shape == dims


@pytest.mark.parametrize("dims,value", [("1", "{{1}}"), ("2,2", "{1,2,3,4}"), ("", "{1}"), ("2,0", "{}"),
                                        ("1,1", "{{{1}}}")])
def test_constant_brace_levels_must_match_the_rank(dims, value):
    from neuronxcc.errors import HloParseError
    text = "HloModule m\n\nENTRY e {\n  ROOT c = f32[%s] constant(%s)\n}\n" % (dims, value)
    with pytest.raises(Exception):
        _xla().hlo_module_from_text(text)          # XLA refuses each of these too
    with pytest.raises(HloParseError, match="levels of braces"):
        parse_hlo_text(text)
