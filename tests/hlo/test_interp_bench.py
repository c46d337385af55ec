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
    rows = [re.match(r"^(layernorm|matmul_grad)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+ok$", l)
            for l in r.stdout.splitlines()]
    rows = [m for m in rows if m]
    assert [m.group(1) for m in rows] == ["layernorm", "matmul_grad"], r.stdout   # outputs matched XLA ("ok")
    ratios = []
    for m in rows:
        t_int, t_xla, ratio = float(m.group(2)), float(m.group(3)), float(m.group(4))
        assert t_int > 0 and t_xla > 0
        # the quotient of the two times it prints (each rounded to 1 us, the ratio to 0.1)
        assert abs(ratio - t_int / t_xla) <= 0.051 + ratio * (0.0005 / t_int + 0.0005 / t_xla) * 1.01, m.group(0)
        ratios.append(ratio)
    med = re.search(r"median ratio over 2 programs: ([\d.]+)x", r.stdout)
    assert med and abs(float(med.group(1)) - sum(ratios) / 2) <= 0.06 + 0.01 * max(ratios), r.stdout
