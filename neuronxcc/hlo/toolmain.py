"""Shared shell of the HLO tools' ``main(argv) -> int`` (hlo-opt, hlo-neff-wrapper).

Usage errors and bad input print one ``[NCC_...]`` line on stderr and return
70; a bug prints one ``[INTERNAL_ERROR]`` line (the traceback goes to the
log, never the console); ``--help`` returns 0.
"""
import argparse
import logging
import os
import sys
import tempfile

from neuronxcc.errors import (CompilerError, CompilerInvalidInputException, InputFileError,  # noqa: F401
                              InternalCompilerError)


class ArgParser(argparse.ArgumentParser):
    def error(self, message):
        raise CompilerInvalidInputException("%s: %s" % (self.prog, message))


def run(prog, body, argv, log):
    if not logging.getLogger().handlers:
        # stderr: stdout may carry the tool's output (hlo-opt --output-type text)
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    try:
        return body(argv)
    except CompilerError as e:
        log.debug("%s failed", prog, exc_info=True)
        sys.stderr.write(e.one_line() + "\n")
        return 70
    except SystemExit as e:  # --help
        return e.code if isinstance(e.code, int) else 0
    except MemoryError:
        log.debug("%s failed", prog, exc_info=True)
        sys.stderr.write("[NCC_EOOM001] %s: out of memory\n" % prog)
        return 70
    except Exception as e:  # a bug: one line on the console, the traceback in the log
        log.debug("%s failed", prog, exc_info=True)
        sys.stderr.write(InternalCompilerError("%s: %s: %s" % (prog, type(e).__name__, e)).one_line() + "\n")
        return 70


def write_atomic(path, data):
    """Write bytes to ``path`` through a temp file in the same directory, then rename."""
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    except OSError as e:
        raise InputFileError("cannot write %s: %s" % (path, e.strerror or e)) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise InputFileError("cannot write %s: %s" % (path, e.strerror or e)) from None
