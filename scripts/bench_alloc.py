#!/usr/bin/env python3
"""Benchmark the walrus SBUF/PSUM allocators: quality and speed.

    python scripts/bench_alloc.py [--quick] [--json out.json]

Quality: allocator peak bytes per partition against the max-live lower bound
(``_bound.max_live_lower_bound``: no allocation under the same placement
rules -- partition starts, PE values at partition 0 -- can do better), as a ratio
(1.00 = optimal), for the interference-graph colouring and the linear-scan
allocators, on
  * random interval sets shaped like tiled programs (tiles of 512 B..64 KiB on
    32/64/128 partitions),
  * real BIR modules: the random looped test programs and, when the HLO and
    Penguin layers are there, the bundled MLP example compiled to BIR.
Speed: allocation time of the typed allocators on the largest interval set,
against a plain-Python first-fit linear scan measured in the same run on the
same data (speedup ratio), and the time of the whole allocation pass
(liveness + placement) on the largest module.

Never asserts; a figure that cannot be measured is printed as "fails: ...".
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def _paths():
    try:
        import neuronxcc  # noqa: F401
    except ImportError:
        sys.path.insert(0, REPO)
    sys.path.insert(0, os.path.join(REPO, "tests"))


def _timeit(fn, reps=3):
    ts = []
    out = None
    for _ in range(reps):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def random_intervals(n, seed=0):
    import numpy as np
    rng = np.random.default_rng(seed)
    horizon = max(10, n // 4)
    start = rng.integers(0, horizon, n).astype(np.int64)
    length = rng.geometric(0.15, n).astype(np.int64)          # most values die young
    longl = rng.random(n) < 0.05                                 # a few live long (weights, accumulators)
    length[longl] = rng.integers(horizon // 10 + 1, horizon // 2 + 2, int(longl.sum()))
    end = start + length
    size = rng.choice([512, 1024, 2048, 4096, 8192, 16384, 65536], n,
                      p=[0.2, 0.25, 0.2, 0.15, 0.1, 0.07, 0.03]).astype(np.int64)
    nparts = rng.choice([128, 64, 32], n, p=[0.8, 0.1, 0.1]).astype(np.int64)
    pin = (rng.random(n) < 0.5).astype(np.int64)
    return start, end, size, nparts, pin


def python_first_fit(start, end, size, nparts):
    """Reference: linear scan first fit in plain Python (partition start 0 only)."""
    order = sorted(range(len(start)), key=lambda v: (start[v], -size[v]))
    active = []
    off = [0] * len(start)
    for v in order:
        s = start[v]
        active = [u for u in active if end[u] >= s]
        occ = sorted((off[u], off[u] + size[u]) for u in active)
        cand = 0
        for lo, hi in occ:
            if cand + size[v] <= lo:
                break
            cand = max(cand, hi)
            if cand % 4:
                cand += 4 - cand % 4
        off[v] = cand
        active.append(v)
    return max(o + s for o, s in zip(off, size))


def bench_intervals(n, with_python):
    import numpy as np
    from neuronxcc.walrus import _alloc, _bound
    from neuronxcc.walrus.placement import MAX_INTERFERENCE_EDGES as MAX_EDGES, color_orders
    start, end, size, nparts, pin = random_intervals(n)
    cap = 1 << 50
    lb = _bound.max_live_lower_bound(start, end, size, nparts, 128, pin)
    row = {"values": n, "lower_bound": int(lb)}

    def col():
        # as the pass does: every order of placement.color_orders, the lowest peak kept
        g = _alloc.interference_graph(start, end)
        peak = None
        for order in color_orders(start, size, nparts, pin, 128):
            off = np.zeros(n, np.int64)
            ps = np.zeros(n, np.int64)
            _alloc.color_allocate(g[0], g[1], order.astype(np.int64), size, nparts, pin, cap, 4, 0, 128, off, ps)
            p = int((off + size).max())
            peak = p if peak is None else min(peak, p)
        return peak, len(g[1]) // 2

    def ls():
        off = np.zeros(n, np.int64)
        ps = np.zeros(n, np.int64)
        _alloc.linear_scan_allocate(start, end, size, nparts, pin, cap, 4, 0, 128, off, ps)
        return int((off + size).max())

    reps = 3 if n <= 20000 else 1
    bound = _alloc.interference_edge_count(start, end)
    if bound <= MAX_EDGES:
        t, (peak, edges) = _timeit(col, reps)
        row.update(coloring_peak=peak, coloring_ratio=peak / lb, coloring_s=t, edges=edges)
    else:
        row.update(coloring_skipped="graph of up to %d edges > the pass's %d-edge budget" % (bound, MAX_EDGES))
    t, peak = _timeit(ls, reps)
    row.update(linear_scan_peak=peak, linear_scan_ratio=peak / lb, linear_scan_s=t)
    if with_python:
        s, e, z, p = start.tolist(), end.tolist(), size.tolist(), nparts.tolist()
        t, peak = _timeit(lambda: python_first_fit(s, e, z, p), 1)
        row.update(python_first_fit_s=t, python_first_fit_peak=peak, speedup_vs_python=t / row["linear_scan_s"])
    return row


def real_modules(quick):
    mods = []
    try:
        from support.walrus_programs import random_program
        for seed in range(3 if quick else 10):
            mods.append(("random_program(%d)" % seed, random_program(seed, nbuf=6)))
    except Exception as e:  # noqa: BLE001
        mods.append(("random programs", "fails: %s" % e))
    try:
        with open(os.path.join(REPO, "examples", "mlp", "model.hlo_module.pb"), "rb") as f:
            mods.append(("examples/mlp", _to_bir(f.read())))
    except Exception as e:  # noqa: BLE001
        mods.append(("examples/mlp", "fails: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:120])))
    for name in ([] if quick else ["mlp_gelu_softmax", "layernorm", "causal_attention", "transformer_block"]):
        label = "%s-tiled" % name
        try:
            from support import corpus
            prog = corpus.get(name)
            proto, _ = corpus.lower(prog, prog.make_args(0, "tiled"))
            mods.append((label, _to_bir(proto)))
        except Exception as e:  # noqa: BLE001
            mods.append((label, "fails: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:120])))
    return mods


def _to_bir(proto):
    """HLO proto bytes -> the Penguin codegen's (unallocated) BIR module."""
    import tempfile
    from neuronxcc.starfish import birpy as B
    from neuronxcc.starfish.penguin.frontend import run_frontend
    from neuronxcc.starfish.tools import run_tool
    d = tempfile.mkdtemp(prefix="bench-alloc-")
    model = os.path.join(d, "model.hlo_module.pb")
    with open(model, "wb") as f:
        f.write(proto)
    if run_tool("hlo2penguin", [model, "--output", os.path.join(d, "penguin.json")]) != 0:
        raise RuntimeError("hlo2penguin failed")
    run_frontend(os.path.join(d, "penguin.json"), os.path.join(d, "sg00"))
    return B.load(os.path.join(d, "sg00", "bir.json"))


def bench_module(name, m):
    from neuronxcc.hwm import get_target
    from neuronxcc.starfish import birpy as B
    from neuronxcc.walrus.registry import PassContext, run_passes
    row = {"module": name, "instructions": len(m.instructions())}
    for alloc in ("coloring_allocator", "linear_scan_allocator"):
        mm = B.from_json(B.to_json(m))
        ctx = PassContext(get_target("trn1"))
        t0 = time.perf_counter()
        try:
            run_passes(mm, [alloc], ctx)
        except Exception as e:  # noqa: BLE001
            row[alloc] = "fails: %s" % str(e).splitlines()[0][:120]
            continue
        dt = time.perf_counter() - t0
        st = list(ctx.metrics["allocation"].values())[0]
        for mem in ("SBUF", "PSUM"):
            s = st.get(mem)
            if s and s["values"]:
                row["%s_%s" % (alloc, mem)] = "%d/%d (%.2f)" % (
                    s["peak_bytes_per_partition"], s["max_live_lower_bound"],
                    s["peak_bytes_per_partition"] / max(1, s["max_live_lower_bound"]))
        row["%s_s" % alloc] = dt
    return row


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes only (seconds)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    _paths()
    report = {"intervals": [], "modules": []}
    sizes = [1000, 10000] if a.quick else [1000, 10000, 30000, 100000]
    print("## interval sets (peak bytes/partition vs max-live lower bound; ratio 1.00 = optimal)")
    print("%8s %10s %12s %8s %9s %12s %8s %9s %10s" % ("values", "lower", "coloring", "ratio", "time",
                                                         "linear-scan", "ratio", "time", "py-speedup"))
    for n in sizes:
        try:
            r = bench_intervals(n, with_python=n <= 10000)
        except Exception as e:  # noqa: BLE001
            print("%8d fails: %s" % (n, e))
            continue
        report["intervals"].append(r)
        if "coloring_skipped" in r:
            print("%8d coloring skipped: %s" % (n, r["coloring_skipped"]))
            r.update(coloring_peak=0, coloring_ratio=float("nan"), coloring_s=float("nan"))
        print("%8d %10d %12d %8.3f %8.3fs %12d %8.3f %8.3fs %10s" % (
            n, r["lower_bound"], r["coloring_peak"], r["coloring_ratio"], r["coloring_s"],
            r["linear_scan_peak"], r["linear_scan_ratio"], r["linear_scan_s"],
            "%.0fx" % r["speedup_vs_python"] if "speedup_vs_python" in r else "-"))
    print()
    print("## BIR modules (SBUF/PSUM peak/lower-bound (ratio), allocation pass time)")
    for name, m in real_modules(a.quick):
        if isinstance(m, str):
            print("%-24s %s" % (name, m))
            report["modules"].append({"module": name, "result": m})
            continue
        r = bench_module(name, m)
        report["modules"].append(r)
        print("%-24s %5d instr  coloring SBUF %-20s PSUM %-18s %.4fs | linear-scan SBUF %-20s PSUM %-18s %.4fs" % (
            name, r["instructions"], r.get("coloring_allocator_SBUF", "-"), r.get("coloring_allocator_PSUM", "-"),
            r.get("coloring_allocator_s", float("nan")), r.get("linear_scan_allocator_SBUF", "-"),
            r.get("linear_scan_allocator_PSUM", "-"), r.get("linear_scan_allocator_s", float("nan"))))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
