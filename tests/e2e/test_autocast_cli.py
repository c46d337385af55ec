"""neuronx-cc compile --auto-cast matmult through the CLI: the cast is reported once at USER
level, the compile-time bir_sim check passes against goldens that round the PE operands the same
way (xla_infergoldens --auto-cast), and the NEFF matches XLA within the bf16-matmul cast tolerance (common/tolerances.py)."""
import numpy as np
import pytest

from neuronxcc.common.tolerances import cast_precision, mismatch
from support import corpus
from support.cli import run_ncc


@pytest.mark.parametrize("name", ["mlp_gelu_softmax", "transformer_block"])
def test_auto_cast_matmult_end_to_end(name, tmp_path):
    prog = corpus.get(name)
    proto, _ = corpus.lower(prog, prog.make_args(0, "tiled"))
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(proto)
    neff = tmp_path / "out.neff"
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(neff),
                 "--auto-cast", "matmult", "--auto-cast-type", "bf16"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "Auto-cast (" in ln]
    assert len(lines) == 1 and " USER " in lines[0] and "matrix multiplication" in lines[0], lines
    from neuronxcc.starfish.birsim import run_neff
    args = prog.make_args(1, "tiled")
    for k, (a, e) in enumerate(zip(run_neff(str(neff), args), corpus.reference(prog, args))):
        assert a.dtype == e.dtype
        why = mismatch(a, e, row="compiled", dtype=cast_precision("bf16"))
        assert why == "", "%s output%d: %s" % (name, k, why)
