#!/usr/bin/env python3
"""Benchmark birsim: time per simulated instruction, large-tile ops against
numpy doing the same math in the same run (ratio = birsim / numpy; target <= 3),
and compiled corpus programs against XLA:CPU executing the same jitted function
in the same run (ratio = birsim / XLA; target <= 3).

    python scripts/bench_birsim.py [--quick] [--runs N] [--programs a,b,...] [--no-corpus]

Corpus section: each program of tests/support/corpus.py at the "tiled" size is
lowered by JAX, compiled with ``neuronx-cc compile`` (goldens off) and run by
``run_neff`` on fresh inputs; "birsim" is the wall time of ``simulate_neff``
(NEFF read + simulation + timeline), "sim only" that of ``simulate`` on the
already-read module; XLA is the warm ``jax.jit(f)`` execution. A program that
does not compile or simulate shows its one-line reason. Each figure is the
median of N runs. Never asserts; prints tables.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402

from neuronxcc.starfish import birpy as B  # noqa: E402
from neuronxcc.hwm import get_target  # noqa: E402
from neuronxcc.starfish.birsim import simulate  # noqa: E402
from neuronxcc.starfish.birsim.blas import single_threaded  # noqa: E402
from neuronxcc.starfish.birsim.executor import Executor  # noqa: E402
from neuronxcc.starfish.birsim.state import MachineState  # noqa: E402
from neuronxcc.starfish.birsim.timeline import Timeline  # noqa: E402


def _median_time(fn, runs):
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _tile_module(op_builder, parts, free, reps, in_dtypes=("float32", "float32"), out_dtype="float32", out_free=None):
    m = B.Module("bench")
    names = []
    for k, dt in enumerate(in_dtypes):
        n = "in%d" % k
        m.add_memloc(n, "SBUF", parts, free * 4)
        names.append(B.AccessPattern(n, dt, 0, [[1, free]], 0, parts))
    of = out_free or free
    m.add_memloc("out", "PSUM" if out_dtype == "psum" else "SBUF", parts, of * 4)
    out = B.AccessPattern("out", "float32" if out_dtype == "psum" else out_dtype, 0, [[1, of]], 0, parts)
    b = B.Builder(m)
    for ap in names:
        b.inst("iota", "POOL", [ap], [], pattern=[[1, free]], offset=1, channel_multiplier=3)
    with b.loop("rep", 0, reps):
        op_builder(b, out, names)
    return b.finish()


def _instr_time(module, reps):
    """Median time birsim takes to execute the module's last instruction (the
    op under test), operands initialised by the instructions before it; the
    timeline step is included."""
    tm = get_target("trn1")
    state = MachineState(module, tm)
    ex = Executor(module, state, Timeline(module, tm))
    insts = module.instructions()
    with single_threaded(), np.errstate(all="ignore"):      # as Executor.run does
        for i in insts[:-1]:
            ex.execute(i)
        ex.execute(insts[-1])          # warm-up (first-touch page faults)
        return _median_time(lambda: ex.execute(insts[-1]), reps)


def bench_per_instruction(runs, n):
    rows = []
    for label, parts, free in [("tensor_scalar [1,1]", 1, 1), ("tensor_scalar [128,64]", 128, 64)]:
        def build(b, out, ins):
            b.inst("tensor_scalar", "DVE", [out], [ins[0]], op0="mult", operand0=2.0, op1="add", operand1=1.0)
        m = _tile_module(build, parts, free, n, in_dtypes=("float32",))
        t = _median_time(lambda: simulate(m, []), runs)
        rows.append((label, t / n * 1e6))
    m = _tile_module(lambda b, out, ins: b.inst("matmul", "PE", [out], [ins[0].copy(pattern=[[1, 64]]), ins[1]]),
                     128, 128, n, in_dtypes=("bfloat16", "bfloat16"), out_dtype="psum", out_free=128)
    m.memlocs["out"].partitions = 64
    m.instructions()[-1].dsts[0].num_partitions = 64
    t = _median_time(lambda: simulate(m, []), runs)
    rows.append(("matmul bf16 128x64x128", t / n * 1e6))
    # a synchronised tile loop (DMA in, ACT, DVE, DMA out per iteration), both execution orders
    iters = max(n // 4, 8)
    lm, x = _loop_module(iters)
    for order in ("program", "streams"):
        t = _median_time(lambda: simulate(lm, [x], order=order), runs)
        rows.append(("tile loop, %s order" % order, t / (4 * iters) * 1e6))
    return rows


def _loop_module(iters):
    m = B.Module("loop")
    m.add_tensor("x", "input", "float32", (iters, 128, 32))
    m.add_tensor("y", "output", "float32", (iters, 128, 32))
    m.add_memloc("a", "SBUF", 128, 2 * 32 * 4)
    m.add_memloc("b", "SBUF", 128, 32 * 4)
    b = B.Builder(m)
    with b.loop("i", 0, iters) as i:
        t = B.AccessPattern("a", "float32", (i % 2) * 32, [[1, 32]], 0, 128)
        b.inst("dma_copy", "SP", [t], [B.AccessPattern("x", "float32", i * 4096, [[32, 128], [1, 32]])],
               queue="q0", signals=[("q0", 1)])
        b.inst("activation", "ACT", [b.ap("b")], [t], func="exp", waits=[("q0", i + 1)], signals=[("A", 1)])
        b.inst("tensor_scalar", "DVE", [t], [b.ap("b")], op0="mult", operand0=2.0, waits=[("A", i + 1)],
               signals=[("D", 1)])
        b.inst("dma_copy", "SP", [B.AccessPattern("y", "float32", i * 4096, [[32, 128], [1, 32]])], [t],
               queue="q1", waits=[("D", i + 1)], signals=[("S", 1)])
    b.finish()
    return m, np.random.default_rng(0).standard_normal((iters, 128, 32)).astype(np.float32)


def bench_large(runs, parts, free, reps):
    rng = np.random.default_rng(0)
    a = rng.uniform(1, 2, (parts, free)).astype(np.float32)
    b = rng.uniform(1, 2, (parts, free)).astype(np.float32)
    cases = []

    def tt(b_, out, ins):
        b_.inst("tensor_tensor", "DVE", [out], ins, op="add")
    cases.append(("tensor_tensor add f32", tt, ("float32", "float32"), "float32", lambda: np.add(a, b)))

    def ts(b_, out, ins):
        b_.inst("tensor_scalar", "DVE", [out], [ins[0]], op0="mult", operand0=2.0, op1="add", operand1=1.0)
    cases.append(("tensor_scalar mult+add", ts, ("float32",), "float32", lambda: a * np.float32(2) + np.float32(1)))

    def ac(b_, out, ins):
        b_.inst("activation", "ACT", [out], [ins[0]], func="exp", scale=0.5)
    cases.append(("activation exp", ac, ("float32",), "float32", lambda: np.exp(a * np.float32(0.5))))

    def cp(b_, out, ins):
        b_.inst("tensor_copy", "DVE", [out], [ins[0]])
    cases.append(("tensor_copy f32->bf16", cp, ("float32",), "bfloat16", lambda: a.astype(ml_dtypes.bfloat16)))

    def tb(b_, out, ins):
        b_.inst("tensor_tensor", "DVE", [out], ins, op="mult")
    abf, bbf = a.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    cases.append(("tensor_tensor mult bf16", tb, ("bfloat16", "bfloat16"), "bfloat16",
                  lambda: (abf.astype(np.float32) * bbf.astype(np.float32)).astype(ml_dtypes.bfloat16)))

    def rd(b_, out, ins):
        b_.inst("tensor_reduce", "DVE", [out.copy(pattern=[[1, 1]])], [ins[0]], op="add", axes=1)
    cases.append(("tensor_reduce add", rd, ("float32",), "float32", lambda: np.sum(a, axis=1)))

    rows = []
    for label, build, ins, odt, ref in cases:
        m = _tile_module(build, parts, free, 1, in_dtypes=ins, out_dtype=odt)
        t_sim = _instr_time(m, reps)
        t_np = _median_time(ref, reps)
        rows.append((label, t_sim * 1e3, t_np * 1e3, t_sim / t_np))
    # matmul: 128x128 stationary, 512 moving, fp32
    k = 128
    s = rng.standard_normal((k, 128)).astype(np.float32)
    mv = rng.standard_normal((k, 512)).astype(np.float32)

    def mm(b_, out, ins):
        b_.inst("matmul", "PE", [out], [ins[0].copy(pattern=[[1, 128]]), ins[1].copy(pattern=[[1, 512]])])
    mmod = _tile_module(mm, 128, 512, 1, out_dtype="psum", out_free=512)
    t_sim = _instr_time(mmod, reps)
    with single_threaded():
        t_np = _median_time(lambda: s.T @ mv, reps)
    rows.append(("matmul f32 128x128x512", t_sim * 1e3, t_np * 1e3, t_sim / t_np))
    return rows


QUICK_PROGRAMS = ("layernorm", "mlp_gelu_softmax", "transformer_block", "conv_relu_maxpool")
PROGRAMS = QUICK_PROGRAMS + ("causal_attention", "rmsnorm_rotary", "bf16_matmul", "mlp_train_step",
                             "embedding_lookup", "batched_einsum", "float_zoo", "cumsum", "matmul_grad")


def bench_corpus(runs, names):
    """[(name, instructions, birsim s, sim-only s, XLA s, error)] for compiled corpus programs."""
    import tempfile

    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import benchlib as bl
    bl.setup_paths()
    from support import corpus

    from neuronxcc.neff import read_neff
    from neuronxcc.starfish.birsim import simulate, simulate_neff
    from neuronxcc.starfish.birsim.sim import to_stored_layout, io_permutations
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-birsim-") as base:
        for name in names:
            try:
                prog = corpus.get(name)
                pb, _ = corpus.lower(prog, prog.make_args(0, "tiled"))
                model = os.path.join(base, name + ".hlo_module.pb")
                with open(model, "wb") as f:
                    f.write(pb)
                c = bl.compile_cli(model, base, extra=["--internal-golden-size-budget", "0"])
                if not c.ok:
                    rows.append((name, 0, None, None, None, "compile: " + (c.error or "failed")))
                    continue
                args = prog.make_args(1, "tiled")
                res = simulate_neff(c.neff, args)           # warm-up (and the instruction count)
                t_all = _median_time(lambda: simulate_neff(c.neff, args), runs)
                neff = read_neff(c.neff)
                stored = to_stored_layout(neff.module, args, io_permutations(neff))
                t_sim = _median_time(lambda: simulate(neff.module, stored), runs)
                t_xla = bl.xla_exec_time(prog.fn, args, runs)
                rows.append((name, res.instructions, t_all, t_sim, t_xla, None))
            except Exception as e:       # a benchmark reports, it never stops on one program
                rows.append((name, 0, None, None, None, bl.one_line(e)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, few runs")
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--programs", default=None, help="comma-separated corpus programs (default: a fixed list)")
    ap.add_argument("--no-corpus", action="store_true", help="skip the compiled-corpus section")
    args = ap.parse_args(argv)
    runs = args.runs or (3 if args.quick else 7)
    n = 300 if args.quick else 3000
    free = 2048 if args.quick else 8192
    reps = 7 if args.quick else 25
    print("birsim benchmark (median of %d runs)" % runs)
    print("\n%-28s %12s" % ("per-instruction overhead", "us/instr"))
    for label, us in bench_per_instruction(runs, n):
        print("%-28s %12.2f" % (label, us))
    print("\n%-28s %12s %12s %8s" % ("large tile [128,%d]" % free, "birsim ms", "numpy ms", "ratio"))
    for label, ts, tn, r in bench_large(runs, 128, free, reps):
        print("%-28s %12.3f %12.3f %8.2f" % (label, ts, tn, r))
    if args.no_corpus:
        return 0
    names = [n for n in args.programs.split(",") if n] if args.programs else \
        list(QUICK_PROGRAMS if args.quick else PROGRAMS)
    print("\ncompiled corpus programs (tiled), %d CPU cores; ratio = birsim / XLA:CPU execute (target <= 3)"
          % (os.cpu_count() or 0))
    print("%-20s %7s %11s %11s %11s %8s %8s %12s" % ("program", "instrs", "birsim ms", "sim only ms", "XLA ms",
                                                   "ratio", "sim/XLA", "instr/s"))
    ratios, sim_ratios, rates = [], [], []
    for name, n, t_all, t_sim, t_xla, err in bench_corpus(runs, names):
        if err is not None:
            print("%-20s fails: %s" % (name, err))
            continue
        ratios.append(t_all / t_xla)
        sim_ratios.append(t_sim / t_xla)
        rates.append(n / t_sim)
        print("%-20s %7d %11.2f %11.2f %11.3f %8.1f %8.1f %12.0f" % (name, n, t_all * 1e3, t_sim * 1e3, t_xla * 1e3,
                                                                  t_all / t_xla, t_sim / t_xla, n / t_sim))
    if ratios:
        print("%-20s %7s %11s %11s %11s %8.1f %8.1f %12.0f" % ("median (%d)" % len(ratios), "", "", "", "",
                                                            statistics.median(ratios), statistics.median(sim_ratios),
                                                            statistics.median(rates)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
