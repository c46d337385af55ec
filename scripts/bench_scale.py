"""bench.py section "program size" (opt-in: ``scripts/bench.py --scale``).

The Llama-3-8B-shaped decode step (``tests/support/llama.py``: hidden 4096, 32/8 heads,
head dim 128, SwiGLU 14336, KV cache 2048, bf16 weights as parameters) at 1, 2, 4, 8, 16
and 32 layers, unrolled (a Python loop) and as one lax.scan (an HLO While), and the 1- and
32-layer prefill at seq 2048. Per program, in the same run: XLA:CPU's compile() of the same
lowered program; our CLI compile (goldens off: compile only) under a 6 GB address-space cap
with its wall time, the peak resident memory of its process tree, BIR instructions and NEFF
size (``scripts/scale_models.py``); then the exponents of time and memory against layers,
fitted on the unrolled decode (least squares in log-log, from 2 layers up).

    scripts/bench.py --sections program_size --scale [--scale-layers 1,2,4,8,16,32]
"""
import math

import benchlib as bl

LAYERS = (1, 2, 4, 8, 16, 32)
PREFILL_LAYERS = (1, 32)
LIMIT = 6_000_000_000
GIB = 1 << 30


def _fit(points):
    """Least-squares exponent k of y ~ x^k over (x, y) points with x, y > 0."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None


def section(bench, layers=LAYERS, prefill_layers=PREFILL_LAYERS):
    import scale_models as sm
    s = bl.Section("program_size", "7. Program size: Llama-3-8B-shaped decode step and prefill against XLA:CPU",
                   ["program", "layers", "XLA:CPU compile", "neuronx-cc compile", "ratio", "peak memory (tree)",
                    "BIR instructions", "NEFF"])
    runs = [("decode", n) for n in layers] + [("decode_scan", n) for n in layers] + \
        [("prefill", n) for n in prefill_layers]
    res = {}
    for kind, n in runs:
        bench.log("program size: %s %d layers" % (kind, n))
        try:
            r = sm.measure(kind, n, bench.base, LIMIT)
        except Exception as e:      # lowering failed: say so, never a number
            s.fails("%s x%d" % (kind, n), bl.one_line(e), data={"kind": kind, "layers": n})
            continue
        res[(kind, n)] = r
        data = {k: r.get(k) for k in ("kind", "layers", "xla_compile_s", "wall_s", "peak_rss", "instructions",
                                      "neff_bytes", "ok", "error", "jobs_s", "passes_s")}
        if not r["ok"]:
            s.row(kind, n, bl.fmt_s(r["xla_compile_s"]), "fails: %s" % bl.shorten(r.get("error") or "", 160), "",
                  bl.fmt_bytes(r["peak_rss"]), "", "", data=data)
            continue
        s.row(kind, n, bl.fmt_s(r["xla_compile_s"]), bl.fmt_s(r["wall_s"]), bl.fmt_x(r["wall_s"] / r["xla_compile_s"]),
              bl.fmt_bytes(r["peak_rss"]), r["instructions"], bl.fmt_bytes(r["neff_bytes"]), data=data)
    ok = [(n, res[("decode", n)]) for n in layers if ("decode", n) in res and res[("decode", n)]["ok"]]
    kt = _fit([(n, r["wall_s"]) for n, r in ok if n >= 2])
    km = _fit([(n, r["peak_rss"]) for n, r in ok if n >= 2])
    kx = _fit([(n, r["xla_compile_s"]) for n, r in ok if n >= 2])
    s.note("Fitted exponents on the unrolled decode, 2 layers up (y ~ layers^k): neuronx-cc compile time k = %s, "
           "peak memory k = %s; XLA:CPU compile time k = %s." % tuple(
               "%.2f" % k if k is not None else "n/a" for k in (kt, km, kx)))
    s.note("Compile only (`--internal-golden-size-budget 0`: no goldens, so no bir_sim check), one CLI compile "
           "per row under `prlimit --as=%d`; peak memory is the sampled (50 ms) resident set of the compile's "
           "driver plus what each of its tool processes holds privately (no page counted twice); XLA:CPU is `jax.jit(f).lower(*specs).compile()` of the same program (weights as "
           "ShapeDtypeStructs), lowering excluded on both sides." % LIMIT)
    s.note("Machine load: the same-run XLA:CPU compile is the reference each ratio is against.")
    bench.sections.append(s)
    d32, d8 = res.get(("decode", 32)), res.get(("decode", 8))
    if d32 is not None and d32["ok"]:
        ratio = d32["wall_s"] / d32["xla_compile_s"]
        bench.target("7 program size", "32-layer unrolled decode compile / XLA:CPU", bl.fmt_x(ratio), "<= 10x",
                     ratio <= 10)
        bench.target("7 program size", "32-layer unrolled decode peak compile memory", bl.fmt_bytes(d32["peak_rss"]),
                     "< 2 GiB", d32["peak_rss"] < 2 * GIB)
        if d8 is not None and d8["ok"]:
            t = d32["wall_s"] / d8["wall_s"]
            bench.target("7 program size", "time(32 layers) / time(8 layers), unrolled decode", "%.2f" % t, "<= 4.5",
                         t <= 4.5)
    elif ("decode", 32) in res or 32 in layers:
        bench.target("7 program size", "32-layer unrolled decode compiles", "fails", "compiles", False)
    for kind, label in (("decode_scan", "scan-form decode"), ("prefill", "prefill (seq 2048)")):
        if 32 in (layers if kind == "decode_scan" else prefill_layers):
            r = res.get((kind, 32))
            okk = bool(r and r["ok"])
            bench.target("7 program size", "32-layer %s compiles" % label,
                         "compiles" if okk else "fails: %s" % bl.shorten((r or {}).get("error") or "", 100),
                         "compiles", okk)
