"""JobRegistry: discovery, RTLD_DEEPBIND around each job import, unknown names."""
import importlib
import os
import sys

import pytest

from neuronxcc.driver.JobRegistry import JOBS_PACKAGE, JobRegistry
from neuronxcc.errors import CompilerInvalidInputException

ELEVEN = {"HLOToTensorizer", "XLAInferGoldens", "Frontend", "StaticIOTranspose", "WalrusDriver", "BIRVerifier",
          "Kelper", "NeffWrapper", "Backend", "Watchpoint", "SaveTemps"}
NATIVE = {"HLOToTensorizer", "WalrusDriver", "BIRVerifier", "NeffWrapper", "XLAInferGoldens", "Backend",
          "Watchpoint"}


def test_discovers_the_eleven_jobs():
    reg = JobRegistry()
    assert ELEVEN <= set(reg.job_factories)
    assert set(reg.job_factories) == ELEVEN | {"InferGoldens"}
    native = {n for n in ELEVEN if reg.job_factories[n].executableLocation}
    assert native == NATIVE
    for n in NATIVE:
        loc = reg.job_factories[n].executableLocation
        assert "/" not in loc  # a bare tool name, resolved at run time


def test_unknown_job_name_raises_naming_it():
    reg = JobRegistry()
    with pytest.raises(CompilerInvalidInputException, match="NoSuchJob"):
        reg.makePipeline(["HLOToTensorizer", "NoSuchJob"])
    with pytest.raises(CompilerInvalidInputException, match="Bogus"):
        reg.job_factories["Bogus"]
    assert "Bogus" not in reg.job_factories


def test_make_pipeline_keeps_the_order():
    reg = JobRegistry()
    names = ["Kelper", "HLOToTensorizer", "SaveTemps", "Frontend"]
    assert reg.makePipeline(names).getJobNames() == names


def test_rtld_deepbind_set_for_each_import_and_restored(monkeypatch):
    calls = []
    real_set = sys.setdlopenflags
    base = sys.getdlopenflags()

    def record(flags):
        calls.append(flags)
        real_set(flags)

    imported = []
    real_import = importlib.import_module

    def tracking_import(name, *a, **k):
        if name.startswith(JOBS_PACKAGE + "."):
            imported.append((name, sys.getdlopenflags()))
            if name.endswith(".Watchpoint"):
                raise ImportError("simulated failure importing Watchpoint")
        return real_import(name, *a, **k)

    monkeypatch.setattr(sys, "setdlopenflags", record)
    monkeypatch.setattr(importlib, "import_module", tracking_import)
    try:
        reg = JobRegistry()
    finally:
        monkeypatch.undo()
    assert sys.getdlopenflags() == base
    mods = [n for n, _ in imported]
    assert len(mods) == 11 and len(set(mods)) == 11
    # every job module was imported with RTLD_DEEPBIND on
    assert all(flags & os.RTLD_DEEPBIND for _, flags in imported)
    # set -> restore, once per job, including the failed one
    assert calls == [base | os.RTLD_DEEPBIND, base] * 11
    assert "Watchpoint" not in reg.job_factories
    assert "Kelper" in reg.job_factories


def test_rejected_job_names_are_skipped(monkeypatch):
    class Reg(JobRegistry):
        rejected_job_names = ("support", "Backend", "Watchpoint")

    reg = Reg()
    assert "Backend" not in reg.job_factories and "Watchpoint" not in reg.job_factories
    assert "Kelper" in reg.job_factories
