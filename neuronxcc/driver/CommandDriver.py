"""neuronx-cc: the command dispatcher (console script ``neuronx-cc``).

``neuronx-cc [args] <subcommand> [<subcommand args>]``. ``run`` splits argv
with ``parse_known_args``: the driver keeps its own flags (--version/-V,
--verbose, --logfile, --logfile-verbose, --fork-subcommand, -h) wherever they
appear, and every other token, in order, is the subcommand's argv (so
``neuronx-cc --target=trn1 compile ...`` works). ``known_commands`` is built
from the CommandInterface subclasses keyed by ``getCommandName()``; neff-info
is dispatchable but not in the usage banner.

Errors: the driver runs in the shared tool shell (``common.toolshell.run_main``,
as every tool does): a ``CompilerError`` prints exactly ``e.one_line()`` on
stderr, its traceback goes to the log file only, and the exit status is 70
(os.EX_SOFTWARE); anything else is reported the same way as an internal
error; a closed stdout (``neuronx-cc list-operators | head``) exits 141 quietly. With --fork-subcommand the subcommand runs in a child process; a child
killed by SIGABRT, SIGKILL or SIGSEGV is reported with the [F134], [F137]
(plus memory usage) or [F139] banner and exit 70.

Importing this module is cheap: the commands and everything below them are
imported when a command runs.
"""
import argparse
import logging
import os
import signal
import sys
import time

USAGE = """%(prog)s [args] <subcommand> [<subcommand args>]
Run the AWS Neuron compiler.
The following subcommands are supported:
   compile         Compile a neural network model
   list-operators  List supported operators
See '%(prog)s <subcommand> --help' for more information about a
specific subcommand."""

SUPPORT_URL = "https://github.com/aws-neuron/aws-neuron-sdk/issues/new"
ICE_TEXT = ("An Internal Compiler Error has occurred. Processes may be terminated if they encountered an "
            "internal error or if there was insufficient memory. Please review the log file for any error "
            "conditions. Please check the available memory on the compile instance.")
BANNERS = {
    signal.SIGABRT: "[F134] neuronx-cc terminated abnormally - Please open a support ticket at " + SUPPORT_URL,
    signal.SIGKILL: ("[F137] neuronx-cc was forcibly killed - This most commonly occurs due to insufficient "
                     "system memory. Using a smaller data type, smaller dimensions or batch size, or a larger "
                     "instance type may help."),
    signal.SIGSEGV: ("[F139] neuronx-cc terminated abnormally (segmentation fault) - Please open a support "
                     "ticket at " + SUPPORT_URL),
}

PROG = "neuronx-cc"
logger = logging.getLogger("neuronxcc.driver.CommandDriver")


def numpyVersion():
    """numpy's version without importing numpy (a third of --version's run time otherwise).

    Reads numpy's own ``numpy/version.py`` as a standalone module when it is
    self-contained (numpy 2); otherwise, or when numpy is already loaded,
    asks numpy itself.
    """
    numpy = sys.modules.get("numpy")
    if numpy is None:
        import importlib.util

        spec = importlib.util.find_spec("numpy")
        if spec is None:
            return "not installed"
        for base in spec.submodule_search_locations or ():
            vspec = importlib.util.spec_from_file_location("_ncc_numpy_version", os.path.join(base, "version.py"))
            if vspec is None:
                continue
            mod = importlib.util.module_from_spec(vspec)
            try:
                vspec.loader.exec_module(mod)
                return str(mod.version)
            except Exception:  # numpy 1.x's version.py imports from its package
                break
        import numpy
    return numpy.__version__


def getVersionString():
    import platform

    from neuronxcc.version import __hwm_version__, __version__

    npv = numpyVersion()
    return ("NeuronX Compiler version %s\n\nPython version %s\nHWM version %s\nNumPy version %s"
            % (__version__, platform.python_version(), __hwm_version__, npv))


class VersionAction(argparse.Action):
    """--version/-V: print the version block and exit before any subcommand is chosen.

    Line 1 goes to stdout and stderr: callers read stdout, stderr, or both merged.
    """

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        text = getVersionString()
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        sys.stderr.write(text.split("\n", 1)[0] + "\n")
        sys.stderr.flush()
        raise SystemExit(0)


def memoryReport():
    import resource

    rs = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rc = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return ("Current memory usage for neuronxcc is %.1f MiB (driver) and %.1f MiB (largest compile process)"
            % (rs / 1024.0, rc / 1024.0))


class CommandDriver:
    def __init__(self):
        from neuronxcc.driver.Arguments import InterceptingArgumentParser

        self.argparser = self._makeParser(InterceptingArgumentParser, with_subcommand=True)
        # The same driver flags without the positional: used when a subcommand flag's value
        # before the subcommand ("--target trn1 compile ...") was taken for the subcommand.
        self.flagparser = self._makeParser(InterceptingArgumentParser, with_subcommand=False)
        self.known_commands = self._discoverCommands()

    @staticmethod
    def _makeParser(cls, with_subcommand):
        p = cls(prog="neuronx-cc", usage=USAGE, add_help=False)
        a = p.add_argument
        a("--version", "-V", action=VersionAction, help="print the compiler version and exit")
        a("--verbose", default="warning",
          help="console log level: debug, info, user, warning, error, critical (any case) or a number")
        a("--logfile", default=None, help="log file (default log-neuron-cc.txt)")
        a("--logfile-verbose", default="debug", help="log-file level (default debug)")
        a("--fork-subcommand", action="store_true", help=argparse.SUPPRESS)
        a("-h", "--help", action="store_true", dest="help")
        if with_subcommand:
            a("subcommand", nargs="?", default=None)
        return p

    def splitArgs(self, argv):
        """(known_args, delegated_args) for argv without the program name (see module docstring)."""
        known_args, delegated_args = self.argparser.parse_known_args(argv)
        name = known_args.subcommand
        if name is not None and name not in self.known_commands:
            at = next((i for i, tok in enumerate(argv) if tok in self.known_commands), None)
            if at is not None:
                known_args, delegated_args = self.flagparser.parse_known_args(argv[:at] + argv[at + 1:])
                known_args.subcommand = argv[at]
        return known_args, delegated_args

    @staticmethod
    def _discoverCommands():
        # Importing the command modules registers their classes; nothing heavy happens here.
        import neuronxcc.driver.commands.CompileCommand  # noqa: F401
        import neuronxcc.driver.commands.ListOperatorsCommand  # noqa: F401
        import neuronxcc.driver.commands.NeffInfoCommand  # noqa: F401
        from neuronxcc.driver.commands.CommandInterface import CommandInterface

        known = {}
        stack = list(CommandInterface.__subclasses__())
        while stack:
            cls = stack.pop(0)
            stack.extend(cls.__subclasses__())
            known[cls.getCommandName(cls.__new__(cls))] = cls
        return known

    def usage(self):
        return USAGE % {"prog": "neuronx-cc"}

    # -- logging -------------------------------------------------------------------------
    def setupLogging(self, known_args):
        from neuronxcc.driver.DriverLogging import DEFAULT_LOGFILE, setup_logging, to_numeric_level
        from neuronxcc.errors import InvalidArgumentError

        console = to_numeric_level(known_args.verbose)
        if console is None:
            raise InvalidArgumentError("invalid --verbose level %r (use debug, info, user, warning, error, "
                                       "critical or a number)" % known_args.verbose)
        filelevel = to_numeric_level(known_args.logfile_verbose)
        if filelevel is None:
            raise InvalidArgumentError("invalid --logfile-verbose level %r" % known_args.logfile_verbose)
        logfile = os.path.abspath(known_args.logfile or DEFAULT_LOGFILE)
        try:
            return setup_logging(console, logfile, filelevel), logfile
        except OSError as e:
            raise InvalidArgumentError("cannot write the log file %s: %s" % (logfile, e.strerror or e)) from e

    # -- running -----------------------------------------------------------------------------
    def run(self, argv):
        """Dispatch ``argv`` (argv[0] is the program name); returns the exit status. Runs in the
        shared tool shell (``common.toolshell.run_main``): an error before the log file is set up
        is just its one line."""
        from neuronxcc.common.toolshell import run_main

        return run_main(PROG, self._dispatch, list(argv[1:]), log=logger, prefix=False, name_internal=False)

    def _dispatch(self, argv):
        from neuronxcc.driver.DriverLogging import teardown_logging
        from neuronxcc.errors import InvalidArgumentError

        known_args, delegated_args = self.splitArgs(argv)
        command_name = known_args.subcommand
        if command_name is None:
            sys.stdout.write(self.usage() + "\n")
            return 0 if known_args.help else os.EX_USAGE
        if known_args.help:
            delegated_args = delegated_args + ["--help"]
        if command_name not in self.known_commands:
            raise InvalidArgumentError("unknown subcommand '%s' (see 'neuronx-cc --help')" % command_name)
        log_state, logfile = self.setupLogging(known_args)
        try:
            logger.info("Diagnostic logs stored in %s", logfile)
            logger.debug("Command line: %s", " ".join(["neuronx-cc"] + argv))
            subcommand = self.known_commands[command_name]
            if known_args.fork_subcommand:
                return self.run_forked(subcommand, delegated_args, logfile)
            return self.run_subcommand(subcommand, delegated_args, logfile)
        finally:
            teardown_logging(log_state)

    def run_subcommand(self, subcommand, delegated_args, logfile):
        """Run one subcommand in the tool shell; its error is one console line, logged with its
        traceback to the log file (``logError``)."""
        from neuronxcc.common.toolshell import run_main

        def body(args):
            command = subcommand() if isinstance(subcommand, type) else subcommand
            return command.run(args, logfile)
        return run_main(PROG, body, delegated_args, log=logger, prefix=False, name_internal=False,
                        report=self.logError)

    def run_subcommand_in_process(self, subcommand, delegated_args, logfile):
        rc = self.run_subcommand(subcommand, delegated_args, logfile)
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        sys.exit(rc)

    def run_forked(self, subcommand, delegated_args, logfile):
        import multiprocessing

        ctx = multiprocessing.get_context("fork")
        sys.stdout.flush()
        sys.stderr.flush()
        child = ctx.Process(target=self.run_subcommand_in_process, args=(subcommand, delegated_args, logfile),
                            name="neuronx-cc-subcommand")
        child.start()
        child.join()
        code = child.exitcode
        logger.info("Subcommand returned with exitcode=%s", code)
        if code == 0:
            return 0
        if code is not None and code < 0:
            self.handleChildSignal(-code)
        return os.EX_SOFTWARE

    def handleChildSignal(self, signo):
        banner = BANNERS.get(signo, "[F%d] neuronx-cc terminated abnormally by signal %d - Please open a "
                                    "support ticket at %s" % (128 + signo, signo, SUPPORT_URL))
        lines = [banner]
        if signo == signal.SIGKILL:
            lines.append(memoryReport())
        for line in lines:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        from neuronxcc.driver.DriverLogging import FILE_ONLY

        logger.error("%s", ICE_TEXT, extra=FILE_ONLY)
        for line in lines:
            logger.error("%s", line, extra=FILE_ONLY)

    def logError(self, line, e):
        """The log-file record of an error whose ``line`` the console gets: the line, the
        traceback and, for an internal error, the versions."""
        from neuronxcc.driver.DriverLogging import FILE_ONLY
        from neuronxcc.errors import CompilerError

        logger.error("%s", line, extra=FILE_ONLY)
        logger.error("Traceback of the error above", exc_info=(type(e), e, e.__traceback__), extra=FILE_ONLY)
        if not isinstance(e, CompilerError) or e.internal:
            from neuronxcc.version import __hwm_version__, __version__

            logger.error("Version information: neuronxcc %s, HWM %s, Python %s", __version__, __hwm_version__,
                         sys.version.split()[0], extra=FILE_ONLY)


def main():
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    logging.Formatter.converter = time.gmtime
    logging.captureWarnings(True)
    absl_logging = sys.modules.get("absl.logging")
    if absl_logging is not None and getattr(absl_logging, "_absl_handler", None) is not None:
        logging.root.removeHandler(absl_logging._absl_handler)
    driver = CommandDriver()
    status = driver.run(sys.argv)
    # Called by the console script, the process ends here: without tearing the interpreter's heap
    # down object by object (40-130 ms after a compile; the log file, stdio and atexit hooks are
    # still closed, flushed and run). Called in-process (nkipy): SystemExit, as always.
    from neuronxcc.common.toolshell import exit_script

    exit_script(status, (PROG,))
