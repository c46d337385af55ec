"""scripts/bench.py --quick runs and writes its table with every section present.

The benchmark never asserts and this test checks no timing: only that the
script runs to the end, writes the markdown table and the JSON to the paths it
is given, that every section is there with at least one row (a number or a
``fails: <reason>`` row), and that no section fell over as a whole.
"""
import json
import os
import subprocess
import sys

import neuronxcc

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "scripts", "bench.py")

SECTION_TITLES = ("### Targets", "### 1. Compile", "### 1b. Compile", "### 2. Scaling", "### 3. Simulator",
                  "### 3b. birsim", "### 4. Generated code", "### 5. Allocation", "### 5b. Allocators", "### 6a. pelican", "### 6b. HLO reference")
SECTION_KEYS = ("compile", "compile_jobs", "scaling", "simulator", "simulator_tiles", "codegen", "allocation",
                "allocation_sets", "pelican", "interp")


def _env():
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(neuronxcc.__file__)))
    if "site-packages" not in pkg_parent and "dist-packages" not in pkg_parent:
        env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def test_bench_quick_writes_every_section(tmp_path):
    out = tmp_path / "bench.md"
    js = tmp_path / "bench.json"
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- bench:begin -->\nOLD-BLOCK-TEXT\n<!-- bench:end -->\ntail\n")
    r = subprocess.run([sys.executable, BENCH, "--quick", "--output", str(out), "--json", str(js),
                        "--update-readme", "--readme", str(readme)],
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=900, env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    text = out.read_text()
    assert text == r.stdout
    for title in SECTION_TITLES:
        assert title in text, "missing section %r in\n%s" % (title, text)
    assert "(section failed)" not in text, text
    assert "Machine: %d cores" % os.cpu_count() in text

    data = json.loads(js.read_text())
    assert data["mode"] == "quick"
    by_key = {s["key"]: s for s in data["sections"]}
    for key in SECTION_KEYS:
        assert key in by_key, key
        rows = by_key[key]["rows"]
        assert rows, "section %s has no rows" % key
        for row in rows:
            assert len(row) == len(by_key[key]["columns"])
    # every target row says whether it is met (True/False) or cannot be judged yet (None)
    assert data["targets"]
    assert all(t["met"] in (True, False, None) for t in data["targets"])

    # --update-readme rewrote only the block between the markers
    new = readme.read_text()
    assert new.startswith("# x\n\n<!-- bench:begin -->\n") and new.endswith("<!-- bench:end -->\ntail\n")
    assert "OLD-BLOCK-TEXT" not in new and "### 2. Scaling" in new
