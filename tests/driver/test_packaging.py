"""Packaging facts the driver depends on: cibuildwheel build identifiers and console scripts."""
import os
import re
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPROJECT = os.path.join(ROOT, "pyproject.toml")
INTENDED = ["cp310-manylinux_x86_64", "cp311-manylinux_x86_64", "cp312-manylinux_x86_64",
            "cp313-manylinux_x86_64"]


def _load():
    if not os.path.isfile(PYPROJECT):
        pytest.skip("pyproject.toml is not next to the tests (tests run from an sdist-less copy)")
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        tomllib = pytest.importorskip("tomli")
    with open(PYPROJECT, "rb") as f:
        return tomllib.load(f)


def test_cibuildwheel_builds_cp310_to_cp313_manylinux():
    cfg = _load()["tool"]["cibuildwheel"]
    build = cfg["build"]
    build = build.split() if isinstance(build, str) else list(build)
    assert sorted(build) == INTENDED
    for ident in build:
        assert re.fullmatch(r"cp3(1[0-3])-manylinux_x86_64", ident)
    assert "auditwheel repair" in cfg["linux"]["repair-wheel-command"]
    assert "manylinux" in cfg.get("manylinux-x86_64-image", "manylinux")


def test_console_scripts_point_at_the_driver_and_the_tools():
    scripts = _load()["project"]["scripts"]
    assert scripts["neuronx-cc"] == "neuronxcc.driver.CommandDriver:main"
    from neuronxcc.starfish.tools import TOOLS

    inventory = {"hlo2penguin", "xla_infergoldens", "hlo-opt", "hlo-neff-wrapper", "snapshot-unpack",
                 "walrus_bugpoint_driver", "coloring_allocator_with_loop", "full_unroll", "walrus_driver", "birsim"}
    assert inventory <= set(scripts) and inventory <= set(TOOLS)
    assert TOOLS["snapshot-unpack"] == ("neuronxcc.driver.jobs.support.Snapshot", "unpack_main")


def test_every_driver_module_is_compiled_at_install():
    """setup.py compiles every neuronxcc/driver/**/*.py except __init__ with Cython."""
    if not os.path.isfile(os.path.join(ROOT, "setup.py")):
        pytest.skip("setup.py not available")
    import neuronxcc.driver

    src = os.path.join(ROOT, "neuronxcc", "driver")
    mods = []
    for d, _, fs in os.walk(src):
        mods += [os.path.join(d, f) for f in fs if f.endswith(".py") and f != "__init__.py"]
    assert len(mods) >= 25
    installed = os.path.dirname(neuronxcc.driver.__file__)
    if os.path.realpath(installed) != os.path.realpath(src):
        # testing an installed package: each module must be an extension, not a .py
        for path in mods:
            rel = os.path.splitext(os.path.relpath(path, src))[0]
            base = os.path.join(installed, rel)
            assert not os.path.exists(base + ".py"), rel
            assert any(f.startswith(os.path.basename(rel) + ".") and f.endswith(".so")
                       for f in os.listdir(os.path.dirname(base))), rel
