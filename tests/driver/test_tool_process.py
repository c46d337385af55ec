"""ToolProcess: a native job's tool runs in a forked driver child only when that runs what the
exec'd launcher would, and the child starts in the state a new interpreter starts in."""
import atexit
import gc
import json
import logging
import os
import signal
import subprocess
import sys
import time

import pytest

from neuronxcc.driver import ToolProcess
from neuronxcc.driver.Job import Job
from neuronxcc.starfish import tools
from support.cli import _env

LAUNCHER = '#!/bin/sh\n# %s: see neuronxcc/starfish/tools.py\nexec /bin/sh "$(dirname -- "$0")/../launch.sh" %s "$@"\n'
TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def fakepkg(tmp_path, monkeypatch):
    """A package dir whose starfish/bin holds launchers of a probe tool, with the interpreter
    launch.sh would pick (<parent>/.venv/bin/python3) being this one."""
    monkeypatch.setitem(tools.TOOLS, "fork_probe", ("support.fork_probe", "main"))
    monkeypatch.delenv("NEURONXCC_TOOL_EXEC", raising=False)
    # the test process's own heap and address-space limit (jax loaded, prlimit) are not under test here
    monkeypatch.setattr(ToolProcess, "_heap_is_small", lambda: True)
    pkg = tmp_path / "neuronxcc"
    (pkg / "starfish" / "bin" / "private").mkdir(parents=True)
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, tmp_path / ".venv" / "bin" / "python3")
    for d in ("starfish/bin", "starfish/bin/private"):
        p = pkg / d / "fork_probe"
        p.write_text(LAUNCHER % ("fork_probe", "fork_probe"))
        p.chmod(0o755)
    return pkg


def _exec_probe(args):
    """The probe in a new interpreter, started the way launch.sh starts a tool."""
    code = ("import sys; sys.path.insert(0, %r); from neuronxcc.starfish import tools; "
            "tools.TOOLS['fork_probe'] = ('support.fork_probe', 'main'); tools.launcher_main()" % TESTS)
    r = subprocess.run([sys.executable, "-c", code, "fork_probe"] + args, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, env=_env())
    return r.returncode, r.stdout, r.stderr


def _fork_probe(pkg, args, merged=False):
    argv = [str(pkg / "starfish" / "bin" / "fork_probe")] + args
    proc = ToolProcess.start(argv, str(pkg), merged=merged)
    assert isinstance(proc, ToolProcess.ForkedTool)
    if merged:
        text = proc.stdout.read()
        proc.stdout.close()
        return proc.wait(), text, None
    out, err = proc.communicate()
    return proc.returncode, out, err


def _state(out):
    return json.loads(next(line for line in out.splitlines() if line.startswith("{")))


def test_only_the_packages_own_launchers_on_this_interpreter_are_forked(fakepkg, monkeypatch, tmp_path):
    pub = str(fakepkg / "starfish" / "bin" / "fork_probe")
    assert ToolProcess.forkableTool([pub, "x"], str(fakepkg)) == "fork_probe"
    # a private override, a custom environment, the opt-out, an edited launcher: exec'd
    assert ToolProcess.forkableTool([str(fakepkg / "starfish" / "bin" / "private" / "fork_probe")],
                                    str(fakepkg)) is None
    assert ToolProcess.forkableTool([pub], str(fakepkg), env={"A": "1"}) is None
    monkeypatch.setenv("NEURONXCC_TOOL_EXEC", "1")
    assert ToolProcess.forkableTool([pub], str(fakepkg)) is None
    monkeypatch.delenv("NEURONXCC_TOOL_EXEC")
    (fakepkg / "starfish" / "bin" / "fork_probe").write_text("#!/bin/sh\necho replaced\n")
    assert ToolProcess.forkableTool([pub], str(fakepkg)) is None
    # a tool the table does not know, and a launcher whose interpreter is another one
    assert ToolProcess.forkableTool([str(fakepkg / "starfish" / "bin" / "nosuch")], str(fakepkg)) is None
    (fakepkg / "starfish" / "bin" / "fork_probe").write_text(LAUNCHER % ("fork_probe", "fork_probe"))
    os.unlink(tmp_path / ".venv" / "bin" / "python3")
    os.symlink("/bin/sh", tmp_path / ".venv" / "bin" / "python3")
    assert ToolProcess.forkableTool([pub], str(fakepkg)) is None


def test_a_large_driver_heap_or_a_tight_address_space_limit_execs(fakepkg, monkeypatch):
    import resource

    monkeypatch.undo()      # the fixture's stand-in for _heap_is_small goes; its table entry comes back
    monkeypatch.setitem(tools.TOOLS, "fork_probe", ("support.fork_probe", "main"))
    monkeypatch.delenv("NEURONXCC_TOOL_EXEC", raising=False)
    pub = [str(fakepkg / "starfish" / "bin" / "fork_probe")]
    mib = 1 << 20
    monkeypatch.setattr(ToolProcess, "_statm_bytes", lambda: (200 * mib, 50 * mib))
    monkeypatch.setattr(resource, "getrlimit", lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    assert ToolProcess.forkableTool(pub, str(fakepkg)) == "fork_probe"
    monkeypatch.setattr(resource, "getrlimit", lambda which: (1024 * mib, resource.RLIM_INFINITY))
    assert ToolProcess.forkableTool(pub, str(fakepkg)) is None          # 200 MB > 1 GiB / 8
    monkeypatch.setattr(resource, "getrlimit", lambda which: (2048 * mib, resource.RLIM_INFINITY))
    assert ToolProcess.forkableTool(pub, str(fakepkg)) == "fork_probe"
    monkeypatch.setattr(ToolProcess, "_statm_bytes", lambda: (200 * mib, ToolProcess.FORK_RSS_LIMIT + 1))
    assert ToolProcess.forkableTool(pub, str(fakepkg)) is None


def test_the_real_packages_tools_are_forked(monkeypatch):
    monkeypatch.delenv("NEURONXCC_TOOL_EXEC", raising=False)
    monkeypatch.setattr(ToolProcess, "_heap_is_small", lambda: True)     # this process's heap is not the point
    job = Job()
    pkg = job.getPackageDir()
    for tool in ("hlo2penguin", "xla_infergoldens", "walrus_driver", "hlo-neff-wrapper"):
        path = job.getFullyQualifiedLocation(tool)
        assert ToolProcess.forkableTool([path], pkg) == tool, tool


@pytest.mark.parametrize("unbuffered", ["1", None])
def test_forked_child_starts_as_a_new_interpreter_does(fakepkg, monkeypatch, unbuffered):
    if unbuffered:
        monkeypatch.setenv("PYTHONUNBUFFERED", unbuffered)
    else:
        monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    seen = []
    h = logging.StreamHandler(sys.stderr)
    logging.getLogger().addHandler(h)
    logging.getLogger("neuronxcc.driver.jobs.Probe").setLevel(logging.DEBUG)
    old_term = signal.signal(signal.SIGTERM, lambda *a: seen.append(a))
    old_usr = signal.signal(signal.SIGUSR1, lambda *a: seen.append(a))
    old_conv = logging.Formatter.converter
    logging.Formatter.converter = time.gmtime

    def hook():
        seen.append("atexit")

    atexit.register(hook)
    gc.disable()
    try:
        forked = _fork_probe(fakepkg, ["5", "a b"])
    finally:
        gc.enable()
        atexit.unregister(hook)
        logging.Formatter.converter = old_conv
        signal.signal(signal.SIGUSR1, old_usr)
        signal.signal(signal.SIGTERM, old_term)
        logging.getLogger("neuronxcc.driver.jobs.Probe").setLevel(logging.NOTSET)
        logging.getLogger().removeHandler(h)
    execd = _exec_probe(["5", "a b"])
    assert forked[0] == execd[0] == 5
    assert _state(forked[1]) == _state(execd[1])
    assert _state(forked[1])["argv"] == ["fork_probe", "5", "a b"]
    assert forked[2] == execd[2] == "a warning from the tool\nto stderr\n"
    assert seen == []


def test_an_ignored_sigint_stays_ignored_as_exec_keeps_it(fakepkg):
    # a driver started by nohup or in a background job has SIGINT ignored; an exec'd tool keeps that
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forked = _fork_probe(fakepkg, ["5"])
        execd = _exec_probe(["5"])
    finally:
        signal.signal(signal.SIGINT, old)
    assert _state(forked[1])["signals"] == _state(execd[1])["signals"]
    assert _state(forked[1])["signals"]["SIGINT"] == "SIG_IGN"


@pytest.mark.parametrize("args", [["raise"], ["exit", "bad value"], ["0"]])
def test_forked_child_fails_as_a_new_interpreter_does(fakepkg, args):
    rc, out, err = _fork_probe(fakepkg, args)
    erc, eout, eerr = _exec_probe(args)
    assert rc == erc
    assert out == eout
    assert ("Traceback" in err) == ("Traceback" in eerr)
    assert err.splitlines()[-1] == eerr.splitlines()[-1]


def test_merged_output_interleaves_in_one_pipe(fakepkg):
    rc, text, _ = _fork_probe(fakepkg, ["0"], merged=True)
    assert rc == 0
    lines = text.splitlines()
    assert "a warning from the tool" in lines and "to stderr" in lines
    assert _state(text)["args"] == ["0"]


def test_the_driver_imports_later_jobs_modules_while_a_forked_tool_runs(fakepkg, tmp_path, monkeypatch):
    """ToolProcess.prefetch: the modules handed to it are imported by the driver after the fork (the
    child does not have them), while the child runs (the child waits for the module's import to
    write its marker file), and the thread is gone when the child has been waited for. The child
    starts with what it inherited frozen out of the collector's scans."""
    mark = tmp_path / "imported.mark"
    (tmp_path / "ncc_prefetch_probe_mod.py").write_text(
        "import os\nwith open(%r, 'w') as f:\n    f.write('x')\n" % str(mark))
    monkeypatch.syspath_prepend(str(tmp_path))
    ToolProcess.prefetch.set(["ncc_prefetch_probe_mod", "json"])   # json: loaded already, skipped
    assert ToolProcess.prefetch.pending == ["ncc_prefetch_probe_mod"]
    try:
        rc, out, err = _fork_probe(fakepkg, ["await", str(mark), "ncc_prefetch_probe_mod"])
        assert rc == 0, err
        assert json.loads(out) == {"had_module": False, "frozen": json.loads(out)["frozen"], "file_seen": True}
        assert json.loads(out)["frozen"] > 0
        assert "ncc_prefetch_probe_mod" in sys.modules
        assert ToolProcess.prefetch.thread is None and ToolProcess.prefetch.pending == []
    finally:
        ToolProcess.prefetch.set(())
        sys.modules.pop("ncc_prefetch_probe_mod", None)


def test_the_pipeline_hands_each_job_the_modules_of_the_jobs_after_it():
    from neuronxcc.driver.Pipeline import Pipeline

    seen = []

    class J(Job):
        def __init__(self, name, mods):
            self.name, self.mods = name, mods
            super().__init__()

        def getName(self):
            return self.name

        def prefetchModules(self, state):
            return self.mods

        def runSingleInput(self, state):
            seen.append((self.name, list(ToolProcess.prefetch.pending)))

    p = Pipeline()
    for name, mods in (("A", ("ncc_nosuch_a",)), ("B", ("ncc_nosuch_b", "json")), ("C", ("ncc_nosuch_c",))):
        p.addJob(J(name, mods))
    p.runSingleInput(None)
    assert seen == [("A", ["ncc_nosuch_b", "ncc_nosuch_c"]), ("B", ["ncc_nosuch_c"]), ("C", [])]
    assert ToolProcess.prefetch.pending == []


def test_forked_child_killed_by_a_signal_reports_it(fakepkg):
    proc = ToolProcess.start([str(fakepkg / "starfish" / "bin" / "fork_probe"), "abort"], str(fakepkg), merged=False)
    assert isinstance(proc, ToolProcess.ForkedTool)
    out, err = proc.communicate()
    assert proc.returncode == -signal.SIGABRT
    assert (proc.returncode, out, err) == _exec_probe(["abort"])   # no fault handler of the driver's
