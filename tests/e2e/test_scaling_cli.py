"""Loops stay loops through the whole pipeline: the matmul+gradient graph (three dots, two
transposes) compiled by ``neuronx-cc compile`` at 1024 and at 16000 square gives NEFFs with about
the same number of BIR instructions and about the same size (compile only: goldens off). The
counts need not be equal: a loop's remainder iteration is peeled, and how many tiles it holds
depends on the size; but a loop unrolled along K or N would grow the count about 15x here."""
import jax
import jax.numpy as jnp

from support import corpus
from support.cli import run_ncc


def _compile(tmp_path, n):
    s = jax.ShapeDtypeStruct((n, n), jnp.float32)
    proto = jax.jit(corpus.matmul_grad).lower(s, s, s).compiler_ir("hlo").as_serialized_hlo_module_proto()
    model = tmp_path / ("mg%d.pb" % n)
    model.write_bytes(proto)
    neff = tmp_path / ("mg%d.neff" % n)
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(neff),
                 "--internal-golden-size-budget", "0"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    from neuronxcc.neff import read_neff
    return len(read_neff(str(neff)).module.instructions()), neff.stat().st_size


def test_matmul_gradient_instruction_count_and_neff_size_do_not_grow(tmp_path):
    n_small, size_small = _compile(tmp_path, 1024)
    n_big, size_big = _compile(tmp_path, 16000)
    assert n_big <= 1.6 * n_small, (n_small, n_big)    # peeled remainders only
    assert size_big < 2 * size_small          # 244x more data, same program
