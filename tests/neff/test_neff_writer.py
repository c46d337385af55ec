"""Kelper (write_neff) and the reader on real BIR modules: round trip, variants,
determinism, atomic write, custom ops, and neff-info."""
import hashlib
import json
import os
import struct
import uuid

import jax.numpy as jnp
import jax
import numpy as np
import pytest

import neuronxcc
from neuronxcc.errors import NeffFormatError
from neuronxcc.neff import read_neff, write_neff
from neuronxcc.neff import customop, writer
from neuronxcc.neff.info import format_neff_info
from neuronxcc.starfish import birpy
from support.neff_programs import add_program, sort_program

DATA_DIR = os.path.join(os.path.dirname(neuronxcc.__file__), "data", "custom_op")


def test_round_trip_header_members_vars_module(tmp_path):
    m = add_program()
    out = tmp_path / "file.neff"
    assert write_neff(str(out), m, name="my_model", io_transposes={"input0": [1, 0]}) == str(out)
    raw = out.read_bytes()
    n = read_neff(str(out))
    h = n.header
    assert (h.pkg_version, h.header_size, h.data_size) == (2, 1024, len(raw) - 1024)
    assert (h.neff_version_major, h.neff_version_minor) == (2, 0)
    assert h.neff_build_version == neuronxcc.__version__
    assert (h.num_tpb, h.lnc_size, h.feature_bits, h.name) == (1, 1, 0, "my_model")
    assert uuid.UUID(bytes=h.uuid).version == 4
    assert h.hash == hashlib.md5(raw[1024:]).digest() + b"0" * 16
    assert n.pkg_version == 2 and n.name == "my_model"          # header fields as attributes

    names = [k for k, _ in n.member_sizes]
    assert names == sorted(names)
    for member in ("kelf-a.json", "neff.json", "sg00/def.json", "sg00/program.json", "sg00/SP.json",
                   "sg00/ACT.json", "sg00/DVE.json", "sg00/POOL.json", "sg00/io_transposes.json"):
        assert member in n.members, member
    assert not any(k.endswith(".so") or k == "ucode_lib.json" for k in names)
    assert n.kelf == {"graphs": [{"definition": "sg00/def.json", "name": "sg00"}], "version": "0.5", "target": "*"}
    kelf_node = n.neff_json["nodes"][-1]
    assert kelf_node["op"] == "tvm_op" and kelf_node["attrs"]["func_name"] == "__kelf"
    assert kelf_node["attrs"]["kelf"] == "kelf-a.json"
    assert [nd["name"] for nd in n.neff_json["nodes"][:-1]] == ["x", "y"]

    d = n.def_json
    assert d["name"] == "sg00"
    assert [(v.name, v.type, v.var_id, v.dtype, v.shape) for v in n.variables] == [
        ("x", "input", 0, "float32", (4, 8)), ("y", "input", 1, "bfloat16", (4, 8)),
        ("out", "output", 2, "float32", (4, 8)), ("c", "file", 3, "float32", (4, 8)),
        ("c/bf16 weird:name", "file", 4, "bfloat16", (2, 3)), ("tmp", "tmp-buf", 5, "float32", (4, 8))]
    assert [v.size for v in n.variables] == [128, 64, 128, 128, 12, 128]
    assert n.constants[0].file_name == "sg00/c.npy"
    assert n.constants[1].file_name == "sg00/c_bf16_weird_name.npy"
    assert set(d["dma_queue"]) == {"q_in", "q_const", "q_out"}
    assert d["dma_queue"]["q_in"]["type"] == "in" and d["dma_queue"]["q_out"]["type"] == "out"
    assert d["dma_queue"]["q_const"]["type"] == "data" and d["dma_queue"]["q_const"]["owner"] == "ACT"
    assert "ucode_lib" not in d
    assert n.io_transposes == {"input0": [1, 0]}

    np.testing.assert_array_equal(n.constant("c"), m.tensors["c"].data)
    cb = n.constant("c/bf16 weird:name")
    assert cb.dtype == birpy.dtypes.np_dtype("bfloat16")
    assert cb.view(np.uint16).tolist() == \
        np.asarray(m.tensors["c/bf16 weird:name"].data).astype(cb.dtype).view(np.uint16).tolist()

    back = n.module
    for t in m.tensors.values():
        bt = back.tensors[t.name]
        if t.data is None:
            assert bt.data is None
        else:
            want = np.asarray(t.data).astype(birpy.dtypes.np_dtype(t.dtype))
            assert bt.data.dtype == want.dtype and bt.data.tobytes() == want.tobytes(), t.name
            bt.data = t.data = None        # (Tensor.__eq__ cannot buffer bf16 data)
    assert back == m                      # tensors, memlocs, I/O, attrs, body with ids


def test_io_names_come_from_the_module(tmp_path):
    m = add_program(input_names=("input0", "input1"), output_names=("output0",))
    p = write_neff(str(tmp_path / "a.neff"), m)
    n = read_neff(p)
    assert [v.name for v in n.inputs] == ["input0", "input1"]
    assert [v.name for v in n.outputs] == ["output0"]
    assert n.name == "add_prog"


def test_io_transposes_from_a_file(tmp_path):
    f = tmp_path / "io_transposes.json"
    f.write_text(json.dumps({"transposes": []}))
    n = read_neff(write_neff(str(tmp_path / "a.neff"), add_program(), io_transposes=str(f)))
    assert n.io_transposes == {"transposes": []}
    n = read_neff(write_neff(str(tmp_path / "b.neff"), add_program()))
    assert n.io_transposes is None and "sg00/io_transposes.json" not in n.members


def test_fast_loading_is_raw_tar_with_sha256(tmp_path):
    a = read_neff(write_neff(str(tmp_path / "a.neff"), add_program(), fast_loading=True))
    raw = (tmp_path / "a.neff").read_bytes()
    assert a.pkg_version == 1
    assert raw[172:204] == hashlib.sha256(raw[1024:]).digest()
    assert raw[1024 + 257:1024 + 262] == b"ustar"             # the payload is a plain tar
    b = read_neff(write_neff(str(tmp_path / "b.neff"), add_program()))
    assert a.members == b.members


def test_same_input_same_bytes_except_uuid(tmp_path):
    p1 = write_neff(str(tmp_path / "1.neff"), add_program(), name="n")
    p2 = write_neff(str(tmp_path / "2.neff"), add_program(), name="n")
    b1, b2 = open(p1, "rb").read(), open(p2, "rb").read()
    assert len(b1) == len(b2)
    assert b1[:204] == b2[:204] and b1[220:] == b2[220:]
    assert b1[204:220] != b2[204:220]
    d1 = writer.write_neff(str(tmp_path / "d1.neff"), add_program(), name="n", deterministic_uuid=True)
    d2 = writer.write_neff(str(tmp_path / "d2.neff"), add_program(), name="n", deterministic_uuid=True)
    assert open(d1, "rb").read() == open(d2, "rb").read()
    assert uuid.UUID(bytes=read_neff(d1).uuid).version == 4
    f = writer.write_neff(str(tmp_path / "f.neff"), add_program(), name="n", fast_loading=True,
                          deterministic_uuid=True)
    assert open(f, "rb").read()[204:220] != open(d1, "rb").read()[204:220]


def test_atomic_write_leaves_nothing_on_failure(tmp_path, monkeypatch):
    out = tmp_path / "file.neff"

    def boom(fd):
        raise OSError("disk full")

    monkeypatch.setattr(writer.os, "fsync", boom)
    with pytest.raises(OSError, match="disk full"):
        write_neff(str(out), add_program())
    assert os.listdir(tmp_path) == []                  # no output, no temp file
    out.write_bytes(b"previous")
    with pytest.raises(OSError):
        write_neff(str(out), add_program())
    assert out.read_bytes() == b"previous" and os.listdir(tmp_path) == ["file.neff"]
    monkeypatch.undo()

    bad = add_program()
    bad.tensors["c"].data = None                       # fails while building members
    with pytest.raises(ValueError, match="no data"):
        write_neff(str(tmp_path / "other.neff"), bad)
    assert sorted(os.listdir(tmp_path)) == ["file.neff"]


def _custom_op_neff(tmp_path, fast=False):
    m = sort_program("sort_f32", rows=11, n=9)
    # a second function in the same module: a topk call on the same rows
    topk = birpy.Instruction("custom_op", "POOL", m.body[1].dsts, m.body[1].srcs,
                             dict(m.body[1].attrs, function="topk_f32", k=3), id=None)
    m.body.insert(2, topk)
    m.renumber()
    p = write_neff(str(tmp_path / "co.neff"), m, fast_loading=fast)
    return m, read_neff(p)


def test_custom_ops_are_packaged(tmp_path):
    m, n = _custom_op_neff(tmp_path)
    assert n.feature_bits == 0x8 and n.uses_custom_ops
    doc = json.loads(n.members["ucode_lib.json"])
    assert doc["ucode_lib"] == n.def_json["ucode_lib"] == n.ucode_lib
    assert [e["library"] for e in n.ucode_lib] == list(customop.builtin_libnames)
    for e in n.ucode_lib:
        lib = customop.CustomOpLibrary(os.path.join(DATA_DIR, e["library"]))
        assert (e["ulib_to_ucode_version"], e["ulib_to_isa_version"]) == (lib.ucode_version, lib.isa_version)
        assert (e["is_builtin"], e["cpu_id"], e["total_cpus"]) == (True, lib.cpu_id, 8)
        assert e["functions"] == [{"name": "sort_f32", "opcode": 133, "sub_opcode": 0},
                                  {"name": "topk_f32", "opcode": 133, "sub_opcode": 1}]
        with open(lib.path, "rb") as f:
            assert n.members[e["library"]] == f.read()
    calls = [i for i in n.module.instructions() if i.opcode == "custom_op"]
    assert [(c.attrs["function"], c.attrs["sub_opcode"]) for c in calls] == [("sort_f32", 0), ("topk_f32", 1)]
    assert "custom_op" not in json.dumps(n.def_json["dma_queue"])


def test_custom_op_program_runs_through_the_packaged_libraries(tmp_path):
    m, n = _custom_op_neff(tmp_path, fast=True)
    d = tmp_path / "libs"
    d.mkdir()
    libs = [customop.CustomOpLibrary(p) for p in n.extract_custom_op_libraries(str(d))]
    x = np.random.default_rng(3).integers(-3, 3, size=(11, 9)).astype(np.float32)
    x[2, 4] = np.nan
    by_id = {f["sub_opcode"]: f["name"] for f in n.ucode_lib[0]["functions"]}
    for call in [i for i in n.module.instructions() if i.opcode == "custom_op"]:
        fn = by_id[call.attrs["sub_opcode"]]
        if fn == "sort_f32":
            v, i = customop.sort_rows(libs, x, descending=call.attrs["descending"])
            assert np.array_equal(i, np.asarray(jnp.argsort(x, axis=-1, stable=True)))
        else:
            v, i = customop.topk_rows(libs, x, call.attrs["k"])
            assert np.array_equal(i, np.asarray(jax.lax.top_k(x, call.attrs["k"])[1]))


def test_registry_from_codegen_is_used_as_is(tmp_path):
    m = sort_program("topk_f32", rows=4, n=6, k=2)
    info = customop.ModuleArtifactInfo()
    customop.register_builtin_custom_op_libs(info, [os.path.join(DATA_DIR, customop.builtin_libnames[0])])
    info.allocateCustomOpFunctionId()                      # id 0 used by something else
    info.bindFunction("topk_f32")
    m.attrs["artifact_info"] = info.to_json()
    n = read_neff(write_neff(str(tmp_path / "r.neff"), m))
    assert [e["library"] for e in n.ucode_lib] == [customop.builtin_libnames[0]]
    assert n.ucode_lib[0]["functions"] == [{"name": "topk_f32", "opcode": 133, "sub_opcode": 1}]
    assert [i.attrs["sub_opcode"] for i in n.module.instructions() if i.opcode == "custom_op"] == [1]


def test_reader_refuses_inconsistent_members(tmp_path):
    m = add_program()
    members, bits = writer.build_members(m)

    def check(mut, word):
        mm = dict(members)
        mut(mm)
        p = writer.write_neff_members(str(tmp_path / "x.neff"), mm, "x")
        with pytest.raises(NeffFormatError, match=word):
            read_neff(p)

    def set_def(mm, f):
        d = json.loads(mm["sg00/def.json"])
        f(d)
        mm["sg00/def.json"] = json.dumps(d).encode()

    check(lambda mm: mm.pop("sg00/def.json"), "no sg00/def.json")
    check(lambda mm: mm.__setitem__("sg00/def.json", b"{not json"), "not valid JSON")
    check(lambda mm: set_def(mm, lambda d: d["var"]["x"].__setitem__("var_id", 9)), "dense")
    check(lambda mm: mm.pop("sg00/c.npy"), "missing")
    check(lambda mm: set_def(mm, lambda d: d.__setitem__("ucode_lib", [{"library": "libx.so"}])), "not a member")
    check(lambda mm: set_def(mm, lambda d: d["var"]["x"].__setitem__("dtype", "float33")), "unknown dtype 'float33'")
    check(lambda mm: set_def(mm, lambda d: d["var"].__setitem__("x", "not an object")), "var 'x' is malformed")
    check(lambda mm: set_def(mm, lambda d: d.__setitem__("ucode_lib", ["libx.so"])), "not a list of objects")
    check(lambda mm: mm.__setitem__("ucode_lib.json", b"[]"), "disagrees")
    with pytest.raises(NeffFormatError, match="Cannot read"):
        read_neff(str(tmp_path / "does-not-exist.neff"))


def test_neff_info_text(tmp_path):
    p = write_neff(str(tmp_path / "a.neff"), add_program(), name="info_model")
    text = format_neff_info(p)
    n = read_neff(p)
    for field in ("pkg_version", "header_size", "data_size", "neff_version", "neff_build_version", "num_tpb",
                  "hash", "uuid", "name", "feature_bits", "lnc_size"):
        assert "\n  %s " % field in text, field
    assert "info_model" in text and n.header.uuid_str in text and n.header.hash_hex in text
    assert "2 (gzip tar, md5)" in text and "2.0" in text
    for name, size in n.member_sizes:
        assert any(line.split() == [name, str(size)] for line in text.splitlines()), name
    assert "Inputs (2):" in text and "Outputs (1):" in text
    lines = text.splitlines()
    assert any(line.split() == ["x", "var_id", "0", "float32", "[4,", "8]"] for line in lines)
    assert any(line.split() == ["y", "var_id", "1", "bfloat16", "[4,", "8]"] for line in lines)
    assert any(line.split() == ["out", "var_id", "2", "float32", "[4,", "8]"] for line in lines)


def test_neff_info_custom_ops_and_errors(tmp_path):
    _m, n = _custom_op_neff(tmp_path)
    text = format_neff_info(n.path)
    assert "0x8 (custom_ops)" in text and "Custom op libraries (8):" in text and "sort_f32=0" in text
    bad = tmp_path / "bad.neff"
    raw = bytearray(open(n.path, "rb").read())
    struct.pack_into("<Q", raw, 16, 5)
    bad.write_bytes(bytes(raw))
    with pytest.raises(NeffFormatError, match="data_size"):
        format_neff_info(str(bad))


def test_long_names_are_cut_to_the_header_field(tmp_path):
    long = "é" * 200                                   # 400 UTF-8 bytes
    n = read_neff(write_neff(str(tmp_path / "l.neff"), add_program(), name=long))
    assert n.name == "é" * 127 and len(n.name.encode()) == 254


def test_custom_op_errors(tmp_path):
    from neuronxcc.errors import CustomOpError

    m = sort_program("no_such_kernel", rows=4, n=4)
    with pytest.raises(CustomOpError, match="no_such_kernel"):
        write_neff(str(tmp_path / "e.neff"), m)
    m = sort_program("sort_f32", rows=4, n=4)
    m.body[1].attrs["function"] = None
    with pytest.raises(CustomOpError, match="function name"):
        write_neff(str(tmp_path / "e.neff"), m)
    assert os.listdir(tmp_path) == []
    # an explicit staged set: only what was staged is registered and packaged
    m = sort_program("sort_f32", rows=4, n=4)
    libs = [os.path.join(DATA_DIR, name) for name in customop.builtin_libnames[:2]]
    n = read_neff(write_neff(str(tmp_path / "two.neff"), m, custom_op_libs=libs))
    assert [e["library"] for e in n.ucode_lib] == list(customop.builtin_libnames[:2])
    assert sorted(k for k in n.members if k.endswith(".so")) == list(customop.builtin_libnames[:2])


def test_reader_refuses_broken_streams(tmp_path):
    members, _ = writer.build_members(add_program())
    mm = dict(members)
    mm["sg00/DVE.json"] = json.dumps({"name": "DVE", "instr": [{"kind": "inst"}]}).encode()
    n = read_neff(writer.write_neff_members(str(tmp_path / "s.neff"), mm, "s"))
    with pytest.raises(NeffFormatError, match="do not form a module"):
        n.module
    mm["sg00/DVE.json"] = json.dumps({"name": "DVE"}).encode()
    n = read_neff(writer.write_neff_members(str(tmp_path / "s.neff"), mm, "s"))
    with pytest.raises(NeffFormatError, match="'instr'"):
        n.module


def test_libraries_the_frontend_recorded_are_used(tmp_path):
    m = sort_program("sort_f32", rows=4, n=4)
    m.attrs["custom_op_libs"] = [os.path.join(DATA_DIR, customop.builtin_libnames[5])]
    n = read_neff(write_neff(str(tmp_path / "f.neff"), m))
    assert [(e["library"], e["cpu_id"]) for e in n.ucode_lib] == [(customop.builtin_libnames[5], 5)]


def test_neff_info_command(tmp_path):
    from support.cli import run_ncc

    p = write_neff(str(tmp_path / "cli.neff"), add_program())
    r = run_ncc(["neff-info", p], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == format_neff_info(p).strip()
    raw = bytearray(open(p, "rb").read())
    raw[-1] ^= 0xFF
    (tmp_path / "bad.neff").write_bytes(bytes(raw))
    r = run_ncc(["neff-info", str(tmp_path / "bad.neff")], cwd=str(tmp_path))
    assert r.returncode == 70
    assert r.stderr.strip().splitlines()[-1].startswith("[NCC_ENEF001]") and "Traceback" not in r.stderr


def test_a_fresh_uuid_is_random_rfc4122_version_4():
    from neuronxcc.neff.container import random_uuid4
    a, b = random_uuid4(), random_uuid4()
    assert len(a) == 16 and a != b
    for u in (a, b):
        u = uuid.UUID(bytes=u)
        assert u.version == 4 and u.variant == uuid.RFC_4122
