"""walrus's window on BIR: load/save through ``neuronxcc.starfish.birpy``.

Everything walrus needs from BIR goes through here (and ``program.py``), so a
change in the BIR API touches one place.

Loading is reading user input: whatever goes wrong while a file is read,
parsed or turned into a module (missing, unreadable, not JSON, JSON that is
not a well-formed BIR module) is a ``BirFormatError`` (NCC_EBIR001, an
``InputFileError``) naming the file, never a bare Python exception; an output that cannot be written is an
``InvalidArgumentError`` naming it.
"""
import json

from neuronxcc import errors
from neuronxcc.starfish import birpy


def _input_error(path, e):
    if isinstance(e, OSError) and e.strerror:
        why = e.strerror
    elif isinstance(e, (OSError, ValueError)):
        why = str(e)
    else:                      # a module birpy could not make sense of
        why = "malformed BIR JSON: %s: %s" % (type(e).__name__, e)
    return errors.BirFormatError("cannot read BIR file '%s': %s" % (path, why))


def _naming_file(path, e):
    """birpy's own error, made to name the file when it does not already."""
    if path not in e.message:
        e.message = "BIR file '%s': %s" % (path, e.message)
    return e


def load_module(path):
    """The birpy Module in BIR JSON file ``path``."""
    try:
        return birpy.load(path)
    except errors.CompilerError as e:
        raise _naming_file(path, e)
    except Exception as e:
        raise _input_error(path, e) from e


def read_module_json(path):
    """(JSON dict, birpy Module with ids) of BIR JSON file ``path``; the dict is checked to load."""
    try:
        with open(path) as f:
            obj = json.load(f)
        m = birpy.from_json(obj)
        m.ensure_ids()
    except errors.CompilerError as e:
        raise _naming_file(path, e)
    except Exception as e:
        raise _input_error(path, e) from e
    return obj, m


def _output_error(path, e):
    return errors.InvalidArgumentError("cannot write BIR file '%s': %s" % (path, e.strerror or e))


def save_module(module, path):
    """Write ``module`` to ``path`` atomically (nothing half-written on a failure)."""
    from neuronxcc.common.toolshell import atomic_output
    try:
        with atomic_output(path) as tmp:
            birpy.save(module, tmp)
    except errors.InputFileError as e:
        raise errors.InvalidArgumentError("cannot write BIR file '%s': %s" % (path, getattr(e, "reason", e))) from e


def save_module_json(obj, path):
    """Write BIR JSON dict ``obj`` (as ``read_module_json`` returned it, possibly edited) to ``path``
    atomically."""
    from neuronxcc.common.toolshell import atomic_write
    try:
        atomic_write(path, json.dumps(obj, indent=1), user_error=False)
    except OSError as e:
        raise _output_error(path, e) from e
