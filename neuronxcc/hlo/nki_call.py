"""The NKI kernel custom-call: ``custom-call`` with target ``AwsNeuronCustomNativeKernel``
(or ``AwsNeuronNkiKernel``), an NKI kernel placed inside an HLO program by a framework.

What it owns: the format of the kernel this package's ``neuronxcc.nki`` front end puts in
the instruction's ``backend_config`` (encode, decode, check against the instruction), and
the one error a backend_config this compiler cannot read gets.

Format: ``backend_config`` is the base64 of the UTF-8 JSON the NKI tracer writes for a traced
kernel (``neuronxcc.nki._trace.TracedKernel.to_json()``)::

    {"format": "neuronxcc-nki", "version": 1, "func_name": "add_kernel", "grid": [2, 1],
     "inputs": [{"name", "shape", "dtype"}, ...],   # the kernel's HBM parameters = the operands, in order
     "outputs": [{"name", "shape", "dtype"}, ...],  # returned tensors, then mutated parameters = result leaves
     "aliases": {"out": "out"},                     # output tensor -> the input it updates in place
     "returns": "single", "bir": {...}}             # the traced kernel: one BIR module (birpy JSON)

The kernel travels inline (no side file, so nothing like the closed compiler's missing-.klir
error can happen). The BIR is what the tracer emits before walrus: the program's walrus
schedules, synchronises and allocates the kernel together with the rest of the program.
A result leaf that aliases an operand starts as that operand's value, so elements the
kernel does not store keep it.

The closed compiler's configs (a ``klir_binary`` file path, or its legacy serialized IR) are
recognised only to say so, in one ``[NCC_ENKC001]`` line.
"""
import base64
import binascii
import json

import numpy as np

from neuronxcc.errors import NkiCustomCallError, source_location

TARGETS = ("AwsNeuronCustomNativeKernel", "AwsNeuronNkiKernel")
FORMAT = "neuronxcc-nki"
KERNEL_VERSION = 1

_ADVICE = ("; only kernels traced by this package's neuronxcc.nki (nki.jit on jax arrays, or "
           "neuronxcc.nki.FrameworkKernel) can be compiled here")


class NkiKernelCall:
    """One decoded kernel: its BIR module and how the instruction's operands/results bind to it."""

    __slots__ = ("func_name", "grid", "input_names", "output_names", "aliases", "bir_json")

    def __init__(self, func_name, grid, input_names, output_names, aliases, bir_json):
        self.func_name = func_name
        self.grid = tuple(grid)
        self.input_names = list(input_names)
        self.output_names = list(output_names)
        self.aliases = dict(aliases)          # result leaf index -> operand index
        self.bir_json = bir_json

    def module(self):
        """A fresh birpy Module of the kernel (callers may edit it)."""
        from neuronxcc.starfish import birpy
        return birpy.from_json(self.bir_json)


def encode_backend_config(kernel_json):
    """The backend_config string (base64 ASCII) carrying a traced kernel (its ``to_json()`` dict)."""
    raw = json.dumps(kernel_json, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.b64encode(raw).decode("ascii")


def _where(inst):
    s = "custom-call %s" % getattr(inst, "name", "?")
    loc = source_location(getattr(inst, "metadata", None))
    return s + (" at %s" % loc if loc else "")


def _config_text(inst):
    bc = (getattr(inst, "attrs", None) or {}).get("backend_config")
    if bc is None:
        bc = getattr(inst, "backend_config", None)
    if isinstance(bc, (bytes, bytearray)):
        bc = bytes(bc).decode("latin-1")
    return (bc or "").strip()


def decode_backend_config(text, where="custom-call"):
    """NkiKernelCall from a backend_config string; NkiCustomCallError when it is not ours."""
    def fail(why):
        return NkiCustomCallError("Cannot read the NKI kernel of %s (target AwsNeuronCustomNativeKernel): %s%s"
                                  % (where, why, _ADVICE))
    if not text:
        raise fail("its backend_config is empty")
    doc = None
    try:
        raw = base64.b64decode(text, validate=True)
        doc = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        try:
            doc = json.loads(text)          # tolerate an unencoded JSON config
        except ValueError:
            raise fail("its backend_config is not base64-encoded JSON (a kernel serialized by the closed "
                       "neuronx-cc)") from None
    if not isinstance(doc, dict):
        raise fail("its backend_config is JSON but not an object")
    if doc.get("format") != FORMAT:
        if "klir_binary" in doc:
            binary = doc.get("klir_binary")
            path = binary.get("binary") if isinstance(binary, dict) else binary
            raise fail("it names a compiled kernel file %r (%s format of the closed neuronx-cc) instead of "
                       "carrying a kernel this compiler can read" % (path, "klir"))
        name = doc.get("func_name")
        raise fail("it is a kernel configuration of the closed neuronx-cc%s, not one serialized by "
                   "neuronxcc.nki" % (" (function %r)" % name if name else ""))
    ver = doc.get("version")
    if ver != KERNEL_VERSION:
        raise fail("kernel format version %r is not supported (this compiler reads version %d)"
                   % (ver, KERNEL_VERSION))
    try:
        ins = [str(x["name"]) for x in doc["inputs"]]
        outs = [str(x["name"]) for x in doc["outputs"]]
        aliases = {outs.index(str(o)): ins.index(str(i)) for o, i in (doc.get("aliases") or {}).items()}
        bir = doc["bir"]
        grid = [int(g) for g in doc.get("grid") or ()]
    except (KeyError, TypeError, ValueError) as e:
        raise fail("the kernel description is malformed (%s)" % e) from None
    if not isinstance(bir, dict):
        raise fail("the kernel description has no BIR module")
    return NkiKernelCall(str(doc.get("func_name") or "kernel"), grid, ins, outs, aliases, bir)


def kernel_call_of(inst):
    """The decoded kernel of custom-call INST, checked against its operands and result."""
    call = decode_backend_config(_config_text(inst), _where(inst))
    check_binding(call, inst)
    return call


def result_leaves(shape):
    """The array shapes of SHAPE's leaves, depth first (a tuple's elements, tokens skipped)."""
    if getattr(shape, "is_tuple", False) or getattr(shape, "element_type", None) == "tuple":
        out = []
        for s in shape.tuple_shapes:
            out.extend(result_leaves(s))
        return out
    if getattr(shape, "element_type", None) == "token":
        return []
    return [shape]


def check_binding(call, inst):
    """The operands and result leaves of INST must match the kernel's I/O tensors (shape, dtype)."""
    from neuronxcc.errors import BirFormatError
    from neuronxcc.hlo.interp_base import dtype_of
    where = _where(inst)

    def fail(why):
        return NkiCustomCallError("NKI kernel %r of %s does not fit the instruction: %s"
                                  % (call.func_name, where, why))
    try:
        m = call.module()
    except BirFormatError as e:
        raise NkiCustomCallError("Cannot read the NKI kernel of %s: its BIR is malformed: %s" % (where, e)) from None
    operands = list(getattr(inst, "operands", []) or [])
    results = result_leaves(inst.shape)
    if len(operands) != len(call.input_names):
        raise fail("%d operands for a kernel of %d inputs" % (len(operands), len(call.input_names)))
    if len(results) != len(call.output_names):
        raise fail("%d results for a kernel of %d outputs" % (len(results), len(call.output_names)))
    for k, v in call.aliases.items():
        if not (0 <= k < len(results) and 0 <= v < len(operands)):
            raise fail("alias %d -> %d is out of range" % (k, v))
    for what, names, shapes in (("operand", call.input_names, [o.shape for o in operands]),
                                ("result", call.output_names, results)):
        for i, (n, s) in enumerate(zip(names, shapes)):
            t = m.tensors.get(n)
            if t is None:
                raise fail("%s %d is bound to %r, which the kernel does not have" % (what, i, n))
            want = np.dtype(dtype_of(s))
            if tuple(t.shape) != tuple(s.dims) or np.dtype(_np_dtype(t.dtype)) != want:
                raise fail("%s %d is %s%s but the kernel's %r is %s%s"
                           % (what, i, s.element_type, list(s.dims), n, t.dtype, list(t.shape)))
    return m


def _np_dtype(name):
    from neuronxcc.starfish.birpy import dtypes as bdt
    return bdt.np_dtype(name)


def program_module(call):
    """The kernel's BIR module as a program runs it: a fresh copy in which every result that
    aliases an operand is first filled with that operand (one HBM -> HBM DMA ahead of the body),
    so the elements the kernel does not store keep the operand's values."""
    from neuronxcc.starfish import birpy
    m = call.module()
    copies = []
    for k, v in sorted(call.aliases.items()):
        o, i = call.output_names[k], call.input_names[v]
        if o == i:
            continue
        t = m.tensors[o]
        pat = birpy.row_major_pattern(t.shape)
        copies.append(birpy.Instruction("dma_copy", "SP", [birpy.AccessPattern(o, t.dtype, 0, pat)],
                                        [birpy.AccessPattern(i, m.tensors[i].dtype, 0, pat)],
                                        {"queue": "q_nki_alias"}, name="%s.alias_init" % o))
    m.body[:0] = copies
    return m
