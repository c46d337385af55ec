"""Read a NEFF: the one reader behind neff-info and birsim.

``read_neff(path)`` checks the header and every member (``container``), then
parses the JSON members. The ``Neff`` it returns holds the header fields
(also as attributes: ``neff.pkg_version``, ``neff.name``, ...), the members
(``members``: name -> bytes in archive order), ``def_json``, the variables
(``variables``/``inputs``/``outputs``/``constants`` as ``NeffVar`` in var_id
order), ``io_transposes``, ``ucode_lib``, and, on first use, the BIR module
rebuilt with ``birpy.merge_engine_streams``. Anything malformed is a
``NeffFormatError`` naming what is wrong.
"""
import io
import json
import os
from dataclasses import dataclass, field

import numpy as np

from neuronxcc.errors import CompilerError, NeffFormatError
from neuronxcc.neff.container import unpack_neff
from neuronxcc.neff.header import NEFF_FEATURE_CUSTOM_OPS, NeffHeader

DEF_JSON = "sg00/def.json"


@dataclass
class NeffVar:
    """One def.json ``var`` entry."""

    name: str
    type: str
    var_id: int
    dtype: str
    shape: tuple
    size: int
    file_name: str = None
    extra: dict = field(default_factory=dict, repr=False)


def _json_member(members, name, required=True):
    if name not in members:
        if required:
            raise NeffFormatError("NEFF has no %s member" % name)
        return None
    try:
        return json.loads(members[name].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise NeffFormatError("NEFF member %s is not valid JSON: %s" % (name, e))


def _parse_vars(def_json):
    from neuronxcc.starfish.birpy import dtypes as bir_dtypes

    var = def_json.get("var")
    if not isinstance(var, dict):
        raise NeffFormatError("NEFF def.json has no 'var' object")
    out = []
    for name, e in var.items():
        try:
            v = NeffVar(name=name, type=str(e["type"]), var_id=int(e["var_id"]), dtype=str(e.get("dtype", "")),
                        shape=tuple(int(d) for d in e.get("shape", ())), size=int(e.get("size", 0)),
                        file_name=e.get("file_name"),
                        extra={k: x for k, x in e.items()
                               if k not in ("type", "var_id", "dtype", "shape", "size", "file_name")})
        except (KeyError, TypeError, ValueError, AttributeError) as err:
            raise NeffFormatError("NEFF def.json var %r is malformed: %s" % (name, err))
        try:
            bir_dtypes.get(v.dtype)
        except KeyError:
            raise NeffFormatError("NEFF def.json var %r has an unknown dtype %r" % (name, v.dtype))
        out.append(v)
    out.sort(key=lambda v: v.var_id)
    if [v.var_id for v in out] != list(range(len(out))):
        raise NeffFormatError("NEFF def.json var_id values are not dense 0..%d" % (len(out) - 1))
    return out


class Neff:
    """A read NEFF (see the module docstring)."""

    def __init__(self, header, members, path=None):
        self.path = path
        self.header = header
        self.members = members
        self.def_json = _json_member(members, DEF_JSON)
        if not isinstance(self.def_json, dict):
            raise NeffFormatError("NEFF def.json is not an object")
        self.kelf = _json_member(members, "kelf-a.json")
        self.neff_json = _json_member(members, "neff.json")
        self.variables = _parse_vars(self.def_json)
        for v in self.variables:
            if v.type == "file" and (v.file_name not in members):
                raise NeffFormatError("NEFF constant %s names member %r, which is missing" % (v.name, v.file_name))
        self.io_transposes = _json_member(members, "sg00/io_transposes.json", required=False)
        self.collectives = _json_member(members, "sg00/collectives.json", required=False)   # neff/collectives.py
        self.ucode_lib = self.def_json.get("ucode_lib")
        ucode_doc = _json_member(members, "ucode_lib.json", required=False)
        if ucode_doc is not None and (not isinstance(ucode_doc, dict)
                                      or ucode_doc.get("ucode_lib") != self.ucode_lib):
            raise NeffFormatError("NEFF ucode_lib.json disagrees with def.json's ucode_lib")
        if self.ucode_lib is not None and not (isinstance(self.ucode_lib, list)
                                               and all(isinstance(lib, dict) for lib in self.ucode_lib)):
            raise NeffFormatError("NEFF def.json ucode_lib is not a list of objects")
        for lib in self.ucode_lib or []:
            if lib.get("library") not in members:
                raise NeffFormatError("NEFF ucode_lib names library %r, which is not a member" % lib.get("library"))
        self._module = None

    # header fields as attributes
    def __getattr__(self, name):
        header = self.__dict__.get("header")
        if header is not None and name in NeffHeader.__dataclass_fields__:
            return getattr(header, name)
        raise AttributeError(name)

    @property
    def member_sizes(self):
        """[(name, size)] in archive order."""
        return [(n, len(b)) for n, b in self.members.items()]

    @property
    def inputs(self):
        return [v for v in self.variables if v.type == "input"]

    @property
    def outputs(self):
        return [v for v in self.variables if v.type == "output"]

    @property
    def constants(self):
        return [v for v in self.variables if v.type == "file"]

    @property
    def uses_custom_ops(self):
        return bool(self.header.feature_bits & NEFF_FEATURE_CUSTOM_OPS)

    def constant(self, name):
        """The numpy array of constant ``name`` (bf16/fp8 viewed back from their bits)."""
        v = next((v for v in self.constants if v.name == name), None)
        if v is None:
            raise KeyError(name)
        try:
            arr = np.load(io.BytesIO(self.members[v.file_name]), allow_pickle=False)
        except ValueError as e:
            raise NeffFormatError("NEFF constant %s (%s) is not a readable .npy: %s" % (name, v.file_name, e))
        from neuronxcc.neff.writer import np_dtype

        want = np_dtype(v.dtype)  # a known dtype: _parse_vars checked it
        if arr.dtype != want:
            if arr.dtype.itemsize != want.itemsize:
                raise NeffFormatError("NEFF constant %s holds %s, def.json says %s" % (name, arr.dtype, v.dtype))
            arr = arr.view(want)
        if tuple(arr.shape) != tuple(v.shape):
            raise NeffFormatError("NEFF constant %s has shape %s, def.json says %s" % (name, arr.shape, v.shape))
        return arr

    @property
    def engine_streams(self):
        """{engine: parsed sg00/<Engine>.json}."""
        engines = self.def_json.get("engines", {})
        if not isinstance(engines, dict) or not all(isinstance(v, str) for v in engines.values()):
            raise NeffFormatError("NEFF def.json 'engines' is not an object of member names")
        return {eng: _json_member(self.members, member) for eng, member in engines.items()}

    @property
    def program(self):
        member = self.def_json.get("program")
        return _json_member(self.members, member) if member else None

    @property
    def module(self):
        """The BIR module (birpy.merge_engine_streams over the engine files)."""
        if self._module is None:
            from neuronxcc.starfish import birpy

            program = self.program
            if program is None:
                raise NeffFormatError("NEFF def.json names no program member; cannot rebuild the BIR module")
            streams = {}
            for eng, obj in self.engine_streams.items():
                if not isinstance(obj, dict) or not isinstance(obj.get("instr"), list):
                    raise NeffFormatError("NEFF engine file for %s has no 'instr' list" % eng)
                streams[eng] = obj["instr"]
            try:
                module = birpy.merge_engine_streams(program, streams)
            except CompilerError as e:
                raise NeffFormatError("NEFF BIR streams do not form a module: %s" % e.one_line())
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                raise NeffFormatError("NEFF BIR streams do not form a module: %s: %s" % (type(e).__name__, e))
            for v in self.constants:
                t = _find_tensor(module, v.name)
                if t is not None:
                    t.data = self.constant(v.name)
            self._module = module
        return self._module

    def extract_custom_op_libraries(self, directory):
        """Write the staged custom-op libraries into ``directory``; [paths] in ucode_lib order."""
        paths = []
        for lib in self.ucode_lib or []:
            name = os.path.basename(lib["library"])
            p = os.path.join(directory, name)
            with open(p, "wb") as f:
                f.write(self.members[lib["library"]])
            paths.append(p)
        return paths


def _find_tensor(module, name):
    t = module.tensors
    if isinstance(t, dict):
        return t.get(name)
    return next((x for x in t if x.name == name), None)


def read_neff_bytes(data, path=None, verify_hash=True):
    header, members = unpack_neff(data, verify_hash=verify_hash)
    return Neff(header, members, path=path)


def read_neff(path, verify_hash=True):
    """Read and check the NEFF at ``path``."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise NeffFormatError("Cannot read NEFF %s: %s" % (path, e.strerror or e))
    try:
        return read_neff_bytes(data, path=os.fspath(path), verify_hash=verify_hash)
    except NeffFormatError as e:        # name the file the user gave
        if os.fspath(path) not in e.message:
            e.message = "%s: %s" % (os.fspath(path), e.message)
            e.args = (e.message,)
        raise
