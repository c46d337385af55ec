#!/usr/bin/env python3
"""Compile Llama-3-8B-shaped programs at a given depth and report what it costs.

Programs (``tests/support/llama.py``): ``decode`` (one decode step, layers
unrolled), ``decode_scan`` (the layers as one lax.scan: an HLO While),
``prefill`` (seq 2048 by default), ``full`` (the small full model). For each
depth: XLA:CPU's compile of the same lowered program, then ``neuronx-cc
compile`` in a child process under an address-space cap, with its wall time,
the peak resident memory of its whole process tree (sampled from /proc), the
BIR instruction count and NEFF size, and the per-job and per-walrus-pass
seconds.

    scripts/scale_models.py decode 1 2 4 8 [--scan] [--limit-gb 6] [--goldens] [--json out.json]

Used by ``scripts/bench.py --scale`` (section "program size"); also the tool
for profiling which stage or walrus pass dominates at a depth.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import benchlib as bl  # noqa: E402

bl.setup_paths()

GOLDENS_OFF = ["--internal-golden-size-budget", "0"]


def _children():
    """{pid: ppid} of every process on the machine (from /proc)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
            out[int(d)] = int(s[s.rfind(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            pass
    return out


def _rss(pid):
    try:
        with open("/proc/%d/statm" % pid) as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _private(pid):
    """Bytes resident in ``pid`` and in no other process (smaps_rollup's Private_Clean +
    Private_Dirty), or its whole resident set where the kernel has no smaps_rollup."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            kb = sum(int(line.split()[1]) for line in f if line.startswith(("Private_Clean:", "Private_Dirty:")))
        return kb * 1024
    except (OSError, ValueError, IndexError):
        return _rss(pid)


def tree_rss(root):
    """Resident bytes of ``root``'s process tree: the root's resident set plus what each descendant
    holds privately. A tool job forked from the driver (driver/ToolProcess.py) shares the driver's
    pages copy-on-write and an exec'd one maps the same shared libraries, so summing every
    process's resident set would count those pages once per process."""
    parent = _children()
    tree = {root}
    grew = True
    while grew:
        grew = False
        for p, pp in parent.items():
            if pp in tree and p not in tree:
                tree.add(p)
                grew = True
    return _rss(root) + sum(_private(p) for p in tree if p != root)


class PeakSampler:
    """Peak resident bytes of a process tree, sampled every ``period`` seconds."""

    def __init__(self, pid, period=0.05):
        self.pid, self.period, self.peak = pid, period, 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, tree_rss(self.pid))
            self._stop.wait(self.period)

    def stop(self):
        self._stop.set()
        self._t.join()
        return self.peak


def xla_compile(fn, args):
    """Seconds of XLA:CPU's compile() of the lowered program (lowering excluded)."""
    import jax
    jax.clear_caches()
    low = jax.jit(fn).lower(*args)
    t0 = time.perf_counter()
    low.compile()
    return time.perf_counter() - t0


def compile_once(pb_path, work, limit_bytes, extra=(), timeout=3600, keep=None):
    """One CLI compile under ``prlimit --as``: dict of wall, peak tree RSS, ok, error, job and pass times."""
    from support.cli import ncc_command, _env
    d = tempfile.mkdtemp(prefix="scale-", dir=work)
    tmp = os.path.join(d, "work")
    os.makedirs(tmp)
    argv = ["--logfile", os.path.join(d, "log.txt"), "compile", pb_path] + bl.COMPILE_FLAGS + \
        ["--output", os.path.join(d, "out.neff"), "--temp-dir", tmp,
         "--internal-compile-metrics", os.path.join(d, "metrics.json")] + list(extra)
    cmd = ["prlimit", "--as=%d" % limit_bytes] + ncc_command() + argv if limit_bytes else ncc_command() + argv
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=d, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sampler = PeakSampler(p.pid)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        _, err = p.communicate()
        err = "timeout after %d s" % timeout
    wall = time.perf_counter() - t0
    peak = sampler.stop()
    neff = os.path.join(d, "out.neff")
    res = {"wall_s": wall, "peak_rss": peak, "ok": p.returncode == 0 and os.path.isfile(neff),
           "rc": p.returncode}
    jobs, walrus = bl.read_compile_metrics(os.path.join(d, "metrics.json"), os.path.join(d, "log.txt"))
    res["jobs_s"] = jobs
    if walrus:
        res["passes_s"] = walrus.get("pass_timings_s", {})
        res["dependences"] = walrus.get("dependences")
        res["dependences_reduced"] = walrus.get("dependences_reduced")
    if res["ok"]:
        res["instructions"], res["neff_bytes"] = bl.count_instructions(neff)
    else:
        res["error"] = bl.last_error_line(err) or "exit %s" % p.returncode
    if keep:
        shutil.rmtree(keep, ignore_errors=True)
        shutil.move(d, keep)
    else:
        shutil.rmtree(d, ignore_errors=True)
    return res


def measure(kind, layers, work, limit_bytes, goldens=False, seq=2048, cfg=None, keep=None):
    from support import llama
    cfg = cfg or llama.LLAMA3_8B
    fn, args = llama.program(kind, layers, cfg, seq)
    t0 = time.perf_counter()
    pb = bl.hlo_bytes(fn, args)
    lower_s = time.perf_counter() - t0
    path = os.path.join(work, "%s_%d.hlo_module.pb" % (kind, layers))
    with open(path, "wb") as f:
        f.write(pb)
    xla = xla_compile(fn, args)
    res = compile_once(path, work, limit_bytes, ([] if goldens else GOLDENS_OFF) + (["--pipeline", "compile", "SaveTemps"] if keep else []),
                       keep=keep)
    res.update(kind=kind, layers=layers, xla_compile_s=xla, lower_s=lower_s, hlo_bytes=len(pb))
    os.unlink(path)
    return res


def describe(r):
    head = "%-11s L=%-3d xla %.2fs" % (r["kind"], r["layers"], r["xla_compile_s"])
    if not r["ok"]:
        return head + "  FAILED %.1fs peak %s: %s" % (r["wall_s"], bl.fmt_bytes(r["peak_rss"]), r.get("error"))
    s = head + "  ncc %.2fs (%.1fx)  peak %s  %d instr  neff %s" % (
        r["wall_s"], r["wall_s"] / r["xla_compile_s"], bl.fmt_bytes(r["peak_rss"]), r["instructions"],
        bl.fmt_bytes(r["neff_bytes"]))
    jobs = sorted(r.get("jobs_s", {}).items(), key=lambda kv: -kv[1])[:4]
    passes = sorted(r.get("passes_s", {}).items(), key=lambda kv: -kv[1])[:5]
    s += "\n    jobs:   " + ", ".join("%s %.2f" % kv for kv in jobs)
    s += "\n    passes: " + ", ".join("%s %.2f" % kv for kv in passes)
    if r.get("dependences") is not None:
        s += "\n    dependences %s -> reduced %s" % (r.get("dependences"), r.get("dependences_reduced"))
    return s


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=("decode", "decode_scan", "prefill", "full"))
    ap.add_argument("layers", type=int, nargs="+")
    ap.add_argument("--limit-gb", type=float, default=6.0, help="address-space cap of the compile (0: none)")
    ap.add_argument("--goldens", action="store_true", help="keep the golden check (default: compile only)")
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--small", action="store_true", help="small dims instead of the 8B shape")
    ap.add_argument("--json", default=None)
    ap.add_argument("--keep", default=None, help="keep the (last) compile's directory here (with SaveTemps)")
    o = ap.parse_args(argv)
    from support import llama
    work = tempfile.mkdtemp(prefix="ncc-scale-")
    rows = []
    try:
        for n in o.layers:
            r = measure(o.kind, n, work, int(o.limit_gb * 1e9), o.goldens, o.seq,
                        llama.SMALL if o.small else llama.LLAMA3_8B, o.keep)
            rows.append(r)
            print(describe(r), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if o.json:
        with open(o.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
