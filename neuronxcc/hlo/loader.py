"""``load_module``: one entry point for every HLO form a caller hands us.

The format is found from the content, never from the file name: a directory
is a torch-neuronx model directory (metadata.json + graph.hlo + weights), a
file or bytes whose first non-blank, non-comment text is ``HloModule`` is HLO
text, and so is printable text that opens like a computation (``ENTRY``, or a
computation name followed by ``{`` or its signature's ``(``): XLA's parser
accepts a module without its header line, as most of XLA's test files are. A
JSON
object with ``model_files`` is a model directory's metadata.json, anything
else is a serialized HloModuleProto (or an HloProto wrapping one). Failures
are InputFileError subclasses (HloParseError) or HloVerifyError, never
another exception type.

``share_parsed(data, module)``: a process that has parsed the content ``data`` (the compile's
driver, the staged model.hlo_module.pb) lets ``load_module`` of a file whose bytes are exactly
``data`` return that module instead of parsing them again: the tools it forks next (hlo2penguin,
xla_infergoldens) inherit the parsed module, so a compile parses its HLO in one process, not in
three. The file is still read and compared byte for byte; anything else is parsed as before.
"""
import os
import re

from neuronxcc.errors import CompilerError, HloParseError, InputFileError

_TEXT_START = re.compile(rb"^(?:\xef\xbb\xbf)?\s*(?://[^\n]*\n\s*|/\*.*?\*/\s*)*HloModule\b", re.S)
# A module without its header: the first computation, `ENTRY ...`, `name {` or `%name (p: f32[]) -> ... {`.
_HEADERLESS_START = re.compile(rb"^(?:\xef\xbb\xbf)?\s*(?://[^\n]*(?:\n|$)\s*|/\*.*?\*/\s*)*"
                               rb"(?:ENTRY\s|%?[A-Za-z_][\w.\-]*\s*[({])", re.S)
_CONTROL_BYTES = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def is_hlo_text(head):
    """True when the first bytes of an input are HLO text (with or without the HloModule line).

    A serialized proto starts with a field tag and a length and carries control bytes, which
    text never does, so printable text that opens like a computation is text."""
    head = bytes(head[:4096])
    if _TEXT_START.match(head):
        return True
    if not _HEADERLESS_START.match(head) or _CONTROL_BYTES.search(head):
        return False
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 3:      # only a character cut by the 4096-byte window is allowed
            return False
    return True


def detect_format(data):
    """'text', 'metadata-json' or 'proto' for the bytes of an HLO input."""
    head = bytes(data[:4096])
    if is_hlo_text(head):
        return "text"
    stripped = head.lstrip()
    if stripped.startswith(b"{") and b"model_files" in head:
        return "metadata-json"
    return "proto"


_SHARED = [None]     # (content bytes, module parsed from them with verify=True), see share_parsed


def share_parsed(data, module):
    """From now on ``load_module`` of a file holding exactly ``data`` returns ``module`` (which must
    be what parsing ``data`` with verification gives: ``module_from_proto_bytes(data)``). The caller
    and what reads the module must not change it; the compile's driver shares it only with the tools
    it forks (each works on its own copy) and withdraws it after the pipeline. ``share_parsed(None,
    None)`` withdraws it."""
    _SHARED[0] = None if data is None or module is None else (bytes(data), module)


def read_input_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise InputFileError("input file %s does not exist" % path) from None
    except IsADirectoryError:
        raise InputFileError("input %s is a directory" % path) from None
    except OSError as e:
        raise InputFileError("cannot read input file %s: %s" % (path, e.strerror or e)) from None


def load_module(source, verify=True):
    """HloModule from a path (file or model directory) or from bytes/str content."""
    try:
        return _load(source, verify)
    except CompilerError:
        raise
    except RecursionError as e:
        raise HloParseError("HLO input nested too deeply") from e
    except MemoryError as e:
        from neuronxcc.errors import TensorTooLargeError
        raise TensorTooLargeError("HLO input too large to load into memory") from e
    except Exception as e:  # a reader bug must still reach the user as one clear line
        err = HloParseError("cannot read the HLO input (internal reader error %s: %s)"
                            % (type(e).__name__, str(e).split("\n")[0]))
        err.unexpected = True
        raise err from e


def _load(source, verify):
    if isinstance(source, str) and is_hlo_text(source[:4096].encode("utf-8", "replace")):
        from neuronxcc.hlo.text_parser import parse_hlo_text
        return parse_hlo_text(source, verify=verify)
    if isinstance(source, (bytes, bytearray, memoryview)):
        return _load_bytes(bytes(source), verify=verify)
    path = os.fspath(source)
    if os.path.isdir(path):
        return load_model_dir(path, verify=verify)
    data = read_input_bytes(path)
    shared = _SHARED[0]
    if verify and shared is not None and len(shared[0]) == len(data) and shared[0] == data:
        return shared[1]
    if detect_format(data) == "metadata-json":
        return load_model_dir(os.path.dirname(os.path.abspath(path)), verify=verify)
    return _load_bytes(data, verify=verify, origin=path)


def load_model_dir(path, verify=True):
    """HloModule of a torch-neuronx model directory, its weights attached (``modeldir``)."""
    from neuronxcc.hlo import modeldir
    graph, meta = modeldir.model_file(path)
    return modeldir.attach_weights(_load(graph, verify), path, meta)


def load_module_bytes(data, verify=True):
    """HloModule from the content of an HLO file (proto or text bytes)."""
    return load_module(bytes(data), verify=verify)


def _load_bytes(data, verify=True, origin=None):
    if not data:
        raise HloParseError("the HLO input%s is empty" % (" " + origin if origin else ""))
    fmt = detect_format(data)
    if fmt == "text":
        from neuronxcc.hlo.text_parser import parse_hlo_text
        try:
            text = data.decode("utf-8-sig")  # a UTF-8 byte-order mark is dropped
        except UnicodeDecodeError as e:
            raise HloParseError("HLO text is not valid UTF-8 at byte %d" % e.start) from None
        return parse_hlo_text(text, verify=verify)
    if fmt == "metadata-json":
        raise InputFileError("metadata.json content given without its model directory")
    from neuronxcc.hlo.proto_io import module_from_proto_bytes
    return module_from_proto_bytes(data, verify=verify)
