"""Custom ops: the per-module library/FunctionId registry, ucode_lib packaging,
and the ctypes binding of the builtin GpSimd CPU libraries.

What it owns (names as in the original's BIR/packager, see the custom-op seed):

* ``ModuleArtifactInfo`` -- the module's custom-op library table, keyed by
  library file name. ``addCustomOpLibFile`` (6 arguments) records a library
  and is idempotent for the same version strings, a hard ``CustomOpError`` for
  different ones. ``allocateCustomOpFunctionId`` hands out dense ids 0, 1, 2,
  ... per module and refuses the 255th unique function (the id is one byte and
  0xFF is reserved). ``addCustomOpFunction`` binds a function name to an id on
  a registered library; the id is stored as one byte.
* ``writeUCodeLibDefinitions`` -- serialises the table into def.json's
  ``ucode_lib`` and the standalone ``ucode_lib.json`` (schema below, opcode
  always 133) and names the library files to stage as NEFF members. With no
  library registered it writes nothing at all.
* ``CustomOpLibrary`` -- one builtin library loaded through ctypes; its version
  strings, cpu id and cpu count are what the library itself reports.
  ``register_builtin_custom_op_libs`` records staged libraries on a registry
  from those reports. ``sort_rows`` / ``topk_rows`` run a kernel on every CPU's
  library so that all rows are covered (what birsim does for a custom op).

ucode_lib.json::

    {"ucode_lib": [{"library": str, "ulib_to_ucode_version": str,
                    "ulib_to_isa_version": str, "is_builtin": bool,
                    "cpu_id": int, "total_cpus": int,
                    "functions": [{"name": str, "opcode": 133, "sub_opcode": int}]}]}
"""
import ctypes
import os

import numpy as np

from neuronxcc.errors import CustomOpError
from neuronxcc.neff.header import NEFF_FEATURE_CUSTOM_OPS  # noqa: F401  (re-exported)
from neuronxcc.starfish.birpy.opcodes import CUSTOM_OP_OPCODE  # 133 (0x85), from the one opcode table

MAX_CUSTOM_OP_FUNCTIONS = 254          # ids 0..253; one byte, 0xFF reserved
UCODE_LIB_MEMBER = "ucode_lib.json"

BUILTIN_LIB_PREFIX = "libbuiltincustomop_cpu"
NUM_BUILTIN_CPUS = 8
# The eight builtin library file names, in cpu order (what the Frontend staging
# loop joins onto findCustomOpDataDir() and checks with is_file()).
builtin_libnames = tuple("%s%d.so" % (BUILTIN_LIB_PREFIX, i) for i in range(NUM_BUILTIN_CPUS))
# The builtin kernels' function names (ucode_lib "functions"[].name); the C
# symbol of function F is ``ncc_F``.
builtin_customop_names = ("sort_f32", "topk_f32")


class CustomOpLibInfo:
    """One registered library: versions, identity bytes, functions name -> id byte."""

    __slots__ = ("file_name", "ulib_to_ucode_version", "ulib_to_isa_version", "is_builtin",
                 "cpu_id", "total_cpus", "functions", "source_path")

    def __init__(self, file_name, ulib_to_ucode_version, ulib_to_isa_version, is_builtin,
                 cpu_id, total_cpus):
        self.file_name = file_name
        self.ulib_to_ucode_version = ulib_to_ucode_version
        self.ulib_to_isa_version = ulib_to_isa_version
        self.is_builtin = bool(is_builtin)
        self.cpu_id = int(cpu_id) & 0xFF
        self.total_cpus = int(total_cpus) & 0xFF
        self.functions = {}          # name -> FunctionId byte, in binding order
        self.source_path = None      # where the staged .so lives on disk (for packaging)

    def to_json(self):
        """libBIR's form: functions as an object {name: id}."""
        return {"file_name": self.file_name,
                "ulib_to_ucode_version": self.ulib_to_ucode_version,
                "ulib_to_isa_version": self.ulib_to_isa_version,
                "is_builtin": self.is_builtin, "cpu_id": self.cpu_id, "total_cpus": self.total_cpus,
                "functions": dict(self.functions), "source_path": self.source_path}


class ModuleArtifactInfo:
    """The module's custom-op registry (see the module docstring)."""

    def __init__(self):
        self.customOpLibs = {}           # file name -> CustomOpLibInfo, registration order
        self.nextCustomOpFnId = 0

    # -- the three registry entry points --------------------------------
    def addCustomOpLibFile(self, file_name, ulib_to_ucode_version, ulib_to_isa_version,
                           is_builtin, cpu_id, total_cpus):
        file_name = str(file_name)
        ucode, isa = str(ulib_to_ucode_version), str(ulib_to_isa_version)
        old = self.customOpLibs.get(file_name)
        if old is not None:
            if old.ulib_to_ucode_version != ucode or old.ulib_to_isa_version != isa:
                raise CustomOpError(
                    "Custom op library %s registered with ulib_to_ucode_version %r, ulib_to_isa_version %r "
                    "and again with %r, %r; one library cannot have two versions"
                    % (file_name, old.ulib_to_ucode_version, old.ulib_to_isa_version, ucode, isa),
                    code="NCC_ECOP002")
            return old
        info = CustomOpLibInfo(file_name, ucode, isa, is_builtin, cpu_id, total_cpus)
        self.customOpLibs[file_name] = info
        return info

    def allocateCustomOpFunctionId(self):
        fid = self.nextCustomOpFnId
        if fid >= MAX_CUSTOM_OP_FUNCTIONS:
            raise CustomOpError("Number of unique custom op functions cannot exceed %d" % MAX_CUSTOM_OP_FUNCTIONS,
                                code="NCC_ECOP003")
        self.nextCustomOpFnId = fid + 1
        return fid

    def addCustomOpFunction(self, lib_name, fn_name, function_id):
        lib = self.customOpLibs.get(str(lib_name))
        if lib is None:
            raise CustomOpError("Custom op function %s bound to library %s, which is not registered"
                                % (fn_name, lib_name), code="NCC_ECOP004")
        lib.functions.setdefault(str(fn_name), int(function_id) & 0xFF)

    # -- conveniences ------------------------------------------------------
    def setCustomOpLibSource(self, file_name, path):
        """Where the registered library's bytes are (staged into the NEFF)."""
        self.customOpLibs[str(file_name)].source_path = os.fspath(path)

    def functionId(self, fn_name):
        """The id bound to ``fn_name`` (on any library), or None."""
        for lib in self.customOpLibs.values():
            if fn_name in lib.functions:
                return lib.functions[fn_name]
        return None

    def bindFunction(self, fn_name):
        """Bind ``fn_name`` on every registered library under one id; returns the id.

        What codegen does per custom-op call site: a function seen before
        keeps its id, a new one gets the next id.
        """
        fid = self.functionId(fn_name)
        if fid is None:
            fid = self.allocateCustomOpFunctionId()
        for lib in self.customOpLibs.values():
            self.addCustomOpFunction(lib.file_name, fn_name, fid)
        return fid

    def __bool__(self):
        return bool(self.customOpLibs)

    def to_json(self):
        return {"custom_op_libs": [lib.to_json() for lib in self.customOpLibs.values()],
                "next_custom_op_fn_id": self.nextCustomOpFnId}

    @classmethod
    def from_json(cls, obj):
        self = cls()
        for d in obj.get("custom_op_libs", []):
            lib = self.addCustomOpLibFile(d["file_name"], d["ulib_to_ucode_version"], d["ulib_to_isa_version"],
                                          d["is_builtin"], d["cpu_id"], d["total_cpus"])
            for name, fid in d.get("functions", {}).items():
                self.addCustomOpFunction(lib.file_name, name, fid)
            lib.source_path = d.get("source_path")
        self.nextCustomOpFnId = int(obj.get("next_custom_op_fn_id", 0))
        return self


def ucode_lib_entries(info):
    """The ``ucode_lib`` array for a registry (the packager's shape)."""
    arr = []
    for lib in info.customOpLibs.values():
        arr.append({
            "library": lib.file_name,
            "ulib_to_ucode_version": lib.ulib_to_ucode_version,
            "ulib_to_isa_version": lib.ulib_to_isa_version,
            "is_builtin": lib.is_builtin,
            "cpu_id": lib.cpu_id,
            "total_cpus": lib.total_cpus,
            "functions": [{"name": name, "opcode": CUSTOM_OP_OPCODE, "sub_opcode": fid}
                          for name, fid in lib.functions.items()],
        })
    return arr


def writeUCodeLibDefinitions(def_json, ucode_lib_doc, info):
    """Fill def.json's ``ucode_lib`` and the standalone ucode_lib.json document.

    Returns the libraries to stage as NEFF members, ``[(member_name,
    source_path)]``; with no registered library it changes nothing and
    returns ``[]``.
    """
    if info is None or not info.customOpLibs:
        return []
    arr = ucode_lib_entries(info)
    def_json["ucode_lib"] = arr
    ucode_lib_doc["ucode_lib"] = [dict(e, functions=[dict(f) for f in e["functions"]]) for e in arr]
    staged = []
    for lib in info.customOpLibs.values():
        if not lib.source_path or not os.path.isfile(lib.source_path):
            raise CustomOpError("Custom op library %s has no staged file to package (%s)"
                                % (lib.file_name, lib.source_path), code="NCC_ECOP005")
        staged.append((lib.file_name, lib.source_path))
    return staged


# -- the builtin libraries through ctypes ------------------------------------

class CustomOpLibrary:
    """A builtin custom-op library loaded with ctypes (ABI: csrc/custom_op/ncc_customop.h)."""

    def __init__(self, path):
        self.path = os.fspath(path)
        try:
            self._lib = ctypes.CDLL(os.path.abspath(self.path))
        except OSError as e:
            raise CustomOpError("Cannot load custom op library %s: %s" % (self.path, e), code="NCC_ECOP006")
        lib = self._lib
        try:
            lib.ncc_customop_ucode_version.restype = ctypes.c_char_p
            lib.ncc_customop_isa_version.restype = ctypes.c_char_p
            lib.ncc_customop_cpu_id.restype = ctypes.c_int
            lib.ncc_customop_total_cpus.restype = ctypes.c_int
            fp, i64, i32 = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32
            lib.ncc_sort_f32.argtypes = [fp, i64, i64, fp, fp, i32]
            lib.ncc_sort_f32.restype = ctypes.c_int
            lib.ncc_topk_f32.argtypes = [fp, i64, i64, i64, fp, fp]
            lib.ncc_topk_f32.restype = ctypes.c_int
        except AttributeError as e:
            raise CustomOpError("%s is not a custom op library of this ABI: %s" % (self.path, e),
                                code="NCC_ECOP006")
        self.ucode_version = lib.ncc_customop_ucode_version().decode("utf-8")
        self.isa_version = lib.ncc_customop_isa_version().decode("utf-8")
        self.cpu_id = int(lib.ncc_customop_cpu_id())
        self.total_cpus = int(lib.ncc_customop_total_cpus())

    @property
    def file_name(self):
        return os.path.basename(self.path)

    def has_function(self, fn_name):
        return hasattr(self._lib, "ncc_" + fn_name)

    def sort_f32(self, src, dst_vals, dst_idx, descending=False):
        """Sort this CPU's rows of a C-contiguous float32 [rows, n] into the dst buffers."""
        rows, n = src.shape
        return self._lib.ncc_sort_f32(src.ctypes.data, rows, n, dst_vals.ctypes.data, dst_idx.ctypes.data,
                                      1 if descending else 0)

    def topk_f32(self, src, k, dst_vals, dst_idx):
        """Top-k of this CPU's rows of a C-contiguous float32 [rows, n] into [rows, k] buffers."""
        rows, n = src.shape
        return self._lib.ncc_topk_f32(src.ctypes.data, rows, n, int(k), dst_vals.ctypes.data,
                                      dst_idx.ctypes.data)


_PRELOADED = {}


def preload_libraries(paths):
    """Load the libraries at ``paths`` into this process once (kept loaded for its lifetime).

    The first load of the eight builtin libraries in a process costs several milliseconds of the
    dynamic loader's work; a later CustomOpLibrary of a loaded path is a reference count. The
    compile driver calls this when the program has custom ops, before it forks walrus_driver, so
    the bir_sim check's simulator (in the forked tool) and Kelper (in the driver) both find them
    loaded instead of each paying the first load. Unloadable paths are left for CustomOpLibrary
    to report."""
    for p in paths:
        key = os.path.abspath(os.fspath(p))
        if key not in _PRELOADED:
            try:
                _PRELOADED[key] = ctypes.CDLL(key)
            except OSError:
                pass


def register_builtin_custom_op_libs(info, paths):
    """Record staged builtin libraries on ``info`` with the versions they report.

    ``paths`` are what the Frontend staging loop found (``findCustomOpDataDir()
    / builtin_libnames[i]`` that ``is_file()``). Returns the loaded libraries.
    """
    libs = []
    for p in paths:
        lib = CustomOpLibrary(p)
        info.addCustomOpLibFile(lib.file_name, lib.ucode_version, lib.isa_version, True,
                                lib.cpu_id, lib.total_cpus)
        info.setCustomOpLibSource(lib.file_name, p)
        libs.append(lib)
    return libs


def _check_cover(libraries):
    if not libraries:
        raise CustomOpError("No custom op library to run on", code="NCC_ECOP007")
    total = libraries[0].total_cpus
    ids = sorted(lib.cpu_id for lib in libraries)
    if ids != list(range(total)) or any(lib.total_cpus != total for lib in libraries):
        raise CustomOpError("Custom op libraries cover cpus %s of %d; every cpu needs its library"
                            % (ids, total), code="NCC_ECOP007")


def _as_rows(src):
    src = np.ascontiguousarray(src, dtype=np.float32)
    if src.ndim == 0:
        raise ValueError("custom op input must have at least one dimension")
    nrows = int(np.prod(src.shape[:-1], dtype=np.int64))
    return src.reshape(nrows, src.shape[-1]), src.shape


def sort_rows(libraries, src, descending=False):
    """Sort the last axis of ``src`` with every CPU's library; (values, int32 indices)."""
    _check_cover(libraries)
    rows, shape = _as_rows(src)
    vals = np.empty(rows.shape, np.float32)
    idx = np.empty(rows.shape, np.int32)
    for lib in libraries:
        rc = lib.sort_f32(rows, vals, idx, descending)
        if rc:
            raise CustomOpError("sort_f32 failed on cpu %d with code %d" % (lib.cpu_id, rc), code="NCC_ECOP008")
    return vals.reshape(shape), idx.reshape(shape)


def topk_rows(libraries, src, k):
    """Top-k of the last axis of ``src`` with every CPU's library; (values, int32 indices)."""
    _check_cover(libraries)
    rows, shape = _as_rows(src)
    out_shape = tuple(shape[:-1]) + (int(k),)
    vals = np.empty((rows.shape[0], int(k)), np.float32)
    idx = np.empty((rows.shape[0], int(k)), np.int32)
    for lib in libraries:
        rc = lib.topk_f32(rows, k, vals, idx)
        if rc:
            raise CustomOpError("topk_f32 failed on cpu %d with code %d" % (lib.cpu_id, rc), code="NCC_ECOP008")
    return vals.reshape(out_shape), idx.reshape(out_shape)


def builtin_library_paths(data_dir):
    """The builtin libraries present in ``data_dir``, in cpu order (is_file check)."""
    import pathlib

    return [str(pathlib.Path(data_dir) / n) for n in builtin_libnames if (pathlib.Path(data_dir) / n).is_file()]


def custom_op_data_dir():
    """Where the package's builtin custom-op libraries live: ``neuronxcc/data/custom_op`` through
    ``importlib.resources``, as a real directory. Pure path resolution: no existence check."""
    import importlib.resources

    data_path = importlib.resources.files("neuronxcc").joinpath("data").joinpath("custom_op")
    with importlib.resources.as_file(data_path) as d:
        return os.path.abspath(str(d))


def stage_builtin_libraries(data_dir=None):
    """Paths of the builtin libraries present in ``data_dir`` (default: the package's), in cpu
    order; "Custom op data directory not found" when the directory is missing."""
    data_dir = custom_op_data_dir() if data_dir is None else data_dir
    if not os.path.isdir(data_dir):
        import logging
        logging.getLogger("neuronxcc.driver.jobs.Frontend").debug("%s does not exist", data_dir)
        raise CustomOpError("Custom op data directory not found")
    return builtin_library_paths(data_dir)
