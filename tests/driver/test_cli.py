"""neuronx-cc as frameworks run it (subprocess): --version, help, dispatch,
verbosity and log format, the one-line error path, crash banners."""
import os
import re
import signal
import time

import pytest

import neuronxcc
from support.cli import run_ncc

HERE = os.path.dirname(os.path.abspath(__file__))
ADD_PB = os.path.join(HERE, "data", "add.hlo_module.pb")
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (DEBUG|INFO|USER|WARNING|ERROR|CRITICAL) (\d+) "
                      r"\[[^\]]+\]: ")


def _one_error_line(r):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout
    return lines[0]


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_text(flag, tmp_path):
    r = run_ncc([flag], cwd=tmp_path)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines[0] == "NeuronX Compiler version %s" % neuronxcc.__version__
    assert lines[1] == ""
    assert re.fullmatch(r"Python version \d+\.\d+\.\d+\S*", lines[2])
    assert lines[3] == "HWM version %s" % neuronxcc.version.__hwm_version__
    import numpy

    assert lines[4] == "NumPy version %s" % numpy.__version__
    # readers of stderr alone (or of the merged streams) also see line 1 first
    assert r.stderr.splitlines()[0] == lines[0]
    # optimum's regex
    assert re.search(r"NeuronX Compiler version ([\w\.+]+)", r.stdout).group(1) == neuronxcc.__version__


def test_help_banner_lists_compile_and_list_operators_not_neff_info(tmp_path):
    r = run_ncc(["--help"], cwd=tmp_path)
    assert r.returncode == 0
    assert "compile         Compile a neural network model" in r.stdout
    assert "list-operators  List supported operators" in r.stdout
    assert "neff-info" not in r.stdout and "neff-info" not in r.stderr


def test_neff_info_is_dispatchable(tmp_path):
    r = run_ncc(["neff-info", "missing.neff"], cwd=tmp_path)
    assert r.returncode == 70
    assert _one_error_line(r) == "[NCC_EINP001] NEFF file not found: missing.neff"
    r = run_ncc(["neff-info", "."], cwd=tmp_path)
    assert r.returncode == 70 and _one_error_line(r) == "[NCC_EINP001] . is a directory, not a NEFF file"
    junk = tmp_path / "junk.neff"
    junk.write_bytes(b"not a neff at all")
    r = run_ncc(["neff-info", str(junk)], cwd=tmp_path)
    assert r.returncode == 70
    assert re.match(r"^(\[INTERNAL_ERROR\] )?\[NCC_[A-Z0-9]+\] ", _one_error_line(r))


def test_subcommand_help(tmp_path):
    for flag in ("--help", "-h"):
        r = run_ncc(["compile", flag], cwd=tmp_path)
        assert r.returncode == 0 and "--framework" in r.stdout and "--internal-walrus-passes" not in r.stdout
        assert "usage: neuronx-cc compile" in r.stdout
    r = run_ncc(["compile", "--help-hidden"], cwd=tmp_path)
    assert r.returncode == 0 and "--internal-walrus-passes" in r.stdout
    r = run_ncc(["compile", "--help-hidden-list"], cwd=tmp_path)
    hidden = r.stdout.splitlines()
    assert r.returncode == 0 and "--internal-golden-size-budget" in hidden and "--layer-unroll-factor" in hidden
    assert "--target" not in hidden


def test_list_operators(tmp_path):
    r = run_ncc(["list-operators", "--framework", "XLA"], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ops = r.stdout.splitlines()
    assert {"add", "dot", "parameter"} <= set(ops) and len(ops) == len(set(ops))
    from neuronxcc.hlo.ops import supported_opcodes

    assert ops == list(supported_opcodes())


def test_unknown_subcommand(tmp_path):
    r = run_ncc(["frobnicate"], cwd=tmp_path)
    assert r.returncode == 70
    assert "unknown subcommand 'frobnicate'" in _one_error_line(r)


@pytest.mark.parametrize("level", ["35", "INFO", "info", "DEBUG", "error", "Warning", "user", "critical"])
def test_verbose_accepts_names_in_any_case_and_numbers(level, tmp_path):
    r = run_ncc(["compile", "missing.pb", "--verbose=%s" % level], cwd=tmp_path)
    assert r.returncode == 70
    assert _one_error_line(r) == "[NCC_EINP001] input file not found: missing.pb"
    if level.lower() in ("info", "debug"):
        out = [l for l in r.stdout.splitlines() if LOG_LINE.match(l)]
        assert out, r.stdout  # info/debug lines go to stdout, in the log format
    else:
        assert not any(LOG_LINE.match(l) for l in r.stdout.splitlines())


def test_bad_verbose_level(tmp_path):
    r = run_ncc(["--verbose", "loud", "compile", "missing.pb"], cwd=tmp_path)
    assert r.returncode == 70
    assert "invalid --verbose level 'loud'" in _one_error_line(r)


def test_log_file_format_utc_and_traceback_only_in_log(tmp_path):
    r = run_ncc(["compile", "missing.pb", "--logfile", "my.log"], cwd=tmp_path)
    assert r.returncode == 70
    assert "Compiler status FAIL" in r.stdout
    text = (tmp_path / "my.log").read_text()
    assert "Traceback (most recent call last)" in text
    first = [l for l in text.splitlines() if LOG_LINE.match(l)]
    assert first and all(LOG_LINE.match(l) for l in text.splitlines() if l[:2] == "20")
    stamp = LOG_LINE.match(first[0]).group(1)
    assert abs(time.mktime(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.gmtime())) < 600
    assert any(" ERROR %s " % LOG_LINE.match(l).group(3) in l and "[NCC_EINP001]" in l for l in first)
    assert not (tmp_path / "log-neuron-cc.txt").exists()


def test_default_logfile(tmp_path):
    run_ncc(["compile", "missing.pb"], cwd=tmp_path)
    assert (tmp_path / "log-neuron-cc.txt").is_file()


def test_missing_and_corrupt_inputs_give_one_ncc_line(tmp_path):
    for name, data in (("missing.pb", None), ("empty.pb", b""), ("corrupt.pb", b"\x08\xff\xff\x00garbage" * 7),
                       ("corrupt.txt", b"HloModule broken\nENTRY { this is not hlo }\n")):
        if data is not None:
            (tmp_path / name).write_bytes(data)
        out = tmp_path / ("%s.neff" % name)
        r = run_ncc(["compile", name, "--framework", "XLA", "--target", "trn1", "--output", str(out)],
                    cwd=tmp_path)
        assert r.returncode == 70, (name, r.stderr)
        line = _one_error_line(r)
        assert re.match(r"^(\[INTERNAL_ERROR\] )?\[NCC_[A-Z0-9]+\] ", line), line
        if data is None or data == b"":
            assert line.startswith("[NCC_EINP001]")
        assert not out.exists()
        assert not list(tmp_path.glob("neuronxcc-*"))  # nothing left behind for an unreadable input


def test_unknown_flags_are_warnings_not_errors(tmp_path):
    r = run_ncc(["compile", "--no-such-flag", "v", "missing.pb", "--verbose=warning"], cwd=tmp_path)
    assert r.returncode == 70
    err = r.stderr.splitlines()
    assert any("WARNING" in l and "Ignoring unknown compile option --no-such-flag v" in l for l in err)
    assert err[-1] == "[NCC_EINP001] input file not found: missing.pb"


@pytest.mark.parametrize("sig,banner", [("SIGABRT", "[F134]"), ("SIGKILL", "[F137]"), ("SIGSEGV", "[F139]")])
def test_fork_subcommand_maps_child_signals_to_banners(sig, banner, tmp_path):
    args = ["compile", ADD_PB, "--target", "trn1", "--internal-test-crash-signal=" + sig]
    # without isolation the crash takes the driver down: the hook really kills
    r = run_ncc(args, cwd=tmp_path)
    assert r.returncode == -getattr(signal, sig)
    r = run_ncc(["--fork-subcommand"] + args, cwd=tmp_path)
    assert r.returncode == 70
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert lines[0].startswith(banner + " neuronx-cc "), r.stderr
    assert [l for l in lines if l.startswith("[F1")] == [lines[0]]
    if sig == "SIGKILL":
        assert "Current memory usage for neuronxcc is" in r.stderr
        assert "insufficient system memory" in lines[0]
    assert "Traceback" not in r.stderr
    assert "Subcommand returned with exitcode=-%d" % getattr(signal, sig) in (tmp_path / "log-neuron-cc.txt").read_text()


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_an_interrupted_compile_leaves_nothing_and_dies_of_the_signal(sig, tmp_path):
    # as Ctrl-C (SIGINT is SIG_DFL in the driver) or a framework's timeout (SIGTERM) mid-pipeline
    r = run_ncc(["compile", ADD_PB, "--output", "x.neff", "--internal-test-crash-signal=" + sig], cwd=tmp_path)
    assert r.returncode == -getattr(signal, sig), r.stderr
    assert "Traceback" not in r.stderr + r.stdout and "Compiler status" not in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log-neuron-cc.txt"]  # no work dir, no NEFF
    log = (tmp_path / "log-neuron-cc.txt").read_text()
    assert "Intermediate files stored in %s" % tmp_path in log


def test_fork_subcommand_error_and_success_paths(tmp_path):
    r = run_ncc(["--fork-subcommand", "compile", "missing.pb"], cwd=tmp_path)
    assert r.returncode == 70
    assert _one_error_line(r) == "[NCC_EINP001] input file not found: missing.pb"
    r = run_ncc(["--fork-subcommand", "compile", "--help"], cwd=tmp_path)
    assert r.returncode == 0 and "--framework" in r.stdout


def test_importing_main_is_cheap():
    import subprocess
    import sys

    code = ("import sys; from neuronxcc.driver.CommandDriver import main; "
            "heavy = [m for m in ('numpy', 'jax', 'google.protobuf', 'neuronxcc.hlo', "
            "'neuronxcc.driver.commands.CompileCommand', 'multiprocessing') if m in sys.modules]; print(heavy)")
    from support.cli import _env

    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    # --version reports numpy's version without importing numpy (a third of its run time)
    code = ("import sys; from neuronxcc.driver.CommandDriver import CommandDriver; "
            "rc = CommandDriver().run(['neuronx-cc', '--version']); "
            "sys.stderr.write('numpy loaded: %s\\n' % ('numpy' in sys.modules)); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stderr.splitlines()[-1] == "numpy loaded: False"


def test_closed_stdout_is_not_a_compiler_error(tmp_path):
    import subprocess

    from support.cli import _env, ncc_command

    p = subprocess.Popen(ncc_command() + ["list-operators"], cwd=tmp_path, env=_env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()  # the reader goes away, as with `neuronx-cc list-operators | head -1`
    err = p.stderr.read()
    p.stderr.close()
    rc = p.wait()
    assert rc in (0, 128 + signal.SIGPIPE), err
    assert err == b""


@pytest.mark.parametrize("flags,expect", [
    (["--target", "foo"], "[NCC_EARG002] neuronx-cc compile: argument --target: invalid choice: 'foo'"),
    (["--optlevel", "9"], "[NCC_EARG002] neuronx-cc compile: argument --optlevel/-O: invalid optlevel '9'"),
    (["-O9"], "[NCC_EARG002] neuronx-cc compile: argument --optlevel/-O: invalid optlevel '9'"),
    (["--auto-cast", "bogus"], "[NCC_EARG002] neuronx-cc compile: argument --auto-cast: invalid choice: 'bogus'"),
    (["--auto-cast-type", "int8"],
     "[NCC_EARG002] neuronx-cc compile: argument --auto-cast-type: invalid choice: 'int8'"),
    (["--fast-math", "fastest"], "[NCC_EARG002] --fast-math: unknown value 'fastest'"),
    (["--lnc", "3"], "[NCC_EARG001] Unsupported logical NeuronCore config 3"),
    (["--lnc", "two"], "[NCC_EARG002] neuronx-cc compile: argument --logical-nc-config/-lnc/--lnc: invalid"),
    (["--target", "trn1", "--lnc", "2"], "[NCC_EARG001] Logical NeuronCore config 2 is supported on trn2 only"),
    (["--output", "outdir"], "[NCC_EARG002] --output outdir is a directory"),
    (["--output", "nodir/x.neff"], "[NCC_EARG002] output directory does not exist: "),
])
def test_bad_flag_values_give_one_ncc_line_and_no_output(flags, expect, tmp_path):
    (tmp_path / "outdir").mkdir()
    r = run_ncc(["compile", ADD_PB] + flags, cwd=tmp_path)
    assert r.returncode == 70, r.stderr
    assert _one_error_line(r).startswith(expect), r.stderr
    assert "Compiler status FAIL" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["log-neuron-cc.txt", "outdir"]
    assert not list((tmp_path / "outdir").iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into a read-only directory")
def test_unwritable_output_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        r = run_ncc(["compile", ADD_PB, "--output", str(ro / "x.neff")], cwd=tmp_path)
    finally:
        ro.chmod(0o700)
    assert r.returncode == 70
    assert _one_error_line(r) == "[NCC_EARG002] output directory is not writable: %s" % ro
    assert not list(ro.iterdir())


def test_unusable_log_file_and_temp_dir_are_user_errors(tmp_path):
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("")
    for flags, expect in (
            (["--logfile", "nodir/log.txt"], "[NCC_EARG002] cannot write the log file %s/nodir/log.txt: " % tmp_path),
            (["--logfile", "adir"], "[NCC_EARG002] cannot write the log file %s/adir: Is a directory" % tmp_path),
            (["--temp-dir", "afile/sub"], "[NCC_EARG002] cannot create the work directory in %s/afile/sub: "
             % tmp_path)):
        r = run_ncc(["compile", ADD_PB, "--output", "x.neff"] + flags, cwd=tmp_path)
        assert r.returncode == 70, r.stderr
        assert _one_error_line(r).startswith(expect), r.stderr
        assert not (tmp_path / "x.neff").exists()
        assert not list(tmp_path.glob("neuronxcc-*"))


def test_driver_runs_in_the_shared_tool_shell(tmp_path, monkeypatch):
    """The driver's error contract is the tool shell's run_main (no shell of its own): a bug in a
    subcommand is one [INTERNAL_ERROR] line, exit 70, the traceback in the log file only."""
    import ast

    from neuronxcc.driver import CommandDriver as CD
    from neuronxcc.driver.commands.ListOperatorsCommand import ListOperatorsCommand

    import os
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "neuronxcc", "driver", "CommandDriver.py")     # the source (installed, it is compiled)
    cls = next(n for n in ast.walk(ast.parse(open(src).read())) if isinstance(n, ast.ClassDef)
               and n.name == "CommandDriver")
    handlers = [h for h in ast.walk(cls) if isinstance(h, ast.ExceptHandler)
                and isinstance(h.type, ast.Name) and h.type.id in ("Exception", "BaseException")]
    runs = {f.name: ast.unparse(f) for f in cls.body if isinstance(f, ast.FunctionDef)}
    assert handlers == [] and "run_main(" in runs["run"] and "run_main(" in runs["run_subcommand"]

    def boom(self, argv, logfile):
        raise ZeroDivisionError("kaboom")
    monkeypatch.setattr(ListOperatorsCommand, "run", boom)
    monkeypatch.chdir(tmp_path)
    import io
    import sys
    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    rc = CD.CommandDriver().run(["neuronx-cc", "list-operators", "--logfile", str(tmp_path / "log.txt")])
    lines = err.getvalue().strip().splitlines()
    assert rc == 70 and len(lines) == 1, err.getvalue()
    assert lines[0].startswith("[INTERNAL_ERROR] [NCC_") and "ZeroDivisionError: kaboom" in lines[0], lines[0]
    log = (tmp_path / "log.txt").read_text()
    assert "Traceback" in log and "kaboom" in log and "Version information" in log
