"""The shell every tool's ``main(argv) -> int`` runs in: parser, exit contract, atomic writes.

* ``ToolParser``: argparse whose usage errors (unknown flag, missing or bad value) raise
  ``InvalidArgumentError("<prog>: ...")`` instead of printing usage and exiting 2.
* ``run_main(prog, body, argv, log)``: runs ``body(argv) -> status``. A ``CompilerError`` is one
  ``[NCC_...] <prog>: ...`` line on stderr and exit 70; a bug is one ``[INTERNAL_ERROR]`` line and
  exit 70; out of memory is ``[NCC_EOOM001]``; ``--help`` exits 0; a closed stdout exits 141
  quietly. The traceback always goes to ``log`` (debug level: the tool's log file) or to the
  ``report`` hook (the ``neuronx-cc`` driver's log file), never to the console.
* ``atomic_write(path, data)`` / ``atomic_output(path)``: write through a temp file in the same
  directory and rename, so a failed tool leaves no half-written output.
* ``require_file(path, what)``: the InputFileError for a missing or empty input, naming it.
* ``load_npz(path, what)``: the arrays of an .npz; an empty, truncated or non-npz file is one
  InputFileError naming it.
* ``exit_now(status)``: end a command-line process with ``status`` after what the interpreter's own
  exit does for the program (threads joined, atexit hooks, stdio flushed), without tearing down
  every module and object one by one; ``exit_script(status, names)``: that when the caller's caller
  is the process's own top level (a console script), else ``sys.exit(status)`` as before.

Invariant: every line a tool prints for an error starts with its code and then the tool's own
name, never another tool's; no traceback reaches the console.
"""
import argparse
import contextlib
import logging
import os
import signal
import sys

from neuronxcc import errors

__all__ = ["ToolParser", "run_main", "named", "internal", "atomic_write", "atomic_output", "require_file",
           "console_logging", "load_npz", "exit_now", "exit_script"]

_log = logging.getLogger("neuronxcc.tools")


def _columns():
    """The terminal width as ``shutil.get_terminal_size`` finds it ($COLUMNS, then stdout's
    terminal, else 80), without importing shutil (and bz2, lzma, fnmatch behind it), which
    argparse's help formatter does on every ``add_argument`` of every tool's start-up."""
    try:
        c = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        c = 0
    if c <= 0:
        try:
            c = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            c = 0
    return c if c > 0 else 80


class _HelpFormatter(argparse.HelpFormatter):
    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class ToolParser(argparse.ArgumentParser):
    """argparse, but a usage error raises InvalidArgumentError prefixed with ``prog``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise errors.InvalidArgumentError("%s: %s" % (self.prog, message))


def named(err, prog):
    """``err`` with its message prefixed by ``prog:`` (once)."""
    if not err.message.startswith(prog + ":"):
        err.message = "%s: %s" % (prog, err.message)
        err.args = (err.message,)
    return err


def internal(exc, prog=None):
    """A non-compiler exception (a bug) as the InternalCompilerError the console shows (named by
    ``prog`` when given)."""
    err = errors.InternalCompilerError("%s%s: %s" % (prog + ": " if prog else "", type(exc).__name__, exc))
    err.__cause__ = exc
    return err


def run_main(prog, body, argv=None, log=None, prefix=True, report=None, name_internal=True):
    """Run ``body(argv) -> status`` as tool ``prog``: errors -> one stderr line, exit 70.

    ``prefix``: a compiler error's message gets ``prog:`` in front (once); the HLO tools, whose
    lines the driver relays as its own, and the driver itself pass False. ``name_internal``: an
    internal error's line names ``prog`` too (the driver's does not). ``report(line, exc)``, when
    given, is called with the console line and the exception before the line is printed (the
    driver logs both, with the traceback, to its log file); without it the traceback goes to
    ``log`` at debug level. A closed stdout (``tool | head``) is not an error: quiet, exit 141
    (a SIGPIPE death's status). ``--help`` / ``sys.exit(n)`` return their status."""
    log = log or _log
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        status = body(argv)
        return 0 if status is None else status
    except SystemExit as e:  # --help, --version
        return 0 if e.code is None else e.code if isinstance(e.code, int) else 1
    except BrokenPipeError:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 128 + signal.SIGPIPE
    except errors.CompilerError as e:
        return _fail(prog, (named(e, prog) if prefix else e), e, log, report)
    except MemoryError as e:
        return _fail(prog, errors.TensorTooLargeError("%s: out of memory" % prog), e, log, report)
    except Exception as e:  # a bug: one line on the console, the traceback in the log
        return _fail(prog, internal(e, prog if name_internal else None), e, log, report)


def _fail(prog, err, exc, log, report):
    line = err.one_line()
    if report is not None:
        report(line, exc)
    else:
        log.debug("%s failed", prog, exc_info=(type(exc), exc, exc.__traceback__))
    sys.stdout.flush()
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return 70


@contextlib.contextmanager
def atomic_output(path, suffix=".tmp", user_error=True):
    """``with atomic_output(path) as tmp:`` write the file ``tmp`` (in the same directory); it
    replaces ``path`` only when the block succeeds, else it is removed. The file gets the mode a
    plain ``open`` would give it (0666 less the umask). An OSError is an InputFileError naming
    ``path`` (``user_error=False``: the OSError itself, for callers that word it themselves)."""
    path = os.path.abspath(os.fspath(path))
    try:
        tmp = _temp_beside(path, suffix)
    except OSError as e:
        if not user_error:
            raise
        raise _write_error(path, e) from None
    done = False
    try:
        yield tmp
        if not os.path.exists(tmp):     # the block wrote nothing: publish an empty file, as before
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        done = True
    except OSError as e:
        if not user_error:
            raise
        raise _write_error(path, e) from None
    finally:
        if not done and os.path.exists(tmp):
            os.unlink(tmp)


def _temp_beside(path, suffix):
    """A free temporary name ``.<name>.<pid>.<token>.<n><suffix>`` in ``path``'s directory (not tempfile,
    whose imports -- shutil, random, bz2, lzma -- cost every tool's start-up).

    The name is checked free by creating the file exclusively, and the file is removed again before
    the caller writes it: the caller's ``open(tmp, "wb")`` then creates a new file instead of
    truncating an existing empty one. On ext4 a write after a truncate to zero is flushed to disk
    when the file is closed (its "auto_da_alloc" replace-by-truncate heuristic), and unlinking the
    flushed file later waits for its blocks: 4-8 ms per work-dir file when a compile removes its
    work directory, and a disk write of every intermediate file. The name carries this process's
    id and a random token, so no other process picks it in between (process ids repeat across
    containers and hosts writing to one shared directory). The directory being unwritable is the
    OSError of the exclusive create."""
    d, base = os.path.split(path)
    token = os.urandom(4).hex()
    for n in range(1000):
        tmp = os.path.join(d, ".%s.%d.%s.%d%s" % (base, os.getpid(), token, n, suffix))
        try:
            fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        os.close(fd)
        os.unlink(tmp)
        return tmp
    raise FileExistsError("no free temporary name beside %s" % path)


def _write_error(path, e):
    err = errors.InputFileError("cannot write %s: %s" % (path, e.strerror or e))
    err.reason = e.strerror or str(e)
    return err


def atomic_write(path, data, fsync=False, user_error=True):
    """Write ``data`` (bytes or str) to ``path`` through a temp file in the same directory, then
    rename (``fsync``: flushed to disk before the rename; ``user_error`` as in atomic_output)."""
    with atomic_output(path, user_error=user_error) as tmp:
        with open(tmp, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())


def console_logging(stream=None):
    """Log INFO and up to ``stream`` (default stderr: stdout may carry the tool's output) unless
    logging is already configured (a tool run in-process by the driver logs to its log)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=stream or sys.stderr)


def require_file(path, what="input"):
    """InputFileError naming ``what`` and ``path`` when it is missing, not a file, or empty."""
    if not os.path.exists(path):
        raise errors.InputFileError("%s %s does not exist" % (what, path))
    if not os.path.isfile(path):
        raise errors.InputFileError("%s %s is not a file" % (what, path))
    if os.path.getsize(path) == 0:
        raise errors.InputFileError("%s %s is empty" % (what, path))
    return path


def load_npz(path, what="inputs file"):
    """{name: array} of the .npz at ``path``; InputFileError naming ``what`` and ``path`` when it is
    missing, empty, truncated, a single .npy array, or not an .npz archive at all."""
    import zipfile

    import numpy as np      # not at module level: the driver imports this shell and must start cheaply

    require_file(path, what)
    try:
        z = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise errors.InputFileError("%s %s is not a readable .npz archive (%s)" % (what, path, _why(e))) from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise errors.InputFileError("%s %s holds one .npy array, not an .npz archive of named arrays"
                                    % (what, path))
    try:
        with z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise errors.InputFileError("%s %s is truncated or corrupt (%s)" % (what, path, _why(e))) from None


def _why(e):
    return str(e).split("\n")[0] or type(e).__name__


def exit_now(status):
    """End this process with exit status ``status`` (an int, or None for 0) the way ``sys.exit``
    does at the top of a program, minus the interpreter's teardown of every module and object.

    What a normal exit does that a program can observe is done here, in the interpreter's order:
    non-daemon threads are joined (``threading._shutdown``), the atexit hooks run (logging's
    ``shutdown`` closes and flushes the log files, ``weakref.finalize`` hooks such as temporary
    directories' cleanup), stdout and stderr are flushed; then ``os._exit``. The teardown skipped
    is the deallocation of the whole heap (tens of milliseconds after a compile, every time), which
    the OS does at once. A status that is not an int (``sys.exit("message")``) takes the normal
    path. Only for a process's own top level (console scripts, launchers): never call it where
    a caller may continue (an in-process ``CommandDriver().run``)."""
    if status is None:
        status = 0
    if not isinstance(status, int) or isinstance(status, bool):
        sys.exit(status)
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except Exception:
            pass
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            if stream is sys.stdout and status == 0:
                status = 120        # what the interpreter's own exit gives when stdout cannot be flushed
    os._exit(status & 0xFF)


def exit_script(status, names=None):
    """``sys.exit(status)`` from a ``main()`` that a program may also call in-process (nkipy sets
    sys.argv and calls ``CommandDriver.main()``, then catches the SystemExit), except when that main
    was called by the process's own top level: the first caller outside this package is the
    module-level code of ``__main__`` (a console script, ``python -c``, ``python -m``) and, with
    ``names``, a script file of one of those names. Then the process ends through ``exit_now``.
    (Frames are looked up by module, not counted: the driver's modules are compiled by Cython at
    install and have no Python frames.)"""
    frame = sys._getframe(1)
    while frame is not None and str(frame.f_globals.get("__name__", "")).startswith("neuronxcc."):
        frame = frame.f_back
    top = (frame is not None and frame.f_code.co_name == "<module>"
           and frame.f_globals.get("__name__") == "__main__")
    if top and names is not None:
        top = os.path.basename(frame.f_globals.get("__file__") or "") in names
    if top:
        exit_now(status)
    sys.exit(status)
