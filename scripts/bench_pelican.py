#!/usr/bin/env python3
"""Benchmark: pelican against sympy on the same index expressions.

Builds a deterministic set of typical address expressions (affine
combinations of 3-6 loop variables with floordiv/mod tiling terms and the
odd min clamp) in pelican and in sympy (integer symbols, ``floor``/``Mod``/
``Min``), and times in the same run, median of several repeats:

* construct   building each expression (both canonicalise on construction)
* subs        substituting ints for some loop variables, expressions for others
* eval        full integer assignment -> int (pelican ``eval(dict)`` vs sympy
              ``subs`` + ``int``)
* eval_point  one assignment at a time: pelican ``CompiledExpr(values)`` vs
              sympy ``lambdify(..., "math")`` on Python ints
* eval_point(cython)  the same from a Cython loop calling the nogil
              ``eval_ptr`` per point (the simulator's path; built at run time
              in a temp dir; skipped with --quick or without a compiler)
* eval_batch  many assignments: pelican ``CompiledExpr.eval_many`` vs sympy
              ``lambdify(..., "numpy")`` over the columns, per point
* parse       text -> expression: pelican ``parse`` (cache cleared) vs
              ``sympy.sympify`` (a subset)
* simplify    pelican ``simplify(ranges)`` vs ``sympy.simplify`` (a subset;
              sympy has no range rules, so this is the cost of "simplify")

Prints ops/s for both and the ratio pelican/sympy (target: >= 100x for
construct/subs/simplify); for construct and subs also the ratio against
sympy with its cache cleared before each pass (every expression new to it).
Every timing starts with one untimed warm-up call, so sympy runs with its
cache warm (its best case); each timed run loops long enough to measure
throughput, counts CPU time (process_time, robust on a loaded machine) and
runs with the cyclic GC off (as timeit does). The values of both are
cross-checked and any disagreement is printed. Never asserts. ``--quick``
for a short run.
"""
import argparse
import gc
import os
import random
import statistics
import sys
import time

# Single-threaded comparison: idle BLAS worker threads only steal cycles here.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

try:
    import sympy
except ImportError:  # pragma: no cover
    sympy = None

from neuronxcc.pelican import min_, var  # noqa: E402


# ---------------------------------------------------------------- recipes
# A recipe is a small tree: ("var", n) | ("const", c) | ("add", a, b) |
# ("mul", a, k) | ("floordiv", a, k) | ("mod", a, k) | ("min", a, b).

def _affine(rng, names, strides):
    t = ("const", rng.randrange(0, 64))
    for n in names:
        t = ("add", t, ("mul", ("var", n), rng.choice(strides)))
    return t


def make_recipes(count, seed=1234):
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        nv = rng.randint(3, 6)
        names = ["i%d" % k for k in range(nv)]
        t = _affine(rng, names[:nv - 2], (1, 2, 128, 512, 4096, 65536))
        a, b = names[-2], names[-1]
        tile = rng.choice((4, 8, 16, 32, 128))
        # tiling: ((a*tile + b) // blk) * stride + ((a*tile + b) % blk)
        inner = ("add", ("mul", ("var", a), tile), ("var", b))
        blk = rng.choice((2, 4, 8, 64))
        t = ("add", t, ("mul", ("floordiv", inner, blk), rng.choice((128, 256, 1024))))
        t = ("add", t, ("mod", inner, blk))
        if rng.random() < 0.3:
            t = ("add", t, ("min", ("add", ("var", names[0]), ("const", rng.randrange(1, 9))), ("const", 100)))
        out.append((names, t))
    return out


def to_source(t):
    """The recipe as Python source, the way index code is written by hand."""
    op = t[0]
    if op == "var":
        return t[1]
    if op == "const":
        return str(t[1])
    if op == "add":
        return "(%s + %s)" % (to_source(t[1]), to_source(t[2]))
    if op == "mul":
        return "%s * %d" % (to_source(t[1]), t[2])
    if op == "floordiv":
        return "%s // %d" % (to_source(t[1]), t[2])
    if op == "mod":
        return "%s %% %d" % (to_source(t[1]), t[2])
    return "MIN(%s, %s)" % (to_source(t[1]), to_source(t[2]))


def compile_builder(names, t, minfn):
    """A function (*loop variables) -> expression, compiled from source."""
    src = "lambda %s: %s" % (", ".join(names), to_source(t))
    return eval(src, {"MIN": minfn})


def build_pelican(t, env):
    op = t[0]
    if op == "var":
        return env[t[1]]
    if op == "const":
        return t[1]
    if op == "add":
        return build_pelican(t[1], env) + build_pelican(t[2], env)
    if op == "mul":
        return build_pelican(t[1], env) * t[2]
    if op == "floordiv":
        return build_pelican(t[1], env) // t[2]
    if op == "mod":
        return build_pelican(t[1], env) % t[2]
    return min_(build_pelican(t[1], env), build_pelican(t[2], env))


def build_sympy(t, env):
    op = t[0]
    if op == "var":
        return env[t[1]]
    if op == "const":
        return sympy.Integer(t[1])
    if op == "add":
        return build_sympy(t[1], env) + build_sympy(t[2], env)
    if op == "mul":
        return build_sympy(t[1], env) * t[2]
    if op == "floordiv":
        return sympy.floor(build_sympy(t[1], env) / t[2])
    if op == "mod":
        return sympy.Mod(build_sympy(t[1], env), t[2])
    return sympy.Min(build_sympy(t[1], env), build_sympy(t[2], env))


# ---------------------------------------------------------------- timing

MIN_RUN = 0.05      # seconds per timed run; fn is looped until a run takes this long


def _median_time(fn, repeats):
    """Median CPU time (process_time: robust on a shared, loaded machine) of
    one fn() call. fn is looped so that each timed run
    lasts MIN_RUN (short runs measure cold caches, not throughput); like
    timeit, the cyclic GC is off while timing."""
    gc.collect()
    t0 = time.process_time()
    fn()                      # warm-up (sympy's cache, allocator pools), not timed
    one = max(time.process_time() - t0, 1e-7)
    loops = max(1, int(MIN_RUN / one))
    times = []
    for _ in range(repeats):
        gc.disable()
        try:
            t0 = time.process_time()
            for _ in range(loops):
                fn()
            times.append((time.process_time() - t0) / loops)
        finally:
            gc.enable()
    return statistics.median(times)


_RUNNER_SRC = """
# cython: language_level=3, boundscheck=False, wraparound=False
from libc.stdint cimport int64_t
from neuronxcc.pelican._compiled cimport CompiledExpr

def run(CompiledExpr ce, const int64_t[:, ::1] rows):
    cdef Py_ssize_t r
    cdef int64_t acc = 0
    with nogil:
        for r in range(rows.shape[0]):
            acc += ce.eval_ptr(&rows[r, 0])
    return acc
"""


def _cython_point_runner():
    """Build (once, in a temp dir) a tiny Cython loop calling eval_ptr per
    point; None when no compiler is around."""
    import importlib.util
    import subprocess
    import tempfile
    import neuronxcc
    root = os.path.dirname(os.path.dirname(os.path.abspath(neuronxcc.__file__)))
    import shutil
    d = tempfile.mkdtemp(prefix="bench_pelican_")
    try:
        with open(os.path.join(d, "pelrun.pyx"), "w") as fh:
            fh.write(_RUNNER_SRC)
        with open(os.path.join(d, "setup.py"), "w") as fh:
            fh.write("from setuptools import setup, Extension\n"
                     "from Cython.Build import cythonize\n"
                     "setup(ext_modules=cythonize([Extension('pelrun', ['pelrun.pyx'], extra_compile_args=['-O2'])],"
                     " include_path=[%r], quiet=True))\n" % root)
        subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=d, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        so = [f for f in os.listdir(d) if f.startswith("pelrun") and f.endswith(".so")][0]
        spec = importlib.util.spec_from_file_location("pelrun", os.path.join(d, so))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)      # loaded: the files can go
        return mod.run
    except Exception:
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer expressions and repeats")
    ap.add_argument("--count", type=int, default=None, help="number of expressions")
    ap.add_argument("--repeats", type=int, default=None)
    args = ap.parse_args(argv)
    if sympy is None:
        print("sympy is not installed: nothing to compare against")
        return 0
    global MIN_RUN
    MIN_RUN = 0.02 if args.quick else 0.1
    count = args.count or (40 if args.quick else 200)
    repeats = args.repeats or (3 if args.quick else 5)
    n_simplify = 5 if args.quick else 20
    n_points = 2000 if args.quick else 20000

    recipes = make_recipes(count)
    all_names = sorted({n for names, _ in recipes for n in names})
    pv = {n: var(n) for n in all_names}
    sv = {n: sympy.Symbol(n, integer=True) for n in all_names}
    rng = random.Random(99)
    assigns = [{n: rng.randrange(-50, 200) for n in names} for names, _ in recipes]
    sub_p, sub_s = [], []
    for names, _ in recipes:
        # first variable -> int, second -> an expression of a fresh variable
        sub_p.append({names[0]: 3, names[1]: pv["i5"] * 2 + 1 if "i5" in pv else 7})
        sub_s.append({sv[names[0]]: 3, sv[names[1]]: sv["i5"] * 2 + 1 if "i5" in sv else 7})

    results = []
    mismatches = []

    def record(name, n_ops, tp, ts, ts_cold=None):
        results.append((name, n_ops / tp, n_ops / ts, ts / tp, None if ts_cold is None else ts_cold / tp))

    def cold(fn):
        # sympy with its cache cleared first: every expression is new to it,
        # as in a compiler that builds each index expression once
        def run():
            sympy.core.cache.clear_cache()
            return fn()
        return run

    # construct: straight-line Python index code, as a user writes it
    pfun = [(compile_builder(names, t, min_), [pv[n] for n in names]) for names, t in recipes]
    sfun = [(compile_builder(names, t, sympy.Min), [sv[n] for n in names]) for names, t in recipes]
    pex = [f(*a) for f, a in pfun]
    sex = [f(*a) for f, a in sfun]
    for k, (names, t) in enumerate(recipes):
        if pex[k] != build_pelican(t, pv) or sympy.simplify(sex[k] - build_sympy(t, sv)) != 0:
            mismatches.append(("construct", str(pex[k]), "", ""))
    tp = _median_time(lambda: [f(*a) for f, a in pfun], repeats)
    ts = _median_time(lambda: [f(*a) for f, a in sfun], repeats)
    tc = _median_time(cold(lambda: [f(*a) for f, a in sfun]), repeats)
    record("construct", count, tp, ts, tc)

    # subs
    tp = _median_time(lambda: [e.subs(m) for e, m in zip(pex, sub_p)], repeats)
    ts = _median_time(lambda: [e.subs(m) for e, m in zip(sex, sub_s)], repeats)
    tc = _median_time(cold(lambda: [e.subs(m) for e, m in zip(sex, sub_s)]), repeats)
    record("subs", count, tp, ts, tc)
    for k, (e, s, m, ms) in enumerate(zip(pex, sex, sub_p, sub_s)):
        env = dict(assigns[k], i5=assigns[k].get("i5", 0))
        a = e.subs(m).eval(env)
        b = int(s.subs(ms).subs({sv[n]: v for n, v in env.items() if n in sv}))
        if a != b:
            mismatches.append(("subs", str(e), a, b))

    # eval (dict)
    s_assigns = [{sv[n]: v for n, v in a.items()} for a in assigns]
    tp = _median_time(lambda: [e.eval(a) for e, a in zip(pex, assigns)], repeats)
    ts = _median_time(lambda: [int(e.subs(a)) for e, a in zip(sex, s_assigns)], repeats)
    record("eval", count, tp, ts)
    for e, s, a, sa in zip(pex, sex, assigns, s_assigns):
        if e.eval(a) != int(s.subs(sa)):
            mismatches.append(("eval", str(e), e.eval(a), int(s.subs(sa))))

    # eval_point: one assignment at a time, the simulator's access pattern;
    # pelican CompiledExpr called from Python (from Cython, eval_ptr is nogil
    # C) vs sympy lambdify on Python ints with the math module
    k_fast = min(count, 10)
    nr = np.random.default_rng(5)
    pts = nr.integers(-50, 200, size=(n_points, len(all_names)), dtype=np.int64)
    compiled = [pex[k].compile(all_names) for k in range(k_fast)]
    arglist = [sv[n] for n in all_names]
    scal = [sympy.lambdify(arglist, sex[k], modules="math") for k in range(k_fast)]
    few = pts[:max(n_points // 20, 100)].tolist()
    tp = _median_time(lambda: [c(p) for c in compiled for p in few], repeats)
    ts = _median_time(lambda: [f(*p) for f in scal for p in few], repeats)
    record("eval_point", k_fast * len(few), tp, ts)
    for c, f in zip(compiled, scal):
        if any(c(p) != int(f(*p)) for p in few[:50]):
            mismatches.append(("eval_point", str(c.expr), "", ""))

    # eval_point from Cython: what the simulator does (CompiledExpr.eval_ptr,
    # nogil, one assignment at a time), against the same lambdify baseline
    runner = None if args.quick else _cython_point_runner()
    if runner is None:
        results.append(("eval_point(cython)", None, "--quick" if args.quick else "no C compiler", None, None))
    else:
        tp = _median_time(lambda: [runner(c, pts) for c in compiled], repeats)
        p_ops = k_fast * n_points / tp
        s_ops = k_fast * len(few) / _median_time(lambda: [f(*p) for f in scal for p in few], repeats)
        results.append(("eval_point(cython)", p_ops, s_ops, p_ops / s_ops, None))

    # eval_batch: many assignments at once; pelican eval_many (column-wise C)
    # vs lambdify with numpy over the columns
    lambdas = [sympy.lambdify(arglist, sex[k], modules="numpy") for k in range(k_fast)]
    cols = [pts[:, c] for c in range(len(all_names))]
    tp = _median_time(lambda: [c.eval_many(pts) for c in compiled], repeats)
    ts = _median_time(lambda: [f(*cols) for f in lambdas], repeats)
    record("eval_batch(points)", k_fast * n_points, tp, ts)
    for c, f in zip(compiled, lambdas):
        if not np.array_equal(c.eval_many(pts), np.asarray(f(*cols)).astype(np.int64)):
            mismatches.append(("eval_batch", str(c.expr), "", ""))

    # parse: the text form back to an expression (BIR JSON loading); pelican
    # uncached vs sympy.sympify of the same text with min -> Min
    from neuronxcc.pelican import _parse
    texts = [str(e) for e in pex]
    stexts = [t.replace("min(", "Min(") for t in texts]
    loc = dict(sv, Min=sympy.Min)

    def pel_parse():
        _parse.clear_cache()
        return [_parse.parse(t) for t in texts]
    tp = _median_time(pel_parse, repeats)
    ts = _median_time(lambda: [sympy.sympify(t, locals=loc) for t in stexts[:n_simplify]], 1)
    results.append(("parse", count / tp, n_simplify / ts, (count / tp) / (n_simplify / ts), None))
    if [_parse.parse(t) for t in texts] != pex:
        mismatches.append(("parse", texts[0], "", ""))

    # simplify (subset)
    ranges = {n: (0, 15) for n in all_names}
    sranges = pex[:n_simplify]
    tp = _median_time(lambda: [e.simplify(ranges) for e in sranges], repeats)
    ts = _median_time(lambda: [sympy.simplify(e) for e in sex[:n_simplify]], 1)
    record("simplify", n_simplify, tp, ts)

    print("pelican vs sympy %s: %d expressions, %d-6 loop variables, median of %d runs"
          % (sympy.__version__, count, 3, repeats))
    # One row per operation: "name  pelican  sympy  ratio x" (scripts/bench.py parses these rows).
    print("%-18s %14s %14s %10s" % ("operation", "pelican op/s", "sympy op/s", "ratio"))
    for name, p, s, r, rc in results:
        if p is None:
            print("%-18s %s" % (name, "skipped: %s" % s))
            continue
        print("%-18s %14.0f %14.0f %9.0fx" % (name, p, s, r))
    colds = ["%s %.0fx" % (name, rc) for name, p, s, r, rc in results if rc is not None]
    if colds:
        print("against sympy with its cache cleared before each pass: " + ", ".join(colds))
    print("example: %s" % pex[0])
    if mismatches:
        print("MISMATCHES between pelican and sympy: %d (first: %r)" % (len(mismatches), mismatches[0]))
    else:
        print("values agree between pelican and sympy on every checked expression")
    return 0


if __name__ == "__main__":
    sys.exit(main())
