"""CommandDriver called in-process (as nkipy does: sys.argv = cmd; main())."""
import logging
import os
import sys

import pytest

from neuronxcc.driver.CommandDriver import CommandDriver, main
from neuronxcc.driver.DriverLogging import USER, to_numeric_level


def test_known_commands_come_from_command_classes():
    d = CommandDriver()
    assert set(d.known_commands) == {"compile", "list-operators", "neff-info"}
    for name, cls in d.known_commands.items():
        assert cls().getCommandName() == name


def test_to_numeric_level():
    assert logging.getLevelName(35) == "USER" and USER == 35
    for text, level in (("35", 35), ("INFO", 20), ("info", 20), ("Debug", 10), ("WARNING", 30), ("user", 35),
                        ("error", 40), ("CRITICAL", 50), (15, 15)):
        assert to_numeric_level(text) == level
    assert to_numeric_level("loud") is None


def test_repeated_in_process_runs_leave_logging_as_they_found_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    for _ in range(2):
        assert CommandDriver().run(["neuronx-cc", "compile", "missing.pb"]) == 70
    assert (list(root.handlers), root.level) == before
    err = capsys.readouterr().err.splitlines()
    assert err == ["[NCC_EINP001] input file not found: missing.pb"] * 2
    assert os.getcwd() == str(tmp_path)


@pytest.fixture
def restore_process_state(monkeypatch):
    """main() resets SIGINT, the log time converter and warnings capture: put them back."""
    import signal

    old_sigint = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(logging.Formatter, "converter", logging.Formatter.converter)
    yield
    signal.signal(signal.SIGINT, old_sigint)
    logging.captureWarnings(False)


def test_main_exits_with_the_status(tmp_path, monkeypatch, capsys, restore_process_state):
    import signal
    import time

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["neuronx-cc", "--version"])
    with pytest.raises(SystemExit) as ei:
        main()
    assert ei.value.code == 0
    assert capsys.readouterr().out.startswith("NeuronX Compiler version ")
    monkeypatch.setattr(sys, "argv", ["neuronx-cc", "compile", "nothere.pb", "--target=trn1"])
    with pytest.raises(SystemExit) as ei:
        main()
    assert ei.value.code == 70
    assert signal.getsignal(signal.SIGINT) == signal.SIG_DFL
    assert logging.Formatter.converter is time.gmtime


def test_no_subcommand_prints_usage(capsys):
    assert CommandDriver().run(["neuronx-cc"]) == os.EX_USAGE
    assert "<subcommand>" in capsys.readouterr().out


def test_console_filters_keep_file_only_records_and_library_warnings_off_the_console(tmp_path, capsys):
    import warnings

    from neuronxcc.driver.DriverLogging import FILE_ONLY, setup_logging, teardown_logging

    log = tmp_path / "l.txt"
    state = setup_logging(logging.INFO, str(log), logging.DEBUG)
    logging.captureWarnings(True)
    try:
        lg = logging.getLogger("neuronxcc.test")
        lg.info("to stdout")
        lg.warning("to stderr")
        lg.error("file only", extra=FILE_ONLY)
        warnings.warn("a library warning")
        lg.debug("debug to the file")
    finally:
        logging.captureWarnings(False)
        teardown_logging(state)
    cap = capsys.readouterr()
    assert "to stdout" in cap.out and "to stderr" not in cap.out
    assert "to stderr" in cap.err and "to stdout" not in cap.err
    assert "file only" not in cap.out + cap.err and "library warning" not in cap.out + cap.err
    text = log.read_text()
    for msg in ("to stdout", "to stderr", "file only", "a library warning", "debug to the file"):
        assert msg in text
