"""LNC=2 on trn2 (penguin/lnc.py): one logical core of two physical cores sharing HBM. The
program's kernels are divided between the cores with barriers, the NEFF says lnc_size 2, and
birsim runs both cores on one HBM; a program it cannot split stays on one core with one
warning line."""
import jax
import jax.numpy as jnp
import numpy as np

from neuronxcc.common.tolerances import mismatch
from neuronxcc.neff import read_neff
from neuronxcc.starfish.birsim import simulate_neff
from support.cli import run_ncc


def _qkv(x, a, b, c):
    h = x * 0.5
    return jnp.tanh(h @ a), jax.nn.sigmoid(h @ b), jnp.maximum(h @ c, 0.0)


def _compile(tmp_path, fn, args, *flags):
    src = tmp_path / "m.hlo"
    src.write_text(jax.jit(fn).lower(*args).compiler_ir("hlo").as_hlo_text())
    out = tmp_path / "m.neff"
    r = run_ncc(["compile", str(src), "--framework", "XLA", "--output", str(out)] + list(flags), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    return read_neff(str(out)), r.stdout + r.stderr


def test_independent_kernels_run_on_both_cores(tmp_path):
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((128, 256)).astype(np.float32)] + \
        [(rng.standard_normal((256, 256)) * 0.1).astype(np.float32) for _ in range(3)]
    neff, said = _compile(tmp_path, _qkv, args, "--target", "trn2")      # LNC=2 is the trn2 default
    assert neff.header.lnc_size == 2
    assert "--lnc 2" not in said                                          # split: nothing to warn about
    res = simulate_neff(neff, args, trace=True)
    ref = [np.asarray(o) for o in jax.jit(_qkv)(*args)]
    assert not any(mismatch(a, b) for a, b in zip(res.outputs, ref))
    cores = res.lnc_cores
    assert len(cores) == 2 and all(c.busy_s.get("PE", 0) > 0 for c in cores)     # both cores did matmuls
    barriers = [i for i in neff.module.instructions() if i.opcode == "collective" and i.attrs["op"] == "barrier"]
    assert barriers and all(i.attrs["groups"] == [[0, 1]] for i in barriers)
    one, _ = _compile(tmp_path, _qkv, args, "--target", "trn2", "--lnc", "1")
    assert one.header.lnc_size == 1
    r1 = simulate_neff(one, args)
    assert not any(mismatch(a, b) for a, b in zip(r1.outputs, ref))


def test_a_program_it_cannot_split_says_so_once(tmp_path):
    def loop(x):
        return jax.lax.fori_loop(0, 3, lambda i, v: v * 1.5 + 1.0, x)
    x = np.ones((8, 16), np.float32)
    neff, said = _compile(tmp_path, loop, [x], "--target", "trn2")
    lines = [l for l in said.splitlines() if "--lnc 2" in l]
    assert len(lines) == 1 and "not split because it has While loops" in lines[0], said
    assert neff.header.lnc_size == 1
    assert not mismatch(simulate_neff(neff, [x]).outputs[0], np.asarray(jax.jit(loop)(x)))
