"""Kelper: write a BIR module as a NEFF.

``write_neff(output, module, name=..., fast_loading=..., io_transposes=...)``
builds the members and packs them (``container.pack_neff``):

* ``kelf-a.json``  -- the kelf graph list, one subgraph ``sg00``;
* ``neff.json``    -- a TVM-style host graph: one ``null`` node per input and
  one ``tvm_op`` node (``func_name "__kelf"``, ``kelf "kelf-a.json"``) whose
  outputs are the NEFF outputs;
* ``sg00/def.json`` -- ``name``, ``version``, ``var`` (inputs, outputs,
  constants, scratch; ``var_id`` dense 0..N-1 in that order), ``dma_queue``
  (the queues the program's DMA instructions use), ``engines`` (engine ->
  member), ``program`` (member holding the module-level BIR parts) and, when
  custom ops are used, ``ucode_lib``;
* ``sg00/<Engine>.json`` -- each engine's instruction stream from
  ``birpy.split_by_engine``; ``sg00/program.json`` the rest of the module
  (tensors without data, memlocs, I/O order) so that ``read_neff`` rebuilds
  the module with ``birpy.merge_engine_streams``;
* constants as ``sg00/<name>.npy`` (bf16/fp8 stored as their unsigned bit
  pattern; the var entry's ``dtype`` says what they are);
* ``sg00/io_transposes.json`` when io_transposes are given;
* ``ucode_lib.json`` and each staged custom-op library when custom ops are used
  (header feature bit 0x8).

Header: pkg_version 2 (gzip + md5) or 1 with ``fast_loading`` (raw tar +
sha256), neff_version 2.0, neff_build_version = the neuronxcc version,
num_tpb 1, lnc_size 1, a random v4 uuid (``deterministic_uuid=True`` derives
it from the content instead), the name.

The same module and flags give the same bytes except the uuid. The file is
written to a temp file in the output's directory and renamed over the output,
so a failure leaves nothing new at the path.
"""
import io
import json
import os
import re

import numpy as np

from neuronxcc.common import toolshell
from neuronxcc.errors import CustomOpError
from neuronxcc.neff import customop
from neuronxcc.neff.container import content_uuid, make_tar, pack_neff
from neuronxcc.neff.header import NEFF_FEATURE_CUSTOM_OPS, truncate_utf8
from neuronxcc.version import __version__

SUBGRAPH = "sg00"
DEF_JSON = SUBGRAPH + "/def.json"
PROGRAM_JSON = SUBGRAPH + "/program.json"
IO_TRANSPOSES_JSON = SUBGRAPH + "/io_transposes.json"
DEF_SCHEMA_VERSION = "0.6"


def dumps(obj):
    """Canonical JSON bytes (sorted keys, compact separators, trailing newline).

    No indentation: json only uses its C encoder without it (indented, the encoder
    was most of the NEFF writer's time at 20 k instructions)."""
    return (json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n").encode("utf-8")


# -- reading the BIR module (a birpy Module) ----------------------------------

def np_dtype(name):
    """numpy dtype of a BIR dtype name (birpy's registry). Raises KeyError for an unknown name."""
    from neuronxcc.starfish.birpy import dtypes as bir_dtypes

    return bir_dtypes.np_dtype(str(name))


def dtype_name(name):
    """The BIR spelling of a dtype (what def.json records)."""
    from neuronxcc.starfish.birpy import dtypes as bir_dtypes

    return bir_dtypes.get(str(name)).name


def _custom_op_calls(module):
    from neuronxcc.starfish.birpy.opcodes import OPCODES_BY_CODE, CUSTOM_OP_OPCODE

    name = OPCODES_BY_CODE[CUSTOM_OP_OPCODE].name
    return [i for i in module.instructions() if i.opcode == name]


def _custom_op_function(inst):
    fn = inst.attrs.get("function")
    if not fn:
        raise CustomOpError("Custom op instruction without a function name (attrs 'function')",
                            code="NCC_ECOP009")
    return str(fn)


def default_custom_op_libs():
    """The builtin libraries as the Frontend job stages them (for modules it did not stage)."""
    return customop.stage_builtin_libraries()


def bind_custom_ops(module, custom_op_libs=None):
    """The codegen step for custom ops: the module's registry, ids bound.

    Uses the registry codegen already filled (its JSON in
    ``module.attrs["artifact_info"]``) when there is one; otherwise
    registers the staged libraries (``custom_op_libs``, else the Frontend's
    ``module.attrs["custom_op_libs"]``, else the builtin set) with
    the versions they report and binds each custom-op instruction's function in
    program order, writing the FunctionId into ``attrs['sub_opcode']``. Returns
    None when the module has no custom op.
    """
    calls = _custom_op_calls(module)
    info = None
    if module.attrs.get("artifact_info"):
        info = customop.ModuleArtifactInfo.from_json(module.attrs["artifact_info"])
    if not calls:
        return info if info else None
    if not info:
        info = customop.ModuleArtifactInfo()
        if custom_op_libs is None:
            custom_op_libs = module.attrs.get("custom_op_libs")      # what the Frontend staged
        paths = list(custom_op_libs) if custom_op_libs is not None else default_custom_op_libs()
        if not paths:
            raise CustomOpError("Custom op data directory not found")
        libs = customop.register_builtin_custom_op_libs(info, paths)
        for inst in calls:
            fn = _custom_op_function(inst)
            missing = [lib.file_name for lib in libs if not lib.has_function(fn)]
            if missing:
                raise CustomOpError("Custom op function %s is not in %s" % (fn, ", ".join(missing)),
                                    code="NCC_ECOP010")
            inst.attrs["sub_opcode"] = info.bindFunction(fn)
    else:
        for inst in calls:
            fn = _custom_op_function(inst)
            fid = info.functionId(fn)
            if fid is None:
                raise CustomOpError("Custom op function %s has no FunctionId in the module registry" % fn,
                                    code="NCC_ECOP010")
            inst.attrs["sub_opcode"] = fid
    return info


# -- members ------------------------------------------------------------------

def _npy_bytes(arr, dtype):
    arr = np.ascontiguousarray(np.asarray(arr).astype(dtype, copy=False))
    if arr.dtype.kind == "V" or arr.dtype.type.__module__.startswith("ml_dtypes"):
        # bf16/fp8 have no portable .npy spelling: store the bits, def.json says the dtype
        arr = arr.view(np.dtype("u%d" % arr.dtype.itemsize))
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def _safe_file_stem(name, used):
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "const"
    cand, n = stem, 1
    while cand in used:
        cand, n = "%s_%d" % (stem, n), n + 1
    used.add(cand)
    return cand


def _var_entry(tensor, vtype, var_id):
    dt = np_dtype(tensor.dtype)
    shape = [int(d) for d in tensor.shape]
    e = {"type": vtype, "var_id": var_id, "size": int(np.prod(shape, dtype=np.int64)) * dt.itemsize,
         "dtype": dtype_name(tensor.dtype), "shape": shape}
    if getattr(tensor, "arena_offset", None) is not None:
        e["arena_offset"] = int(tensor.arena_offset)     # our own key: its place in the shared scratch arena
    return e


def build_var(module, members):
    """def.json ``var``; adds constant members. Order: inputs, outputs, constants, scratch."""
    by_name = dict(module.tensors)
    var = {}

    def add(name, vtype):
        if name not in by_name:
            raise ValueError("module lists %s %r but has no such tensor" % (vtype, name))
        if name in var:
            raise ValueError("tensor %r is listed twice among the NEFF variables" % name)
        var[name] = _var_entry(by_name[name], vtype, len(var))
        return var[name]

    for n in module.inputs:
        add(n, "input")
    for n in module.outputs:
        add(n, "output")
    used = set()
    for t in module.tensors.values():
        if t.kind == "const" and t.name not in var:
            e = add(t.name, "file")
            if t.data is None:
                raise ValueError("constant tensor %r has no data" % t.name)
            data = np.asarray(t.data)
            if list(data.shape) != e["shape"]:
                raise ValueError("constant %r data shape %s != tensor shape %s" % (t.name, data.shape, e["shape"]))
            e["file_name"] = "%s/%s.npy" % (SUBGRAPH, _safe_file_stem(t.name, used))
            members[e["file_name"]] = _npy_bytes(data, np_dtype(t.dtype))
    for t in module.tensors.values():
        if t.kind == "scratch" and t.name not in var:
            add(t.name, "tmp-buf")
    return var


def build_dma_queues(module, var):
    """def.json ``dma_queue``: each queue the program uses, typed by what it moves."""
    queues = {}
    for inst in module.instructions():
        q = inst.attrs.get("queue")
        if q is None:
            continue
        e = queues.setdefault(str(q), {"engines": set(), "kinds": set()})
        e["engines"].add(str(inst.engine))
        for op in list(inst.srcs) + list(inst.dsts):
            v = var.get(op.target)
            if v is not None:
                e["kinds"].add(v["type"])
    out = {}
    for q, e in sorted(queues.items()):
        kinds = e["kinds"]
        qtype = "in" if kinds == {"input"} else "out" if kinds == {"output"} else "data"
        out[q] = {"type": qtype, "num_queues": 1, "owner": ",".join(sorted(e["engines"])),
                  "queue_instances": 1}
    return out


def build_neff_json(var):
    """The TVM-style host graph: inputs as null nodes feeding one __kelf tvm_op."""
    ins = sorted((v["var_id"], n, v) for n, v in var.items() if v["type"] == "input")
    outs = sorted((v["var_id"], n, v) for n, v in var.items() if v["type"] == "output")
    nodes = [{"op": "null", "name": n, "inputs": []} for _, n, _ in ins]
    nodes.append({"op": "tvm_op", "name": "kelf0", "inputs": [[i, 0, 0] for i in range(len(ins))],
                  "attrs": {"func_name": "__kelf", "kelf": "kelf-a.json", "flatten_data": "0",
                            "num_inputs": str(len(ins)), "num_outputs": str(len(outs)),
                            "output_names": [n for _, n, _ in outs]}})
    entries = [v for _, _, v in ins] + [v for _, _, v in outs]
    return {"nodes": nodes, "arg_nodes": list(range(len(ins))),
            "node_row_ptr": list(range(len(ins) + 1)) + [len(ins) + len(outs)],
            "heads": [[len(ins), j, 0] for j in range(len(outs))],
            "attrs": {"dltype": ["list_str", [v["dtype"] for v in entries]],
                      "shape": ["list_shape", [v["shape"] for v in entries]],
                      "storage_id": ["list_int", list(range(len(entries)))]}}


def build_program_members(module):
    """``{engine: member}`` and the members: one instruction stream per engine
    (``{"name": engine, "instr": [BIR node JSON]}``) and sg00/program.json (the
    module without body and constant data)."""
    from neuronxcc.starfish import birpy

    streams = birpy.split_by_engine(module)
    members, engines = {}, {}
    for eng, nodes in sorted(streams.items()):
        member = "%s/%s.json" % (SUBGRAPH, eng)
        engines[eng] = member
        members[member] = dumps({"name": eng, "instr": birpy.stream_to_json(nodes)})
    members[PROGRAM_JSON] = dumps(birpy.module_to_json(module, body=False, const_data=False))
    return engines, members


def _io_transposes_obj(io_transposes):
    if io_transposes is None:
        return None
    if isinstance(io_transposes, (str, bytes, os.PathLike)):
        with open(io_transposes, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    return io_transposes


def build_members(module, io_transposes=None, custom_op_libs=None):
    """(members, feature_bits) for a module."""
    members = {}
    info = bind_custom_ops(module, custom_op_libs)
    var = build_var(module, members)
    engines, prog = build_program_members(module)
    members.update(prog)
    def_json = {"name": SUBGRAPH, "version": DEF_SCHEMA_VERSION, "var": var,
                "dma_queue": build_dma_queues(module, var), "engines": engines, "program": PROGRAM_JSON}
    ucode_doc = {}
    feature_bits = 0
    staged = customop.writeUCodeLibDefinitions(def_json, ucode_doc, info)
    if staged:
        for member, src in staged:
            with open(src, "rb") as f:
                members[member] = f.read()
        members[customop.UCODE_LIB_MEMBER] = dumps(ucode_doc)
        feature_bits |= NEFF_FEATURE_CUSTOM_OPS
    from neuronxcc.neff.collectives import add_members as _collective_members
    _collective_members(module, def_json, members)
    iot = _io_transposes_obj(io_transposes)
    if iot is not None:
        members[IO_TRANSPOSES_JSON] = dumps(iot)
    members[DEF_JSON] = dumps(def_json)
    members["kelf-a.json"] = dumps({"graphs": [{"definition": DEF_JSON, "name": SUBGRAPH}],
                                    "version": "0.5", "target": "*"})
    members["neff.json"] = dumps(build_neff_json(var))
    return members, feature_bits


def write_neff_members(output, members, name, fast_loading=False, feature_bits=0, deterministic_uuid=False,
                       uuid_bytes=None, lnc_size=1, durable=True):
    """Pack ``members`` and write them atomically at ``output``; returns the path. ``durable``:
    flushed to disk before the rename (a file that is only an intermediate, e.g. the work dir's
    NEFF the driver then publishes durably, need not be)."""
    name = truncate_utf8(name, 255)
    if uuid_bytes is None and deterministic_uuid:
        uuid_bytes = content_uuid(make_tar(members) + (b"raw" if fast_loading else b"gz"), name)
    data = pack_neff(members, name, fast_loading=fast_loading, feature_bits=feature_bits,
                     neff_build_version=truncate_utf8(__version__, 127), uuid_bytes=uuid_bytes, lnc_size=lnc_size)
    atomic_write(output, data, durable)
    return output


def atomic_write(path, data, durable=True):
    """Write ``data`` to a temp file next to ``path`` (flushed to disk when ``durable``) and rename
    it over ``path``."""
    toolshell.atomic_write(path, data, fsync=durable, user_error=False)     # callers word the OSError


def write_neff(output, module, name=None, fast_loading=False, io_transposes=None, custom_op_libs=None,
               deterministic_uuid=False, durable=True):
    """Kelper: write ``module`` as a NEFF at ``output`` (see the module docstring)."""
    if name is None:
        name = getattr(module, "name", None) or os.path.splitext(os.path.basename(os.fspath(output)))[0]
    members, feature_bits = build_members(module, io_transposes=io_transposes, custom_op_libs=custom_op_libs)
    lnc = int((getattr(module, "attrs", None) or {}).get("lnc", 1) or 1)   # penguin/lnc.py: 2 when split
    return write_neff_members(output, members, name, fast_loading=fast_loading, feature_bits=feature_bits,
                              deterministic_uuid=deterministic_uuid, lnc_size=lnc, durable=durable)
