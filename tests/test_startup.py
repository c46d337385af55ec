"""Tool start-up (issue 12 item 4): every tool is its own process per the seeds, so what its
imports pull in is paid on every compile. These pin the modules the tools no longer import:
tempfile/shutil/zipfile (and bz2, lzma behind them), numpy.ma (np.unique), protobuf's
descriptor_pb2 (the HLO schema is built from bytes)."""
import os
import re
import subprocess
import sys

import pytest

from support.cli import _env

HEAVY = ("tempfile", "shutil", "zipfile", "bz2", "lzma", "numpy.ma", "google.protobuf.descriptor_pb2")


def test_tool_modules_import_nothing_heavy_they_do_not_use():
    code = ("import sys\n"
            "import neuronxcc.starfish.penguin.hlo2penguin, neuronxcc.hlo.infergoldens, neuronxcc.hlo.proto_io\n"
            "import neuronxcc.hlo.interpreter, neuronxcc.walrus.driver, neuronxcc.walrus.passes\n"
            "import neuronxcc.starfish.birsim, neuronxcc.starfish.birsim.tool\n"
            "from neuronxcc.common.toolshell import ToolParser\n"
            "p = ToolParser(prog='t'); p.add_argument('--x', default=1); p.parse_args([])\n"
            "print(' '.join(m for m in %r if m in sys.modules))" % (HEAVY,))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "", r.stdout


def test_atomic_write_needs_no_tempfile(tmp_path):
    code = ("import sys\nfrom neuronxcc.common.toolshell import atomic_write\n"
            "atomic_write(sys.argv[1], 'x')\nprint('tempfile' in sys.modules, open(sys.argv[1]).read())")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "f.txt")], capture_output=True, text=True,
                       env=_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "x"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.txt"]


def test_help_width_follows_the_terminal_as_shutil_finds_it(monkeypatch):
    import shutil

    from neuronxcc.common import toolshell
    for cols in ("150", "61", None):
        if cols is None:
            monkeypatch.delenv("COLUMNS", raising=False)
        else:
            monkeypatch.setenv("COLUMNS", cols)
        assert toolshell._columns() == shutil.get_terminal_size().columns


F32_ADD = """HloModule m

ENTRY e {
  a = f32[4,8]{1,0} parameter(0)
  b = f32[4,8]{1,0} parameter(1)
  ROOT c = f32[4,8]{1,0} add(a, b)
}
"""


def _tool_imports(d, monkeypatch, exec_tools):
    """({tool job: the modules its process imported, as -X importtime reports them in the compile's log},
    the modules the driver imported, from its own stderr)."""
    from support.cli import run_ncc
    d.mkdir()
    model = d / "model.hlo"
    model.write_text(F32_ADD)
    log = d / "log.txt"
    with monkeypatch.context() as mp:
        mp.setenv("PYTHONPROFILEIMPORTTIME", "1")
        if exec_tools:
            mp.setenv("NEURONXCC_TOOL_EXEC", "1")
        else:
            mp.delenv("NEURONXCC_TOOL_EXEC", raising=False)
        r = run_ncc(["--logfile", str(log), "compile", str(model), "--framework", "XLA", "--target", "trn1",
                     "--output", str(d / "out.neff")], cwd=str(d))
    assert r.returncode == 0, r.stderr
    found = {}
    for line in log.read_text().splitlines():
        m = re.search(r"\[neuronxcc\.driver\.jobs\.(\w+)\]: \[(?:stderr|hlo2penguin)\] import time:.*\| +(\S+)\s*$", line)
        if m:
            found.setdefault(m.group(1), set()).add(m.group(2))
    driver = set(re.findall(r"^import time:.*\| +(\S+)\s*$", r.stderr, re.M))
    return found, driver


def test_tool_jobs_start_without_importing_python_and_numpy_again(tmp_path, monkeypatch):
    """The three tool jobs of a compile run in forked children of the driver (driver/ToolProcess.py):
    numpy, the interpreter's start-up modules and the package's shared modules are not imported
    again; exec'd (NEURONXCC_TOOL_EXEC=1) every tool imports them itself."""
    execd, _ = _tool_imports(tmp_path / "exec", monkeypatch, True)
    forked, driver = _tool_imports(tmp_path / "fork", monkeypatch, False)
    tools = {"HLOToTensorizer", "XLAInferGoldens", "WalrusDriver"}
    assert tools <= set(execd), sorted(execd)
    for job in tools:
        assert {"numpy", "encodings", "neuronxcc.common.toolshell"} <= execd[job], job
        assert not {"numpy", "encodings", "site", "neuronxcc.common.toolshell"} & forked.get(job, set()), job
    # what only a tool uses is imported once: by the tool, or by the driver while an earlier tool ran
    # (ToolProcess.prefetch; how far it got depends on how long that tool ran)
    assert "numpy" in driver and "neuronxcc.driver.Pipeline" in driver      # (so the stderr is read right)
    assert "neuronxcc.hlo.interpreter" in forked.get("XLAInferGoldens", set()) | driver
    assert "neuronxcc.starfish.birsim" in forked.get("WalrusDriver", set()) | driver
    # the modules several processes of a compile import are imported by the driver before it forks
    from neuronxcc.driver.ToolProcess import SHARED_MODULES
    assert {"zipfile", "neuronxcc.hlo.ops", "neuronxcc.collectives"} <= execd["XLAInferGoldens"]
    for job in tools:
        assert not set(SHARED_MODULES) & forked.get(job, set()), job


_BLAS_PROBE = ("import os, sys\n"
               "from neuronxcc.driver.commands.CompileCommand import loadNumpyWithOneBlasThread\n"
               "loadNumpyWithOneBlasThread()\n"
               "import numpy\n"
               "print(len(os.listdir('/proc/self/task')), os.environ.get('OPENBLAS_NUM_THREADS'))\n")


@pytest.mark.skipif((os.cpu_count() or 1) < 2 or not os.path.isdir("/proc/self/task"),
                    reason="needs two cores and /proc to see OpenBLAS's threads")
def test_a_compile_loads_numpy_with_one_blas_thread_and_leaves_the_environment_alone():
    env = {k: v for k, v in _env().items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                                        "OMP_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-c", _BLAS_PROBE], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "None"]     # no OpenBLAS worker; the variable is gone again
    # a thread count the user set is theirs
    r = subprocess.run([sys.executable, "-c", _BLAS_PROBE], capture_output=True, text=True,
                       env=dict(env, OPENBLAS_NUM_THREADS="2"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "2"]
    # without the helper numpy starts OpenBLAS's pool with a worker (what the helper saves)
    r = subprocess.run([sys.executable, "-c", "import os, numpy; print(len(os.listdir('/proc/self/task')))"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and int(r.stdout) >= 2, (r.stdout, r.stderr)


_EXIT_PROBE = """
import atexit, logging, sys, threading, time
from neuronxcc.common.toolshell import exit_now

class Teardown:
    def __del__(self):
        sys.__stdout__.write("heap torn down\\n")
        sys.__stdout__.flush()

keep = Teardown()                      # freed only by the interpreter's teardown
handler = logging.FileHandler(sys.argv[1])
logging.getLogger("probe").addHandler(handler)
logging.getLogger("probe").warning("logged before the exit")
atexit.register(lambda: sys.stdout.write("atexit hook ran\\n"))
go = threading.Event()
t = threading.Thread(target=lambda: (go.wait(), time.sleep(0.05), sys.stdout.write("thread joined\\n")))
t.start()
sys.stdout.write("buffered, not flushed")   # stdout is a pipe: block-buffered
go.set()                                    # the thread writes after this line, before the exit ends
exit_now(int(sys.argv[2]))
"""


@pytest.mark.parametrize("status", [0, 3])
def test_exit_now_does_what_an_exit_shows_without_the_heap_teardown(tmp_path, status):
    """toolshell.exit_now (the end of neuronx-cc and of every exec'd tool): the status, non-daemon
    threads joined, atexit hooks run, logging's files flushed, stdout flushed; but no object is freed
    one by one (the interpreter's teardown, 40-130 ms after a compile)."""
    log = tmp_path / "probe.log"
    env = {k: v for k, v in _env().items() if k != "PYTHONUNBUFFERED"}
    r = subprocess.run([sys.executable, "-c", _EXIT_PROBE, str(log), str(status)], capture_output=True, text=True,
                       env=env)
    assert r.returncode == status, r.stderr
    assert r.stdout == "buffered, not flushedthread joined\natexit hook ran\n"
    assert log.read_text() == "logged before the exit\n"
    # the same program ending with sys.exit pays the teardown (the probe sees it)
    r = subprocess.run([sys.executable, "-c", _EXIT_PROBE.replace("exit_now(", "sys.exit("), str(log), str(status)],
                       capture_output=True, text=True, env=env)
    assert r.returncode == status and r.stdout.endswith("heap torn down\n"), r.stdout


_SCRIPT = """import sys
import neuronxcc.common.toolshell as ts
ts.exit_now = lambda status: (sys.stdout.write('exit_now(%r)\\n' % (status,)), sys.stdout.flush(), ts.os._exit(status))
from {mod} import {fn} as main
if __name__ == '__main__':
    sys.exit(main())
"""


@pytest.mark.parametrize("script, mod, fn, args", [
    ("neuronx-cc", "neuronxcc.driver.CommandDriver", "main", ["--version"]),
    ("walrus_driver", "neuronxcc.starfish.tools", "walrus_driver_main", ["--list-passes"])])
def test_console_scripts_end_through_exit_now_and_in_process_calls_raise(tmp_path, script, mod, fn, args):
    """The console script (pip's text: ``sys.exit(main())`` at the top of a file named after the
    program) ends through exit_now; main() called from anywhere else raises SystemExit as before
    (nkipy calls CommandDriver.main in-process and catches it)."""
    path = tmp_path / script
    path.write_text(_SCRIPT.format(mod=mod, fn=fn))
    r = subprocess.run([sys.executable, str(path)] + args, capture_output=True, text=True, env=_env(),
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "exit_now(0)"
    other = tmp_path / "user_script.py"
    other.write_text(_SCRIPT.format(mod=mod, fn=fn).replace(
        "    sys.exit(main())", "    try:\n        main()\n    except SystemExit as e:\n        print('SystemExit', e.code)"))
    r = subprocess.run([sys.executable, str(other)] + args, capture_output=True, text=True, env=_env(),
                       cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "SystemExit 0"


def test_atomic_output_lets_the_writer_create_the_file(tmp_path):
    """The temporary name is free when the block starts (the writer creates the file: no truncate of
    an existing one, which ext4 flushes to disk on close); the result is published as before, an
    empty block publishes an empty file, a failed block leaves nothing."""
    from neuronxcc.common.toolshell import atomic_output

    out = tmp_path / "out.bin"
    with atomic_output(str(out)) as tmp:
        assert os.path.dirname(tmp) == str(tmp_path) and not os.path.exists(tmp)
        with open(tmp, "wb") as f:
            f.write(b"data")
    assert out.read_bytes() == b"data"
    umask = os.umask(0)
    os.umask(umask)
    assert (out.stat().st_mode & 0o777) == 0o666 & ~umask
    empty = tmp_path / "empty.bin"
    with atomic_output(str(empty)):
        pass
    assert empty.read_bytes() == b""
    with pytest.raises(RuntimeError):
        with atomic_output(str(tmp_path / "failed.bin")) as tmp:
            open(tmp, "wb").close()
            raise RuntimeError("the writer failed")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.bin", "out.bin"]
