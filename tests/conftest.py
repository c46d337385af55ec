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
