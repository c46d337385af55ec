"""Logging for the driver: levels, format, console and log-file handlers.

Invariants:
  * every line reads ``YYYY-MM-DDTHH:MM:SSZ LEVEL pid [logger]: msg`` in UTC;
  * level 35 is ``USER`` (between WARNING and ERROR), the level frameworks
    pass as ``--verbose=35``;
  * on the console, DEBUG/INFO go to stdout and WARNING and above to stderr;
  * records marked ``FILE_ONLY`` (tracebacks, the status lines the driver
    prints itself) and Python warnings captured from libraries reach the log
    file but never the console;
  * handlers installed by ``setup_logging`` are removed again by
    ``teardown_logging`` so the driver can run many times in one process.
"""
import logging
import sys
import time

USER = 35
logging.addLevelName(USER, "USER")

LOG_FORMAT = "%(asctime)s %(levelname)s %(process)d [%(name)s]: %(message)s"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
DEFAULT_LOGFILE = "log-neuron-cc.txt"
DEFAULT_CONSOLE_LEVEL = logging.WARNING
DEFAULT_FILE_LEVEL = logging.DEBUG

# Pass as ``extra=FILE_ONLY`` to keep a record off the console.
FILE_ONLY = {"ncc_file_only": True}

_LEVEL_NAMES = {"debug": logging.DEBUG, "info": logging.INFO, "user": USER,
                "warning": logging.WARNING, "warn": logging.WARNING,
                "error": logging.ERROR, "critical": logging.CRITICAL, "fatal": logging.CRITICAL}


def to_numeric_level(value):
    """Map a level name in any case (``info``, ``DEBUG``, ``user``) or a number (``35``) to an int.

    Returns None when ``value`` is neither.
    """
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    return _LEVEL_NAMES.get(text.lower())


class UTCFormatter(logging.Formatter):
    converter = time.gmtime

    def __init__(self):
        super().__init__(LOG_FORMAT, DATE_FORMAT)


class _ConsoleFilter(logging.Filter):
    def __init__(self, low, high):
        super().__init__()
        self.low = low
        self.high = high

    def filter(self, record):
        if getattr(record, "ncc_file_only", False) or record.name == "py.warnings":
            # tracebacks, status lines, and Python warnings from libraries (captureWarnings)
            return False
        return self.low <= record.levelno < self.high


class _Handlers:
    """What setup_logging installed, so teardown removes exactly that."""

    def __init__(self, handlers, old_level):
        self.handlers = handlers
        self.old_level = old_level


def setup_logging(console_level=DEFAULT_CONSOLE_LEVEL, logfile=DEFAULT_LOGFILE, file_level=DEFAULT_FILE_LEVEL):
    """Install console (stdout below WARNING, stderr from WARNING) and log-file handlers on the root logger."""
    root = logging.getLogger()
    fmt = UTCFormatter()
    handlers = []
    out = logging.StreamHandler(sys.stdout)
    out.addFilter(_ConsoleFilter(console_level, logging.WARNING))
    err = logging.StreamHandler(sys.stderr)
    err.addFilter(_ConsoleFilter(max(console_level, logging.WARNING), 1 << 30))
    handlers += [out, err]
    if logfile:
        # Append: concurrent compiles in one directory share the default log
        # file and must not truncate each other's lines.
        fh = logging.FileHandler(logfile, mode="a", encoding="utf-8", delay=False)
        fh.setLevel(file_level)
        handlers.append(fh)
    for h in handlers:
        h.setFormatter(fmt)
        root.addHandler(h)
    state = _Handlers(handlers, root.level)
    levels = [console_level] + ([file_level] if logfile else [])
    root.setLevel(max(1, min(levels)))
    return state


def teardown_logging(state):
    if state is None:
        return
    root = logging.getLogger()
    for h in state.handlers:
        root.removeHandler(h)
        try:
            h.flush()
            if isinstance(h, logging.FileHandler):
                h.close()
        except Exception:  # pragma: no cover - closing a broken stream
            pass
    root.setLevel(state.old_level)
