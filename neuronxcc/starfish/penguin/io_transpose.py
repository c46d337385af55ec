"""StaticIOTranspose: io_transposes.json, the layout changes applied to I/O.

Penguin codegen keeps every input and output tensor in the HLO's own
row-major layout (the access patterns of the kernels absorb any transposed
access), so no I/O tensor is ever stored transposed. The file therefore
lists no transposes. Its format, for a consumer that applies them:

    {"version": 1, "transposes": [
        {"name": "<NEFF variable>", "kind": "input"|"output",
         "shape": [...logical HLO shape...], "permutation": [...]}   # stored = logical.transpose(permutation)
    ]}

An empty ``transposes`` list means every variable is stored exactly as the
HLO shape says.
"""
import json

from neuronxcc.common.toolshell import atomic_output
from neuronxcc.starfish import birpy


def io_transposes(module):
    """The list of I/O layout changes of a BIR module (always empty for Penguin codegen)."""
    return _from_attrs(module.attrs)


def _from_attrs(attrs):
    out = []
    for t in attrs.get("io_transposes", []) if isinstance(attrs, dict) else []:
        out.append(dict(t))
    return out


def write_io_transposes(bir_path, out_path):
    # the module attrs are all it reads: not the tensors, memlocs or body (32-layer prefill: 11 s)
    doc = {"version": 1, "transposes": _from_attrs(birpy.load_attrs(bir_path))}
    with atomic_output(out_path) as tmp, open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1)
    return out_path
