"""neuronx-cc compile --auto-cast / --auto-cast-type through the CLI, one case per mode: the cast is
reported once at USER level (nothing is said when nothing is cast), the compile-time bir_sim check
passes against goldens that round the PE operands the same way (xla_infergoldens --auto-cast), and
the NEFF matches XLA within the tolerance of the precision the mode computes in
(common/tolerances.py: the cast rows for matmult, the narrow type's row under all)."""
import numpy as np
import pytest

from neuronxcc.common.tolerances import cast_precision, mismatch
from support import corpus
from support.cli import run_ncc

CASES = [
    # program, flags, what the one USER line says (None: no line), precision of the XLA comparison
    ("mlp_gelu_softmax", [], None, "float32"),                      # the default: none, exact fp32
    ("mlp_gelu_softmax", ["--auto-cast", "matmult"], "from fp32 to bf16", cast_precision("bf16")),
    ("transformer_block", ["--auto-cast", "matmult", "--auto-cast-type", "bf16"], "from fp32 to bf16",
     cast_precision("bf16")),
    ("mlp_gelu_softmax", ["--auto-cast=matmul", "--auto-cast-type=tf32"], "from fp32 to tf32",
     cast_precision("tf32")),
    ("transformer_block", ["--auto-cast", "all", "--auto-cast-type", "tf32"], "elementwise operation",
     cast_precision("tf32")),
    ("mlp_gelu_softmax", ["--auto-cast", "matmult", "--auto-cast-type", "fp8_e4m3"], "from fp32 to fp8_e4m3",
     cast_precision("fp8_e4m3")),
    ("mlp_gelu_softmax", ["--auto-cast", "all", "--auto-cast-type", "fp16"], "elementwise operation",
     "float16"),
    ("bf16_matmul", ["--auto-cast", "fp32"], "in fp32 on chip", None),   # None: each output's own type
]


def _ids(c):
    return "%s:%s" % (c[0], "_".join(c[1]).replace("--", "") or "default")


@pytest.mark.parametrize("name,flags,says,precision", CASES, ids=[_ids(c) for c in CASES])
def test_auto_cast_mode_end_to_end(name, flags, says, precision, tmp_path):
    prog = corpus.get(name)
    proto, _ = corpus.lower(prog, prog.make_args(0, "tiled"))
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(proto)
    neff = tmp_path / "out.neff"
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(neff)] + flags,
                cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if "Auto-cast (" in ln]
    if says is None:
        assert lines == []
    else:
        assert len(lines) == 1 and " USER " in lines[0] and says in lines[0], lines
    # the built-in golden check ran and passed (the driver says so when it did not or proved little)
    assert "Golden check on birsim" not in r.stdout + r.stderr
    from neuronxcc.starfish.birsim import run_neff
    args = prog.make_args(1, "tiled")
    for k, (a, e) in enumerate(zip(run_neff(str(neff), args), corpus.reference(prog, args))):
        assert a.dtype == e.dtype
        why = mismatch(a, e, row="compiled", dtype=precision)
        assert why == "", "%s output%d: %s" % (name, k, why)
