"""torch-neuronx style model directories.

Layout: ``metadata.json`` = ``{"model_files": "graph.hlo", "version": "1.0",
"weights": {name: "weights/<name>.npy"}}``, ``graph.hlo`` (a serialized
HloModuleProto; the format is still found from the content) and
``weights/*.npy``. bf16 weights are stored as 2-byte void (``|V2``) arrays and
come back as ``ml_dtypes.bfloat16``. Weights are memory-mapped, never read
whole, and checked against the literal size limit. A weight whose name is a
parameter's name or its ``neff_input_names`` attribute is bound to that
parameter (``module.weight_parameters``) and must match its shape.
"""
import json
import os

import numpy as np

from neuronxcc.errors import HloVerifyError, InputFileError, TensorTooLargeError
from neuronxcc.hlo import model

METADATA = "metadata.json"


def _bf16():
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


def read_metadata(path):
    meta_path = os.path.join(path, METADATA)
    if not os.path.isfile(meta_path):
        raise InputFileError("model directory %s has no %s" % (path, METADATA))
    try:
        with open(meta_path, "rb") as f:
            meta = json.loads(f.read().decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise InputFileError("%s is not valid JSON: %s" % (meta_path, e)) from None
    except OSError as e:
        raise InputFileError("cannot read %s: %s" % (meta_path, e.strerror or e)) from None
    if not isinstance(meta, dict):
        raise InputFileError("%s must hold a JSON object" % meta_path)
    return meta


def _inside(path, rel, what):
    if not isinstance(rel, str) or not rel:
        raise InputFileError("%s in %s must be a file name" % (what, METADATA))
    full = os.path.normpath(os.path.join(path, rel))
    if os.path.commonpath([os.path.abspath(full), os.path.abspath(path)]) != os.path.abspath(path):
        raise InputFileError("%s %s points outside the model directory" % (what, rel))
    if not os.path.isfile(full):
        raise InputFileError("%s %s listed in %s does not exist" % (what, rel, METADATA))
    return full


def load_weight(full, name):
    try:
        arr = np.load(full, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as e:
        raise InputFileError("weight %s (%s) is not a readable .npy file: %s" % (name, full, e)) from None
    if not isinstance(arr, np.ndarray):
        raise InputFileError("weight %s (%s) is not a single array" % (name, full))
    if arr.nbytes > model.MAX_LITERAL_BYTES:
        raise TensorTooLargeError("weight %s of shape %s needs %d bytes, more than the %d-byte limit"
                                  % (name, list(arr.shape), arr.nbytes, model.MAX_LITERAL_BYTES))
    if arr.dtype.kind == "V" and arr.dtype.itemsize == 2:
        arr = arr.view(_bf16())
    return arr


def model_file(path):
    """(path of the graph file, metadata) of the model directory ``path``."""
    meta = read_metadata(path)
    files = meta.get("model_files", "graph.hlo")
    if isinstance(files, list):
        if not files:
            raise InputFileError("model_files in %s is empty" % METADATA)
        files = files[0]
    return _inside(path, files, "model file"), meta


def attach_weights(module, path, meta):
    """Load the weights ``meta`` lists (memory-mapped) into ``module`` and bind them to parameters."""
    weights = meta.get("weights") or {}
    if not isinstance(weights, dict):
        raise InputFileError("weights in %s must map names to .npy files" % METADATA)
    for name, rel in weights.items():
        module.weights[name] = load_weight(_inside(path, rel, "weight %s" % name), name)
    _bind(module)
    return module


def _bind(module):
    by_name = {}
    for p in module.entry.parameters:
        by_name.setdefault(p.name, p)
        n = p.frontend_attributes.get("neff_input_names")
        if n:
            by_name.setdefault(n, p)
    for name, arr in module.weights.items():
        p = by_name.get(name)
        if p is None:
            continue
        if not p.shape.is_array or tuple(arr.shape) != p.shape.dims or arr.dtype != p.shape.numpy_dtype():
            raise HloVerifyError("weight %s has shape %s %s but parameter %d (%s) is %s"
                                 % (name, arr.dtype, list(arr.shape), p.parameter_number, p.name,
                                    p.shape.to_text(False)))
        module.weight_parameters[p.parameter_number] = name


def write_model_dir(module, path, weights=None, model_file="graph.hlo"):
    """Write a model directory: graph as HloModuleProto, weights as .npy (bf16 as |V2)."""
    os.makedirs(os.path.join(path, "weights"), exist_ok=True)
    from neuronxcc.hlo.proto_io import module_to_proto_bytes
    with open(os.path.join(path, model_file), "wb") as f:
        f.write(module_to_proto_bytes(module))
    listed = {}
    for name, arr in (weights or {}).items():
        arr = np.asarray(arr)
        if arr.dtype == _bf16():
            arr = arr.view(np.dtype("V2"))
        rel = "weights/%s.npy" % name
        np.save(os.path.join(path, rel), arr, allow_pickle=False)
        listed[name] = rel
    with open(os.path.join(path, METADATA), "w") as f:
        json.dump({"model_files": model_file, "version": "1.0", "weights": listed}, f)
    return path

