"""hlo-opt: the pass registry, each pass's rewrite, and programs computing the same after all passes."""
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402
from support.cli import run_tool  # noqa: E402

from neuronxcc.hlo import load_module, parse_hlo_text  # noqa: E402
from neuronxcc.hlo.compare import diff_modules  # noqa: E402
from neuronxcc.hlo.opt import main  # noqa: E402
from neuronxcc.hlo import passes  # noqa: E402
from neuronxcc.hlo import module_to_proto_bytes

ALL = ["dce", "cse", "algsimp", "constant-folding", "convert-inputs-to-optimal-shape"]

TEXT = """HloModule m

unused {
  ua = f32[] parameter(0)
  ROOT n = f32[] negate(ua)
}

ENTRY main {
  x = f32[2,3]{1,0} parameter(0)
  zero = f32[] constant(-0)
  zb = f32[2,3]{1,0} broadcast(zero), dimensions={}
  pz = f32[] constant(0)
  pzb = f32[2,3]{1,0} broadcast(pz), dimensions={}
  kept = f32[2,3]{1,0} add(x, pzb)
  dropped = f32[2,3]{1,0} subtract(kept, pzb)
  one = f32[] constant(1)
  ob = f32[2,3]{1,0} broadcast(one), dimensions={}
  a = f32[2,3]{1,0} add(x, zb)
  m = f32[2,3]{1,0} multiply(a, ob)
  e1 = f32[2,3]{1,0} exponential(m)
  e2 = f32[2,3]{1,0} exponential(m)
  s = f32[2,3]{1,0} add(e1, e2)
  r = f32[2,3]{1,0} reshape(s)
  t = f32[2,3]{1,0} transpose(r), dimensions={0,1}
  dead = f32[2,3]{1,0} sine(x)
  c1 = f32[] constant(2)
  c2 = f32[] constant(3)
  c3 = f32[] multiply(c1, c2)
  c3b = f32[2,3]{1,0} broadcast(c3), dimensions={}
  out = f32[2,3]{1,0} divide(t, c3b)
  ROOT both = f32[2,3]{1,0} multiply(out, dropped)
}
"""


def _ops(m):
    return sorted(i.opcode for i in m.entry.instructions)


def test_registry_and_list_passes(capsys):
    assert set(ALL) <= set(passes.PASSES)
    assert main(["--list-passes"]) == 0
    out = capsys.readouterr().out.split("\n")
    assert sorted(line.split()[0] for line in out if line.strip()) == sorted(passes.PASSES)


def test_unknown_pass_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "m.hlo").write_text(TEXT)
    assert main(["--input", str(tmp_path / "m.hlo"), "--output", str(tmp_path / "o.pb"), "--passes", "dce,nope"]) == 70
    err = capsys.readouterr().err.strip().split("\n")
    assert len(err) == 1 and err[0].startswith("[NCC_EARG001]") and "'nope'" in err[0] and "dce" in err[0]


def test_register_twice_fails():
    from neuronxcc.errors import InternalCompilerError
    with pytest.raises(InternalCompilerError):
        passes.register(passes.DeadCodeElimination)


def test_each_pass():
    m = parse_hlo_text(TEXT)
    assert passes.run_pipeline(m, passes.make_pipeline(["dce"])) == ["dce"]
    assert "unused" not in m.computations and "sine" not in _ops(m)
    assert passes.run_pipeline(m, passes.make_pipeline(["cse"])) == ["cse"]
    assert _ops(m).count("exponential") == 1
    passes.run_pipeline(m, passes.make_pipeline(["algsimp"]))
    # x + (-0) and k - (+0) go; x + (+0) stays (it turns -0 into +0)
    assert "transpose" not in _ops(m) and "reshape" not in _ops(m) and "subtract" not in _ops(m)
    assert _ops(m).count("add") == 2
    assert "multiply" in _ops(m)  # c1 * c2 still there
    passes.run_pipeline(m, passes.make_pipeline(["constant-folding"]))
    consts = [i for i in m.entry.instructions if i.opcode == "constant"]
    assert sorted(float(c.literal) for c in consts) == [0.0, 6.0]  # the kept +0, and c1 * c2 folded
    assert passes.run_pipeline(m, passes.make_pipeline(ALL)) == []  # a fixed point


def test_nxd_command_line_leaves_the_module_as_is(tmp_path):
    pb = rc.lowered("attention")[0]
    (tmp_path / "in.pb").write_bytes(pb)
    r = run_tool("hlo-opt", ["--input", "in.pb", "--output", "out.pb", "--passes", "convert-inputs-to-optimal-shape",
                             "--input-type", "proto", "--output-type", "proto"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "kept as is" in r.stderr
    assert diff_modules(load_module(pb), load_module(str(tmp_path / "out.pb"))) == []


def test_input_type_mismatch(tmp_path, capsys):
    (tmp_path / "m.hlo").write_text(TEXT)
    assert main(["--input", str(tmp_path / "m.hlo"), "--output", str(tmp_path / "o.pb"), "--input-type", "proto"]) == 70
    assert "HLO text" in capsys.readouterr().err


def test_text_output_reads_back(tmp_path):
    (tmp_path / "m.hlo").write_text(TEXT)
    assert main(["--input", str(tmp_path / "m.hlo"), "--output", str(tmp_path / "o.hlo"), "--passes", ",".join(ALL),
                 "--output-type", "text"]) == 0
    m = load_module(str(tmp_path / "o.hlo"))
    assert m.entry.root.opcode == "multiply"


@pytest.mark.parametrize("name", sorted(rc.PROGRAMS))
def test_programs_compute_the_same_after_all_passes(name):
    from neuronxcc.errors import UnsupportedOperatorError
    from neuronxcc.hlo import interpreter as interp
    from support.corpus import xla_run
    fn, args = rc.PROGRAMS[name]
    pb = rc.lowered(name)[0]
    m = load_module(pb)
    inputs = [np.asarray(a) for a in args]
    run = interp.evaluate
    try:
        before = run(load_module(pb), inputs)
    except UnsupportedOperatorError:     # e.g. a LAPACK custom-call: XLA:CPU runs both forms instead
        run = lambda module, inputs: xla_run(module_to_proto_bytes(module), inputs)  # noqa: E731
        before = run(load_module(pb), inputs)
    passes.run_pipeline(m, passes.make_pipeline(ALL))
    after = run(m, inputs)
    assert len(before) == len(after)
    for b, a in zip(before, after):
        assert b.dtype == a.dtype and b.shape == a.shape
        # the passes only drop identities and fold with the same interpreter: bit-exact
        def bits(x):
            return np.ascontiguousarray(np.atleast_1d(x)).view(np.uint8)
        np.testing.assert_array_equal(bits(b), bits(a))
    # and the result still round-trips through XLA
    assert rc.xla_text(module_to_proto_bytes(m))
