"""walrus's window on BIR: load/save through ``neuronxcc.starfish.birpy``.

Everything walrus needs from BIR goes through here (and ``program.py``), so a
change in the BIR API touches one place.
"""
from neuronxcc import errors


def birpy():
    try:
        from neuronxcc.starfish import birpy as _b
    except ImportError as e:
        raise errors.NotBuiltYetError("walrus needs neuronxcc.starfish.birpy, which is not built yet (%s)" % e) from e
    return _b


def load_module(path):
    b = birpy()
    try:
        return b.load(path)
    except errors.CompilerError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise errors.InputFileError("cannot read BIR file '%s': %s" % (path, e)) from e


def save_module(module, path):
    birpy().save(module, path)
