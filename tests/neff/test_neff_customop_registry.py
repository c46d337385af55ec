"""The custom-op registry guards and ucode_lib packaging, as the seed describes them."""
import json

import pytest

from neuronxcc.errors import CustomOpError
from neuronxcc.neff import customop
from neuronxcc.neff.customop import ModuleArtifactInfo, writeUCodeLibDefinitions


def _lib(info, i, ucode="u1", isa="i1"):
    return info.addCustomOpLibFile("libbuiltincustomop_cpu%d.so" % i, ucode, isa, True, i, 8)


def test_addCustomOpLibFile_dedups_same_versions_and_rejects_others():
    info = ModuleArtifactInfo()
    a = _lib(info, 0)
    b = _lib(info, 0)
    assert a is b and list(info.customOpLibs) == ["libbuiltincustomop_cpu0.so"]
    for ucode, isa in [("u2", "i1"), ("u1", "i2")]:
        with pytest.raises(CustomOpError) as ei:
            _lib(info, 0, ucode, isa)
        assert "libbuiltincustomop_cpu0.so" in str(ei.value)
    assert info.customOpLibs["libbuiltincustomop_cpu0.so"].ulib_to_ucode_version == "u1"
    _lib(info, 1, "u9", "i9")       # keyed by file name: another library may differ
    assert len(info.customOpLibs) == 2


def test_function_ids_are_dense_per_module_and_capped_at_254():
    info = ModuleArtifactInfo()
    assert [info.allocateCustomOpFunctionId() for _ in range(5)] == [0, 1, 2, 3, 4]
    assert ModuleArtifactInfo().allocateCustomOpFunctionId() == 0          # per module
    for _ in range(254 - 5):
        info.allocateCustomOpFunctionId()
    assert info.nextCustomOpFnId == 254
    with pytest.raises(CustomOpError) as ei:
        info.allocateCustomOpFunctionId()
    assert "Number of unique custom op functions cannot exceed" in str(ei.value)
    assert ei.value.one_line().startswith("[NCC_ECOP")


def test_addCustomOpFunction_needs_the_library_and_stores_one_byte():
    info = ModuleArtifactInfo()
    with pytest.raises(CustomOpError, match="not registered"):
        info.addCustomOpFunction("libbuiltincustomop_cpu0.so", "sort_f32", 0)
    _lib(info, 0)
    info.addCustomOpFunction("libbuiltincustomop_cpu0.so", "sort_f32", 0x1_02)
    assert info.customOpLibs["libbuiltincustomop_cpu0.so"].functions == {"sort_f32": 0x02}
    info.addCustomOpFunction("libbuiltincustomop_cpu0.so", "sort_f32", 7)      # duplicate name: kept
    assert info.customOpLibs["libbuiltincustomop_cpu0.so"].functions == {"sort_f32": 0x02}


def test_bindFunction_keeps_one_id_per_function_across_libraries():
    info = ModuleArtifactInfo()
    for i in range(8):
        _lib(info, i)
    assert info.bindFunction("sort_f32") == 0
    assert info.bindFunction("topk_f32") == 1
    assert info.bindFunction("sort_f32") == 0
    assert all(lib.functions == {"sort_f32": 0, "topk_f32": 1} for lib in info.customOpLibs.values())


def test_ucode_lib_schema_exactly(tmp_path):
    so = tmp_path / "libbuiltincustomop_cpu3.so"
    so.write_bytes(b"\x7fELF...")
    info = ModuleArtifactInfo()
    info.addCustomOpLibFile(so.name, "uc-7", "isa-3", True, 3, 8)
    info.setCustomOpLibSource(so.name, so)
    info.addCustomOpFunction(so.name, "sort_f32", info.allocateCustomOpFunctionId())
    info.addCustomOpFunction(so.name, "topk_f32", info.allocateCustomOpFunctionId())
    def_json, doc = {"name": "sg00"}, {}
    staged = writeUCodeLibDefinitions(def_json, doc, info)
    expect = [{"library": so.name, "ulib_to_ucode_version": "uc-7", "ulib_to_isa_version": "isa-3",
               "is_builtin": True, "cpu_id": 3, "total_cpus": 8,
               "functions": [{"name": "sort_f32", "opcode": 133, "sub_opcode": 0},
                             {"name": "topk_f32", "opcode": 133, "sub_opcode": 1}]}]
    assert doc == {"ucode_lib": expect}
    assert def_json == {"name": "sg00", "ucode_lib": expect}
    assert staged == [(so.name, str(so))]
    # JSON types as the packager emits them: bool, ints, and the constant 133
    e = json.loads(json.dumps(doc))["ucode_lib"][0]
    assert e["is_builtin"] is True and type(e["cpu_id"]) is int and e["functions"][0]["opcode"] == 133
    assert set(e) == {"library", "ulib_to_ucode_version", "ulib_to_isa_version", "is_builtin", "cpu_id",
                      "total_cpus", "functions"}


def test_nothing_when_no_custom_op():
    def_json, doc = {"name": "sg00"}, {}
    assert writeUCodeLibDefinitions(def_json, doc, ModuleArtifactInfo()) == []
    assert writeUCodeLibDefinitions(def_json, doc, None) == []
    assert def_json == {"name": "sg00"} and doc == {}


def test_registry_json_round_trip():
    info = ModuleArtifactInfo()
    for i in range(2):
        _lib(info, i)
    info.bindFunction("topk_f32")
    back = ModuleArtifactInfo.from_json(json.loads(json.dumps(info.to_json())))
    assert back.to_json() == info.to_json()
    assert back.allocateCustomOpFunctionId() == 1


def test_builtin_names():
    assert customop.builtin_libnames == tuple("libbuiltincustomop_cpu%d.so" % i for i in range(8))
    assert customop.CUSTOM_OP_OPCODE == 133 and customop.NEFF_FEATURE_CUSTOM_OPS == 0x8
