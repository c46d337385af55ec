#!/usr/bin/env python3
"""One benchmark run that shows where neuronxcc stands, each figure against a reference
measured side by side in the same run on the same machine.

Sections (the README's "Benchmarks" table is this script's output):

1. Compile: ``neuronx-cc compile`` wall time (CLI, a child process) and the
   in-process pipeline time (``CommandDriver().run`` here), each against
   XLA:CPU's ``compile()`` of the same jax program, per corpus program and as
   the median; the per-job breakdown from the driver's ``--internal-compile-metrics``
   JSON (else its log).
2. Scaling: the matmul+gradient graph (three dots, two transposes) at 1024,
   4096 and 16000 square, compile only (goldens off): compile time, BIR
   instruction count (read back from the NEFF), NEFF size.
3. Simulator: birsim executing the compiled NEFF once loaded (``load_neff`` then
   ``execute``) against XLA:CPU's warm execution of the same program, wall and CPU
   time; load time against XLA:CPU's compile; simulated instructions per second; outputs checked;
   ``scripts/bench_birsim.py``'s per-instruction and large-tile-vs-numpy figures.
4. Generated code: birsim's estimated device time against the roofline bound
   (max of FLOPs at the PE peak for the dtype and bytes at HBM bandwidth,
   ``neuronxcc.hwm``), per-engine utilisation; a matmul sweep (f32, bf16) and
   the transformer block.
5. Allocation: SBUF/PSUM peak bytes per partition against the max-live lower
   bound (walrus's metrics of each compile); allocation time on the largest
   program; ``scripts/bench_alloc.py``'s synthetic interval sets.
6. pelican against sympy (``scripts/bench_pelican.py``); the HLO reference
   interpreter against XLA:CPU execution (``scripts/bench_hlo_interp.py``).
7. Program size (opt-in, ``--scale``): the Llama-3-8B-shaped decode step at 1..32 layers,
   unrolled and as lax.scan, and the 1- and 32-layer prefill: compile time, peak memory,
   instructions, NEFF size against XLA:CPU's compile, fitted exponents (``scripts/bench_scale.py``).

Programs come from the test suite's JAX corpus (``tests/support/corpus.py``).
A layer that cannot handle a program yet gives that program's row as
``fails: <one-line reason>``; nothing is ever fabricated, and the benchmark
never asserts. ``--quick`` runs a subset (small repeats) in about two minutes.

    scripts/bench.py [--quick] [--output build/bench.md] [--json [PATH]] [--update-readme] [--committed]

``--committed`` measures the committed HEAD in a local clone built in place (the shared working tree
may hold half-done edits); the README table is produced that way.
"""
import argparse
import contextlib
import io
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

import benchlib as bl

bl.setup_paths()

QUICK_PROGRAMS = ("layernorm", "mlp_gelu_softmax", "transformer_block", "matmul_grad")
QUICK_INTERP_PROGRAMS = QUICK_PROGRAMS + ("int_zoo", "conv_relu_maxpool")
PELICAN_TARGET_OPS = ("construct", "subs", "simplify")   # bench_pelican.py's own target rows
GOLDENS_OFF = ["--internal-golden-size-budget", "0"]   # compile only: no goldens, so no bir_sim check
SECTION_KEYS = ("compile", "scaling", "simulator", "codegen", "allocation", "pelican_interp", "program_size")
OPT_IN = {"program_size": "--scale"}     # sections that run only when asked for (minutes each)


def _matmul(x, w):
    return x @ w


class ProgramState:
    """Per corpus program: its args, HLO file, and what the sections measured on it."""

    def __init__(self, program, args, pb_path):
        self.program, self.args, self.pb = program, args, pb_path
        self.artifact = None          # CompileResult of the kept (SaveTemps) in-process compile
        self.xla_exec = None
        self.xla_out = None
        self.xla_compile = None       # seconds, measured in section 1
        self.xla_exec_cpu = None      # CPU seconds of one warm execution (this process, all threads)


class Bench:
    def __init__(self, opts):
        self.opts = opts
        self.quick = opts.quick
        self.r = opts.repeats or (2 if self.quick else 3)            # compiles, simulations
        self.r_cli = max(1, self.r - 1)                               # CLI compiles (the slowest figure)
        self.r_cheap = max(3, self.r) if self.quick else 5            # XLA, interpreter
        self.base = tempfile.mkdtemp(prefix="ncc-bench-")
        self.targets = []
        self.sections = []
        self.progs = {}
        self.prog_errors = {}
        self.warm = False                                             # an in-process compile has run
        # section 4's compiles: extra walrus_driver options (e.g. an allocator switch), to compare runs
        self.codegen_extra = (["--internal-backend-options=" + opts.backend_options]
                              if opts.backend_options else [])
        from support import corpus
        self.corpus = corpus
        if opts.programs:
            self.names = [n for n in opts.programs.split(",") if n]
        else:
            self.names = list(QUICK_PROGRAMS) if self.quick else [p.name for p in corpus.CORPUS]

    def log(self, msg):
        sys.stderr.write("[bench %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
        sys.stderr.flush()

    def target(self, section, figure, measured, target, met, note=""):
        self.targets.append(bl.Target(section, figure, measured, target, met, note))

    # -- programs --------------------------------------------------------------------
    def program(self, name):
        """ProgramState of a corpus program at the tiled size (lowered once), or raises."""
        if name in self.prog_errors:
            raise self.prog_errors[name]
        if name not in self.progs:
            try:
                p = self.corpus.get(name)
                args = p.make_args(0, "tiled")
                pb, _ = self.corpus.lower(p, args)
                path = os.path.join(self.base, name + ".hlo_module.pb")
                with open(path, "wb") as f:
                    f.write(pb)
                self.progs[name] = ProgramState(p, args, path)
            except Exception as e:
                self.prog_errors[name] = e
                raise
        return self.progs[name]

    def xla_exec(self, st):
        if st.xla_exec is None:
            st.xla_exec, st.xla_exec_cpu = bl.xla_exec_time(st.program.fn, st.args, self.r_cheap, with_cpu=True)
            st.xla_out = bl.xla_outputs(st.program.fn, st.args)
        return st.xla_exec

    def write_pb(self, tag, pb):
        path = os.path.join(self.base, tag + ".hlo_module.pb")
        with open(path, "wb") as f:
            f.write(pb)
        return path

    # -- 1. compile --------------------------------------------------------------------
    def section_compile(self):
        s = bl.Section("compile", "1. Compile time against XLA:CPU (corpus, tiled sizes)",
                       ["program", "CLI", "in-process", "XLA:CPU compile", "CLI / XLA", "in-process / XLA",
                        "CLI CPU / XLA CPU", "in-process CPU / XLA CPU", "slowest job (in-process)"])
        cli_r, inp_r, cpu_r, cli_cpu_r, jobs = [], [], [], [], {}
        for name in self.names:
            self.log("compile %s" % name)
            try:
                st = self.program(name)
                xla, xla_cpu = bl.xla_compile_time(st.program.fn, st.args, self.r_cheap, with_cpu=True)
            except Exception as e:
                s.fails(name, "lowering with jax: " + bl.one_line(e))
                continue
            st.xla_compile = xla
            was_warm = self.warm
            art = bl.compile_inproc(st.pb, self.base)     # the first one in the process is the warm-up
            self.warm = True
            st.artifact = art
            if not art.ok:
                s.fails(name, art.error, data={"xla_compile_s": xla})
                continue
            inp = bl.median_compile(bl.compile_inproc, st.pb, self.base, self.r, first=art if was_warm else None)
            cli = bl.median_compile(bl.compile_cli, st.pb, self.base, self.r_cli)
            if not inp.ok or not cli.ok:
                s.fails(name, (inp.error if not inp.ok else cli.error), data={"xla_compile_s": xla})
                continue
            total = sum(inp.job_times.values()) or None
            slow = max(inp.job_times.items(), key=lambda kv: kv[1]) if inp.job_times else None
            for k, v in inp.job_times.items():
                jobs.setdefault(k, []).append((v, v / total if total else None))
            cli_r.append(cli.wall / xla)
            inp_r.append(inp.wall / xla)
            rc = inp.cpu / xla_cpu if xla_cpu > 0 else None
            if rc is not None:
                cpu_r.append(rc)
            rcc = cli.cpu / xla_cpu if xla_cpu > 0 else None
            if rcc is not None:
                cli_cpu_r.append(rcc)
            s.row(name, bl.fmt_s(cli.wall), bl.fmt_s(inp.wall), bl.fmt_s(xla), bl.fmt_x(cli.wall / xla),
                  bl.fmt_x(inp.wall / xla), bl.fmt_x(rcc), bl.fmt_x(rc),
                  "%s %s" % (slow[0], bl.fmt_s(slow[1])) if slow else "",
                  data={"name": name, "cli_s": cli.wall, "inprocess_s": inp.wall, "xla_compile_s": xla,
                        "inprocess_cpu_s": inp.cpu, "xla_compile_cpu_s": xla_cpu, "cli_cpu_s": cli.cpu,
                        "jobs_s": inp.job_times})
        n_ok, n = len(cli_r), len(self.names)
        if cli_r:
            mc, mi = statistics.median(cli_r), statistics.median(inp_r)
            mcpu = statistics.median(cpu_r) if cpu_r else None
            mccpu = statistics.median(cli_cpu_r) if cli_cpu_r else None
            s.row("**median** (%d of %d compile)" % (n_ok, n), "", "", "", bl.fmt_x(mc), bl.fmt_x(mi),
                  bl.fmt_x(mccpu), bl.fmt_x(mcpu), "")
            self.target("1 compile", "CLI compile / XLA:CPU compile, median (%d of %d programs compile)"
                        % (n_ok, n), bl.fmt_x(mc), "<= 3x", mc <= 3)
            self.target("1 compile", "in-process pipeline / XLA:CPU compile, median (%d of %d programs compile)"
                        % (n_ok, n), bl.fmt_x(mi), "<= 3x", mi <= 3)
            if mccpu is not None:
                self.target("1 compile", "CLI compile CPU time / XLA:CPU compile CPU time, median (%d of %d "
                            "programs compile; less sensitive to load)" % (n_ok, n), bl.fmt_x(mccpu), "(reported)",
                            None)
        else:
            for fig, tgt in (("CLI compile / XLA:CPU compile, median", "<= 3x"),
                             ("in-process pipeline / XLA:CPU compile, median", "<= 3x")):
                self.target("1 compile", fig, "no program compiles (0 of %d)" % n, tgt, None)
        s.note("XLA:CPU: `jax.jit(f).lower(*args).compile()` timed on the compile step of a freshly lowered "
               "program with jax's caches cleared. CLI: `neuronx-cc compile` as a child process (includes "
               "Python start-up); in-process: `CommandDriver().run([...])` in the benchmark's process after a "
               "warm-up compile. Both run the full default pipeline (goldens and the bir_sim check included). "
               "CPU: user+system seconds of the process and its child processes (the CLI's whole process tree; "
               "in-process: the pipeline and its tool jobs), against XLA's process CPU time; less sensitive "
               "than wall time to other load on the machine.")
        self.sections.append(s)
        jb = bl.Section("compile_jobs", "1b. Compile: per-job time (in-process, over the programs that compile)",
                        ["job", "median", "max", "median share of the pipeline"])
        for k, vals in sorted(jobs.items(), key=lambda kv: -statistics.median(v for v, _ in kv[1])):
            secs = [v for v, _ in vals]
            shares = [f for _, f in vals if f is not None]
            jb.row(k, bl.fmt_s(statistics.median(secs)), bl.fmt_s(max(secs)),
                   "%.0f%%" % (100 * statistics.median(shares)) if shares else "",
                   data={"job": k, "median_s": statistics.median(secs), "max_s": max(secs)})
        if not jobs:
            jb.fails("(all jobs)", "no program compiled, so there is no per-job time")
        jb.note("Job times are the driver's own (its log's \"Job X took Y seconds\" lines); tool jobs "
                "(hlo2penguin, xla_infergoldens, walrus_driver) run as child processes.")
        self.sections.append(jb)

    # -- 2. scaling --------------------------------------------------------------------
    def section_scaling(self):
        import jax
        import jax.numpy as jnp
        s = bl.Section("scaling", "2. Scaling: matmul+gradient graph (3 dots, 2 transposes), compile only",
                       ["N (square)", "compile (in-process)", "vs 1024", "XLA:CPU compile", "BIR instructions",
                        "vs 1024", "NEFF size"])
        sizes = [1024, 4096, 16000]
        first = {}
        neff_sizes = {}
        skipped = []
        for n in sizes:
            if self.quick and n == 16000 and first.get("wall", 0) > 20:
                skipped.append(n)
                s.fails(str(n), "skipped in --quick: the 1024 compile took %s" % bl.fmt_s(first["wall"]))
                continue
            self.log("scaling %d" % n)
            try:
                spec = [jax.ShapeDtypeStruct((n, n), jnp.float32)] * 3
                pb = self.write_pb("matmul_grad_%d" % n, bl.hlo_bytes(self.corpus.matmul_grad, spec))
                xla = bl.xla_compile_time(self.corpus.matmul_grad, spec, self.r_cheap)
            except Exception as e:
                s.fails(str(n), "lowering with jax: " + bl.one_line(e))
                continue
            if not self.warm:                                          # imports paid once, not timed
                bl.compile_inproc(pb, self.base, extra=GOLDENS_OFF)
                self.warm = True
            r = bl.median_compile(bl.compile_inproc, pb, self.base, self.r, extra=GOLDENS_OFF)
            if not r.ok:
                s.fails(str(n), r.error, data={"n": n, "xla_compile_s": xla})
                continue
            try:
                ninstr, nbytes = bl.count_instructions(r.neff)
            except Exception as e:
                s.fails(str(n), "reading the NEFF back: " + bl.one_line(e))
                continue
            if n == 1024:
                first = {"wall": r.wall, "instr": ninstr}
            neff_sizes[n] = nbytes
            rt = r.wall / first["wall"] if first else None
            ri = ninstr / first["instr"] if first else None
            s.row(str(n), bl.fmt_s(r.wall), bl.fmt_x(rt), bl.fmt_s(xla), str(ninstr), bl.fmt_x(ri),
                  bl.fmt_bytes(nbytes),
                  data={"n": n, "compile_s": r.wall, "xla_compile_s": xla, "bir_instructions": ninstr,
                        "neff_bytes": nbytes, "jobs_s": r.job_times})
            if n == 16000 and first:
                self.target("2 scaling", "compile time 16000 / 1024 (matmul+gradient)", bl.fmt_x(rt), "<= 1.5x",
                            rt <= 1.5)
                self.target("2 scaling", "BIR instructions 16000 / 1024", "%d / %d" % (ninstr, first["instr"]),
                            "no growth (<= 1.0x)", ninstr <= first["instr"])
        if 16000 not in [d["n"] for d in s.data if "n" in d and "fails" not in d] or not first:
            why = "16000 skipped" if 16000 in skipped else "1024 or 16000 does not compile"
            self.target("2 scaling", "compile time 16000 / 1024 (matmul+gradient)", why, "<= 1.5x", None)
        if neff_sizes:
            big = max(neff_sizes.values())
            self.target("2 scaling", "largest NEFF (sizes %s)" % ", ".join(str(k) for k in sorted(neff_sizes)),
                        bl.fmt_bytes(big), "< 1 MiB", big < (1 << 20))
        else:
            self.target("2 scaling", "largest NEFF", "no size compiles", "< 1 MiB", None)
        s.note("`--internal-golden-size-budget 0` at every size, so no goldens and no bir_sim check: the "
               "compile of the same graph at different sizes does the same work. Instructions are the static "
               "BIR instructions of the NEFF's program (loops count once; walrus's `unroll` pass unrolls loops of very "
               "few trips, so a small size can have more).")
        self.sections.append(s)

    # -- 3. simulator ------------------------------------------------------------------
    def section_simulator(self):
        from neuronxcc.common.tolerances import mismatch
        s = bl.Section("simulator", "3. Simulator: birsim against XLA:CPU executing the same program",
                       ["program", "birsim execute", "XLA:CPU execute", "execute / XLA", "execute CPU / XLA CPU",
                        "birsim load", "XLA:CPU compile", "load / XLA compile", "executed instructions",
                        "simulated instr/s", "outputs vs XLA"])
        try:
            from neuronxcc.starfish.birsim.model import load_neff
        except Exception as e:
            s.fails("(all)", "birsim: " + bl.one_line(e))
            self.target("3 simulator", "birsim / XLA:CPU execute, median", "birsim not importable", "<= 3x", None)
            self.sections.append(s)
            self._birsim_micro()
            return
        ratios, load_ratios, cpu_ratios = [], [], []
        worst = worst_cpu = (0.0, "")
        limit = 120 if self.quick else 600
        for name in self.names:
            st = self.progs.get(name)
            if st is None or st.artifact is None or not st.artifact.ok:
                why = st.artifact.error if st is not None and st.artifact is not None else \
                    bl.one_line(self.prog_errors[name]) if name in self.prog_errors else "not compiled"
                s.fails(name, "no NEFF: " + why)
                continue
            self.log("simulate %s" % name)
            try:
                with bl.time_limit(limit):
                    loads = []
                    for _ in range(max(1, self.r)):
                        t0 = time.perf_counter()
                        model = load_neff(st.artifact.neff)
                        loads.append(time.perf_counter() - t0)
                    load = statistics.median(loads)
                    res = model.execute(st.args)      # the first execution, outside the timing
                    walls, cpus = [], []
                    t_all = time.perf_counter()      # small programs: more samples, up to 0.2 s
                    while len(walls) < max(3, self.r) or (len(walls) < 30 and time.perf_counter() - t_all < 0.2):
                        c0 = time.process_time()
                        t0 = time.perf_counter()
                        model.execute(st.args)
                        walls.append(time.perf_counter() - t0)
                        cpus.append(time.process_time() - c0)
                    wall, cpu = statistics.median(walls), statistics.median(cpus)
                xla = self.xla_exec(st)
            except Exception as e:
                s.fails(name, bl.one_line(e))
                continue
            outs = res.outputs
            if len(outs) != len(st.xla_out):
                check = "%d outputs, XLA has %d" % (len(outs), len(st.xla_out))
            else:
                bad = [(k, mismatch(a, b)) for k, (a, b) in enumerate(zip(outs, st.xla_out))]
                bad = [(k, m) for k, m in bad if m]
                check = "match" if not bad else "output%d: %s" % bad[0]
            ratios.append(wall / xla)
            worst = max(worst, (wall / xla, name))
            lr = load / st.xla_compile if st.xla_compile else None
            if lr is not None:
                load_ratios.append(lr)
            cr = cpu / st.xla_exec_cpu if st.xla_exec_cpu else None
            if cr is not None:
                cpu_ratios.append(cr)
                worst_cpu = max(worst_cpu, (cr, name))
            s.row(name, bl.fmt_s(wall), bl.fmt_s(xla), bl.fmt_x(wall / xla), bl.fmt_x(cr), bl.fmt_s(load),
                  bl.fmt_s(st.xla_compile) if st.xla_compile else "", bl.fmt_x(lr), str(res.instructions),
                  "%.0f" % (res.instructions / wall), bl.shorten(check, 100),
                  data={"name": name, "birsim_s": wall, "xla_exec_s": xla, "birsim_cpu_s": cpu,
                        "xla_exec_cpu_s": st.xla_exec_cpu, "birsim_load_s": load,
                        "xla_compile_s": st.xla_compile, "instructions": res.instructions, "outputs": check})
        if ratios:
            m = statistics.median(ratios)
            ml = statistics.median(load_ratios) if load_ratios else None
            mc = statistics.median(cpu_ratios) if cpu_ratios else None
            s.row("**median** (%d of %d)" % (len(ratios), len(self.names)), "", "", bl.fmt_x(m), bl.fmt_x(mc), "",
                  "", bl.fmt_x(ml), "", "", "")
            self.target("3 simulator", "birsim execute / XLA:CPU execute, median (%d of %d programs)"
                        % (len(ratios), len(self.names)), bl.fmt_x(m), "<= 3x", m <= 3)
            self.target("3 simulator", "birsim execute / XLA:CPU execute, worst program (%s)" % worst[1],
                        bl.fmt_x(worst[0]), "<= 30x", worst[0] <= 30)
            if mc is not None:
                self.target("3 simulator", "birsim execute CPU time / XLA:CPU execute CPU time, median (%d programs; "
                            "less sensitive to load)" % len(cpu_ratios), bl.fmt_x(mc), "(reported)", None)
                self.target("3 simulator", "birsim execute CPU time / XLA:CPU execute CPU time, worst program (%s)"
                            % worst_cpu[1], bl.fmt_x(worst_cpu[0]), "(reported)", None)
            if ml is not None:
                self.target("3 simulator", "birsim load / XLA:CPU compile, median (%d programs)" % len(load_ratios),
                            bl.fmt_x(ml), "(reported)", None)
        else:
            self.target("3 simulator", "birsim / XLA:CPU execute, median", "no program simulates", "<= 3x", None)
            self.target("3 simulator", "birsim / XLA:CPU execute, worst program", "no program simulates", "<= 30x",
                        None)
        s.note("birsim execute: `load_neff(neff).execute(inputs)` on the NEFF of section 1, median of repeated "
               "executions of one loaded model after a first one (functional execution plus the timeline; each "
               "execution resets the machine state, sets the inputs and returns the outputs); XLA:CPU execute: "
               "warm `jax.jit(f)(*args)`, which likewise excludes compiling and loading. CPU: process CPU seconds "
               "(all threads) of the same executions, less sensitive than wall time to other load on the machine. "
               "birsim load: "
               "`load_neff` (reading the NEFF, parsing its BIR, preparing every instruction's plan, access "
               "patterns and timeline cost), against XLA:CPU's compile of section 1. Outputs compared with "
               "per-dtype tolerances (`neuronxcc.common.tolerances`).")
        self.sections.append(s)
        self._birsim_micro()

    def _birsim_micro(self):
        """3b: scripts/bench_birsim.py's figures (per-instruction cost; large tiles against numpy)."""
        s = bl.Section("simulator_tiles", "3b. birsim per instruction, and on large tiles against numpy "
                       "(`scripts/bench_birsim.py`)", ["operation", "birsim", "numpy", "birsim / numpy", "target",
                                                      "met"])
        self.log("birsim micro")
        try:
            import bench_birsim
            runs = 3 if self.quick else 5
            n, free, reps = (300, 2048, 7) if self.quick else (3000, 8192, 25)
            for label, us in bench_birsim.bench_per_instruction(runs, n):
                s.row(label, "%.1f us/instruction" % us, "", "", "", "", data={"op": label, "us_per_instr": us})
            worst = None
            for label, ts, tn, r in bench_birsim.bench_large(runs, 128, free, reps):
                s.row("%s [128, %d]" % (label, free), "%.3f ms" % ts, "%.3f ms" % tn, bl.fmt_x(r), "<= 3x",
                      bl.met_text(r <= 3), data={"op": label, "birsim_ms": ts, "numpy_ms": tn, "ratio": r})
                if worst is None or r > worst[1]:
                    worst = (label, r)
            if worst:
                self.target("3 simulator", "birsim / numpy on large tiles, worst op (%s)" % worst[0],
                            bl.fmt_x(worst[1]), "<= 3x", worst[1] <= 3)
        except Exception as e:
            s.fails("(all)", bl.one_line(e))
            self.target("3 simulator", "birsim / numpy on large tiles", "fails", "<= 3x", None)
        s.note("One instruction executed by birsim's executor (timeline step included) against numpy doing the "
               "same math on the same tile, median of several runs.")
        self.sections.append(s)

    # -- 4. generated code -------------------------------------------------------------
    def section_codegen(self):
        import jax
        import jax.numpy as jnp
        import ml_dtypes
        import numpy as np
        from neuronxcc.hwm import get_target
        tm = get_target("trn1")
        s = bl.Section("codegen", "4. Generated code: birsim's estimated device time against the roofline (trn1)",
                       ["program", "estimated time", "roofline bound", "estimate / roofline", "bound by",
                        "utilisation PE / ACT / DVE / POOL / DMA engines (busiest queue)", "target", "met"])
        try:
            from neuronxcc.starfish.birsim import simulate_neff
        except Exception as e:
            simulate_neff = None
            sim_err = bl.one_line(e)
        sizes = [128, 1024] if self.quick else [128, 256, 512, 1024, 2048, 4096]
        worst = {}
        self.codegen_artifacts = []
        for dt, npdt, bname in ((jnp.float32, np.float32, "float32"), (jnp.bfloat16, ml_dtypes.bfloat16, "bfloat16")):
            for n in sizes:
                name = "matmul %d %s" % (n, "f32" if bname == "float32" else "bf16")
                self.log("codegen %s" % name)
                item = np.dtype(npdt).itemsize
                flops = 2.0 * n * n * n
                nbytes = 3.0 * n * n * item
                bound, by = self._roofline(tm, bname, flops, nbytes)
                tgt = "<= 1.5x" if n >= 1024 else ""
                try:
                    spec = [jax.ShapeDtypeStruct((n, n), dt)] * 2
                    pb = self.write_pb("mm_%d_%s" % (n, bname), bl.hlo_bytes(_matmul, spec))
                except Exception as e:
                    s.fails(name, "lowering with jax: " + bl.one_line(e))
                    continue
                r = bl.compile_inproc(pb, self.base, extra=GOLDENS_OFF + self.codegen_extra)
                self.codegen_artifacts.append((name, r))
                if not r.ok:
                    s.fails(name, r.error, data={"roofline_s": bound})
                    if n >= 1024:
                        worst.setdefault("fail", name)
                    continue
                if simulate_neff is None:
                    s.fails(name, "birsim: " + sim_err)
                    continue
                rng = np.random.RandomState(n)
                args = [(rng.randn(n, n) * n ** -0.25).astype(npdt) for _ in range(2)]
                try:
                    with bl.time_limit(300 if self.quick else 900):
                        res = simulate_neff(r.neff, args)
                except Exception as e:
                    s.fails(name, "birsim: " + bl.one_line(e), data={"roofline_s": bound})
                    if n >= 1024:
                        worst.setdefault("fail", name)
                    continue
                ratio = res.total_s / bound
                met = (ratio <= 1.5) if n >= 1024 else None
                if n >= 1024:
                    worst[name] = ratio
                s.row(name, bl.fmt_s(res.total_s), bl.fmt_s(bound), bl.fmt_x(ratio), by, self._util(res), tgt,
                      bl.met_text(met) if met is not None else "",
                      data={"name": name, "estimated_s": res.total_s, "roofline_s": bound, "flops": flops,
                            "bytes": nbytes, "utilisation": res.utilisation})
        # the transformer block (corpus, tiled size)
        self._codegen_block(s, tm, simulate_neff)
        # Llama-3-8B-shaped layers at real dims (tests/support/llama.py): decode (HBM-bound), prefill
        for kind, tgt in (("decode", 1.2), ("prefill", 1.5)):
            if self.quick and kind == "prefill":
                continue
            self._codegen_llama(s, tm, simulate_neff, kind, tgt)
        if worst and "fail" not in worst:
            k = max(worst, key=worst.get)
            self.target("4 codegen", "estimated time / roofline, matmuls >= 1024 (worst: %s)" % k,
                        bl.fmt_x(worst[k]), "<= 1.5x", worst[k] <= 1.5)
        else:
            self.target("4 codegen", "estimated time / roofline, matmuls >= 1024",
                        "fails: %s" % worst.get("fail", "no matmul >= 1024 measured"), "<= 1.5x",
                        False if worst.get("fail") else None)
        s.note("Roofline = max(2*M*N*K / PE peak for the input dtype, bytes of inputs+outputs / the core's memory "
               "rate), `neuronxcc.hwm` trn1: PE peak %.1f TFLOP/s bf16, %.1f TFLOP/s f32; memory rate %.0f GB/s = "
               "the %d DMA engines' peak (%.0f B/ns each), below the core's HBM share of %.0f GB/s, so the bytes leg "
               "is 'DMA'-bound (it would be %.2fx lower at HBM speed). Estimated time and utilisation (busy / total) "
               "are birsim's timeline (`SimResult.total_s`, `.utilisation`) under the cost model of "
               "`birpy.cost` (DMA engines shared by all queues round-robin, one descriptor of at most 32 KiB a turn, each engine serving 8 SBUF partitions, a DMA "
               "trigger in its engine's in-order stream, queues in order per engine, per-descriptor overhead, "
               "overlapped fixed latency, ACT/DVE result latency, v2 shared SBUF/PSUM ports, half-rate access "
               "above a 16-byte innermost stride). Matmuls are compiled with goldens off and "
               "simulated on random inputs."
               % (tm.peak_flops("bfloat16") / 1e12, tm.peak_flops("float32") / 1e12, tm.memory_bytes_per_sec / 1e9,
                  tm.dma_engines, tm.dma_bytes_per_sec_per_engine / 1e9, tm.hbm_bytes_per_sec / 1e9,
                  tm.hbm_bytes_per_sec / tm.memory_bytes_per_sec))
        self.sections.append(s)

    @staticmethod
    def _roofline(tm, dtype, flops, nbytes):
        """(bound seconds, what binds): PE FLOPs at peak, or bytes at the core's memory rate (the DMA
        engines' peak capped at the HBM bandwidth: 'DMA' or 'HBM', whichever is lower)."""
        tc, tb = flops / tm.peak_flops(dtype), nbytes / tm.memory_bytes_per_sec
        mem = "DMA" if tm.dma_bytes_per_sec < tm.hbm_bytes_per_sec else "HBM"
        return max(tc, tb), ("PE" if tc >= tb else mem)

    @staticmethod
    def _util(res):
        u = dict(res.utilisation)
        eng = ["%.0f%%" % (100 * u.get(e, 0.0)) for e in ("PE", "ACT", "DVE", "POOL")]
        queues = [v for k, v in u.items() if k.startswith("DMA:")]
        eng.append("%.0f%% (%.0f%%)" % (100 * u.get("DMA", 0.0), 100 * max(queues)) if queues else "-")
        return " / ".join(eng)

    def _codegen_block(self, s, tm, simulate_neff):
        name = "transformer_block"
        try:
            st = self.program(name)
        except Exception as e:
            s.fails(name, "lowering with jax: " + bl.one_line(e))
            return
        self.log("codegen %s" % name)
        try:
            flops, nbytes = hlo_cost(st.pb)
        except Exception as e:
            s.fails(name, "HLO cost: " + bl.one_line(e))
            return
        bound, by = self._roofline(tm, "float32", flops, nbytes)
        art = st.artifact
        if self.codegen_extra:
            art = bl.compile_inproc(st.pb, self.base, extra=self.codegen_extra)
        elif art is None:
            art = bl.compile_inproc(st.pb, self.base)
            st.artifact = art
        if not art.ok:
            s.fails(name, art.error, data={"roofline_s": bound})
            return
        if simulate_neff is None:
            s.fails(name, "birsim not importable")
            return
        try:
            with bl.time_limit(600):
                res = simulate_neff(art.neff, st.args)
        except Exception as e:
            s.fails(name, "birsim: " + bl.one_line(e))
            return
        ratio = res.total_s / bound
        self.target("4 codegen", "transformer_block (tiled, f32): estimated / roofline", bl.fmt_x(ratio), "<= 2x",
                    ratio <= 2)
        s.row(name + " (tiled, f32)", bl.fmt_s(res.total_s), bl.fmt_s(bound), bl.fmt_x(ratio), by,
              self._util(res), "<= 2x", bl.met_text(ratio <= 2),
              data={"name": name, "estimated_s": res.total_s, "roofline_s": bound, "flops": flops, "bytes": nbytes,
                    "utilisation": res.utilisation})

    def _codegen_llama(self, s, tm, simulate_neff, kind, tgt):
        """One Llama-3-8B layer at real dims, bf16 weights: estimated time against its roofline (bytes at
        the DMA engines' peak, or FLOPs at the PE peak), and against bytes at the HBM bandwidth."""
        import numpy as np
        from support import llama
        name = "Llama-3-8B layer, %s%s" % (kind, " (seq 2048)" if kind == "prefill" else " step")
        self.log("codegen %s" % name)
        try:
            pb = self.write_pb("llama_" + kind, llama.hlo_proto(kind, 1))
            _, args = llama.program(kind, 1, concrete=True)
            args = [np.asarray(a) for a in args]
        except Exception as e:
            s.fails(name, "lowering with jax: " + bl.one_line(e))
            return
        flops, nbytes = hlo_cost(pb)
        bound, by = self._roofline(tm, "bfloat16", flops, nbytes)
        hbm = nbytes / tm.hbm_bytes_per_sec
        r = bl.compile_inproc(pb, self.base, extra=GOLDENS_OFF + self.codegen_extra)
        if not r.ok:
            s.fails(name, r.error, data={"roofline_s": bound})
            self.target("4 codegen", name + " / roofline", "fails: " + r.error, "<= %.1fx" % tgt, False)
            return
        try:
            with bl.time_limit(1500):
                res = simulate_neff(r.neff, args)
        except Exception as e:
            s.fails(name, "birsim: " + bl.one_line(e), data={"roofline_s": bound})
            self.target("4 codegen", name + " / roofline", "fails: birsim", "<= %.1fx" % tgt, False)
            return
        ratio = res.total_s / bound
        data = {"name": name, "estimated_s": res.total_s, "roofline_s": bound, "hbm_bound_s": hbm,
                "flops": flops, "bytes": nbytes, "utilisation": res.utilisation, "counts": res.counts}
        if by == "PE":
            s.row(name, bl.fmt_s(res.total_s), bl.fmt_s(bound), bl.fmt_x(ratio), by, self._util(res),
                  "<= %.1fx" % tgt, bl.met_text(ratio <= tgt), data=data)
            self.target("4 codegen", "%s: estimated / roofline (PE-bound)" % name, bl.fmt_x(ratio),
                        "<= %.1fx" % tgt, ratio <= tgt)
            return
        # bytes-bound (decode): the target is against the bytes at HBM speed, which the DMA
        # engines cannot reach: their public peak (hwm: dma_engines x dma_bytes_per_sec_per_engine,
        # [DMABW]) is below the core's HBM share, so no program gets under floor = HBM / DMA rate
        # of that figure. Both ratios are reported; the one the issue names is the HBM one.
        hratio = res.total_s / hbm
        floor = tm.hbm_bytes_per_sec / tm.memory_bytes_per_sec
        s.row(name, bl.fmt_s(res.total_s), bl.fmt_s(bound), bl.fmt_x(ratio), by, self._util(res),
              "<= %.1fx of the HBM bound (%s): %.2fx, floor %.2fx" % (tgt, bl.fmt_s(hbm), hratio, floor),
              bl.met_text(hratio <= tgt), data=data)
        reach = "so the target is out of reach" if floor > tgt else "below the target"
        self.target("4 codegen", "%s: estimated / bytes at HBM speed (%s); floor %.2fx = HBM %.0f GB/s over the "
                    "%d DMA engines' public peak %.0f GB/s ([DMABW]), %s"
                    % (name, bl.fmt_s(hbm), floor, tm.hbm_bytes_per_sec / 1e9, tm.dma_engines,
                       tm.memory_bytes_per_sec / 1e9, reach),
                    bl.fmt_x(hratio), "<= %.1fx" % tgt, hratio <= tgt)
        self.target("4 codegen", "%s: estimated / bytes at the DMA engines' peak (%s-bound roofline, the reachable "
                    "floor)" % (name, by), bl.fmt_x(ratio), "(reported; 1.0x = floor)", None)

    # -- 5. allocation -----------------------------------------------------------------
    def section_allocation(self):
        s = bl.Section("allocation", "5. Allocation: peak bytes per partition against the max-live lower bound",
                       ["program", "SBUF peak", "SBUF max-live", "SBUF peak / max-live", "PSUM peak", "PSUM max-live",
                        "PSUM peak / max-live", "values (SBUF+PSUM)", "spilled"])
        compiled = []
        for n in self.names:        # the corpus compiles of section 1, or compiled here once (in-process)
            try:
                st = self.program(n)
            except Exception as e:
                s.fails(n, "lowering with jax: " + bl.one_line(e))
                continue
            if st.artifact is None:
                self.log("allocation: compile %s" % n)
                st.artifact = bl.compile_inproc(st.pb, self.base)
            compiled.append((n, st.artifact))
        compiled += list(getattr(self, "codegen_artifacts", []))
        ratios = []
        largest = None
        for name, art in compiled:
            if not art.ok:
                s.fails(name, "no compile: " + art.error)
                continue
            try:
                met = art.metrics()
                alloc = (met or {}).get("allocation") or {}
                if not alloc:
                    raise LookupError("sg00/metrics.json has no allocation statistics")
                method, st = next(iter(alloc.items()))
                cells, vals = [], 0
                for mem in ("SBUF", "PSUM"):
                    d = st.get(mem) or {}
                    peak, lb = d.get("peak_bytes_per_partition"), d.get("max_live_lower_bound")
                    vals += d.get("values", 0)
                    r = (peak / lb) if peak is not None and lb else None
                    if r is not None:
                        ratios.append((r, name, mem))
                    cells += [bl.fmt_bytes(peak), bl.fmt_bytes(lb), bl.fmt_x(r) if r is not None else "-"]
                pt = met.get("pass_timings_s") or {}
                at = sum(v for k, v in pt.items() if k in ("coloring", "coloring_allocator", "linear_scan_allocator"))
                if largest is None or vals > largest[1]:
                    largest = (name, vals, at, sum(pt.values()), method)
                s.row(name, *cells, str(vals), str(len(st.get("spilled") or [])),
                      data={"name": name, "method": method, "stats": st, "alloc_s": at})
            except Exception as e:
                s.fails(name, bl.one_line(e))
        if ratios:
            worst = max(ratios)
            med = statistics.median(r for r, _, _ in ratios)
            self.target("5 allocation", "allocator peak / max-live, worst (%s %s); median %s over %d"
                        % (worst[1], worst[2], bl.fmt_x(med), len(ratios)), bl.fmt_x(worst[0]), "<= 1.1x",
                        worst[0] <= 1.1)
        else:
            self.target("5 allocation", "allocator peak / max-live", "no allocation statistics", "<= 1.1x", None)
        if largest:
            name, vals, at, walrus, method = largest
            s.note("Allocation time on the largest program (%s, %d values, %s allocator: coloring analysis + "
                   "allocation passes): %s, %.0f%% of its walrus passes (%s)."
                   % (name, vals, method, bl.fmt_s(at), 100 * at / walrus if walrus else 0, bl.fmt_s(walrus)))
            self.target("5 allocation", "allocation time on the largest program (%s, %d values) / its walrus "
                        "passes" % (name, vals), "%s (%.0f%%)" % (bl.fmt_s(at), 100 * at / walrus if walrus else 0),
                        "(reported)", None)
        s.note("Peaks and the max-live lower bound are walrus's own figures from each compile's `sg00/metrics.json` "
               "(default pipeline: coloring allocator). The bound (`_bound.max_live_lower_bound`) is the largest, "
               "over program points, of what the values live there need under the placement rules: their bytes "
               "spread over the partition quarters, those sure to sit at partition 0 stacked there, the narrow "
               "ones as four quarter stacks, and for PSUM the best packing of partition 0's 2 KiB banks (exact by a "
               "bounded search while at most 64 values are live there, else Martello and Toth's L2).")
        self.sections.append(s)
        self._alloc_intervals()

    def _alloc_intervals(self):
        """5b: scripts/bench_alloc.py's synthetic interval sets (quality and speed of both allocators)."""
        s = bl.Section("allocation_sets", "5b. Allocators on synthetic interval sets (`scripts/bench_alloc.py`)",
                       ["values", "max-live lower bound", "coloring peak / max-live", "coloring time",
                        "linear-scan peak / max-live", "linear-scan time", "linear scan vs Python first fit"])
        self.log("allocator interval sets")
        worst = None
        try:
            import bench_alloc
            for n in ([1000, 10000] if self.quick else [1000, 10000, 30000]):
                r = bench_alloc.bench_intervals(n, with_python=n <= 10000)
                cr = r.get("coloring_ratio")
                s.row(str(n), bl.fmt_bytes(r["lower_bound"]),
                      bl.fmt_x(cr) if cr is not None else "skipped: " + r.get("coloring_skipped", ""),
                      bl.fmt_s(r.get("coloring_s")), bl.fmt_x(r["linear_scan_ratio"]), bl.fmt_s(r["linear_scan_s"]),
                      ("%.0fx faster" % r["speedup_vs_python"]) if "speedup_vs_python" in r else "",
                      data=r)
                if cr is not None and (worst is None or cr > worst[1]):
                    worst = (n, cr)
        except Exception as e:
            s.fails("(all)", bl.one_line(e))
        if worst:
            self.target("5 allocation", "coloring peak / max-live on synthetic interval sets, worst (%d values)"
                        % worst[0], bl.fmt_x(worst[1]), "<= 1.1x", worst[1] <= 1.1)
        s.note("Random live intervals shaped like tiled programs (tiles of 512 B to 64 KiB on 32-128 partitions); "
               "the lower bound is `_bound.max_live_lower_bound`. Python first fit: a plain-Python linear scan on "
               "the same data, measured in the same run.")
        self.sections.append(s)

    # -- 6. pelican and the HLO interpreter ---------------------------------------------
    def section_pelican_interp(self):
        s = bl.Section("pelican", "6a. pelican against sympy (same index expressions)",
                       ["operation", "pelican op/s", "sympy op/s", "pelican / sympy", "target", "met"])
        self.log("pelican")
        try:
            rows = pelican_rows(self.quick)
            for op, p, sy, ratio in rows:
                tgt = op in PELICAN_TARGET_OPS
                s.row(op, "%.0f" % p, "%.0f" % sy, bl.fmt_x(ratio), ">= 100x" if tgt else "",
                      bl.met_text(ratio >= 100) if tgt else "",
                      data={"op": op, "pelican_ops": p, "sympy_ops": sy, "ratio": ratio})
            rows = [r for r in rows if r[0] in PELICAN_TARGET_OPS]
            if rows:
                lo = min(rows, key=lambda r: r[3])
                self.target("6 pelican", "pelican / sympy, slowest operation (%s)" % lo[0], bl.fmt_x(lo[3]),
                            ">= 100x", lo[3] >= 100)
            else:
                raise RuntimeError("bench_pelican printed no rows")
        except Exception as e:
            s.fails("(all)", bl.one_line(e))
            self.target("6 pelican", "pelican / sympy", "fails", ">= 100x", None)
        s.note("From `scripts/bench_pelican.py%s` (its own medians and cross-check of values). Its target "
               "applies to construct, subs and simplify; the evaluation rows (pelican's evaluators against "
               "sympy `subs` or numpy `lambdify`) are shown for information." % (" --quick" if self.quick else ""))
        self.sections.append(s)

        t = bl.Section("interp", "6b. HLO reference interpreter against XLA:CPU execution (corpus, tiled sizes)",
                       ["program", "interpreter", "XLA:CPU execute", "interpreter / XLA", "outputs vs XLA"])
        try:
            import bench_hlo_interp
        except Exception as e:
            t.fails("(all)", bl.one_line(e))
            self.sections.append(t)
            self.target("6 interpreter", "interpreter / XLA:CPU execute, median", "fails", "<= 10x", None)
            return
        names = self.names if not self.quick or self.opts.programs else list(QUICK_INTERP_PROGRAMS)
        runs, min_s = (3, 0.0) if self.quick else (7, 0.2)
        ratios = []
        for name in names:
            self.log("interpret %s" % name)
            try:
                with bl.time_limit(120 if self.quick else 300):
                    secs, xla, ok = bench_hlo_interp.bench_program(self.corpus.get(name), "tiled", runs, min_s)
            except Exception as e:
                t.fails(name, bl.one_line(e))
                continue
            ratios.append(secs / xla)
            t.row(name, bl.fmt_s(secs), bl.fmt_s(xla), bl.fmt_x(secs / xla), "match" if ok else "MISMATCH",
                  data={"name": name, "interp_s": secs, "xla_exec_s": xla, "match": ok})
        if ratios:
            m = statistics.median(ratios)
            t.row("**median** (%d of %d)" % (len(ratios), len(names)), "", "", bl.fmt_x(m), "")
            self.target("6 interpreter", "HLO interpreter / XLA:CPU execute, median (%d programs)" % len(ratios),
                        bl.fmt_x(m), "<= 10x", m <= 10)
        else:
            self.target("6 interpreter", "HLO interpreter / XLA:CPU execute, median", "no program runs", "<= 10x",
                        None)
        t.note("`scripts/bench_hlo_interp.py`'s measurement: the interpreter (`Evaluator`, plans built once) on "
               "the corpus program's HLO proto against warm `jax.jit(f)(*args)`, run alternately, median of >= %d "
               "runs; outputs checked with per-dtype tolerances." % runs)
        self.sections.append(t)

    # -- 7. program size (opt-in) --------------------------------------------------------
    def section_program_size(self):
        import bench_scale
        layers = tuple(int(x) for x in self.opts.scale_layers.split(",") if x) if self.opts.scale_layers \
            else bench_scale.LAYERS
        bench_scale.section(self, layers, tuple(n for n in bench_scale.PREFILL_LAYERS if n <= max(layers)))

    # -- run ---------------------------------------------------------------------------
    def run(self, keys):
        t0 = time.perf_counter()
        for key in SECTION_KEYS:
            if key not in keys:
                continue
            fn = getattr(self, "section_" + key)
            n_before = len(self.sections)
            try:
                fn()
            except Exception as e:  # a section never takes the run down
                import traceback
                traceback.print_exc(file=sys.stderr)
                sec = bl.Section(key, "%s (section failed)" % key, ["item", "result"])
                sec.fails("(section)", bl.one_line(e))
                self.sections = self.sections[:n_before] + [sec]
                self.target(key, "section %s" % key, "fails: %s" % bl.one_line(e), "", None)
        report = {"mode": "quick" if self.quick else "full", "machine": bl.machine_info(),
                  "repeats": "%d (in-process compiles, simulations), %d (CLI compiles), %d (XLA, interpreter)"
                             % (self.r, self.r_cli, self.r_cheap),
                  "targets": self.targets, "sections": self.sections, "elapsed_s": time.perf_counter() - t0}
        return report

    def close(self):
        shutil.rmtree(self.base, ignore_errors=True)


# ------------------------------------------------------------------ helpers

def hlo_cost(pb_path):
    """(FLOPs of the dots and convolutions, bytes of entry parameters + results) of an HLO module."""
    from neuronxcc.hlo import load_module
    m = load_module(pb_path)
    flops = 0.0
    for comp in m.computations.values():
        for i in comp.instructions:
            if i.opcode == "dot":
                lhs = i.operands[0].shape.dims
                k = 1
                for d in i.attrs.get("lhs_contracting_dims", ()):
                    k *= lhs[d]
                flops += 2.0 * i.shape.numel() * k
            elif i.opcode == "convolution":
                w = i.operands[1].shape
                flops += 2.0 * i.shape.numel() * w.numel() / max(1, w.dims[-1] if w.dims else 1)
    nbytes = sum(p.shape.nbytes() for p in m.entry.parameters) + sum(leaf.nbytes() for leaf in m.entry.root.shape.leaves())
    return flops, float(nbytes)


_PEL_ROW = re.compile(r"^(\S+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)x\s*$")


def pelican_rows(quick):
    """Rows (operation, pelican op/s, sympy op/s, ratio) of scripts/bench_pelican.py's printed table."""
    import bench_pelican
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        bench_pelican.main(["--quick"] if quick else [])
    rows = []
    for ln in buf.getvalue().splitlines():
        m = _PEL_ROW.match(ln.strip())
        if m:
            p, sy = float(m.group(2)), float(m.group(3))
            rows.append((m.group(1), p, sy, p / sy if sy > 0 else float(m.group(4))))
        if ln.startswith("MISMATCHES"):
            raise RuntimeError(ln.strip())
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a subset with fewer repeats (about two minutes)")
    ap.add_argument("--output", default=os.path.join(bl.REPO, "build", "bench.md"), help="markdown table path")
    ap.add_argument("--json", nargs="?", const="", default=None, metavar="PATH",
                    help="also write the figures as JSON (default: --output with .json)")
    ap.add_argument("--update-readme", action="store_true",
                    help="rewrite the README block between <!-- bench:begin --> and <!-- bench:end -->")
    ap.add_argument("--readme", default=os.path.join(bl.REPO, "README.md"))
    ap.add_argument("--sections", default=",".join(SECTION_KEYS),
                    help="comma list of sections to run (%s)" % ",".join(SECTION_KEYS))
    ap.add_argument("--programs", default=None, help="comma list of corpus programs (default: all; quick: 4)")
    ap.add_argument("--scale", action="store_true",
                    help="also run section 7, program size (Llama-3-8B-shaped decode/prefill up to 32 layers; "
                         "tens of minutes)")
    ap.add_argument("--scale-layers", default=None, help="comma list of layer counts for --scale (default: "
                                                          "1,2,4,8,16,32)")
    ap.add_argument("--repeats", type=int, default=None, help="compile/simulation repeats (median)")
    ap.add_argument("--backend-options", default=None, metavar="OPTS",
                    help="section 4 (codegen): compile with --internal-backend-options=OPTS (walrus_driver "
                         "options, e.g. --no-reuse-distance), to compare simulated times with a run without")
    ap.add_argument("--committed", action="store_true",
                    help="measure the committed HEAD: clone this checkout, build it in place and run there "
                         "(edits in the working tree are not measured)")
    argv = list(sys.argv[1:] if argv is None else argv)
    opts = ap.parse_args(argv)
    if opts.committed:
        rest = [a for a in argv if a != "--committed"]
        return bl.run_in_clone(rest, os.path.abspath(opts.output), os.path.abspath(opts.readme),
                               None if opts.json is None else (os.path.abspath(opts.json) if opts.json else ""))
    # Measure what an installed package gives: its modules are byte-compiled once. Without this a
    # PYTHONDONTWRITEBYTECODE=1 environment recompiles every module from source in every tool process.
    bytecode_env = os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    sys.dont_write_bytecode = False
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    keys = [k for k in opts.sections.split(",") if k]
    keys = [k for k in keys if k not in OPT_IN or opts.scale]
    unknown = [k for k in keys if k not in SECTION_KEYS]
    if unknown:
        ap.error("unknown section(s): %s" % ", ".join(unknown))
    bench = Bench(opts)
    try:
        report = bench.run(keys)
    finally:
        bench.close()
    if bytecode_env is not None:
        report["machine"]["note"] = "PYTHONDONTWRITEBYTECODE was unset for the run (bytecode cached as installed)"
    text = bl.render(report)
    sys.stdout.write(text)
    sys.stdout.flush()
    out = os.path.abspath(opts.output)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    if opts.json is not None:
        import json
        jpath = opts.json or os.path.splitext(out)[0] + ".json"
        with open(jpath, "w", encoding="utf-8") as f:
            json.dump(bl.to_json(report), f, indent=1, default=str)
    if opts.update_readme:
        if not bl.update_readme(opts.readme, text):
            sys.stderr.write("bench: %s has no %s ... %s block; README not updated\n" % (opts.readme, bl.BEGIN, bl.END))
    return 0


if __name__ == "__main__":
    sys.exit(main())
