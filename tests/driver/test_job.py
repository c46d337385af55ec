"""Job: private-first tool resolution, shellCommand, error mapping, replay scripts, launch-dir paths."""
import os
import stat
import sys

import pytest

from neuronxcc.driver import Job as jobmod
from neuronxcc.driver.Job import ChildProcessJobError, Job, errorFromChildOutput
from neuronxcc.errors import (CompilerInvalidInputException, HloParseError, NotBuiltYetError,
                              UnsupportedOperatorError)


def _exe(path, body):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body + "\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class FakePkgJob(Job):
    pkg = None

    @staticmethod
    def getPackageDir():
        return FakePkgJob.pkg


@pytest.fixture
def fakepkg(tmp_path):
    FakePkgJob.pkg = str(tmp_path / "neuronxcc")
    return tmp_path / "neuronxcc"


def test_private_bin_overrides_public(fakepkg):
    pub = _exe(str(fakepkg / "starfish" / "bin" / "mytool"), "echo public")
    priv = _exe(str(fakepkg / "starfish" / "bin" / "private" / "mytool"), "echo private")
    only = _exe(str(fakepkg / "starfish" / "bin" / "onlypublic"), "echo public")
    job = FakePkgJob()
    assert job.getFullyQualifiedLocation("mytool") == priv
    assert job.getFullyQualifiedLocation("onlypublic") == only
    os.unlink(priv)
    assert job.getFullyQualifiedLocation("mytool") == pub


def test_absolute_path_passes_through_and_miss_raises(fakepkg):
    job = FakePkgJob()
    assert job.getFullyQualifiedLocation("/no/such/abs/tool") == "/no/such/abs/tool"
    with pytest.raises(CompilerInvalidInputException, match="^Could not find nosuchtool$"):
        job.getFullyQualifiedLocation("nosuchtool")


def test_real_package_resolves_shipped_tools_and_not_the_unshipped():
    job = Job()
    pkg = job.getPackageDir()
    import neuronxcc

    assert pkg == os.path.dirname(os.path.abspath(neuronxcc.__file__))
    for tool in ("walrus_driver", "hlo2penguin", "xla_infergoldens", "hlo-neff-wrapper"):
        assert job.getFullyQualifiedLocation(tool) == os.path.join(pkg, "starfish", "bin", tool)
    for tool in ("nn_executor", "watchpoint_insert"):
        with pytest.raises(CompilerInvalidInputException, match="Could not find " + tool):
            job.getFullyQualifiedLocation(tool)


@pytest.mark.parametrize("name,tool", [("Backend", "nn_executor"), ("Watchpoint", "watchpoint_insert")])
def test_unshipped_tool_jobs_fail_with_could_not_find(tmp_path, monkeypatch, name, tool):
    from neuronxcc.driver.CompileState import CompileState
    from neuronxcc.driver.JobRegistry import JobRegistry
    import argparse

    monkeypatch.chdir(tmp_path)
    job = JobRegistry().job_factories[name]()
    with pytest.raises(CompilerInvalidInputException) as ei:
        job.run(CompileState(argparse.Namespace(target="trn1"), workdir=str(tmp_path)))
    assert ei.value.one_line() == "[NCC_EARG001] Could not find " + tool


def test_shell_command_runs_without_shell_and_writes_replay(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = Job()
    rc, out, err = job.shellCommand([sys.executable, "-c", "import sys; print('a b'); sys.stderr.write('e')"])
    assert rc == 0 and out.strip() == "a b" and err == "e"
    script = tmp_path / "replay_Job.sh"
    assert script.is_file() and os.access(script, os.X_OK)
    assert "-c" in script.read_text()
    # useShell goes through /bin/bash -c, still shell=False
    rc, out, _ = job.shellCommand("echo $((1+2)) && echo two", useShell=True)
    assert out.split() == ["3", "two"]
    # a string without useShell is split, not given to a shell
    rc, out, _ = job.shellCommand("echo '$HOME;' x")
    assert out.strip() == "$HOME; x"


def test_shell_command_logs_replay_line(tmp_path, monkeypatch, caplog):
    import logging

    monkeypatch.chdir(tmp_path)
    with caplog.at_level(logging.DEBUG):
        Job().shellCommand(["true"])
    assert "Replay this job by calling: cd %s && true" % tmp_path in caplog.text
    assert "Executing true" in caplog.text


def test_child_ncc_line_becomes_the_matching_error(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    job = Job()
    with pytest.raises(UnsupportedOperatorError) as ei:
        job.shellCommand(["/bin/sh", "-c", "echo noise; echo '[NCC_EVRF001] Operation sort is not supported' >&2;"
                                          " exit 70"])
    assert ei.value.one_line() == "[NCC_EVRF001] Operation sort is not supported"
    with pytest.raises(NotBuiltYetError) as ei:
        job.shellCommand(["/bin/sh", "-c", "echo '[INTERNAL_ERROR] [NCC_INBY001] tool: x is not built yet' >&2;"
                                          " exit 70"])
    assert ei.value.one_line().startswith("[INTERNAL_ERROR] [NCC_INBY001] tool: x is not built yet - Please")
    with pytest.raises(ChildProcessJobError) as ei:
        job.shellCommand(["/bin/sh", "-c", "echo plain failure >&2; exit 3"])
    assert ei.value.message == 'Child process job "Job" exited abnormally!'
    assert ei.value.detail == "exit status 3; last output: plain failure"
    with pytest.raises(ChildProcessJobError) as ei:
        job.shellCommand(["/bin/sh", "-c", "kill -9 $$"])
    assert ei.value.detail == "killed by signal 9"
    rc, _, _ = job.shellCommand(["/bin/sh", "-c", "exit 4"], propagate_exit=False)
    assert rc == 4


def test_error_from_child_output_keeps_class_and_text():
    e = errorFromChildOutput("x\n[NCC_EHLO001] bad HLO text (line 3, column 4)\n")
    assert isinstance(e, HloParseError) and e.one_line() == "[NCC_EHLO001] bad HLO text (line 3, column 4)"
    assert errorFromChildOutput("nothing here") is None


def test_get_abs_path_is_relative_to_the_launch_dir(tmp_path, monkeypatch):
    launch = tmp_path / "launch"
    work = tmp_path / "work"
    launch.mkdir()
    work.mkdir()
    monkeypatch.chdir(work)
    jobmod.setLaunchDir(str(launch))
    try:
        assert Job.getAbsPath("out/file.neff") == str(launch / "out" / "file.neff")
        assert Job.getAbsPath("/abs/x") == "/abs/x"
    finally:
        jobmod.setLaunchDir(None)
    assert Job.getAbsPath("y") == str(work / "y")
