"""A tool main for tests/driver/test_tool_process.py: reports the interpreter state it runs in
(as JSON on stdout) and exits as its argv asks, so a forked run can be compared with an exec'd one."""
import atexit
import gc
import json
import logging
import os
import signal
import sys
import time


def _disp(sig):
    h = signal.getsignal(sig)
    if h is signal.SIG_DFL:
        return "SIG_DFL"
    if h is signal.SIG_IGN:
        return "SIG_IGN"
    if h is signal.default_int_handler:
        return "default_int_handler"
    return repr(h)


def _await(path, module):
    """``await FILE MODULE``: wait (up to a minute) for FILE to appear, then report whether MODULE was
    in sys.modules when the tool started and how many objects the collector had frozen."""
    had = module in sys.modules
    frozen = gc.get_freeze_count()
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)
    print(json.dumps({"had_module": had, "frozen": frozen, "file_seen": os.path.exists(path)}))
    return 0


def main(argv):
    if argv and argv[0] == "await":
        return _await(argv[1], argv[2])
    root = logging.getLogger()
    named = logging.getLogger("neuronxcc.driver.jobs.Probe")
    state = {
        "argv": sys.argv,
        "args": argv,
        "signals": {s.name: _disp(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE, signal.SIGUSR1)},
        "root_handlers": len(root.handlers), "root_level": root.level,
        "named_handlers": len(named.handlers), "named_level": named.level,
        "effective_level": named.getEffectiveLevel(),
        "localtime": logging.Formatter.converter is time.localtime,
        "gc": gc.isenabled(),
        "atexit": atexit._ncallbacks(),
        "stdin": sys.stdin.read(),
        "stdout_line_buffered": sys.stdout.line_buffering,
        "stderr": [sys.stderr.line_buffering, sys.stderr.errors],
    }
    named.warning("a warning from the tool")   # no handler configured: Python's last resort (stderr)
    print(json.dumps(state, sort_keys=True))
    sys.stderr.write("to stderr\r\n")
    if argv and argv[0] == "abort":
        sys.stdout.flush()
        os.abort()
    if argv and argv[0] == "raise":
        raise RuntimeError("probe failed")
    if argv and argv[0] == "exit":
        sys.exit(argv[1])
    return int(argv[0]) if argv else 0
