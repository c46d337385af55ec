"""hlo-neff-wrapper: the entry reduced to its parameters + one AwsNeuronNeff custom-call."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402
from support.cli import run_tool  # noqa: E402

from neuronxcc.hlo import load_module  # noqa: E402
from neuronxcc.hlo.neff_wrapper import main, wrap_neff  # noqa: E402
from neuronxcc.hlo import module_to_proto_bytes, module_to_text

NEFF = bytes(range(256)) * 4 + b"\x00NEFF\xff"   # arbitrary binary, every byte value

TORCH_XLA_STYLE = """HloModule SyncTensorsGraph.9, input_output_alias={ {1}: (1, {}, must-alias) }

ENTRY %SyncTensorsGraph.9 (p0.1: f32[2,3], p1.2: f32[3]) -> (f32[2,3], f32[3]) {
  %p0.1 = f32[2,3]{1,0} parameter(0), frontend_attributes={neff_input_names="input0"}
  %p1.2 = f32[3]{0} parameter(1), frontend_attributes={neff_input_names="input1"}
  %broadcast.3 = f32[2,3]{1,0} broadcast(f32[3]{0} %p1.2), dimensions={1}
  %add.4 = f32[2,3]{1,0} add(f32[2,3]{1,0} %p0.1, f32[2,3]{1,0} %broadcast.3)
  %negate.5 = f32[3]{0} negate(f32[3]{0} %p1.2)
  ROOT %tuple.6 = (f32[2,3]{1,0}, f32[3]{0}) tuple(%add.4, %negate.5), frontend_attributes={neff_output_names="output0,output1"}
}
"""


def _check(wrapped, original):
    e = wrapped.entry
    assert list(wrapped.computations) == [e.name]
    assert [i.opcode for i in e.instructions] == ["parameter"] * len(original.entry.parameters) + ["custom-call"]
    cc = e.root
    assert cc.custom_call_target == "AwsNeuronNeff"
    assert cc.backend_config == NEFF
    assert cc.frontend_attributes["valid_inputs"] == ",".join(["1"] * len(original.entry.parameters))
    assert cc.shape == original.entry.root.shape
    assert [o.name for o in cc.operands] == [p.name for p in original.entry.parameters]
    assert [p.shape for p in e.parameters] == [p.shape for p in original.entry.parameters]
    assert [p.frontend_attributes for p in e.parameters] == [p.frontend_attributes for p in original.entry.parameters]


def test_wrap_jax_module_and_read_back(tmp_path):
    pb = rc.lowered("mlp")[0]
    (tmp_path / "model.hlo_module.pb").write_bytes(pb)
    (tmp_path / "file.neff").write_bytes(NEFF)
    assert main([str(tmp_path / "model.hlo_module.pb"), "--neff", str(tmp_path / "file.neff"),
                 "--output", str(tmp_path / "wrapped_neff.hlo")]) == 0
    data = (tmp_path / "wrapped_neff.hlo").read_bytes()
    wrapped = load_module(data)
    _check(wrapped, load_module(pb))
    # XLA itself loads the wrapped module
    assert "custom_call_target=\"AwsNeuronNeff\"" in rc.xla_text(data)


def test_torch_xla_names_and_aliasing_kept():
    m = load_module(TORCH_XLA_STYLE)
    w = wrap_neff(m, NEFF)
    _check(w, m)
    assert w.input_output_alias == m.input_output_alias
    assert w.entry.root.frontend_attributes["neff_output_names"] == "output0,output1"
    again = load_module(module_to_proto_bytes(w))
    assert again.entry.root.backend_config == NEFF
    assert again.input_output_alias == [((1,), 1, (), "must-alias")]
    # the text form carries the raw bytes too
    assert load_module(module_to_text(w)).entry.root.backend_config == NEFF


def test_tool_through_launcher(tmp_path):
    (tmp_path / "model.hlo").write_text(TORCH_XLA_STYLE)
    (tmp_path / "file.neff").write_bytes(NEFF)
    r = run_tool("hlo-neff-wrapper", ["model.hlo", "--neff", "file.neff", "--output", "wrapped_neff.hlo"],
                 cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert load_module(str(tmp_path / "wrapped_neff.hlo")).entry.root.backend_config == NEFF


@pytest.mark.parametrize("setup,code", [
    ("missing_neff", "NCC_EINP001"), ("empty_neff", "NCC_EINP001"), ("bad_model", "NCC_EHLO001"),
    ("no_args", "NCC_EARG002"),
])
def test_errors_are_one_line(tmp_path, capsys, setup, code):
    (tmp_path / "m.hlo").write_text(TORCH_XLA_STYLE)
    (tmp_path / "f.neff").write_bytes(NEFF)
    args = [str(tmp_path / "m.hlo"), "--neff", str(tmp_path / "f.neff"), "--output", str(tmp_path / "o.hlo")]
    if setup == "missing_neff":
        args[2] = str(tmp_path / "none.neff")
    elif setup == "empty_neff":
        (tmp_path / "f.neff").write_bytes(b"")
    elif setup == "bad_model":
        (tmp_path / "m.hlo").write_bytes(b"HloModule x\nENTRY e {\n  ROOT a = f32[] add(\n}\n")
    elif setup == "no_args":
        args = []
    assert main(args) == 70
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 1 and err[0].startswith("[%s]" % code), err
    assert not (tmp_path / "o.hlo").exists()
