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


def test_console_scripts_are_the_tool_table():
    """pyproject's scripts are exactly neuronx-cc plus one per row of the tool table, each naming
    the table's entry point for it, which exists and reaches the row's main."""
    scripts = _load()["project"]["scripts"]
    assert scripts.pop("neuronx-cc") == "neuronxcc.driver.CommandDriver:main"
    from neuronxcc.starfish import tools

    assert set(scripts) == set(tools.TOOLS)
    for name, target in scripts.items():
        mod, fn = target.split(":")
        assert mod == "neuronxcc.starfish.tools" and fn == name.replace("-", "_") + "_main", target
        assert callable(getattr(tools, fn)), target
    assert tools.TOOLS["snapshot-unpack"] == ("neuronxcc.driver.jobs.support.Snapshot", "unpack_main")
    import importlib
    for name, (mod, fn) in tools.TOOLS.items():
        assert callable(getattr(importlib.import_module(mod), fn)), name


@pytest.mark.parametrize("package, at_least", [(("driver",), 20), (("starfish", "penguin"), 15)])
def test_every_compiled_module_is_an_extension_when_installed(package, at_least):
    """setup.py compiles every .py of neuronxcc/driver and neuronxcc/starfish/penguin except
    __init__ with Cython; an installed package ships them as extensions only."""
    if not os.path.isfile(os.path.join(ROOT, "setup.py")):
        pytest.skip("setup.py not available")
    import importlib

    pkg = importlib.import_module(".".join(("neuronxcc",) + package))
    src = os.path.join(ROOT, "neuronxcc", *package)
    mods = []
    for d, _, fs in os.walk(src):
        mods += [os.path.join(d, f) for f in fs if f.endswith(".py") and f != "__init__.py"]
    assert len(mods) >= at_least
    installed = os.path.dirname(pkg.__file__)
    if os.path.realpath(installed) != os.path.realpath(src):
        # testing an installed package: each module must be an extension, not a .py
        for path in mods:
            rel = os.path.splitext(os.path.relpath(path, src))[0]
            base = os.path.join(installed, rel)
            assert not os.path.exists(base + ".py"), rel
            assert any(f.startswith(os.path.basename(rel) + ".") and f.endswith(".so")
                       for f in os.listdir(os.path.dirname(base))), rel
    else:
        # a checkout: plain Python, editable without a rebuild
        for path in mods:
            base = os.path.splitext(path)[0]
            assert not any(f.startswith(os.path.basename(base) + ".") and f.endswith(".so")
                           for f in os.listdir(os.path.dirname(base))), path


def test_an_installed_package_has_the_bytecode_of_every_python_module():
    """Every plain-Python module of an installed package has current bytecode beside it (pip
    compiles it at install): without it every process of every compile compiles the modules it
    imports from source again when PYTHONDONTWRITEBYTECODE is set or site-packages is read-only."""
    import importlib.util

    import neuronxcc

    installed = os.path.dirname(os.path.abspath(neuronxcc.__file__))
    if os.path.realpath(installed) == os.path.realpath(os.path.join(ROOT, "neuronxcc")):
        pytest.skip("a checkout, not an installed package")
    stale = []
    n = 0
    for d, dirs, fs in os.walk(installed):
        dirs[:] = [x for x in dirs if x != "__pycache__"]
        for f in fs:
            if not f.endswith(".py"):
                continue
            n += 1
            src = os.path.join(d, f)
            pyc = importlib.util.cache_from_source(src)
            try:
                with open(pyc, "rb") as fh:
                    head = fh.read(16)
            except OSError:
                stale.append(os.path.relpath(src, installed))
                continue
            st = os.stat(src)
            flags = int.from_bytes(head[4:8], "little")
            ok = head[:4] == importlib.util.MAGIC_NUMBER and (
                flags != 0 or (int.from_bytes(head[8:12], "little") == int(st.st_mtime) & 0xFFFFFFFF
                               and int.from_bytes(head[12:16], "little") == st.st_size & 0xFFFFFFFF))
            if not ok:
                stale.append(os.path.relpath(src, installed))
    assert n > 50
    assert stale == [], stale[:10]
