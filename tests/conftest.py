"""Shared fixtures. Tests import the installed package (ci/test.sh) or, in a
developer checkout, the source tree via PYTHONPATH=. (see README)."""
import os

import pytest

from support.cli import run_ncc, tool_path  # noqa: F401  (re-exported for tests)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    """A fresh directory that is also the cwd."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(autouse=True)
def _quiet_jax(monkeypatch):
    monkeypatch.setenv("JAX_PLATFORMS", os.environ.get("JAX_PLATFORMS", "cpu"))


@pytest.fixture(scope="session")
def spmd_dir(tmp_path_factory):
    """Multi-rank programs with XLA:CPU's per-rank results (support/spmd.py), generated once in a
    subprocess that sees 8 host devices (the rest of the suite keeps one)."""
    from support import spmd
    d = tmp_path_factory.mktemp("spmd")
    spmd.generate(str(d))
    return str(d)
