"""``neuronx-cc compile``: build the job pipeline for a compile and run it.

buildPipeline(argv, logger) -> (pipeline, args), in the seed's order:
  1. parse (``Arguments.splitArgv`` first, so argument order never matters and
     unknown flags become logged warnings, not errors);
  2. processSerialTpbOpts, validateArgs;
  3. flag normalisation (optlevel; ``-O0`` turns the new backend off);
  4. names = collectFrontendPipeline + collectWalrusPipeline + collectBackendPipeline
     (plain list concatenation: the collectors' order IS the compile order),
     or the stages ``--pipeline`` names;
  5. the name special-case filter (golden jobs, Watchpoint, BIRSim);
  6. jobRegistry.makePipeline(names).

--optlevel shapes flags and walrus passes, never the job list.

runPipeline: a fresh work directory per compile (``makeWorkDir``, mkdtemp's contract, under
--temp-dir or the launch dir, so two compiles in one cwd never share files),
the input staged as ``model.hlo_module.pb``, progress dots on stdout, the
jobs, then ``--output`` published atomically only when every job passed.
The work directory is removed on success unless SaveTemps ran; it is kept
(and its path logged) on failure. A SIGINT/SIGTERM while it exists removes it
and the process still dies of that signal (see _RemoveWorkdirOnInterrupt).
"""
import argparse
import logging
import os
import shutil
import signal
import sys
import threading
import time

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Arguments import InterceptingArgumentParser, addCompileArguments, splitArgv
from neuronxcc.driver.CompileState import CompileState
from neuronxcc.driver.DriverLogging import FILE_ONLY, USER
from neuronxcc.driver.commands.CommandInterface import CommandInterface
from neuronxcc.errors import InputFileError, InternalCompilerError, InvalidArgumentError

XLAInterface = "XLA"
GOLDEN_JOBS = ("XLAInferGoldens", "InferGoldens", "MetaInferGoldens")
# Names the special-case filter understands that are not job classes.
SPECIAL_NAMES = ("MetaInferGoldens", "BIRSim")
# --pipeline stage names -> which collectors they take.
STAGES = {"compile": ("front", "walrus", "backend"), "tensorize": ("front",)}
PROGRESS_DOT_SECONDS = 20.0


class _ProgressDots:
    """Prints '.' on stdout when the pipeline starts and every PROGRESS_DOT_SECONDS after."""

    def __init__(self, interval=PROGRESS_DOT_SECONDS):
        self.interval = interval
        self._stop = threading.Event()
        self._thread = None

    def _dot(self):
        try:
            sys.stdout.write(".")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass

    def _loop(self):
        while not self._stop.wait(self.interval):
            self._dot()

    def __enter__(self):
        self._dot()
        self._thread = threading.Thread(target=self._loop, name="neuronx-cc-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        try:
            sys.stdout.write("\n")
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        return False


# The variables OpenBLAS takes its thread count from, in its order of precedence.
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")


def loadNumpyWithOneBlasThread():
    """Load numpy with OpenBLAS's thread pool at one thread.

    Every BLAS call of a compile runs on one thread anyway (the HLO interpreter's
    ``interp_blas.single_threaded_blas``, birsim's ``blas``), and OpenBLAS otherwise starts a
    worker thread per core while numpy loads (about 10 ms of CPU per compile on two cores,
    inherited by every forked tool). The variable is set only while numpy loads: the tools and
    anything exec'd get the environment as it was. Nothing changes when numpy is already loaded
    (an in-process caller) or the environment sets a BLAS thread count."""
    if "numpy" in sys.modules or any(v in os.environ for v in BLAS_THREAD_VARIABLES):
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        os.environ.pop("OPENBLAS_NUM_THREADS", None)


# HLO opcode -> the --implicit-integer-downcast name that allows it.
_DOWNCAST_NAMES = {"dot": "dot", "scatter": "scatter", "all-reduce": "all_reduce",
                   "reduce-scatter": "reduce_scatter", "power": "pow"}


def checkIntegerDowncast(module, args):
    """Refuse 64-bit integer values the target would compute in 32 bits, as the flag asks.

    This compiler computes s64/u64 in 32 bits on every target (trn1 has no
    64-bit integer datapath; --native-int64 is not applied yet). With
    ``--implicit-integer-downcast none`` every instruction producing s64/u64 is
    an error; with a list of op names, those ops among dot, scatter,
    all_reduce, reduce_scatter and pow that are not listed are errors; with
    ``default``/``all`` everything is downcast silently (the documented default).
    """
    policy = args.implicit_integer_downcast
    if policy in ("default", "all"):
        return
    allowed = set() if policy == "none" else set(policy.split(","))
    from neuronxcc.errors import IntegerDowncastError, source_location

    for comp in module.computations.values():
        for inst in comp.instructions:
            types = [s.element_type for s in _leaf_shapes(inst.shape)]
            wide = [t for t in types if t in ("s64", "u64")]
            if not wide:
                continue
            name = _DOWNCAST_NAMES.get(inst.opcode)
            if policy != "none" and (name is None or name in allowed):
                continue
            where = source_location(inst.metadata)
            raise IntegerDowncastError(
                "--implicit-integer-downcast=%s: instruction '%s' (%s) produces %s, which target %s computes "
                "in 32 bits%s; allow it with --implicit-integer-downcast=all or use 32-bit integers"
                % (policy, inst.name, inst.opcode, wide[0], args.target, " at " + where if where else ""))


def _leaf_shapes(shape):
    if shape.element_type == "tuple":
        for s in shape.tuple_shapes:
            yield from _leaf_shapes(s)
    else:
        yield shape


class CompileCommand(CommandInterface):
    def __init__(self):
        from neuronxcc.driver.JobRegistry import JobRegistry

        self.logger = logging.getLogger("neuronxcc.driver.commands.CompileCommand")
        self.jobRegistry = JobRegistry()
        self.parser = self.makeParser()
        self.pipeline = None          # the job-name list of the last buildPipeline
        self.walrus_passes = []       # forwarded as one --walrus-passes argument
        self.logical_nc_config = None
        self.unknown_args = []
        self.argv_split = None

    def getCommandName(self):
        return "compile"

    def getDescription(self):
        return "Compile a neural network model"

    # -- parsing -------------------------------------------------------------------
    def makeParser(self, show_hidden=False):
        p = InterceptingArgumentParser(prog="neuronx-cc compile", description=self.getDescription(),
                                       show_hidden=show_hidden)
        addCompileArguments(p)
        self.jobRegistry.RegisterArgs(p)
        p.add_argument("--help-hidden", action=_HelpHiddenAction, command=self,
                       help="show help including the internal flags")
        p.add_argument("--help-hidden-list", action=_HelpHiddenListAction,
                       help="list the internal flags, one per line")
        return p

    def parseArgs(self, argv, logger=None):
        logger = logger or self.logger
        split = splitArgv(self.parser, argv)
        for unk in split.unknown:
            logger.warning("Ignoring unknown compile option %s", " ".join(unk))
        self.unknown_args = split.unknown
        self.argv_split = split
        return self.parser.parse_args(split.normalized())

    def processSerialTpbOpts(self, args):
        """Logical NeuronCore config: default per target (2 on trn2-class, else 1), then checked."""
        v3 = args.target in ("trn2", "trn2n", "trn3")
        if args.logical_nc_config is None:
            args.logical_nc_config = 2 if v3 else 1
        if args.logical_nc_config not in (1, 2):
            raise InvalidArgumentError("Unsupported logical NeuronCore config %s (choose 1 or 2)"
                                       % args.logical_nc_config, code="NCC_EARG001")
        if args.logical_nc_config == 2 and not v3:
            raise InvalidArgumentError("Logical NeuronCore config 2 is supported on trn2 only, not on %s"
                                       % args.target, code="NCC_EARG001")
        self.logical_nc_config = args.logical_nc_config

    def validateArgs(self, args):
        from neuronxcc import hwm

        if not args.model_files:
            raise InvalidArgumentError("no input model given (neuronx-cc compile <model_files> ...)")
        if len(args.model_files) > 1:
            raise InvalidArgumentError("only one input model is supported, got %d: %s"
                                       % (len(args.model_files), " ".join(args.model_files)))
        path = args.model_files[0]
        if not os.path.exists(path):
            raise InputFileError("input file not found: %s" % path)
        if not (os.path.isfile(path) or os.path.isdir(path)):  # a fifo or device would block or never end
            raise InputFileError("input %s is not a regular file or a model directory" % path)
        if os.path.isfile(path) and os.path.getsize(path) == 0:
            raise InputFileError("input file is empty: %s" % path)
        try:
            hwm.get_target(args.target)
        except KeyError:
            raise InvalidArgumentError("target %s is not modelled by this compiler (known: %s)"
                                       % (args.target, ", ".join(hwm.known_targets())))
        iid = args.implicit_integer_downcast
        if iid not in ("default", "all", "none"):
            from neuronxcc.driver.Arguments import DOWNCAST_OPS

            bad = [o for o in iid.split(",") if o not in DOWNCAST_OPS]
            if bad:
                raise InvalidArgumentError("--implicit-integer-downcast: unknown op(s) %s" % ",".join(bad))
        from neuronxcc.starfish.penguin.autocast import policy
        policy(args)     # --auto-cast / --auto-cast-type / --fast-math: refuse what cannot be applied, up front
        if args.execute_repetition < 1:
            raise InvalidArgumentError("--execute-repetition must be at least 1")
        if args.pipeline:
            for stage in args.pipeline:
                if stage not in STAGES and stage not in SPECIAL_NAMES:
                    self.jobRegistry.getJobClass(stage)  # raises naming an unknown job
        checkOutputPath(args.output)

    def normalizeFlags(self, args):
        if args.enable_experimental_O1:
            args.optlevel = "1"
        if args.optlevel == "0":
            args.enable_internal_new_backend = False
        if self.logical_nc_config == 2 and args.meta_module:
            self.logger.warning("--lnc 2 with --meta-module: the sub-module is compiled for one physical NeuronCore "
                                "(lnc_size 1)")
        unused = [flag for flag, on in (("--model-type " + args.model_type, args.model_type != "generic"),
                                        ("--enable-saturate-infinity", args.enable_saturate_infinity),
                                        ("--enable-fast-context-switch", args.enable_fast_context_switch))
                  if on]
        if unused:
            self.logger.info("Accepted without effect on this compiler's output: %s", ", ".join(unused))

    # -- the three collectors --------------------------------------------------------
    def collectFrontendPipeline(self, args):
        if args.meta_module:
            # A sub-module linked later: goldens and the static IO transpose happen at link time.
            self.logical_nc_config = 1
            return ["HLOToTensorizer", "Frontend"]
        goldens = "XLAInferGoldens" if args.framework == XLAInterface else "InferGoldens"
        return ["HLOToTensorizer", goldens, "Frontend", "StaticIOTranspose"]

    def collectWalrusPipeline(self, args):
        from neuronxcc.driver.jobs.WalrusDriver import walrusPassesFor

        self.walrus_passes = walrusPassesFor(args)
        return ["WalrusDriver"]

    def collectBackendPipeline(self, args):
        pipeline = []
        if (not args.enable_internal_modular_compilation
                and not args.enable_internal_bir_linker
                and args.layer_unroll_factor > 0):
            if args.internal_run_standalone_legacy_compilation:
                pipeline.append("Backend")
            pipeline.append("Kelper")
            if args.enable_internal_neff_wrapper:
                pipeline.append("NeffWrapper")
        return pipeline

    def filterJobNames(self, names, args):
        """The name special-case loop.

        * golden jobs are dropped when nothing reads goldens (no WalrusDriver in
          the list, or the bir_sim pass is off); MetaInferGoldens is spelled
          InferGoldens here;
        * BIRSim is not a job here: it turns the walrus ``bir_sim`` pass on;
        * Watchpoint stays (only reachable through --pipeline).
        """
        from neuronxcc.walrus.pass_names import bir_sim_skip

        if "BIRSim" in names and bir_sim_skip(self.walrus_passes) == "disabled":
            self.walrus_passes.append("bir_sim")
        goldens_read = "WalrusDriver" in names and bir_sim_skip(self.walrus_passes) is None
        out = []
        for name in names:
            if name in GOLDEN_JOBS:
                if not goldens_read:
                    continue
                name = "InferGoldens" if name == "MetaInferGoldens" else name
            elif name == "BIRSim":
                continue
            if name not in out:
                out.append(name)
        return out

    def buildPipeline(self, argv, logger=None):
        logger = logger or self.logger
        args = self.parseArgs(argv, logger)
        self.processSerialTpbOpts(args)
        self.validateArgs(args)
        self.normalizeFlags(args)
        fe = self.collectFrontendPipeline(args)
        wd = self.collectWalrusPipeline(args)
        be = self.collectBackendPipeline(args)
        names = fe + wd + be
        if args.pipeline:
            parts = {"front": fe, "walrus": wd, "backend": be}
            names = []
            for stage in args.pipeline:
                if stage in STAGES:
                    for part in STAGES[stage]:
                        names += parts[part]
                else:
                    names.append(stage)
        names = self.filterJobNames(names, args)
        self.pipeline = names
        pipeline = self.jobRegistry.makePipeline(names)
        logger.debug("Job pipeline: %s; walrus passes: %s", " ".join(names), ",".join(self.walrus_passes))
        return (pipeline, args)

    # -- running -----------------------------------------------------------------------
    def stageInput(self, state):
        """Write the input as ``model.hlo_module.pb`` (HloModuleProto bytes) into the work dir, and
        parse what was written once for the tools that read it (``hlo.loader.share_parsed``: the
        forked hlo2penguin and xla_infergoldens take the parsed module instead of parsing the file
        again; exec'd tools parse it themselves)."""

        from neuronxcc.hlo import load_module, module_to_proto_bytes
        module = load_module(state.input_path)
        checkIntegerDowncast(module, state.args)
        if getattr(state.args, "internal_num_ranks", None):
            from neuronxcc.hlo.ranks import set_rank_count
            set_rank_count(module, state.args.internal_num_ranks)
        state.module_name = getattr(module, "name", None)
        data = module_to_proto_bytes(module)
        with open(files.MODEL, "wb") as f:
            f.write(data)
        from neuronxcc.driver import ToolProcess
        if not os.environ.get(ToolProcess.EXEC_ENV):
            from neuronxcc.hlo import module_from_proto_bytes
            from neuronxcc.hlo.loader import share_parsed
            share_parsed(data, module_from_proto_bytes(data))

    def publishOutputs(self, state, pipeline_names):
        """Copy the NEFF (and wrapped_neff.hlo) out of the work dir: temp file + rename."""
        if "Kelper" not in pipeline_names:
            self.logger.info("No NEFF is produced by pipeline %s; %s not written", " ".join(pipeline_names),
                             state.output)
            return
        neff = state.path(files.NEFF)
        if not os.path.isfile(neff):
            raise InternalCompilerError("Kelper finished without writing %s" % files.NEFF)
        _atomicCopy(neff, state.output)
        wrapped = state.path(files.WRAPPED_NEFF_HLO)
        if "NeffWrapper" in pipeline_names and os.path.isfile(wrapped):
            _atomicCopy(wrapped, os.path.join(os.path.dirname(state.output), files.WRAPPED_NEFF_HLO))

    def runPipeline(self, pipeline, args):
        from neuronxcc.driver.Job import Job, setLaunchDir

        launch = os.getcwd()
        setLaunchDir(launch)
        state = CompileState(args, command=self, launch_dir=launch, output=Job.getAbsPath(args.output))
        state.input_path = Job.getAbsPath(args.model_files[0])
        state.argv_split = self.argv_split
        base = Job.getAbsPath(args.temp_dir) if args.temp_dir else launch
        with _RemoveWorkdirOnInterrupt(state):
            try:
                os.makedirs(base, exist_ok=True)
                state.workdir = makeWorkDir(base)
            except OSError as e:
                raise InvalidArgumentError("cannot create the work directory in %s: %s%s" % (
                    base, e.strerror or e, "" if args.temp_dir else " (choose one with --temp-dir)")) from e
            self._runInWorkdir(pipeline, args, state, launch)
        return 0

    def _runInWorkdir(self, pipeline, args, state, launch):
        from neuronxcc.driver.Job import setLaunchDir

        self.logger.info("Intermediate files stored in %s, output in %s", state.workdir, state.output)
        names = pipeline.getJobNames()
        ok = False
        staged = False
        t_start = time.perf_counter()
        os.chdir(state.workdir)
        try:
            self.stageInput(state)
            staged = True
            if args.internal_test_crash_signal:
                _crash(args.internal_test_crash_signal)
            with _ProgressDots(), _NoCyclicCollector():
                pipeline.runSingleInput(state)
            self.publishOutputs(state, names)
            ok = True
            self._reportGoldenCheck(state, names)
        except BaseException:
            self._saveTempsAfterFailure(pipeline, state)
            raise
        finally:
            os.chdir(launch)
            from neuronxcc.hlo.loader import share_parsed
            share_parsed(None, None)         # the staged module was for this compile's tools only
            try:
                self.logMetrics(pipeline, state, ok, time.perf_counter() - t_start)
            except Exception as e:  # metrics must never mask the compile's own outcome
                self.logger.warning("could not write the compile metrics: %s", e)
            setLaunchDir(None)
            # Kept: after SaveTemps, and after a failed job (for diagnosis). A compile that
            # failed before any job ran (unreadable input) leaves nothing behind.
            if (ok or not staged) and not state.keep_workdir:
                shutil.rmtree(state.workdir, ignore_errors=True)
            else:
                self.logger.log(USER if not ok else logging.INFO, "Artifacts stored in: %s", state.workdir,
                                extra=FILE_ONLY)

    def _reportGoldenCheck(self, state, names):
        """One USER line when the built-in golden check (walrus bir_sim) did not run or proved
        little, so that "Compiler status PASS" never stands for a check that did not happen."""
        if "WalrusDriver" not in names:
            return
        import json

        try:
            with open(state.path(files.METRICS)) as f:
                status = json.load(f).get("bir_sim")
        except (OSError, ValueError):
            status = None
        from neuronxcc.walrus.pass_names import bir_sim_skip

        if bir_sim_skip(self.walrus_passes) == "disabled":
            why = "not run (disabled)"
        elif status is None:
            why = "not run: no goldens (the program is over the golden size budget, or they were not computed)"
        elif status.startswith("skipped"):
            why = "not run: " + status.split(":", 1)[-1].strip()
        elif status.startswith("weak"):
            why = "weak: " + status.split(":", 1)[-1].strip()
        else:
            return
        self.logger.log(USER, "Golden check on birsim %s", why)

    def _saveTempsAfterFailure(self, pipeline, state):
        for job in pipeline:
            if job.getName() == "SaveTemps" and not getattr(job, "done", False):
                try:
                    job.run(state)
                except Exception as e:  # best effort: the original failure is what matters
                    self.logger.debug("SaveTemps after failure did not complete: %s", e, exc_info=True)

    def logMetrics(self, pipeline, state=None, ok=None, elapsed=None):
        """Per-job times to the log; with --internal-compile-metrics also to a JSON file."""
        for name, secs in pipeline.job_times.items():
            self.logger.info("Job %s took %.3f seconds", name, secs)
        path = getattr(state.args, "internal_compile_metrics", None) if state is not None else None
        if not path:
            return
        import json

        walrus = None
        try:
            with open(state.path(files.METRICS)) as f:
                walrus = json.load(f)
        except (OSError, ValueError):
            pass
        doc = {"status": "PASS" if ok else "FAIL", "jobs": pipeline.getJobNames(),
               "job_seconds": dict(pipeline.job_times), "total_seconds": elapsed,
               "walrus_passes": list(self.walrus_passes), "walrus_metrics": walrus}
        from neuronxcc.driver.Job import Job

        target = Job.getAbsPath(path) if not os.path.isabs(path) else path
        from neuronxcc.common.toolshell import atomic_output
        with atomic_output(target) as tmp, open(tmp, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)

    def run(self, argv, logfile=None):
        loadNumpyWithOneBlasThread()
        try:
            pipeline, args = self.buildPipeline(argv, self.logger)
            self.runPipeline(pipeline, args)
        except BaseException as e:
            if not (isinstance(e, SystemExit) and not e.code):
                _status("FAIL")
            raise
        _status("PASS")
        return 0


class _HelpHiddenAction(argparse.Action):
    """--help-hidden: print the compile help with the internal flags listed, exit 0."""

    def __init__(self, option_strings, dest, command=None, **kw):
        self.command = command
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        self.command.makeParser(show_hidden=True).print_help()
        parser.exit(0)


class _HelpHiddenListAction(argparse.Action):
    """--help-hidden-list: the internal flags' option strings, one per line, exit 0."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        for action in parser._actions:
            if action.dest in parser.hidden_dests:
                print(", ".join(action.option_strings))
        parser.exit(0)


def _status(word):
    print("Compiler status %s" % word)
    sys.stdout.flush()
    logging.getLogger("neuronxcc.driver.commands.CompileCommand").log(USER, "Compiler status %s", word,
                                                                      extra=FILE_ONLY)


class _RemoveWorkdirOnInterrupt:
    """SIGINT/SIGTERM while the jobs run: remove the work dir (unless SaveTemps keeps it),
    then die of the same signal, as SIG_DFL would. Only where the signal's disposition is
    SIG_DFL (what ``main`` sets for SIGINT) and in the main thread; elsewhere nothing changes."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, state):
        self.state = state
        self.saved = {}

    def _handler(self, signo, frame):
        if self.state.workdir and not self.state.keep_workdir:
            shutil.rmtree(self.state.workdir, ignore_errors=True)
        signal.signal(signo, signal.SIG_DFL)
        os.kill(os.getpid(), signo)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signo in self.SIGNALS:
                if signal.getsignal(signo) == signal.SIG_DFL:
                    self.saved[signo] = signal.signal(signo, self._handler)
        return self

    def __exit__(self, *exc):
        for signo, old in self.saved.items():
            signal.signal(signo, old)
        return False


def _crash(name):
    """TEST ONLY (--internal-test-crash-signal): kill this process with a signal once the
    work dir holds the staged input (as an interrupt or a crash in the middle of a compile)."""
    n = str(name).upper()
    if not n.startswith("SIG"):
        n = "SIG" + n
    sig = getattr(signal, n, None)
    if sig is None:
        raise InvalidArgumentError("--internal-test-crash-signal: unknown signal %s" % name)
    sys.stdout.flush()
    sys.stderr.flush()
    # SIGINT/SIGTERM keep their handler (SIG_DFL or _RemoveWorkdirOnInterrupt); SIGKILL and
    # SIGSTOP cannot be caught; the rest are reset so that a Python-level handler cannot swallow them.
    if sig not in (signal.SIGKILL, signal.SIGSTOP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    time.sleep(5)
    raise InternalCompilerError("signal %s did not end the process" % n)


class _NoCyclicCollector:
    """The cyclic garbage collector paused while the pipeline runs in the driver (as walrus_driver
    runs its passes). Frontend and Kelper build and drop hundreds of thousands of small objects
    on top of a heap of as many, and the collector's full scans of that heap grow with both: on
    an 8-layer Llama prefill they doubled Kelper's time (0.69 -> 1.4-1.9 s of CPU), at 32 layers
    more. Reference counting still frees everything acyclic; the collector runs again after the
    pipeline. Forked tools start with it on (ToolProcess)."""

    def __enter__(self):
        import gc

        self.was = gc.isenabled()
        gc.disable()
        return self

    def __exit__(self, *exc):
        import gc

        if self.was:
            gc.enable()
        return False


def makeWorkDir(base, prefix="neuronxcc-"):
    """A new directory ``base/<prefix><random>`` (mode 0700, absolute path) that no other compile
    gets: ``tempfile.mkdtemp``'s contract, without importing tempfile (random and hashlib with it)
    into every compile."""
    import errno

    for _ in range(100):
        path = os.path.abspath(os.path.join(base, prefix + os.urandom(6).hex()))
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(errno.EEXIST, "no usable work directory name in %s" % base)


def checkOutputPath(output):
    """--output must name a file in an existing, writable directory (checked before any work)."""
    path = os.path.abspath(output)
    out_dir = os.path.dirname(path) or "."
    if not os.path.isdir(out_dir):
        raise InvalidArgumentError("output directory does not exist: %s" % out_dir)
    if os.path.isdir(path):
        raise InvalidArgumentError("--output %s is a directory; give the NEFF file name" % output)
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise InvalidArgumentError("output directory is not writable: %s" % out_dir)


def _atomicCopy(src, dst):
    """Publish ``src`` at ``dst`` with the tool shell's atomic write (temp file, flushed, renamed):
    ``dst`` is whole or untouched. A write the OS refuses is the user's error (the path)."""
    from neuronxcc.common.toolshell import atomic_write

    with open(src, "rb") as f:
        data = f.read()
    try:
        atomic_write(dst, data, fsync=True, user_error=False)
    except OSError as e:
        raise InvalidArgumentError("cannot write %s: %s" % (dst, e.strerror or e)) from e
