"""WalrusDriver (native): one ``walrus_driver`` process runs every backend pass.

The pass list is built by ``walrusPassesFor(args)`` (called from
CompileCommand.collectWalrusPipeline, stored as ``walrus_passes``) from the
one pass table ``neuronxcc.walrus.pass_names.PIPELINE`` (its order and each
pass's gate: ``default_pipeline``) and forwarded as a single
``--walrus-passes a,b,c`` argument:

  walrus_driver --input sg00/bir.json --output sg00/walrus.bir.json
                --walrus-passes P1,P2,... --target T --metrics sg00/metrics.json
                [--goldens goldens.npz]

Default passes and gates, as the table declares them (the order is the execution order):
  lsa                       always (experimental_loop_lsa with --internal-experimental-loop-lsa)
  unroll                    -O2 and up
  lower_ac                  always: access patterns must be in hardware form
  bir_splitter              always: oversized instructions must be split
  partitioner               always
  tensorcopy_accel          -O2 and up (engine choice for copies, before scheduling)
  vn_splitter               -O2 and up (shorter live ranges before allocation)
  pre_sched                 -O1 and up
  coloring + coloring_allocator   -O2/-O3 (better packing, slower compile)
  linear_scan_allocator     -O0/-O1 (fast compile); --internal-allocator overrides
  dma_optimization          -O1 and up
  anti_dependency_analyzer  always: semaphores are what make the program correct
  post_sched                -O1 and up
  shift_left                with --internal-enable-shift-left (experimental_loop_shift_left
                            together with --internal-experimental-loop-lsa)
  dep_reduction             -O1 and up
  print_metrics             always (writes sg00/metrics.json)
  birverifier               always, unless --internal-backend-options='--enable-verifier=false'
  bir_sim                   on by default; off with --internal-disable-bir-sim. At run time it is
                            dropped when goldens.npz is absent (program over the golden budget).
``--internal-walrus-passes a,b`` replaces the list; ``--skip-pass X`` (also inside
--internal-backend-options) removes passes. Unknown pass names are an error.
--internal-backend-options may also carry walrus_driver's own --sim-budget-instructions N,
--sim-budget-bytes N, --unroll-max-trip N, --verify-between-passes, --no-spill and --no-reuse-distance, which are
forwarded; the original backend's other options are ignored.
"""
import os
import shlex

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


def _checkNames(names, where):
    from neuronxcc.walrus.pass_names import check_names

    return check_names(names, where)


# walrus_driver options that --internal-backend-options may carry and that are forwarded as given
FORWARD_VALUE_FLAGS = ("--sim-budget-instructions", "--sim-budget-bytes", "--unroll-max-trip")
FORWARD_BOOL_FLAGS = ("--verify-between-passes", "--no-spill", "--no-reuse-distance")


def _backendOptions(args):
    """(skip passes, verifier on?, walrus_driver flags to forward) from --internal-backend-options.

    Other options in that string (the original backend's, e.g.
    --enable-output-completion-notifications, --dge-levels) have no meaning
    for this backend and are ignored.
    """
    skips, verifier, forward = [], True, []
    toks = shlex.split(getattr(args, "internal_backend_options", "") or "")
    i = 0
    while i < len(toks):
        t = toks[i]
        name, eq, val = t.partition("=")
        if name == "--skip-pass":
            if not eq and i + 1 < len(toks):
                val = toks[i + 1]
                i += 1
            skips += [s for s in val.split(",") if s]
        elif name == "--enable-verifier":
            verifier = val.strip().lower() not in ("false", "0", "no", "off")
        elif name in FORWARD_VALUE_FLAGS:
            if not eq and i + 1 < len(toks):
                val = toks[i + 1]
                i += 1
            forward += [name, val]
        elif t in FORWARD_BOOL_FLAGS:
            forward.append(t)
        i += 1
    return skips, verifier, forward


def walrusPassesFor(args):
    """The --walrus-passes list for a parsed compile Namespace (see module docstring)."""
    opt = int(getattr(args, "optlevel", "2") or 2)
    skips, verifier, _ = _backendOptions(args)
    for s in getattr(args, "skip_pass", None) or []:
        skips += [x for x in s.split(",") if x]
    override = getattr(args, "internal_walrus_passes", None)
    if override:
        passes = _checkNames([p for p in override.split(",") if p], "--internal-walrus-passes")
    else:
        from neuronxcc.walrus.pass_names import GATE_FLAGS, default_pipeline

        flags = {f for f in GATE_FLAGS if getattr(args, f, False)}
        passes = default_pipeline(opt, flags, getattr(args, "internal_allocator", None), verifier)
    _checkNames(skips, "--skip-pass")
    return [p for p in passes if p not in skips]


class WalrusDriver(Job):
    executableLocation = "walrus_driver"
    replayScript = "replay_walrus.sh"

    @classmethod
    def RegisterArgs(cls, parser):
        h = parser.add_hidden
        h("--internal-walrus-passes", default=None, help="comma list replacing the default walrus passes")
        h("--skip-pass", action="append", default=None, help="walrus pass(es) to leave out (comma list)")
        h("--internal-allocator", choices=("coloring", "linear-scan"), default=None,
          help="SBUF/PSUM allocator (default: coloring at -O2/-O3, linear-scan at -O0/-O1)")
        h("--internal-disable-bir-sim", action="store_true",
          help="do not check the compiled program against the goldens on birsim")
        h("--internal-experimental-loop-lsa", action="store_true")
        h("--internal-enable-shift-left", action="store_true")

    def prefetchModules(self, state):
        mods = ["neuronxcc.walrus.driver", "neuronxcc.walrus.bir", "neuronxcc.walrus.registry",
                "neuronxcc.walrus.passes"]
        # the bir_sim check's simulator, unless no goldens can come (a zero golden budget)
        from neuronxcc.walrus.pass_names import bir_sim_skip

        goldens = getattr(state.args, "internal_golden_size_budget", 1) > 0
        if bir_sim_skip(state.walrus_passes, goldens) is None:
            # with what its first run imports on the way: every executor's NKI-op table, and the
            # codec of the goldens file's member names (an npz is a zip)
            mods += ["neuronxcc.starfish.birsim", "neuronxcc.common.tolerances", "neuronxcc.starfish.birsim.nki_ops",
                     "encodings.cp437"]
        return self.forkedToolModules(mods)

    def passesForRun(self, state):
        from neuronxcc.walrus.pass_names import bir_sim_skip

        passes = list(state.walrus_passes)
        if bir_sim_skip(passes, os.path.isfile(files.GOLDENS)) == "no goldens":
            self.log("no %s (over the golden budget or not computed): bir_sim check skipped" % files.GOLDENS,
                     level=20)
            passes.remove("bir_sim")
        return passes

    def runSingleInput(self, state):
        args = state.args
        self.requireFile(files.BIR, "Frontend")
        cmd = [self.getFullyQualifiedLocation(self.executableLocation),
               "--input", files.BIR, "--output", files.WALRUS_BIR,
               "--walrus-passes", ",".join(self.passesForRun(state)),
               "--target", args.target, "--metrics", files.METRICS]
        cmd += _backendOptions(args)[2]
        if os.path.isfile(files.GOLDENS):
            cmd += ["--goldens", files.GOLDENS]
        self.shellCommand(cmd)
        self.requireFile(files.WALRUS_BIR, "walrus_driver")
