"""Shared helpers for the benchmarks under scripts/: paths, timing, compiles, tables.

Owns: finding the package and the test corpus (``tests/support``) from a
checkout or an installed package; timing with medians; running
``neuronx-cc compile`` as a subprocess (the CLI) and in this process
(``CommandDriver().run``), with the per-job times parsed from the driver's
log ("Job X took Y seconds"); XLA:CPU reference timings; the markdown report
model (sections of rows plus the list of targets) and the README block
between ``<!-- bench:begin -->`` and ``<!-- bench:end -->``.

Invariants: nothing here asserts or fabricates a figure. A measurement that
cannot be made is reported as ``fails: <one-line reason>``.
"""
import contextlib
import io
import json
import os
import platform
import re
import shutil
import signal
import statistics
import sys
import tempfile
import time

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(SCRIPTS)
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def setup_paths():
    """Make ``neuronxcc`` (installed, else the checkout) and ``support`` (tests/) importable."""
    try:
        import neuronxcc  # noqa: F401
    except ImportError:
        sys.path.insert(0, REPO)
    tests = os.path.join(REPO, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    if SCRIPTS not in sys.path:
        sys.path.insert(0, SCRIPTS)


# ------------------------------------------------------------------ errors / timing

def one_line(e, limit=160):
    """A one-line reason for exception ``e`` (the CompilerError line when it is one)."""
    if hasattr(e, "one_line"):
        try:
            s = e.one_line()
        except Exception:
            s = str(e)
    else:
        s = "%s: %s" % (type(e).__name__, e)
    return shorten(s, limit)


def shorten(s, limit=160):
    s = " ".join(str(s).split())
    s = s.replace("|", "/")  # keep markdown tables intact
    return s if len(s) <= limit else s[:limit - 3] + "..."


def last_error_line(text):
    """The most telling line of a tool's stderr: the last '[...]' line, else the last line."""
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    tagged = [ln for ln in lines if ln.startswith("[")]
    return shorten((tagged or lines or ["no output"])[-1])


def median_time(fn, repeats, warmup=0):
    """(median seconds, all times) of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


class Timeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds):
    """Best effort: raise Timeout after ``seconds`` (SIGALRM; main thread, Python code only)."""
    if not seconds or not hasattr(signal, "SIGALRM"):
        yield
        return

    def handler(signum, frame):
        raise Timeout("took longer than %ds" % seconds)
    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(int(seconds))
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


# ------------------------------------------------------------------ machine

def machine_info():
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    cpu = ln.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "date_utc": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    try:
        import numpy
        info["numpy"] = numpy.__version__
    except ImportError:
        pass
    try:
        import jax
        info["jax"] = jax.__version__
    except ImportError:
        pass
    try:
        import neuronxcc
        info["neuronxcc"] = getattr(neuronxcc, "__version__", "?")
    except ImportError:
        pass
    try:
        import subprocess
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        if rev:
            info["commit"] = rev
    except Exception:
        pass
    return info


# ------------------------------------------------------------------ XLA:CPU reference

def xla_compile_time(fn, args, repeats, with_cpu=False):
    """Median seconds of XLA:CPU's ``compile()`` of a freshly lowered ``jax.jit(fn)`` (caches cleared);
    with ``with_cpu`` also the median CPU seconds of this process (all threads)."""
    import jax
    times, cpus = [], []
    for _ in range(max(1, repeats)):
        jax.clear_caches()
        low = jax.jit(fn).lower(*args)
        c0 = time.process_time()
        t0 = time.perf_counter()
        low.compile()
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    if with_cpu:
        return statistics.median(times), statistics.median(cpus)
    return statistics.median(times)


def xla_exec_time(fn, args, repeats, min_time=0.05, with_cpu=False):
    """Median seconds of one warm ``jax.jit(fn)(*args)`` on XLA:CPU (each sample averages >= min_time);
    with ``with_cpu`` also the median CPU seconds of this process (all threads) per call."""
    import jax
    f = jax.jit(fn)
    jax.block_until_ready(f(*args))
    t0 = time.perf_counter()
    jax.block_until_ready(f(*args))
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, min(1000, int(min_time / one)))
    samples, cpus = [], []
    for _ in range(max(3, repeats)):
        c0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(inner):
            jax.block_until_ready(f(*args))
        samples.append((time.perf_counter() - t0) / inner)
        cpus.append((time.process_time() - c0) / inner)
    if with_cpu:
        return statistics.median(samples), statistics.median(cpus)
    return statistics.median(samples)


def xla_outputs(fn, args):
    import jax
    import numpy as np
    return [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]


def hlo_bytes(fn, args):
    """Serialized HloModuleProto of ``jax.jit(fn)`` on ``args`` (arrays or ShapeDtypeStructs)."""
    import jax
    return jax.jit(fn).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()


# ------------------------------------------------------------------ compiles

_JOB_RE = re.compile(r"Job (\S+) took ([0-9.]+) seconds")
COMPILE_FLAGS = ["--framework", "XLA", "--target", "trn1"]


class CompileResult:
    """One compile: ok, wall seconds, per-job seconds, error line, NEFF path, walrus metrics, CPU seconds."""

    def __init__(self, ok, wall, job_times, error=None, neff=None, walrus=None, cpu=None):
        self.ok, self.wall, self.job_times, self.error = ok, wall, job_times, error
        self.neff = neff
        self.walrus = walrus  # walrus_driver's sg00/metrics.json, via --internal-compile-metrics
        self.cpu = cpu        # CPU seconds of this process and its (waited-for) children

    def metrics(self):
        return self.walrus


def read_compile_metrics(metrics_path, log_path):
    """(job seconds, walrus metrics) from the driver's --internal-compile-metrics JSON, else its log."""
    try:
        with open(metrics_path) as f:
            doc = json.load(f)
        return {k: float(v) for k, v in (doc.get("job_seconds") or {}).items()}, doc.get("walrus_metrics")
    except (OSError, ValueError):
        return parse_job_times(log_path), None


def parse_job_times(log_path):
    times = {}
    try:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            for ln in f:
                m = _JOB_RE.search(ln)
                if m:
                    times[m.group(1)] = float(m.group(2))
    except OSError:
        pass
    return times


def _compile_argv(model, d, tmp, extra):
    return (["--logfile", os.path.join(d, "log.txt"), "compile", model] + COMPILE_FLAGS
            + ["--output", os.path.join(d, "out.neff"), "--temp-dir", tmp,
               "--internal-compile-metrics", os.path.join(d, "compile_metrics.json")] + list(extra))


def _fresh_dirs(base, tag):
    d = tempfile.mkdtemp(prefix=tag + "-", dir=base)
    tmp = os.path.join(d, "work")
    os.makedirs(tmp)
    return d, tmp


def _result(d, tmp, rc, err, wall, cpu):
    out = os.path.join(d, "out.neff")
    ok = rc == 0 and os.path.isfile(out)
    jobs, walrus = read_compile_metrics(os.path.join(d, "compile_metrics.json"), os.path.join(d, "log.txt"))
    shutil.rmtree(tmp, ignore_errors=True)   # a failed compile keeps its work dir there
    return CompileResult(ok, wall, jobs, None if ok else last_error_line(err), out if ok else None, walrus, cpu)


def _cpu_now():
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def compile_cli(model, base, extra=(), timeout=1800):
    """``neuronx-cc compile MODEL`` in a child process; wall time includes interpreter start-up."""
    from support.cli import run_ncc
    d, tmp = _fresh_dirs(base, "cli")
    c0 = _cpu_now()
    t0 = time.perf_counter()
    try:
        r = run_ncc(_compile_argv(model, d, tmp, extra), cwd=d, timeout=timeout)
        rc, err = r.returncode, r.stderr
    except Exception as e:  # timeout
        rc, err = -1, one_line(e)
    return _result(d, tmp, rc, err, time.perf_counter() - t0, _cpu_now() - c0)


def compile_inproc(model, base, extra=()):
    """The same compile through ``CommandDriver().run`` in this process (console output captured)."""
    from neuronxcc.driver.CommandDriver import CommandDriver
    d, tmp = _fresh_dirs(base, "inproc")
    argv = ["neuronx-cc"] + _compile_argv(model, d, tmp, extra)
    so, se = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    c0 = _cpu_now()
    t0 = time.perf_counter()
    try:
        with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
            rc = CommandDriver().run(argv)
        err = se.getvalue()
    except BaseException as e:  # the driver should never raise; if it does, say so
        if isinstance(e, KeyboardInterrupt):
            raise
        rc, err = -1, one_line(e)
    finally:
        os.chdir(cwd)
    return _result(d, tmp, rc, err, time.perf_counter() - t0, _cpu_now() - c0)


def median_compile(compile_fn, model, base, repeats, extra=(), first=None):
    """Median wall, CPU and per-job times over ``repeats`` compiles (``first``, an earlier passing
    compile of the same model, counts as one); returns the first failing compile instead."""
    runs = [first] if first is not None and first.ok else []
    while len(runs) < max(1, repeats):
        r = compile_fn(model, base, extra=extra)
        if not r.ok:
            return r
        runs.append(r)
    jobs = {}
    for r in runs:
        for k, v in r.job_times.items():
            jobs.setdefault(k, []).append(v)
    return CompileResult(True, statistics.median(r.wall for r in runs),
                         {k: statistics.median(v) for k, v in jobs.items()}, neff=runs[-1].neff,
                         walrus=runs[-1].walrus, cpu=statistics.median(r.cpu for r in runs))


def count_instructions(neff_path):
    """(static BIR instruction count, NEFF bytes) of a NEFF, read back with neuronxcc.neff."""
    from neuronxcc.neff import read_neff
    neff = read_neff(neff_path)
    return len(neff.module.instructions()), os.path.getsize(neff_path)


# ------------------------------------------------------------------ committed-state runs

def run_in_clone(script_args, output, readme, json_path):
    """Run bench.py from a local clone of this checkout's HEAD, built in place; returns its exit status.

    The shared working tree may hold other engineers' half-done edits; a clone measures exactly the
    committed state (the table names the commit). Outputs go to the given absolute paths.
    """
    import subprocess
    d = tempfile.mkdtemp(prefix="ncc-bench-clone-")
    clone = os.path.join(d, "repo")
    try:
        subprocess.run(["git", "clone", "-q", "--local", REPO, clone], check=True)
        os.makedirs(os.path.join(clone, "neuronxcc", "data", "custom_op"), exist_ok=True)  # built libraries
        venv = os.path.join(REPO, ".venv")
        if os.path.isdir(venv):
            os.symlink(venv, os.path.join(clone, ".venv"))      # the tool launchers look for it
        b = subprocess.run([sys.executable, os.path.join("scripts", "dev_build.py")], cwd=clone,
                           capture_output=True, text=True)
        if b.returncode != 0:
            sys.stderr.write("bench: building the clone failed:\n%s\n" % (b.stdout + b.stderr)[-3000:])
            return 1
        args = list(script_args) + ["--output", output, "--readme", readme]
        if json_path is not None:
            args += ["--json", json_path or os.path.splitext(output)[0] + ".json"]
        env = dict(os.environ, PYTHONPATH=clone)
        return subprocess.call([sys.executable, os.path.join(clone, "scripts", "bench.py")] + args, cwd=clone,
                               env=env)
    finally:
        shutil.rmtree(d, ignore_errors=True)


# ------------------------------------------------------------------ report model

class Section:
    """One table of the report: a title, column names, rows (lists of cells) and notes."""

    def __init__(self, key, title, columns):
        self.key, self.title, self.columns = key, title, list(columns)
        self.rows, self.notes, self.data = [], [], []

    def row(self, *cells, data=None):
        cells = [fmt_cell(c) for c in cells]
        cells += [""] * (len(self.columns) - len(cells))
        self.rows.append(cells)
        if data is not None:
            self.data.append(data)

    def fails(self, name, reason, data=None):
        self.row(name, "fails: %s" % shorten(reason), data=dict(data or {}, name=name, fails=shorten(reason)))

    def note(self, text):
        self.notes.append(text)

    def markdown(self):
        out = ["### %s" % self.title, ""]
        out.append("| " + " | ".join(self.columns) + " |")
        out.append("|" + "|".join("---" for _ in self.columns) + "|")
        for r in self.rows:
            out.append("| " + " | ".join(r) + " |")
        if not self.rows:
            out.append("| (no rows) |" + " |" * (len(self.columns) - 1))
        for n in self.notes:
            out.append("")
            out.append(n)
        out.append("")
        return "\n".join(out)


class Target:
    """A target figure: what, the measured ratio text, the target text, met (True/False/None = unknown)."""

    def __init__(self, section, figure, measured, target, met, note=""):
        self.section, self.figure, self.measured, self.target, self.met, self.note = \
            section, figure, measured, target, met, note

    def as_dict(self):
        return dict(section=self.section, figure=self.figure, measured=self.measured, target=self.target,
                    met=self.met, note=self.note)


def met_text(met):
    return {True: "yes", False: "**no**", None: "n/a"}[met]


def fmt_cell(c):
    if c is None:
        return ""
    if isinstance(c, float):
        return fmt_num(c)
    return shorten(c, 400)


def fmt_num(x):
    if x is None:
        return ""
    ax = abs(x)
    if ax == 0:
        return "0"
    if ax >= 1000:
        return "%.0f" % x
    if ax >= 100:
        return "%.1f" % x
    if ax >= 1:
        return "%.2f" % x
    return "%.3g" % x


def fmt_s(sec):
    if sec is None:
        return ""
    if sec >= 1:
        return "%.2f s" % sec
    if sec >= 1e-3:
        return "%.1f ms" % (sec * 1e3)
    return "%.1f us" % (sec * 1e6)


def fmt_x(r):
    if r is None:
        return ""
    return ("%.0fx" if r >= 100 else "%.2fx" if r < 10 else "%.1fx") % r


def fmt_bytes(n):
    if n is None:
        return ""
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return "%.1f %s" % (n / k, unit)
    return "%d B" % n


def render(report):
    """Markdown text of a report dict: machine line, targets table, then each section."""
    m = report["machine"]
    mode = "" if report["mode"] == "full" else " --" + report["mode"]
    lines = ["Latest `scripts/bench.py%s` run. Machine: %s cores, %s; Python %s, jax %s, numpy %s; "
             "neuronxcc %s%s; %s. Every figure is the median of %s runs unless a row says otherwise; "
             "ratios are against a reference measured in the same run."
             % (mode, m.get("cores"), m.get("cpu") or "unknown CPU", m.get("python"), m.get("jax", "?"),
                m.get("numpy", "?"), m.get("neuronxcc", "?"), (" at " + m["commit"]) if m.get("commit") else "",
                m.get("date_utc"), report["repeats"])
             + (" " + m["note"] + "." if m.get("note") else ""), ""]
    lines.append("### Targets")
    lines.append("")
    lines.append("| section | figure | measured | target | met |")
    lines.append("|---|---|---|---|---|")
    for t in report["targets"]:
        lines.append("| %s | %s | %s | %s | %s |" % (t.section, shorten(t.figure, 200), shorten(t.measured, 200),
                                                    t.target, met_text(t.met)))
    lines.append("")
    for s in report["sections"]:
        lines.append(s.markdown())
    lines.append("Total benchmark time: %.0f s." % report["elapsed_s"])
    return "\n".join(lines) + "\n"


def to_json(report):
    return {"mode": report["mode"], "machine": report["machine"], "repeats": report["repeats"],
            "elapsed_s": report["elapsed_s"], "targets": [t.as_dict() for t in report["targets"]],
            "sections": [{"key": s.key, "title": s.title, "columns": s.columns, "rows": s.rows,
                          "notes": s.notes, "data": s.data} for s in report["sections"]]}


def update_readme(readme, text):
    """Replace the block between the bench markers in ``readme`` by ``text``. Returns True if written."""
    try:
        with open(readme, encoding="utf-8") as f:
            old = f.read()
    except OSError:
        return False
    i, j = old.find(BEGIN), old.find(END)
    if i < 0 or j < i:
        return False
    new = old[:i + len(BEGIN)] + "\n" + text.rstrip("\n") + "\n" + old[j:]
    from neuronxcc.common.toolshell import atomic_write
    atomic_write(readme, new)
    return True
