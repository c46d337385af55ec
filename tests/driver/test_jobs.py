"""The jobs' command lines and file contracts (docs/INTERFACES.md 1 and 2),
run against small fake tools so they do not depend on later layers."""
import argparse
import json
import os
import stat
import sys

import pytest

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.CompileState import CompileState
from neuronxcc.driver.JobRegistry import JobRegistry
from neuronxcc.errors import InternalCompilerError, UnsupportedOperatorError

FAKE = r'''#!%(python)s
import json, os, sys
json.dump(sys.argv[1:], open("argv-%(name)s.json", "w"))
mode = os.environ.get("FAKE_MODE", "ok")
def arg(flag):
    return sys.argv[sys.argv.index(flag) + 1]
if mode == "fail":
    sys.stderr.write("[NCC_EVRF001] Operation sort is not supported\n"); sys.exit(70)
if mode == "ok":
    open(arg("--output"), "w").write("{}")
if mode == "skipped":
    sys.stderr.write("skipped: over the size budget\n"); sys.exit(3)
sys.exit(0)   # mode "nofile": success without an output
'''


@pytest.fixture
def registry():
    return JobRegistry()


@pytest.fixture
def work(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.makedirs(files.SG_DIR)
    return tmp_path


def _fake_tool(tmp_path, name):
    path = tmp_path / ("fake_" + name)
    path.write_text(FAKE % {"python": sys.executable, "name": name})
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def _state(work, registry=None, **kw):
    ns = dict(target="trn1", optlevel="2", internal_hlo2tensorizer_options="", internal_golden_size_budget=1000,
              enable_fast_loading_neuron_binaries=False)
    ns.update(kw)
    cmd = argparse.Namespace(walrus_passes=["lsa", "linear_scan_allocator", "print_metrics", "bir_sim"],
                             pipeline=[])
    return CompileState(argparse.Namespace(**ns), command=cmd, workdir=str(work), output=str(work / "out.neff"))


def _job(registry, name, tool_path, monkeypatch):
    job = registry.job_factories[name]()
    monkeypatch.setattr(job, "getFullyQualifiedLocation", lambda loc: tool_path)
    return job


def _argv(work, name):
    return json.loads((work / ("argv-%s.json" % name)).read_text())


def test_hlo2penguin_argv_keeps_the_options_string_whole(work, registry, monkeypatch):
    tool = _fake_tool(work, "hlo2penguin")
    job = _job(registry, "HLOToTensorizer", tool, monkeypatch)
    job.run(_state(work, internal_hlo2tensorizer_options="--verify-hlo=true --recursive-layer-det=false"))
    assert _argv(work, "hlo2penguin") == [files.MODEL, "--output", "penguin.json", "--target", "trn1",
                                          "--options", "--verify-hlo=true --recursive-layer-det=false"]
    assert (work / "replay_hlo2penguin.sh").is_file()
    monkeypatch.setenv("FAKE_MODE", "fail")
    with pytest.raises(UnsupportedOperatorError):
        job.run(_state(work))


def test_goldens_over_budget_is_not_a_failure(work, registry, monkeypatch):
    tool = _fake_tool(work, "xla_infergoldens")
    job = _job(registry, "XLAInferGoldens", tool, monkeypatch)
    monkeypatch.setenv("FAKE_MODE", "skipped")       # exit 3: over the size budget, nothing written
    job.run(_state(work))
    assert _argv(work, "xla_infergoldens") == [files.MODEL, "--output", "goldens.npz", "--size-budget", "1000"]
    assert not (work / "goldens.npz").exists()
    monkeypatch.setenv("FAKE_MODE", "fail")
    with pytest.raises(UnsupportedOperatorError):
        job.run(_state(work))
    monkeypatch.setenv("FAKE_MODE", "nofile")        # exit 0 but no goldens: not taken for success
    with pytest.raises(InternalCompilerError, match="goldens.npz was not produced"):
        job.run(_state(work))


def test_walrus_driver_argv_and_bir_sim_only_with_goldens(work, registry, monkeypatch):
    tool = _fake_tool(work, "walrus_driver")
    job = _job(registry, "WalrusDriver", tool, monkeypatch)
    (work / files.BIR).write_text("{}")
    job.run(_state(work))
    assert _argv(work, "walrus_driver") == [
        "--input", "sg00/bir.json", "--output", "sg00/walrus.bir.json",
        "--walrus-passes", "lsa,linear_scan_allocator,print_metrics", "--target", "trn1",
        "--metrics", "sg00/metrics.json"]
    assert (work / "replay_walrus.sh").is_file()
    (work / files.GOLDENS).write_bytes(b"PK")
    job.run(_state(work))
    argv = _argv(work, "walrus_driver")
    assert argv[argv.index("--walrus-passes") + 1] == "lsa,linear_scan_allocator,print_metrics,bir_sim"
    assert argv[-2:] == ["--goldens", "goldens.npz"]


def test_walrus_driver_forwards_its_own_backend_options(work, registry, monkeypatch):
    job = _job(registry, "WalrusDriver", _fake_tool(work, "walrus_driver"), monkeypatch)
    (work / files.BIR).write_text("{}")
    job.run(_state(work, internal_backend_options=" --enable-output-completion-notifications --no-spill "
                                                  "--sim-budget-bytes=4096 --unroll-max-trip 8 --dge-levels=io"))
    argv = _argv(work, "walrus_driver")
    assert argv[argv.index("--metrics") + 2:] == ["--no-spill", "--sim-budget-bytes", "4096",
                                                  "--unroll-max-trip", "8"]


def test_walrus_driver_needs_the_frontend_output(work, registry, monkeypatch):
    job = _job(registry, "WalrusDriver", _fake_tool(work, "walrus_driver"), monkeypatch)
    with pytest.raises(InternalCompilerError, match="sg00/bir.json was not produced by Frontend"):
        job.run(_state(work))


def test_neff_wrapper_argv(work, registry, monkeypatch):
    job = _job(registry, "NeffWrapper", _fake_tool(work, "hlo-neff-wrapper"), monkeypatch)
    (work / files.NEFF).write_bytes(b"x")
    job.run(_state(work))
    assert _argv(work, "hlo-neff-wrapper") == [files.MODEL, "--neff", "model.neff", "--output",
                                               "wrapped_neff.hlo"]
    assert (work / "replay_neff_wrapper.sh").is_file()
    # stderr is merged into the streamed output: the tool's NCC line becomes the error
    monkeypatch.setenv("FAKE_MODE", "fail")
    with pytest.raises(UnsupportedOperatorError, match="Operation sort is not supported"):
        job.run(_state(work))


def _block(monkeypatch, *modules):
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)  # import raises ModuleNotFoundError


@pytest.mark.parametrize("name,module,needs", [
    ("Frontend", "neuronxcc.starfish.penguin.frontend", files.PENGUIN),
    ("StaticIOTranspose", "neuronxcc.starfish.penguin.io_transpose", files.BIR),
    ("Kelper", "neuronxcc.neff", files.WALRUS_BIR),
])
def test_in_process_jobs_surface_a_broken_library_as_an_import_error(work, registry, monkeypatch, name, module,
                                                                      needs):
    """A library that fails to import is a bug to see (the driver's one [INTERNAL_ERROR] line, the
    traceback in the log), not "not built yet"; the job writes nothing."""
    (work / needs).write_text("{}")
    _block(monkeypatch, module)
    job = registry.job_factories[name]()
    with pytest.raises(ImportError, match=module.replace(".", r"\.")):
        job.run(_state(work))
    assert sorted(os.listdir(work)) == sorted([needs.split("/")[0]] + (["sg00"] if "/" not in needs else []))


def test_frontend_stages_builtin_custom_op_libs(work, registry, monkeypatch):
    from neuronxcc.driver.jobs import Frontend as fe

    data = work / "data" / "custom_op"
    data.mkdir(parents=True)
    for i in (0, 3):
        (data / ("libbuiltincustomop_cpu%d.so" % i)).write_bytes(b"\x7fELF")
    (data / "libbuiltincustomop_cpu9.so").write_bytes(b"")
    (data / "libbuiltincustomop_cpu1.so").mkdir()
    import neuronxcc.driver.jobs.support.FindCustomOpData as fcod

    monkeypatch.setattr(fcod, "findCustomOpDataDir", lambda: str(data))
    assert fe.stageBuiltinCustomOps() == [str(data / "libbuiltincustomop_cpu0.so"),
                                          str(data / "libbuiltincustomop_cpu3.so")]
    monkeypatch.setattr(fcod, "findCustomOpDataDir", lambda: str(work / "nowhere"))
    from neuronxcc.errors import CustomOpError

    with pytest.raises(CustomOpError) as ei:
        fe.stageBuiltinCustomOps()
    assert ei.value.message == "Custom op data directory not found"


def test_find_custom_op_data_dir_is_in_the_package():
    import neuronxcc
    from neuronxcc.driver.jobs.support.FindCustomOpData import findCustomOpDataDir

    assert findCustomOpDataDir() == os.path.join(os.path.dirname(os.path.abspath(neuronxcc.__file__)),
                                                 "data", "custom_op")
