#!/usr/bin/env python3
"""Benchmark: the HLO reference interpreter against XLA:CPU on the corpus.

For each program of tests/support/corpus.py the same HLO module runs through
``neuronxcc.hlo.interpreter.evaluate`` and through XLA:CPU
(``jax.jit(f)``, compiled and warmed up first); both are timed in this run,
alternately (so load from other processes hits both alike), as the median
of several runs. Prints per-program times and the ratio
interpreter/XLA, and the median ratio over the corpus (target: within 10x).
Never asserts.

    PYTHONPATH=. .venv/bin/python scripts/bench_hlo_interp.py [--quick] [--size tiled|small] [NAME ...]
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import jax  # noqa: E402

from support import corpus  # noqa: E402
from neuronxcc.hlo import load_module  # noqa: E402
from neuronxcc.hlo.interpreter import Evaluator  # noqa: E402
from neuronxcc.common.tolerances import mismatch  # noqa: E402

TARGET = 10.0


def _interleaved_medians(fa, fb, runs, min_seconds):
    """Median times of ``fa`` and ``fb`` run alternately, so load from other processes
    on the machine falls on both alike."""
    ta, tb = [], []
    t_end = time.perf_counter() + min_seconds
    while len(ta) < runs or (time.perf_counter() < t_end and len(ta) < 50 * runs):
        t = time.perf_counter()
        fa()
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        fb()
        tb.append(time.perf_counter() - t)
    return statistics.median(ta), statistics.median(tb)


def bench_program(program, size, runs, min_seconds):
    args = program.make_args(0, size)
    pb, _ = corpus.lower(program, args)
    module = load_module(pb)
    jitted = jax.jit(program.fn)
    dev_args = [jax.device_put(a) for a in args]

    def run_xla():
        jax.block_until_ready(jitted(*dev_args))
    run_xla()

    ev = Evaluator(module)          # plans are built once per module, like XLA compiles once
    outs = ev.evaluate_entry(args)

    def run_interp():
        ev.evaluate_entry(args)
    t_int, t_xla = _interleaved_medians(run_interp, run_xla, runs, min_seconds)
    ref = corpus.reference(program, args)
    ok = len(outs) == len(ref) and not any(mismatch(a, b) for a, b in zip(outs, ref))
    return t_int, t_xla, ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="corpus programs (default: all)")
    ap.add_argument("--quick", action="store_true", help="fewer runs (a smoke run)")
    ap.add_argument("--size", default="tiled", choices=corpus.SIZES)
    ap.add_argument("--runs", type=int, default=None)
    a = ap.parse_args(argv)
    runs = a.runs or (3 if a.quick else 7)
    min_seconds = 0.0 if a.quick else 0.2
    progs = [p for p in corpus.CORPUS if not a.names or p.name in a.names]
    print("HLO interpreter vs XLA:CPU, size=%s, median of >=%d runs (jax %s, numpy %s)"
          % (a.size, runs, jax.__version__, np.__version__))
    print("%-20s %12s %12s %9s  %s" % ("program", "interp ms", "xla ms", "ratio", "match"))
    ratios = []
    for p in progs:
        try:
            t_int, t_xla, ok = bench_program(p, a.size, runs, min_seconds)
        except Exception as e:  # a benchmark never fails the run
            print("%-20s  error: %s: %s" % (p.name, type(e).__name__, str(e).splitlines()[0][:100]))
            continue
        r = t_int / t_xla if t_xla > 0 else float("inf")
        ratios.append(r)
        print("%-20s %12.3f %12.3f %8.1fx  %s" % (p.name, t_int * 1e3, t_xla * 1e3, r, "ok" if ok else "MISMATCH"))
    if ratios:
        med = statistics.median(ratios)
        print("median ratio over %d programs: %.1fx (target: within %.0fx) -> %s"
              % (len(ratios), med, TARGET, "met" if med <= TARGET else "NOT met"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
