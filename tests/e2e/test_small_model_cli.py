"""The small full Llama-shaped model (2 layers; token id and position in, logits and caches
out; tests/support/llama.py SMALL dims) through the CLI, then ``birsim --strict``: every
semaphore wait the compiler wrote must order every conflicting access on the simulated
timeline (a race is exit 70), and the outputs must match XLA:CPU.

The token id feeds an embedding gather (a ``dma_gather`` on a DMA queue): the gather is
asynchronous like any DMA, so what reads its result must wait for the gather's queue.
"""
import numpy as np

from neuronxcc.common.tolerances import mismatch
from support import llama
from support.cli import run_ncc, run_tool


def test_small_full_model_runs_race_free_under_strict_birsim(tmp_path):
    import jax
    fn, args = llama.program("full", 2, llama.SMALL, concrete=True)
    pb = jax.jit(fn).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    (tmp_path / "model.pb").write_bytes(pb)
    r = run_ncc(["compile", "model.pb", "--framework", "XLA", "--target", "trn1", "--output", "model.neff"],
                cwd=str(tmp_path))
    assert r.returncode == 0 and "Compiler status PASS" in r.stdout, r.stdout + r.stderr
    assert "Golden check" not in r.stdout + r.stderr      # the bir_sim check ran and was not weak
    np.savez(str(tmp_path / "in.npz"), **{"input%d" % i: np.asarray(a) for i, a in enumerate(args)})
    r = run_tool("birsim", ["model.neff", "--inputs", "in.npz", "--output", "out.npz", "--strict"],
                 cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    got = np.load(str(tmp_path / "out.npz"))
    ref = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
    assert len(got.files) == len(ref) == 5
    for i, e in enumerate(ref):
        # the logits are f32 from bf16 arithmetic: compared at bf16's compiled-code tolerance
        a = got["output%d" % i]
        if a.dtype.kind == "V":                 # npz keeps bf16 as raw 2-byte records
            a = a.view(e.dtype)
        why = mismatch(a, e, row="compiled", dtype="bf16", what="output %d" % i, reference="XLA:CPU")
        assert not why, why


def test_pass_says_when_the_golden_check_did_not_run(tmp_path):
    import jax
    spec = jax.ShapeDtypeStruct((128, 128), np.float32)
    pb = jax.jit(lambda a, b: a @ b).lower(spec, spec).compiler_ir("hlo").as_serialized_hlo_module_proto()
    (tmp_path / "mm.pb").write_bytes(pb)
    base = ["compile", "mm.pb", "--framework", "XLA", "--target", "trn1", "--output", "mm.neff"]
    r = run_ncc(base + ["--internal-golden-size-budget", "0"], cwd=str(tmp_path))
    assert r.returncode == 0 and "Compiler status PASS" in r.stdout, r.stdout + r.stderr
    assert "Golden check on birsim not run: no goldens" in r.stdout + r.stderr, r.stdout + r.stderr
    r = run_ncc(base + ["--internal-disable-bir-sim"], cwd=str(tmp_path))
    assert r.returncode == 0 and "Golden check on birsim not run (disabled)" in r.stdout + r.stderr
