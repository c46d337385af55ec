"""Bad HLO input through ``neuronx-cc compile``: exit 70, one [NCC_...] line, never a traceback."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402
from support.cli import run_ncc  # noqa: E402

GOOD = """HloModule m

ENTRY main {
  p0 = f32[2,3]{1,0} parameter(0)
  p1 = f32[2,3]{1,0} parameter(1)
  ROOT add = f32[2,3]{1,0} add(p0, p1)
}
"""

CASES = {
    "empty": (b"", "NCC_EINP001"),    # the driver checks the file before any reader
    "truncated_proto": (None, "NCC_EHLO001"),
    "corrupt": (b"\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01garbage", "NCC_EHLO001"),
    "syntax": (GOOD.replace("add(p0, p1)", "add(p0, p1").encode(), "NCC_EHLO001"),
    "shapes": (GOOD.replace("p1 = f32[2,3]{1,0}", "p1 = f32[3,2]{1,0}").encode(), "NCC_EVRF002"),
    "missing_parameter": (GOOD.replace("parameter(1)", "parameter(2)").encode(), "NCC_EVRF002"),
    "too_large": (GOOD.replace("ROOT add", "big = f32[4000000000]{0} constant({0})\n  ROOT add").encode(),
                  "NCC_EOOM001"),
}


@pytest.mark.parametrize("case", sorted(CASES) + ["no_metadata_dir"])
def test_compile_bad_input_is_one_line(tmp_path, case):
    if case == "no_metadata_dir":
        target = tmp_path / "model"
        target.mkdir()
        (target / "graph.hlo").write_bytes(b"x")
        code = "NCC_EINP001"
    else:
        data, code = CASES[case]
        if data is None:
            pb = rc.lowered("mlp")[0]
            data = pb[:len(pb) // 2]
        target = tmp_path / "file.code"
        target.write_bytes(data)
    r = run_ncc(["compile", str(target), "--framework", "XLA", "--target", "trn1",
                 "--output", str(tmp_path / "file.neff")], cwd=str(tmp_path), timeout=300)
    assert r.returncode == 70, (r.stdout, r.stderr)
    out = r.stdout + r.stderr
    assert "Traceback" not in out
    lines = [line for line in out.splitlines() if "[NCC_" in line]
    assert len(lines) == 1 and ("[" + code) in lines[0], out
    assert not (tmp_path / "file.neff").exists()
