"""scripts/bench_hlo_interp.py runs and prints a ratio per program and the median
(a smoke run: the benchmark's figures are never asserted)."""
import os
import re
import subprocess
import sys

from support.cli import _env

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts", "bench_hlo_interp.py")


def test_bench_quick_prints_ratios_and_median():
    r = subprocess.run([sys.executable, SCRIPT, "--quick", "--size", "small", "layernorm", "matmul_grad"],
                       capture_output=True, text=True, timeout=600, env=_env())
    assert r.returncode == 0, r.stderr
    rows = [l for l in r.stdout.splitlines() if re.match(r"^(layernorm|matmul_grad)\s+[\d.]+\s+[\d.]+\s+[\d.]+x\s+ok$", l)]
    assert len(rows) == 2, r.stdout
    assert re.search(r"median ratio over 2 programs: [\d.]+x", r.stdout), r.stdout
