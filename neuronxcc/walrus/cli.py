"""Command-line plumbing shared by the walrus tools.

Owns: the argument parser every walrus tool uses (``ToolParser``: a usage
error is an ``InvalidArgumentError`` naming the tool, exit 70 like every
other bad input), ``--target`` lookup, and ``run_main``, the wrapper that
turns whatever a tool's body raises into exactly one ``[NCC_...]`` line on
stderr and exit 70.

Invariant: every line a tool prints for an error starts with its code and
then the tool's own name (``[NCC_EARG002] full_unroll: ...``), never another
tool's; no traceback reaches the console.
"""
import argparse
import sys

from neuronxcc import errors


class ToolParser(argparse.ArgumentParser):
    """argparse, but a usage error raises InvalidArgumentError prefixed with ``prog``."""

    def error(self, message):
        raise errors.InvalidArgumentError("%s: %s" % (self.prog, message))


def get_target(name, prog):
    """hwm target model for ``--target name``; unknown names are bad input of tool ``prog``."""
    from neuronxcc.hwm import get_target as _get, known_targets
    try:
        return _get(name)
    except KeyError:
        raise errors.InvalidArgumentError(
            "%s: unknown --target '%s' (known: %s)" % (prog, name, ", ".join(known_targets()))) from None


def named(err, prog):
    """``err`` with its message prefixed by ``prog:`` (once)."""
    if not err.message.startswith(prog + ":"):
        err.message = "%s: %s" % (prog, err.message)
    return err


def internal(exc, prog):
    """A non-compiler exception (a bug) as the InternalCompilerError the console shows."""
    return errors.InternalCompilerError("%s: %s: %s" % (prog, type(exc).__name__, exc))


def run_main(prog, body, argv):
    """Run ``body(argv) -> status`` as tool ``prog``: errors -> one stderr line, exit 70."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return body(argv)
    except errors.CompilerError as e:
        sys.stderr.write(named(e, prog).one_line() + "\n")
        return 70
    except Exception as e:  # a bug: one line, no traceback on the console
        sys.stderr.write(internal(e, prog).one_line() + "\n")
        return 70
