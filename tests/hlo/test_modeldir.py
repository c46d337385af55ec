"""torch-neuronx style model directories: metadata.json + graph.hlo + weights/*.npy."""
import json
import os
import sys

import ml_dtypes
import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402

from neuronxcc.errors import HloVerifyError, InputFileError, TensorTooLargeError  # noqa: E402
from neuronxcc.hlo import load_module, model  # noqa: E402
from neuronxcc.hlo.compare import diff_modules  # noqa: E402
from neuronxcc.hlo.modeldir import write_model_dir  # noqa: E402
from neuronxcc.hlo import module_to_proto_bytes

TEXT = """HloModule m

ENTRY main {
  x = f32[2,3]{1,0} parameter(0), frontend_attributes={neff_input_names="input0"}
  w = bf16[3,4]{1,0} parameter(1), frontend_attributes={neff_input_names="input1"}
  wc = f32[3,4]{1,0} convert(w)
  ROOT d = f32[2,4]{1,0} dot(x, wc), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def _weights():
    return {"input1": np.arange(12, dtype=np.float32).reshape(3, 4).astype(ml_dtypes.bfloat16)}


def test_directory_round_trip_with_bf16_weights(tmp_path):
    m = load_module(TEXT)
    d = write_model_dir(m, str(tmp_path / "model"), _weights())
    stored = np.load(os.path.join(d, "weights", "input1.npy"))
    assert stored.dtype.str == "|V2"  # what torch-neuronx writes for bf16
    meta = json.load(open(os.path.join(d, "metadata.json")))
    assert meta == {"model_files": "graph.hlo", "version": "1.0", "weights": {"input1": "weights/input1.npy"}}
    back = load_module(d)
    assert diff_modules(m, back) == []
    w = back.weights["input1"]
    assert w.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(w.astype(np.float32), np.arange(12, dtype=np.float32).reshape(3, 4))
    assert back.weight_parameters == {1: "input1"}


def test_goldens_take_the_directory_weights(tmp_path):
    from neuronxcc.hlo.infergoldens import main, read_npz
    d = write_model_dir(load_module(TEXT), str(tmp_path / "model"), _weights())
    out = str(tmp_path / "g.npz")
    assert main([d, "--output", out]) == 0
    (x, w), (y,) = read_npz(out, load_module(d))
    assert w.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(w, _weights()["input1"])
    from neuronxcc.common.tolerances import assert_close
    assert_close(y, x @ w.astype(np.float32))


def test_metadata_json_path_reads_the_directory(tmp_path):
    d = write_model_dir(load_module(rc.lowered("mlp")[0]), str(tmp_path / "model"))
    assert load_module(os.path.join(d, "metadata.json")).entry.root.opcode == "divide"


def test_graph_may_be_text(tmp_path):
    d = tmp_path / "model"
    d.mkdir()
    (d / "graph.hlo").write_text(TEXT)
    (d / "metadata.json").write_text(json.dumps({"model_files": "graph.hlo", "version": "1.0", "weights": {}}))
    assert load_module(str(d)).entry.root.name == "d"


def test_directory_without_metadata(tmp_path):
    (tmp_path / "graph.hlo").write_bytes(module_to_proto_bytes(load_module(TEXT)))
    with pytest.raises(InputFileError, match="has no metadata.json"):
        load_module(str(tmp_path))


@pytest.mark.parametrize("meta,match", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "JSON object"),
    (json.dumps({"model_files": "missing.hlo"}), "does not exist"),
    (json.dumps({"model_files": "../outside.hlo"}), "outside"),
    (json.dumps({"model_files": "graph.hlo", "weights": {"a": "weights/none.npy"}}), "does not exist"),
    (json.dumps({"model_files": "graph.hlo", "weights": ["a"]}), "map names"),
])
def test_bad_metadata(tmp_path, meta, match):
    (tmp_path / "graph.hlo").write_bytes(module_to_proto_bytes(load_module(TEXT)))
    (tmp_path / "metadata.json").write_text(meta)
    with pytest.raises(InputFileError, match=match):
        load_module(str(tmp_path))


def test_corrupt_weight_file(tmp_path):
    d = write_model_dir(load_module(TEXT), str(tmp_path / "model"), _weights())
    with open(os.path.join(d, "weights", "input1.npy"), "wb") as f:
        f.write(b"\x93NUMPY garbage")
    with pytest.raises(InputFileError, match="not a readable .npy"):
        load_module(d)


def test_weight_shape_must_match_its_parameter(tmp_path):
    d = write_model_dir(load_module(TEXT), str(tmp_path / "model"),
                        {"input1": np.zeros((4, 3), ml_dtypes.bfloat16)})
    with pytest.raises(HloVerifyError, match="parameter 1"):
        load_module(d)


def test_weight_too_large(tmp_path, monkeypatch):
    d = write_model_dir(load_module(TEXT), str(tmp_path / "model"), _weights())
    monkeypatch.setattr(model, "MAX_LITERAL_BYTES", 8)
    with pytest.raises(TensorTooLargeError, match="input1"):
        load_module(d)
