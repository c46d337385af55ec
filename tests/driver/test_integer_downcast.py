"""--implicit-integer-downcast: 64-bit integer ops are computed in 32 bits;
``none`` (or an op list that leaves an op out) refuses them with one
[NCC_EVRF035] line naming the instruction, exit 70 and no output."""
import pytest

from support.cli import run_ncc

S64_ADD = """HloModule m

ENTRY e {
  a = s32[4]{0} parameter(0)
  b = s64[4]{0} convert(a), metadata={op_name="jit(f)/convert" source_file="model.py" source_line=12}
  c = s64[4]{0} add(b, b)
  ROOT d = s32[4]{0} convert(c)
}
"""

S64_DOT = """HloModule m

ENTRY e {
  a = s32[4,4]{1,0} parameter(0)
  b = s64[4,4]{1,0} convert(a)
  c = s64[4,4]{1,0} dot(b, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT d = s32[4,4]{1,0} convert(c)
}
"""


def _compile(tmp_path, text, *flags):
    model = tmp_path / "model.hlo"
    model.write_text(text)
    out = tmp_path / "out.neff"
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(out)]
                + list(flags), cwd=str(tmp_path))
    return r, out


@pytest.mark.parametrize("flag", ["none", "pow"])
def test_refused_with_one_line_naming_the_instruction(tmp_path, flag):
    r, out = _compile(tmp_path, S64_ADD if flag == "none" else S64_DOT, "--implicit-integer-downcast", flag)
    assert r.returncode == 70, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip() and "Compiler status" not in ln]
    assert len(lines) == 1 and lines[0].startswith("[NCC_EVRF035]"), r.stderr
    assert "Traceback" not in r.stderr and not out.exists()
    if flag == "none":
        assert "'b' (convert) produces s64" in lines[0] and "model.py:12" in lines[0]


def test_an_allowed_op_list_and_the_default_compile(tmp_path):
    # dot allowed explicitly: the only s64 op besides converts that the list governs is the dot
    r, out = _compile(tmp_path, S64_DOT, "--implicit-integer-downcast", "dot,pow")
    assert r.returncode == 0, r.stderr
    assert out.exists()
    out.unlink()
    r, out = _compile(tmp_path, S64_ADD)
    assert r.returncode == 0, r.stderr
    assert out.exists()
