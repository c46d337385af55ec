"""runPipeline: work directories, publishing --output, SaveTemps snapshots and
their replay, concurrent compiles, and the end-to-end compile of a small module."""
import argparse
import glob
import json
import os
import re
import struct
import subprocess
import tarfile

import pytest

from neuronxcc.driver.Job import Job
from neuronxcc.driver.Pipeline import Pipeline
from support.cli import _env, ncc_command, run_ncc, run_tool

HERE = os.path.dirname(os.path.abspath(__file__))
ADD_PB = os.path.join(HERE, "data", "add.hlo_module.pb")
ADD_TXT = os.path.join(HERE, "data", "add.hlo")
SUB_TXT = os.path.join(HERE, "data", "sub.hlo")


def _lines(text):
    return [l for l in text.splitlines() if l.strip()]


def _check_compile_result(r, out):
    """The compile passed and wrote a whole NEFF at ``out`` (every layer is built: nothing else is accepted)."""
    assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
    assert "Compiler status PASS" in r.stdout
    assert "Traceback" not in r.stdout + r.stderr
    data = open(out, "rb").read()
    assert len(data) > 1024
    header_size, data_size = struct.unpack_from("<QQ", data, 8)
    assert header_size == 1024 and data_size == len(data) - 1024
    assert [p for p in os.listdir(os.path.dirname(out)) if os.path.basename(out) in p] == [os.path.basename(out)]


@pytest.mark.parametrize("inp", [ADD_TXT])
def test_end_to_end_compile_runs_on_the_simulator(tmp_path, inp):
    out = tmp_path / "out.neff"
    r = run_ncc(["--target=trn1", "compile", "--framework", "XLA", inp, "--output", str(out), "--verbose=35"],
                cwd=tmp_path)
    _check_compile_result(r, str(out))
    assert r.stdout.startswith(".")
    assert not glob.glob(str(tmp_path / "neuronxcc-*"))  # the work dir of a passing compile is removed
    # the NEFF computes (x + y) * 2 on the bundled simulator (f32: exact for these small integers)
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.integers(-50, 50, (4, 8)).astype(np.float32)
    y = rng.integers(-50, 50, (4, 8)).astype(np.float32)
    np.savez(tmp_path / "in.npz", input0=x, input1=y)
    s = run_tool("birsim", [str(out), "--inputs", "in.npz", "--output", "res.npz"], cwd=tmp_path)
    assert s.returncode == 0, s.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "res.npz")["output0"], (x + y) * 2)


def _callers(work):
    """Command lines of real callers (drop-in-contract section 2), on a copy of the small module."""
    return {
        "libneuronxla": ["compile", "--framework=XLA", "model.MODULE_1+d41d8cd9.hlo_module.pb", "--output",
                         "model.MODULE_1+d41d8cd9.neff", "--target=trn1", "--verbose=35"],
        "nkipy": ["compile", "--framework", "XLA", str(work / "hlo_module.pb"), "--pipeline", "compile",
                  "SaveTemps", "--target", "trn1", "--output=k.neff", "--lnc", "1",
                  "--internal-tensorizer-opt-level=2"],
        "nxd": ["compile", str(work / "model" / "graph.hlo"), "--framework", "XLA", "--target", "trn1",
                "--output", str(work / "compiled" / "graph.neff"), "--auto-cast=none", "--model-type=transformer",
                "--tensorizer-options=--enable-ccop-compute-overlap --cc-pipeline-tiling-factor=2", "-O1",
                "--internal-num-neuroncores-per-sengine=1", "--logfile=%s" % (work / "log-neuron-cc.txt"),
                "--enable-internal-neff-wrapper", "--verbose=35", "--enable-saturate-infinity"],
        "zml": ["compile", "--framework=XLA", "--target", "trn2", "--enable-internal-neff-wrapper", "--output",
                str(work / "file.neff"), "--optlevel=1", "--model-type=transformer", "--auto-cast=none",
                "--enable-fast-loading-neuron-binaries", "--verbose", "info", "--logfile-verbose", "info",
                "--logfile=./log-neuron-cc.txt", str(work / "file.code")],
        "torch-neuronx-dir": ["compile", str(work / "model"), "--framework", "XLA", "--target", "trn1",
                              "--output", str(work / "dir.neff")],
    }


OUTPUTS = {"libneuronxla": "model.MODULE_1+d41d8cd9.neff", "nkipy": "k.neff", "nxd": "compiled/graph.neff",
           "zml": "file.neff", "torch-neuronx-dir": "dir.neff"}


@pytest.mark.parametrize("caller", sorted(OUTPUTS))
def test_real_caller_command_lines(tmp_path, caller):
    data = open(ADD_PB, "rb").read()
    for name in ("model.MODULE_1+d41d8cd9.hlo_module.pb", "hlo_module.pb", "file.code"):
        (tmp_path / name).write_bytes(data)
    (tmp_path / "model").mkdir()
    (tmp_path / "compiled").mkdir()
    (tmp_path / "model" / "graph.hlo").write_bytes(data)
    (tmp_path / "model" / "metadata.json").write_text(
        json.dumps({"model_files": "graph.hlo", "version": "1.0", "weights": {}}))
    r = run_ncc(_callers(tmp_path)[caller], cwd=tmp_path)
    if caller == "zml":  # --verbose info: log lines on stdout, errors still one line on stderr
        r = subprocess.CompletedProcess(r.args, r.returncode,
                                        "\n".join(l for l in r.stdout.splitlines() if " INFO " not in l), r.stderr)
    neff = tmp_path / OUTPUTS[caller]
    _check_compile_result(r, str(neff))
    wrapped = neff.parent / "wrapped_neff.hlo"
    # --enable-internal-neff-wrapper: wrapped_neff.hlo next to the NEFF
    assert wrapped.is_file() == (caller in ("nxd", "zml"))
    if wrapped.is_file():
        # our own HLO reader takes it; the entry is the parameters plus one AwsNeuronNeff custom-call
        # whose backend_config is the NEFF itself (drop-in-contract 2.1)
        from neuronxcc.hlo import load_module

        module = load_module(str(wrapped))
        calls = [i for i in module.entry.instructions if i.opcode == "custom-call"]
        assert [c.custom_call_target for c in calls] == ["AwsNeuronNeff"]
        assert calls[0].backend_config == neff.read_bytes()
        params = [i for i in module.entry.instructions if i.opcode == "parameter"]
        assert len(params) == 2 and calls[0].frontend_attributes["valid_inputs"] == "1,1"


def test_concurrent_compiles_in_one_directory_use_separate_work_dirs(tmp_path):
    procs = []
    for i, inp in enumerate((ADD_TXT, SUB_TXT)):
        args = ["compile", inp, "--target", "trn1", "--output", "out%d.neff" % i, "--logfile", "log%d.txt" % i,
                "--pipeline", "compile", "SaveTemps"]
        procs.append(subprocess.Popen(ncc_command() + args, cwd=tmp_path, env=_env(), text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    results = [p.communicate(timeout=600) + (p.returncode,) for p in procs]
    workdirs = []
    for i, (out, err, rc) in enumerate(results):
        r = subprocess.CompletedProcess([], rc, out, err)
        _check_compile_result(r, str(tmp_path / ("out%d.neff" % i)))
        log = (tmp_path / ("log%d.txt" % i)).read_text()
        m = re.search(r"Intermediate files stored in (\S+), output in", log)
        workdirs.append(m.group(1))
    assert workdirs[0] != workdirs[1]
    assert all(os.path.dirname(w) == str(tmp_path) for w in workdirs)
    for i, (w, inp) in enumerate(zip(workdirs, (ADD_TXT, SUB_TXT))):
        with tarfile.open(os.path.join(w, "snapshot.tar.gz")) as tar:
            manifest = json.load(tar.extractfile("manifest.json"))
        assert manifest["original_input"] == inp
        staged = open(os.path.join(w, "model.hlo_module.pb"), "rb").read()
        assert (b"subtract" in staged) == (i == 1)


def test_temp_dir_and_save_temps_snapshot_replays(tmp_path):
    tdir = tmp_path / "tmpd"
    r = run_ncc(["compile", ADD_PB, "--framework=XLA", "--target=trn1", "--output=a.neff", "--lnc", "1",
                 "--temp-dir", str(tdir), "--pipeline", "compile", "SaveTemps", "--enable-saturate-infinity"],
                cwd=tmp_path)
    _check_compile_result(r, str(tmp_path / "a.neff"))
    (workdir,) = glob.glob(str(tdir / "neuronxcc-*"))
    assert not glob.glob(str(tmp_path / "neuronxcc-*"))
    snap = os.path.join(workdir, "snapshot.tar.gz")
    dest = tmp_path / "unpacked"
    u = run_tool("snapshot-unpack", [snap, "-o", str(dest)], cwd=tmp_path)
    assert u.returncode == 0, u.stderr
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["versions"]["neuronxcc"]
    assert (dest / "inputs" / "add.hlo_module.pb").read_bytes() == open(ADD_PB, "rb").read()
    flags = manifest["flags"]
    assert "--target=trn1" in flags and "--enable-saturate-infinity" in flags
    assert not any(f.startswith("--output") or f.startswith("--temp-dir") for f in flags)
    replay = (dest / "replay.sh").read_text()
    assert "compile inputs/add.hlo_module.pb" in replay and "--output a.neff" in replay
    # replaying in the unpacked directory reaches the same outcome
    rr = run_tool("snapshot-unpack", [snap, "-o", str(tmp_path / "again"), "--replay"], cwd=tmp_path)
    assert rr.returncode == 0, rr.stderr
    again, first = (tmp_path / "again" / "a.neff").read_bytes(), (tmp_path / "a.neff").read_bytes()
    # the same bytes but for the header's random v4 uuid (offset 204, 16 bytes)
    assert again[:204] + again[220:] == first[:204] + first[220:]


def test_snapshot_unpack_rejects_bad_input(tmp_path):
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(b"not a tar")
    r = run_tool("snapshot-unpack", [str(bad)], cwd=tmp_path)
    assert r.returncode == 70 and _lines(r.stderr)[0].startswith("[NCC_EINP001]")
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as tar:
        for name in ("manifest.json", "../escape.txt"):
            info = tarfile.TarInfo(name)
            info.size = 2
            import io

            tar.addfile(info, io.BytesIO(b"{}"))
    r = run_tool("snapshot-unpack", [str(evil), "-o", str(tmp_path / "x")], cwd=tmp_path)
    assert r.returncode == 70 and "escapes" in r.stderr
    assert not (tmp_path / "escape.txt").exists()
    # a manifest that is not what SaveTemps writes, a file as the output dir, no argument at all
    import io

    odd = tmp_path / "odd.tar.gz"
    with tarfile.open(odd, "w:gz") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"[]"))
    (tmp_path / "afile").write_text("")
    for args, expect in (([str(odd), "-o", str(tmp_path / "o")], "[NCC_EINP001] %s: malformed manifest.json" % odd),
                         ([str(odd), "-o", str(tmp_path / "afile")], "[NCC_EARG002] cannot create the output "
                                                                     "directory %s: " % (tmp_path / "afile")),
                         ([], "[NCC_EARG002] snapshot-unpack: the following arguments are required: snapshot")):
        r = run_tool("snapshot-unpack", args, cwd=tmp_path)
        assert r.returncode == 70 and len(_lines(r.stderr)) == 1, r.stderr
        assert _lines(r.stderr)[0].startswith(expect), r.stderr


# -- publishing --output, in process with stand-in jobs -------------------------------------
class _WriteNeff(Job):
    @classmethod
    def getName(cls):
        return "Kelper"

    def runSingleInput(self, state):
        with open("model.neff", "wb") as f:
            f.write(b"NEFF-BYTES")


class _Fail(Job):
    def runSingleInput(self, state):
        from neuronxcc.errors import UnsupportedOperatorError

        raise UnsupportedOperatorError("late failure")


def _run(tmp_path, monkeypatch, jobs, output):
    from neuronxcc.driver.commands.CompileCommand import CompileCommand

    monkeypatch.chdir(tmp_path)
    cc = CompileCommand()
    pipeline = Pipeline()
    for j in jobs:
        pipeline.addJob(j())
    args = cc.parseArgs([ADD_PB, "--output", output])
    return cc.runPipeline(pipeline, args)


def test_output_published_only_when_every_job_passes(tmp_path, monkeypatch):
    out = tmp_path / "keep.neff"
    out.write_bytes(b"OLD")
    from neuronxcc.errors import UnsupportedOperatorError

    with pytest.raises(UnsupportedOperatorError):
        _run(tmp_path, monkeypatch, [_WriteNeff, _Fail], "keep.neff")
    assert out.read_bytes() == b"OLD"
    assert len(glob.glob(str(tmp_path / "neuronxcc-*"))) == 1  # kept for diagnosis
    assert os.getcwd() == str(tmp_path)
    assert _run(tmp_path, monkeypatch, [_WriteNeff], "keep.neff") == 0
    assert out.read_bytes() == b"NEFF-BYTES"
    assert len(glob.glob(str(tmp_path / "neuronxcc-*"))) == 1  # the passing compile removed its own
    assert sorted(p.name for p in tmp_path.iterdir() if "keep.neff" in p.name) == ["keep.neff"]


def test_pipeline_log_lines_and_progress_dots(tmp_path, monkeypatch, caplog, capsys):
    import logging

    with caplog.at_level(logging.INFO):
        assert _run(tmp_path, monkeypatch, [_WriteNeff], "p.neff") == 0
    text = caplog.text
    for pat in (r"Intermediate files stored in \S+neuronxcc-\w+, output in \S+p\.neff",
                r"Running pipeline compile 1", r"Starting job Kelper",
                r"Finished job Kelper in \d+\.\d{3} seconds", r"Finished pipeline compile in \d+\.\d{3} seconds"):
        assert re.search(pat, text), pat
    assert capsys.readouterr().out == ".\n"


def test_compile_metrics_file(tmp_path, monkeypatch):
    from neuronxcc.driver.commands.CompileCommand import CompileCommand

    monkeypatch.chdir(tmp_path)
    cc = CompileCommand()
    pipeline = Pipeline()
    pipeline.addJob(_WriteNeff())
    args = cc.parseArgs([ADD_PB, "--output", "m.neff", "--internal-compile-metrics", "metrics.json"])
    cc.walrus_passes = ["lsa"]
    assert cc.runPipeline(pipeline, args) == 0
    doc = json.loads((tmp_path / "metrics.json").read_text())
    assert doc["status"] == "PASS" and doc["jobs"] == ["Kelper"] and doc["walrus_passes"] == ["lsa"]
    assert set(doc["job_seconds"]) == {"Kelper"} and doc["total_seconds"] >= doc["job_seconds"]["Kelper"] >= 0


def test_kelper_without_neff_is_an_internal_error(tmp_path, monkeypatch):
    from neuronxcc.errors import InternalCompilerError

    class _NoNeff(_WriteNeff):
        def runSingleInput(self, state):
            pass

    with pytest.raises(InternalCompilerError, match="without writing model.neff"):
        _run(tmp_path, monkeypatch, [_NoNeff], "x.neff")
    assert not (tmp_path / "x.neff").exists()


def test_an_unwritable_output_is_one_user_error_and_leaves_no_temporary(tmp_path, monkeypatch):
    # A write that fails when the NEFF is published (e.g. a read-only file system, where the
    # up-front access check cannot tell): the user's error, not an internal one, and no leftovers.
    from neuronxcc.errors import InvalidArgumentError

    real_replace = os.replace

    def refuse(src, dst, *a, **kw):
        if str(dst).endswith("ro.neff"):
            raise PermissionError(13, "Permission denied", dst)
        return real_replace(src, dst, *a, **kw)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(InvalidArgumentError, match=r"^cannot write \S+ro\.neff: Permission denied$"):
        _run(tmp_path, monkeypatch, [_WriteNeff], "ro.neff")
    assert not (tmp_path / "ro.neff").exists()
    assert not glob.glob(str(tmp_path / "*ro.neff*"))  # no temporary left next to it


def test_trn2_lnc2_says_once_when_one_core_does_all_the_work(tmp_path):
    from neuronxcc.neff import read_neff
    out = tmp_path / "t.neff"
    r = run_ncc(["compile", ADD_TXT, "--framework", "XLA", "--target", "trn2", "--output", str(out)], cwd=tmp_path)
    _check_compile_result(r, str(out))
    said = [l for l in (r.stdout + r.stderr).splitlines() if "--lnc 2" in l]
    assert len(said) == 1 and "does all the work" in said[0], r.stdout + r.stderr     # one kernel
    assert read_neff(str(out)).header.lnc_size == 2


def test_a_compile_parses_its_hlo_in_the_driver_only(tmp_path, monkeypatch):
    """stageInput parses the staged model.hlo_module.pb once and shares it (hlo.loader.share_parsed):
    the forked hlo2penguin and xla_infergoldens parse nothing; exec'd, each parses it itself. The
    share is withdrawn after the compile."""
    import os

    from neuronxcc.driver import ToolProcess
    from neuronxcc.driver.CommandDriver import CommandDriver
    from neuronxcc.hlo import loader, proto_io

    monkeypatch.setattr(ToolProcess, "_heap_is_small", lambda: True)   # this test process's heap is not the point
    calls = tmp_path / "parses.txt"
    real = proto_io.module_from_proto_bytes

    def counted(data, verify=True):
        with open(calls, "a") as f:
            f.write("%d\n" % os.getpid())
        return real(data, verify=verify)

    monkeypatch.setattr(proto_io, "module_from_proto_bytes", counted)
    model = tmp_path / "m.hlo"
    model.write_text("HloModule m\n\nENTRY e {\n  a = f32[4,8]{1,0} parameter(0)\n"
                     "  b = f32[4,8]{1,0} parameter(1)\n  ROOT c = f32[4,8]{1,0} add(a, b)\n}\n")
    for exec_tools in (False, True):
        if exec_tools:
            monkeypatch.setenv("NEURONXCC_TOOL_EXEC", "1")
        else:
            monkeypatch.delenv("NEURONXCC_TOOL_EXEC", raising=False)
        if calls.exists():
            calls.unlink()
        monkeypatch.chdir(tmp_path)
        rc = CommandDriver().run(["neuronx-cc", "--logfile", str(tmp_path / "log.txt"), "compile", str(model),
                                  "--framework", "XLA", "--target", "trn1", "--output", str(tmp_path / "o.neff")])
        assert rc == 0
        pids = calls.read_text().split() if calls.exists() else []
        if exec_tools:
            assert pids == []       # the exec'd tools' own processes parse (the driver read text, staged once)
        else:
            assert pids == [str(os.getpid())]          # the staged bytes, parsed once, here
        assert loader._SHARED[0] is None
