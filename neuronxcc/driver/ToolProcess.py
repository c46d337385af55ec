"""The process a native job's tool runs in: a forked copy of the driver, or an exec'd program.

A native job runs its tool as a separate process (the seeds' process model): the job logs
'Executing <argv>', writes the replay script, starts the process with stdin on /dev/null and
stdout/stderr on pipes, waits for it and maps its exit status. What the process *is* is decided
here, per command:

* The package's own launcher (``starfish/bin/<tool>``, whose whole job is to exec the Python this
  driver runs on with the package first on ``sys.path`` and call the tool's ``main(argv)`` from
  ``neuronxcc.starfish.tools``): the driver forks, and the child, after putting the interpreter
  back into the state a fresh one starts in (stdio on the pipes, the tool's argv, default signal
  dispositions, logging unconfigured, no inherited atexit hooks, the cyclic collector on), calls
  that same ``main(argv)`` and exits with its status. The tool runs in its own process with the
  same argv, cwd, environment, files, output and exit status; what it no longer pays is a new
  interpreter importing Python's startup modules, numpy and the package again (about 0.15 s of
  CPU per tool against a small program's whole compile of 0.5-1 s).
* Anything else (a private override in ``starfish/bin/private``, an absolute path, a shell
  command, a custom environment, a launcher that would pick another interpreter, a driver over
  1 GiB resident or over an eighth of an address-space limit, which a forked child would inherit):
  ``subprocess.Popen`` of the resolved program, as before.

``NEURONXCC_TOOL_EXEC=1`` in the environment makes every tool exec'd (for comparing the two).

While a forked tool runs, the driver only waits on its pipes. ``prefetch`` uses that time: the
modules the compile's later jobs import (their tools' modules, which forked children then inherit,
and the driver's own in-process jobs') are imported by a thread of the driver while the child runs,
on the core the child leaves free. The thread runs only then: it is paused (it finishes the module
it is importing and stops) before any fork, so no child is forked while an import is half done, and
when the child ends, so no in-process job runs beside it. Every module is imported once in the
compile either way; what moves is when.

Both kinds are driven through the same small interface (``communicate()``, line iteration over
``stdout`` in merged mode, ``wait()``, ``returncode`` negative for a signal death).
"""
import io
import os
import sys

# The launcher's text is checked before forking: a file edited or replaced by something else
# is exec'd as it is.
_LAUNCHER_LINE = 'exec /bin/sh "$(dirname -- "$0")/../launch.sh" %s "$@"'
# A driver whose resident set is over this does not fork (see the module docstring).
FORK_RSS_LIMIT = 1 << 30
EXEC_ENV = _EXEC_ENV = "NEURONXCC_TOOL_EXEC"
# Modules more than one process of a compile imports, read from -X importtime of the corpus's
# compiles: two tools (hlo2penguin and xla_infergoldens: the HLO op table and attribute readers,
# rank spaces, collectives; every forked child: faulthandler), or a tool and the driver's own later
# jobs (penguin's IR for Frontend; pathlib, zipfile, urllib and hashlib, which xla_infergoldens's
# numpy.random and npz writer and the driver's importlib.resources and NEFF writer all import).
# The driver imports them once before its first fork, so no forked tool imports them again.
SHARED_MODULES = ("faulthandler", "base64", "hashlib", "ipaddress", "urllib.parse", "pathlib", "zipfile",
                  "neuronxcc.hlo.ops", "neuronxcc.hlo.interp_attrs", "neuronxcc.hlo.ranks",
                  "neuronxcc.collectives", "neuronxcc.starfish.penguin.ir", "neuronxcc.starfish.penguin.hloinst",
                  "neuronxcc.starfish.penguin.collectives")


def _tools():
    from neuronxcc.starfish.tools import TOOLS

    return TOOLS


def _statm_bytes():
    """(virtual size, resident set) of this process in bytes, or None."""
    try:
        with open("/proc/self/statm") as f:
            size, rss = f.read().split()[:2]
        page = os.sysconf("SC_PAGE_SIZE")
        return int(size) * page, int(rss) * page
    except (OSError, ValueError):
        return None


def _heap_is_small():
    """A fork inherits the driver's heap (shared copy-on-write) and its address space: under an
    address-space limit (ulimit -v, prlimit --as) that counts against the tool, which exec'd would
    start near 150 MB. Fork only while the driver's resident set is under FORK_RSS_LIMIT and its
    virtual size under an eighth of the limit."""
    st = _statm_bytes()
    if st is None or st[1] > FORK_RSS_LIMIT:
        return False
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):
        return True
    return soft == resource.RLIM_INFINITY or st[0] <= soft // 8


def _launcher_python(pkgparent):
    """The interpreters ``starfish/launch.sh`` tries first for a package under ``pkgparent``."""
    base = os.path.basename(pkgparent)
    if base in ("site-packages", "dist-packages"):
        prefix = os.path.dirname(os.path.dirname(os.path.dirname(pkgparent)))
        return [os.path.join(prefix, "bin", "python3"), os.path.join(prefix, "bin", "python")]
    return [os.path.join(pkgparent, ".venv", "bin", "python3")]


def _same_file(a, b):
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def forkableTool(argv, packageDir, env=None):
    """The tool name when ``argv`` runs this package's own launcher of a known tool on the
    interpreter this driver runs on (so a fork runs exactly what the exec would); else None."""
    if env is not None or not argv or os.environ.get(_EXEC_ENV):
        return None
    if not hasattr(os, "fork") or not sys.executable:
        return None
    path = str(argv[0])
    name = os.path.basename(path)
    if name not in _tools():
        return None
    bindir = os.path.join(packageDir, "starfish", "bin")
    if os.path.dirname(os.path.abspath(path)) != os.path.abspath(bindir):
        return None
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    if _LAUNCHER_LINE % name not in text.splitlines():
        return None
    # launch.sh takes the first executable of its candidates; the fork is only the same program
    # when that is this interpreter.
    own = [p for p in _launcher_python(os.path.dirname(os.path.abspath(packageDir))) if os.access(p, os.X_OK)]
    if not own or not _same_file(own[0], sys.executable):
        return None
    if not _heap_is_small():
        return None
    return name


def importSharedModules():
    """Import SHARED_MODULES into the driver (a no-op once they are loaded)."""
    import importlib

    for name in SHARED_MODULES:
        if name not in sys.modules:
            importlib.import_module(name)


class _Prefetch:
    """The driver's background imports while a forked tool runs (see the module docstring)."""

    def __init__(self):
        self.pending = []
        self.thread = None
        self.stop = False

    def set(self, modules):
        """The modules to import (in order) while the next forked tools run; replaces the list."""
        self.pause()
        seen = set()
        self.pending = [m for m in modules if m not in sys.modules and not (m in seen or seen.add(m))]

    def _run(self):
        while self.pending and not self.stop:
            name = self.pending.pop(0)
            if name in sys.modules:
                continue
            try:
                __import__(name)      # the import statement's path, which -X importtime reports
            except BaseException:  # the job that needs it imports it again and reports the error
                pass

    def resume(self):
        """Start importing the pending modules (the driver just forked a tool)."""
        if self.pending and self.thread is None:
            import threading

            self.stop = False
            self.thread = threading.Thread(target=self._run, name="neuronx-cc-prefetch", daemon=True)
            self.thread.start()

    def pause(self):
        """Let the thread finish the module it is importing and stop; returns when it has."""
        t = self.thread
        if t is not None:
            self.stop = True
            t.join()
            self.thread = None
            self.stop = False


prefetch = _Prefetch()


def start(argv, packageDir, merged, env=None):
    """Start ``argv`` (a list) with stdin on /dev/null and stdout/stderr piped (merged into one
    pipe when ``merged``), in text mode; returns a Popen or a ForkedTool."""
    tool = forkableTool(argv, packageDir, env)
    if tool is not None:
        importSharedModules()
        return ForkedTool(tool, [str(a) for a in argv[1:]], merged)
    import subprocess

    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merged else subprocess.PIPE,
                            stdin=subprocess.DEVNULL, close_fds=True, env=env, shell=False,
                            universal_newlines=True)


def _text(data):
    """Bytes from a pipe as Popen's text mode gives them (locale encoding, universal newlines)."""
    import locale

    s = data.decode(locale.getpreferredencoding(False))
    return s.replace("\r\n", "\n").replace("\r", "\n")


class ForkedTool:
    """A tool running in a forked child of the driver (see the module docstring)."""

    def __init__(self, tool, args, merged):
        self.args = [tool] + list(args)
        self.returncode = None
        import locale  # noqa: F401  (what reading the child's pipes imports, not left to the prefetch's time)
        import selectors  # noqa: F401

        out_r, out_w = os.pipe()
        err_r, err_w = (None, None) if merged else os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        prefetch.pause()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(out_r)
            if err_r is not None:
                os.close(err_r)
            _runChild(tool, list(args), out_w, err_w if err_w is not None else out_w)
        prefetch.resume()
        self.pid = pid
        os.close(out_w)
        if err_w is not None:
            os.close(err_w)
        self._out_fd, self._err_fd = out_r, err_r
        self.stdout = io.TextIOWrapper(io.FileIO(out_r, "r"), newline=None) if merged else None

    def wait(self):
        if self.returncode is None:
            try:
                while True:
                    try:
                        _, status = os.waitpid(self.pid, 0)
                        break
                    except InterruptedError:
                        continue
            finally:
                prefetch.pause()
            self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def communicate(self):
        """Read both pipes to their end, wait; (stdout, stderr) as text (stderr None when merged)."""
        import selectors

        chunks = {self._out_fd: [], self._err_fd: []}
        with selectors.DefaultSelector() as sel:
            for fd in (self._out_fd, self._err_fd):
                if fd is not None:
                    sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                for key, _ in sel.select():
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        sel.unregister(key.fd)
                        os.close(key.fd)
        self.wait()
        out = _text(b"".join(chunks[self._out_fd]))
        err = _text(b"".join(chunks[self._err_fd])) if self._err_fd is not None else None
        return out, err


def _stdio(fd):
    """sys.stdin/stdout/stderr on ``fd`` as a new interpreter makes them (CPython's create_stdio):
    stdin buffered; with PYTHONUNBUFFERED the writers unbuffered and write-through, else
    block-buffered with stderr line-buffered; PYTHONIOENCODING's encoding and errors, else the
    locale's, stderr with backslashreplace."""
    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED"))
    enc, _, errs = (os.environ.get("PYTHONIOENCODING") or "").partition(":")
    write = fd != 0
    raw = io.FileIO(fd, "w" if write else "r", closefd=False)
    buf = raw if (write and unbuffered) else (io.BufferedWriter(raw) if write else io.BufferedReader(raw))
    return io.TextIOWrapper(buf, encoding=enc or None,
                            errors=errs or ("backslashreplace" if fd == 2 else "strict"),
                            line_buffering=not unbuffered and (fd == 2 or raw.isatty()),
                            write_through=write and unbuffered)


def _freshInterpreter(tool, args, out_fd, err_fd):
    """Put this forked child into the state a new interpreter running the launcher starts in."""
    import atexit
    import gc
    import logging
    import signal
    import time

    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    for fd in {devnull, out_fd, err_fd} - {0, 1, 2}:
        os.close(fd)
    sys.stdin = sys.__stdin__ = _stdio(0)
    sys.stdout = sys.__stdout__ = _stdio(1)
    sys.stderr = sys.__stderr__ = _stdio(2)
    sys.argv = [tool] + list(args)
    # Signals: Python's own start-up dispositions (SIGINT raises KeyboardInterrupt; the driver's
    # handlers, e.g. the work-dir cleanup on SIGTERM, are not the tool's).
    for sig in signal.valid_signals():
        try:
            h = signal.getsignal(sig)
        except (OSError, ValueError):
            continue
        if callable(h) and h is not signal.default_int_handler:
            signal.signal(sig, signal.SIG_DFL)
    # An interpreter sets its KeyboardInterrupt handler only where SIGINT is not ignored: exec keeps
    # an ignored signal ignored (a driver started with nohup or in a background job).
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # faulthandler off (pytest, for one, leaves it on), unless the environment asks for it.
    import faulthandler

    if os.environ.get("PYTHONFAULTHANDLER"):
        faulthandler.enable()
    else:
        faulthandler.disable()
    # Logging as unconfigured as in a new process: no handlers, default levels, local-time stamps.
    logging.captureWarnings(False)
    logging.Formatter.converter = time.localtime
    logging.disable(logging.NOTSET)
    root = logging.getLogger()
    for lg in [root] + [v for v in logging.Logger.manager.loggerDict.values() if isinstance(v, logging.Logger)]:
        lg.handlers.clear()
        lg.filters.clear()
        lg.setLevel(logging.NOTSET)
        lg.propagate = True
        lg.disabled = False
    root.setLevel(logging.WARNING)
    # The driver's exit hooks are not the tool's; logging's own (flush and close the handlers the
    # tool configures), registered when a new interpreter imports logging, is.
    atexit._clear()
    atexit.register(logging.shutdown)
    prefetch.pending = []
    # What the child inherited stays where it is: the collector (on, as in a new interpreter)
    # leaves those objects out of its scans, which would otherwise walk the driver's whole heap
    # (and copy every page they touch) for objects the tool never frees.
    gc.freeze()
    gc.enable()


def _runChild(tool, args, out_fd, err_fd):
    status = 1
    try:
        _freshInterpreter(tool, args, out_fd, err_fd)
        from neuronxcc.starfish.tools import run_tool

        status = run_tool(tool, args)
    except SystemExit as e:
        code = e.code
        if code is None:
            status = 0
        elif isinstance(code, int):
            status = code
        else:
            try:
                sys.stderr.write(str(code) + "\n")
            except Exception:
                pass
            status = 1
    except BaseException:  # what an uncaught exception does to a new interpreter: traceback, exit 1
        try:
            import traceback

            traceback.print_exc()
        except Exception:
            pass
        status = 1
    finally:
        try:
            import atexit

            atexit._run_exitfuncs()
        except BaseException:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:
                pass
        os._exit(status if isinstance(status, int) and 0 <= status <= 255 else 1)
