"""scripts/bench.py on one small program: it measures what it says and checks the outputs.

A smoke run, never a timing assertion: two sections (compile, simulator) on one corpus program
with one repeat. The test checks that the figures are measured (positive times, a ratio that is
the quotient of the two times it reports), that the simulator section compared birsim's outputs
with XLA's and found them equal, that every target row says whether it is met, and that
``--update-readme`` rewrites only the marked block.
"""
import json
import os
import subprocess
import sys

import pytest

import neuronxcc

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(os.path.dirname(HERE), "scripts", "bench.py")
PROGRAM = "layernorm"


def _env():
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(neuronxcc.__file__)))
    if "site-packages" not in pkg_parent and "dist-packages" not in pkg_parent:
        env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def test_bench_measures_and_checks_one_program(tmp_path):
    if not os.path.isfile(BENCH):
        pytest.skip("scripts/ not next to the tests")
    out, js, readme = tmp_path / "bench.md", tmp_path / "bench.json", tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- bench:begin -->\nOLD-BLOCK-TEXT\n<!-- bench:end -->\ntail\n")
    r = subprocess.run([sys.executable, BENCH, "--quick", "--sections", "compile,simulator", "--programs", PROGRAM,
                        "--repeats", "1", "--output", str(out), "--json", str(js), "--update-readme",
                        "--readme", str(readme)],
                       cwd=str(tmp_path), capture_output=True, text=True, timeout=600, env=_env())
    assert r.returncode == 0, r.stderr[-3000:]
    assert out.read_text() == r.stdout
    data = json.loads(js.read_text())
    by_key = {s["key"]: s for s in data["sections"]}
    assert {"compile", "simulator"} <= set(by_key) and not {"scaling", "codegen", "allocation"} & set(by_key)

    comp = [d for d in by_key["compile"]["data"] if d.get("name") == PROGRAM]
    assert len(comp) == 1 and "fails" not in comp[0], by_key["compile"]["rows"]
    c = comp[0]
    assert c["cli_s"] > 0 and c["inprocess_s"] > 0 and c["xla_compile_s"] > 0
    row = next(r for r in by_key["compile"]["rows"] if r[0] == PROGRAM)
    ratio = float(row[by_key["compile"]["columns"].index("CLI / XLA")].rstrip("x"))
    assert abs(ratio - c["cli_s"] / c["xla_compile_s"]) <= 0.01 * ratio + 0.01       # the quotient it claims

    sim = [d for d in by_key["simulator"]["data"] if d.get("name") == PROGRAM]
    assert len(sim) == 1 and "fails" not in sim[0], by_key["simulator"]["rows"]
    assert sim[0]["outputs"] == "match"                 # birsim's outputs were compared with XLA's
    assert sim[0]["birsim_s"] > 0 and sim[0]["xla_exec_s"] > 0 and sim[0]["instructions"] > 0

    assert data["targets"] and all(t["met"] in (True, False, None) for t in data["targets"])
    new = readme.read_text()
    assert new.startswith("# x\n\n<!-- bench:begin -->\n") and new.endswith("<!-- bench:end -->\ntail\n")
    assert "OLD-BLOCK-TEXT" not in new and PROGRAM in new
