"""Job: one stage of a compile pipeline, and the base of the eleven job classes.

A job reads and writes files in the compile's work directory (the cwd while it
runs; names in docs/INTERFACES.md section 1). A *native* job runs a tool of
``starfish/bin`` by its bare name: ``getFullyQualifiedLocation`` resolves the
name private-first (``starfish/bin/private`` then ``starfish/bin``) and
``shellCommand`` runs it (``shell=False`` always, the inherited environment),
logs 'Replay this job by calling: ...' and writes a replay script into the
work directory. An *in-process* job calls a library directly. Whether the tool's process is a fork
of the driver or an exec'd program is ``ToolProcess``'s decision (the package's own
launchers are forked; everything else is exec'd).

Failure mapping (so the console always shows one line):
  * a child that prints an ``[NCC_...]`` line and exits non-zero re-raises that
    line as the matching ``CompilerError`` subclass;
  * any other non-zero or signal exit raises ``ChildProcessJobError``
    ('Child process job "<name>" exited abnormally!').
"""
import logging
import os
import re
import shlex
import shutil

import neuronxcc.errors as errors
from neuronxcc.driver import ToolProcess
from neuronxcc.errors import CompilerError, CompilerInvalidInputException, InternalCompilerError

PRIVATE_BIN = "starfish/bin/private"
PUBLIC_BIN = "starfish/bin"

_NCC_LINE = re.compile(r"(\[INTERNAL_ERROR\] )?\[(NCC_[A-Z0-9]+)\] (.*)$")
_SUPPORT_SUFFIX = " - Please open a support ticket at " + errors.SUPPORT_URL


class ChildProcessJobError(InternalCompilerError):
    """A tool exited abnormally without saying why in an NCC_ line."""

    code = "NCC_IDRV001"


def _errorClassFor(code, internal):
    """The most derived CompilerError subclass whose code is ``code``."""
    found = None
    stack = [CompilerError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__dict__.get("code") == code and bool(cls.internal) == bool(internal):
            found = cls
    if found is None:
        found = InternalCompilerError if internal else CompilerError
    return found


def errorFromChildOutput(text):
    """The CompilerError a tool reported as its last ``[NCC_...]`` line, or None."""
    last = None
    for line in (text or "").splitlines():
        m = _NCC_LINE.search(line.strip())
        if m:
            last = m
    if last is None:
        return None
    internal, code, msg = bool(last.group(1)), last.group(2), last.group(3)
    if msg.endswith(_SUPPORT_SUFFIX):
        msg = msg[: -len(_SUPPORT_SUFFIX)]
    cls = _errorClassFor(code, internal)
    for c in cls.__mro__:          # a subclass with its own constructor (e.g. NkiNotImplementedError(api, why)):
        if issubclass(c, CompilerError):       # the nearest base that takes (message, code) carries the line
            try:
                return c(msg, code=code)
            except TypeError:
                continue
    return (InternalCompilerError if internal else CompilerError)(msg, code=code)


def getLaunchDir():
    """The directory neuronx-cc was started in (set by the compile before it chdirs)."""
    return _LAUNCH_DIR[0] or os.getcwd()


_LAUNCH_DIR = [None]


def setLaunchDir(path):
    _LAUNCH_DIR[0] = os.path.abspath(path) if path else None


class Job:
    """Base class. Subclasses implement ``runSingleInput(state)``.

    ``state`` is the compile's ``CompileState``: ``args`` (the Namespace),
    ``workdir``, ``command`` (the CompileCommand), ``files`` (INTERFACES names).
    """

    # Set by native jobs: the bare tool name looked up in starfish/bin.
    executableLocation = None
    # Name of the replay script a native job writes into the work dir.
    replayScript = None

    def __init__(self, state=None):
        self.state = state
        self.logger = logging.getLogger("neuronxcc.driver.jobs." + self.getName())

    # -- identity and flags ------------------------------------------------------
    @classmethod
    def getName(cls):
        return cls.__name__

    @classmethod
    def RegisterArgs(cls, parser):
        """Add this job's own flags to the compile parser (default: none)."""

    def log(self, msg, *a, level=logging.DEBUG):
        self.logger.log(level, msg, *a)

    def prefetchModules(self, state):
        """Modules this job's process imports for any program (a native job: its forked tool's).
        The driver imports them while an earlier job's forked tool runs (``ToolProcess.prefetch``),
        so neither this job nor its tool spends that time. Default: none."""
        return ()

    @staticmethod
    def forkedToolModules(modules):
        """``modules`` when the package's tools run as forks of the driver (they inherit what the
        driver imported), else none: an exec'd tool imports everything itself."""
        return () if os.environ.get(ToolProcess.EXEC_ENV) else tuple(modules)

    # -- paths --------------------------------------------------------------------
    @staticmethod
    def getPackageDir():
        """Return full path of neuronxcc python package, e.g. to access data files."""
        import neuronxcc

        return os.path.dirname(os.path.abspath(neuronxcc.__file__))

    @staticmethod
    def getAbsPath(path):
        """Absolute path for a path given on the command line: relative to the
        neuronx-cc launch directory, not the cwd (which is the work dir while jobs run)."""
        if path is None or os.path.isabs(path):
            return path
        return os.path.normpath(os.path.join(getLaunchDir(), path))

    def getFullyQualifiedLocation(self, executableLocation):
        """Resolve a tool: absolute paths pass through; else shutil.which over
        starfish/bin/private then starfish/bin (private overrides)."""
        relPath = executableLocation
        if os.path.isabs(relPath):
            return relPath
        packageDirectory = self.getPackageDir()
        pathDirectories = [os.path.join(packageDirectory, PRIVATE_BIN), os.path.join(packageDirectory, PUBLIC_BIN)]
        found = shutil.which(relPath, path=os.pathsep.join(pathDirectories))
        if found is None:
            raise CompilerInvalidInputException("Could not find " + relPath)
        return found

    # -- running tools ---------------------------------------------------------------
    @staticmethod
    def _quote(cmd):
        return cmd if isinstance(cmd, str) else shlex.join([str(c) for c in cmd])

    def getReplayCommandLine(self, cmd, cwd=None):
        """Log 'Replay this job by calling: ...' and write the replay script to the work dir."""
        cwd = cwd or os.getcwd()
        line = self._quote(cmd)
        self.logger.info("Replay this job by calling: %s %s", "cd %s &&" % shlex.quote(cwd), line)
        name = self.replayScript or "replay_%s.sh" % self.getName()
        path = os.path.join(cwd, name)
        try:
            with open(path, "w") as f:
                f.write("#!/bin/sh\n# Replays the %s job of a neuronx-cc compile in its work directory.\n"
                        'cd "$(dirname -- "$0")" || exit 1\nexec %s "$@"\n' % (self.getName(), line))
            os.chmod(path, 0o755)
        except OSError as e:  # a read-only work dir must not fail the compile
            self.logger.debug("could not write %s: %s", path, e)
        return line

    def shellCommand(self, cmd, *, env=None, useShell=False, expose_stderr=False, propagate_exit=True,
                     use_logger=True):
        """Run ``cmd`` (an argv list; a string with useShell) and wait.

        Always ``shell=False``: useShell runs ``["/bin/bash", "-c", cmd]``.
        Returns (returncode, stdout, stderr). With propagate_exit a non-zero
        exit raises (see module docstring).
        """
        text = self._quote(cmd)
        self.log("Executing " + text, level=logging.INFO)
        self.log("Working directory is " + os.getcwd())
        self.getReplayCommandLine(cmd)
        if useShell:
            argv = ["/bin/bash", "-c", text]
        else:
            argv = shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]
        proc = ToolProcess.start(argv, self.getPackageDir(), merged=expose_stderr, env=env)
        out, err = proc.communicate()
        if use_logger:
            self._logOutput(out, err)
        if propagate_exit and proc.returncode != 0:
            self.raiseForExit(proc.returncode, (out or "") + "\n" + (err or ""))
        return proc.returncode, out, err

    def runMergedOutput(self, cmd, tag):
        """The own Popen of HLOToTensorizer and NeffWrapper: stdout and stderr merged, text
        mode, each line streamed into the log as ``[tag] line``; a failure raises as in shellCommand."""
        self.log("Executing " + self._quote(cmd), level=logging.INFO)
        self.getReplayCommandLine(cmd)
        proc = ToolProcess.start(list(cmd), self.getPackageDir(), merged=True)
        lines = []
        with proc.stdout:
            for line in proc.stdout:
                lines.append(line)
                self.logger.debug("[%s] %s", tag, line.rstrip("\n"))
        proc.wait()
        if proc.returncode != 0:
            self.raiseForExit(proc.returncode, "".join(lines))

    def _logOutput(self, out, err):
        for stream, text in (("stdout", out), ("stderr", err)):
            for line in (text or "").splitlines():
                self.logger.debug("[%s] %s", stream, line)

    def raiseForExit(self, returncode, output):
        err = errorFromChildOutput(output)
        if err is not None and returncode > 0:
            raise err
        how = ("killed by signal %d" % -returncode) if returncode < 0 else ("exit status %d" % returncode)
        tail = [l.strip() for l in (output or "").splitlines() if l.strip()]
        if tail:
            how += "; last output: %s" % tail[-1][:300]
        # The console line is the seed's text exactly; how the tool ended goes to the log.
        from neuronxcc.driver.DriverLogging import FILE_ONLY

        self.logger.error("%s ended with %s", self.getName(), how, extra=FILE_ONLY)
        err = ChildProcessJobError('Child process job "%s" exited abnormally!' % self.getName())
        err.detail = how
        raise err

    # -- running -----------------------------------------------------------------------
    def run(self, state):
        self.state = state
        return self.runOnState(state)

    def runOnState(self, state):
        return self.runSingleInput(state)

    def runSingleInput(self, state):  # pragma: no cover - every job overrides it
        raise NotImplementedError(self.getName())

    # -- helpers for jobs ------------------------------------------------------------
    def requireFile(self, path, producer):
        """Fail clearly when an input the job needs was not produced."""
        if not os.path.isfile(path):
            raise InternalCompilerError("%s: %s was not produced by %s" % (self.getName(), path, producer))
        return path
