"""BIR JSON round trip, file save/load, malformed input, per-engine split/merge."""
import json

import ml_dtypes
import numpy as np
import pytest

from neuronxcc.errors import BirFormatError
from neuronxcc.pelican import var
from neuronxcc.starfish import birpy as B


def _module():
    m = B.Module("everything", "trn2")
    m.attrs = {"source": "test"}
    m.add_tensor("x", "input", "bfloat16", (256, 64))
    m.add_tensor("k", "const", "bfloat16", (4, 3), data=np.arange(12, dtype=np.float32).reshape(4, 3).astype(ml_dtypes.bfloat16))
    m.add_tensor("y", "output", "float32", (256, 64))
    m.add_tensor("s", "scratch", "int32", (8,))
    m.add_memloc("a", "SBUF", 128, 1024, 0, 4096)
    m.add_memloc("p", "PSUM", 64, 2048)
    b = B.Builder(m)
    i = var("i")
    with b.loop("i", 0, 2):
        b.inst("dma_copy", "SP", [b.ap("a", dtype="bfloat16", free=64)],
               [B.AccessPattern("x", "bfloat16", i * 8192 + (i // 2) * 3 + i % 2, [[64, 128], [1, 64]])],
               queue="q0", signals=[("q0", 1)], name="load")
        with b.loop("j", 0, 4, 2):
            b.inst("activation", "ACT", [b.ap("a", free=32)], [b.ap("a", free=32, offset=var("j") * 32)],
                   func="gelu", scale=0.5, waits=[("q0", i + 1)], signals=[("ACT", 2)])
        b.inst("register_load", "POOL", [], [b.ap("s", pattern=[[1, 1]])], register="r", min=0, max=3)
        with b.while_("r", max_trips=10):
            b.inst("nop", "PE", waits=[("ACT", 2 * i + 2)])
        with b.if_("r"):
            b.inst("memset", "DVE", [b.ap("a", free=4)], [], value=-1.5)
        with b.else_():
            b.inst("iota", "POOL", [b.ap("a", dtype="int32", free=4)], [], pattern=[[1, 4]], offset=2,
                   channel_multiplier=1)
    with b.loop("empty", 0, 3):
        pass
    return b.finish()


def test_json_round_trip_all_node_kinds():
    m = _module()
    obj = B.to_json(m)
    text = json.dumps(obj)
    m2 = B.from_json(json.loads(text))
    assert m2 == m
    assert B.to_json(m2) == obj
    assert m2.tensors["k"].data.dtype == ml_dtypes.bfloat16
    assert str(m2.instructions()[0].srcs[0].offset) == str(m.instructions()[0].srcs[0].offset)
    assert m2.instructions()[1].waits[0][1] == var("i") + 1
    assert [n.id for n in m2.walk()] == list(range(len(list(m.walk()))))


def test_save_load_file_and_const_data_omitted(tmp_path):
    m = _module()
    B.save(m, str(tmp_path / "bir.json"))
    assert B.load(str(tmp_path / "bir.json")) == m
    obj = B.to_json(m, const_data=False)
    assert "data" not in obj["tensors"][1]
    m3 = B.from_json(obj)
    assert m3.tensors["k"].data is None


@pytest.mark.parametrize("text,match", [
    ("{", "does not parse"), ('{"format": "hlo"}', "not a BIR module"),
    ('{"format": "bir", "version": 99}', "unsupported BIR version"),
    ('{"format": "bir", "version": 1, "body": [{"kind": "goto"}]}', "unknown BIR node kind"),
    ('{"format": "bir", "version": 1, "body": [{"kind": "inst", "engine": "PE"}]}', "malformed"),
])
def test_malformed_json(text, match):
    with pytest.raises(BirFormatError, match=match) as e:
        B.loads(text)
    assert e.value.code == "NCC_EBIR001"
    with pytest.raises(BirFormatError):
        B.load("/nonexistent/bir.json")


def test_split_merge_round_trip():
    m = _module()
    streams = B.split_by_engine(m)
    assert set(streams) == {"SP", "ACT", "POOL", "PE", "DVE"}
    # each stream holds only its engine's instructions, inside its own loop copies
    for eng, nodes in streams.items():
        hdr = B.Module("x")
        hdr.body = nodes
        assert all(i.engine == eng for i in hdr.instructions())
    assert streams["ACT"][0].kind == "loop" and streams["ACT"][0].body[0].kind == "loop"
    header = B.to_json(m, body=False)
    js = {e: json.loads(json.dumps(B.stream_to_json(n))) for e, n in streams.items()}
    assert B.merge_engine_streams(header, js) == m
    assert B.merge_engine_streams(B.from_json(header), streams) == m


def test_printer_lists_everything():
    text = B.format_module(_module())
    for s in ("for i in range(0, 2, 1)", "while r", "if r", "else:", "ACT.activation", "wait(q0>=i + 1)",
              "memloc a SBUF 128x1024B @p0+4096", "tensor k const bfloat16[4, 3]"):
        assert s in text


def test_load_attrs_reads_the_attrs_without_the_rest(tmp_path):
    m = _module()
    m.attrs = {"io_transposes": [{"name": "x", "kind": "input", "shape": [256, 64], "permutation": [1, 0]}],
               "note": "a } and a \"quote\""}
    p = tmp_path / "m.json"
    B.save(m, str(p))
    assert B.load_attrs(str(p)) == B.load(str(p)).attrs == m.attrs
    # attrs after the body (another writer's key order) still come back, the same
    obj = B.to_json(m)
    attrs = obj.pop("attrs")
    obj["attrs"] = attrs
    p.write_text(json.dumps(obj, indent=2))
    assert B.load_attrs(str(p)) == m.attrs
    obj.pop("attrs")
    p.write_text(json.dumps(obj))
    assert B.load_attrs(str(p)) == {}
    p.write_text('{"format": "bir", "attrs": [1')
    with pytest.raises(BirFormatError):
        B.load_attrs(str(p))
