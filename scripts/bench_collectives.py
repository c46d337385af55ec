#!/usr/bin/env python3
"""Tensor-parallel benchmarks: a Llama-3-8B-shaped decoder layer, one per-rank program
per TP degree, compiled by neuronx-cc and run on N simulated NeuronCores.

Section 1 (device time): for TP = 1, 2, 8, 32 the per-rank program of one decoder layer
(hidden 4096, 32 query heads and 8 KV heads of 128, FFN 14336 SwiGLU, bf16 weights;
T new tokens attending over a KV cache of S; NxD-style column-parallel QKV / gate / up and
row-parallel O / down with an all-reduce after attention and after the MLP; KV heads
replicated once TP > 8). Printed per TP: birsim's simulated device time of the slowest
rank, its collective time and share (waiting + interconnect model), the speed-up against
TP=1 measured in the same run, and the compile time.

Section 2 (compile time): a TP=8 decode step of N_LAYERS such layers (unrolled, as NxD
traces it), neuronx-cc compile wall time against XLA:CPU's compile of the same
shard_map program on 8 host devices in the same run (``--layers``, default 32).

The per-rank HLO is what XLA's SPMD partitioner hands a compiler (dumped after
spmd-partitioning, in a subprocess that sees TP host devices). Nothing is asserted; a step
that fails prints its one-line reason.

    scripts/bench_collectives.py [--tp 1,2,8,32] [--tokens 16] [--cache 256] [--layers 32] [--skip-compile]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

H, NQ, NKV, HD, FFN = 4096, 32, 8, 128, 14336


def _layer_fn(tp, tokens, cache):
    import jax
    import jax.numpy as jnp

    nq, nkv = NQ // tp, max(1, NKV // tp)
    rep = nq // nkv
    red = (lambda v: jax.lax.psum(v, "tp")) if tp > 1 else (lambda v: v)

    def rms(x, g):
        xf = x.astype(jnp.float32)
        return (xf * jax.lax.rsqrt(jnp.mean(xf * xf, -1, keepdims=True) + 1e-5)).astype(x.dtype) * g

    def layer(x, g1, g2, wq, wk, wv, wo, wg, wu, wd, kc, vc):
        h = rms(x, g1)
        q = (h @ wq).reshape(tokens, nkv, rep, HD)
        k = jnp.concatenate([kc, (h @ wk).reshape(tokens, nkv, HD)], 0)      # [S+T, nkv, HD]
        v = jnp.concatenate([vc, (h @ wv).reshape(tokens, nkv, HD)], 0)
        s = jnp.einsum("tgrd,sgd->grts", q, k).astype(jnp.float32) * (1.0 / np.sqrt(HD))
        p = jax.nn.softmax(s, axis=-1).astype(x.dtype)
        a = jnp.einsum("grts,sgd->tgrd", p, v).reshape(tokens, nq * HD)
        x = x + red(a @ wo)
        h = rms(x, g2)
        m = (jax.nn.silu(h @ wg) * (h @ wu)) @ wd
        return x + red(m)
    return layer


def _shapes(tp, tokens, cache):
    nq, nkv = NQ // tp, max(1, NKV // tp)
    return [(tokens, H), (H,), (H,), (H, nq * HD), (H, nkv * HD), (H, nkv * HD), (nq * HD, H),
            (H, FFN // tp), (H, FFN // tp), (FFN // tp, H), (cache, nkv, HD), (cache, nkv, HD)]


def _gen(outdir, tp, tokens, cache, layers):
    """(in the subprocess) write <outdir>/program.hlo; print XLA's compile seconds."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import Mesh, PartitionSpec as P

    layer = _layer_fn(tp, tokens, cache)
    shapes = _shapes(tp, tokens, cache)
    devs = sorted(jax.devices(), key=lambda d: d.id)[:tp]
    mesh = Mesh(np.array(devs), ("tp",))
    nl = layers

    def fn(x, *ws):
        per = len(shapes) - 1
        for i in range(nl):
            x = layer(x, *ws[i * per:(i + 1) * per])
        return x

    spec1 = [P(), P(), P(), P(None, "tp"), P(None, "tp"), P(None, "tp"), P("tp", None), P(None, "tp"),
             P(None, "tp"), P("tp", None), P(None, "tp", None), P(None, "tp", None)]
    if NKV // tp < 1:       # KV heads replicated past TP=8: every rank holds its own copy
        spec1[4] = spec1[5] = P()
        spec1[10] = spec1[11] = P()
    specs = [spec1[0]] + spec1[1:] * nl
    glob_shapes = []
    for s, sp in zip([shapes[0]] + shapes[1:] * nl, specs):
        g = list(s)
        for k, ax in enumerate(sp):
            if ax == "tp":
                g[k] *= tp
        glob_shapes.append(tuple(g))
    args = [jax.ShapeDtypeStruct(s, jnp.bfloat16) for s in glob_shapes]
    sm = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=tuple(specs), out_specs=P())) if tp > 1 else jax.jit(fn)
    lowered = sm.lower(*args)
    t0 = time.perf_counter()
    lowered.compile()
    xla_s = time.perf_counter() - t0
    if tp == 1:     # one device: no partitioner run; the lowered module is the per-rank program
        with open(os.path.join(outdir, "program.hlo"), "w") as f:
            f.write(lowered.compiler_ir("hlo").as_hlo_text())
        print(json.dumps({"xla_compile_s": xla_s}))
        return
    dump = os.environ["NCC_BENCH_DUMP"]
    files = sorted(glob.glob(os.path.join(dump, "*after_spmd-partitioning*.txt")))
    if not files:
        raise RuntimeError("no after_spmd-partitioning dump")
    with open(files[-1]) as f:
        text = f.read()
    with open(os.path.join(outdir, "program.hlo"), "w") as f:
        f.write(text)
    print(json.dumps({"xla_compile_s": xla_s}))


def generate(outdir, tp, tokens, cache, layers=1):
    dump = os.path.join(outdir, "dump")
    env = dict(os.environ)
    env["XLA_FLAGS"] = ("--xla_force_host_platform_device_count=%d --xla_dump_to=%s "
                        "--xla_dump_hlo_pass_re=spmd-partitioning" % (tp, dump))
    env["JAX_PLATFORMS"] = "cpu"
    env["NCC_BENCH_DUMP"] = dump
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--gen", outdir, str(tp), str(tokens), str(cache),
                        str(layers)], env=env, capture_output=True, text=True, timeout=3600)
    if p.returncode:
        raise RuntimeError((p.stderr or p.stdout).strip().splitlines()[-1])
    return json.loads(p.stdout.strip().splitlines()[-1])


def compile_neff(outdir, name="program"):
    from neuronxcc.errors import CompilerError  # noqa: F401
    neff = os.path.join(outdir, name + ".neff")
    cmd = [sys.executable, "-c", "import sys; from neuronxcc.driver.CommandDriver import main; sys.exit(main())",
           "compile", os.path.join(outdir, name + ".hlo"), "--framework", "XLA", "--target", "trn1",
           "--output", neff]
    import neuronxcc
    env = dict(os.environ)    # the compiler under test, wherever this process imported it from
    root = os.path.dirname(os.path.dirname(os.path.abspath(neuronxcc.__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=outdir, env=env, capture_output=True, text=True, timeout=7200)
    dt = time.perf_counter() - t0
    if p.returncode:
        raise RuntimeError("compile failed: " + ((p.stderr or p.stdout).strip().splitlines() or ["?"])[-1])
    return neff, dt


def device_time(neff, tp):
    import ml_dtypes
    from neuronxcc.neff import read_neff
    from neuronxcc.starfish.birsim import simulate_neff_ranks
    n = read_neff(neff)
    rng = np.random.default_rng(0)
    ins = [(rng.standard_normal(v.shape) * 0.02).astype(ml_dtypes.bfloat16) for v in n.inputs]
    res = simulate_neff_ranks(n, [ins] * tp, nranks=tp) if tp > 1 else None
    if res is None:
        from neuronxcc.starfish.birsim import simulate_neff
        r = simulate_neff(n, ins)
        return r.total_s, 0.0
    k = int(np.argmax([r.total_s for r in res.ranks]))
    return res.total_s, res.collective_s[k]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--gen", nargs=5, help=argparse.SUPPRESS)
    ap.add_argument("--tp", default="1,2,8,32")
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--cache", type=int, default=256)
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--skip-compile", action="store_true", help="skip section 2")
    a = ap.parse_args(argv)
    if a.gen:
        d, tp, t, c, nl = a.gen
        return _gen(d, int(tp), int(t), int(c), int(nl))
    print("## Llama-3-8B-shaped decoder layer, per-rank program (tokens %d, KV cache %d, bf16), trn1"
          % (a.tokens, a.cache))
    print("| TP | device time (slowest rank) | collectives | share | speed-up vs TP=1 | neuronx-cc compile |")
    print("|---|---|---|---|---|---|")
    base = None
    for tp in [int(x) for x in a.tp.split(",")]:
        with tempfile.TemporaryDirectory(prefix="bench-tp%d-" % tp) as d:
            try:
                generate(d, tp, a.tokens, a.cache)
                neff, ct = compile_neff(d)
                t, c = device_time(neff, tp)
            except Exception as e:   # a layer that cannot handle it yet: say so
                print("| %d | fails: %s | | | | |" % (tp, str(e)[:160]))
                continue
            if base is None and tp == 1:
                base = t
            print("| %d | %.1f us | %.1f us | %.1f%% | %s | %.1f s |" % (
                tp, t * 1e6, c * 1e6, 100 * c / t if t else 0, "%.2fx" % (base / t) if base else "-", ct))
            sys.stdout.flush()
    if a.skip_compile:
        return 0
    print()
    print("## TP=8 decode step of %d layers (tokens 1, KV cache %d): compile time" % (a.layers, a.cache))
    with tempfile.TemporaryDirectory(prefix="bench-tp8-step-") as d:
        try:
            x = generate(d, 8, 1, a.cache, a.layers)
            _, ct = compile_neff(d)
            print("neuronx-cc %.1f s, XLA:CPU %.1f s: ratio %.1fx" % (ct, x["xla_compile_s"], ct / x["xla_compile_s"]))
        except Exception as e:
            print("fails: %s" % str(e)[:300])
    return 0


if __name__ == "__main__":
    sys.exit(main())
