"""walrus_driver: run the named walrus passes over one BIR file.

    walrus_driver --input sg00/bir.json --output sg00/walrus.bir.json \\
                  --walrus-passes lsa,coloring,...,birverifier,bir_sim \\
                  [--target trn1] [--goldens goldens.npz] [--metrics sg00/metrics.json]
    walrus_driver --list-passes [--target trn2]

Passes run in the order given. Exit 0 on success, 70 on a compile error with
exactly one ``[NCC_...]`` line on stderr; the traceback goes to the log file
(``--log-file``, default ``walrus_driver.log`` next to ``--output``).
"""
import gc
import json
import logging
import os
import sys
import traceback

from neuronxcc import errors
from neuronxcc.common.toolshell import ToolParser, atomic_output, run_main
from neuronxcc.walrus.cli import get_target

PROG = "walrus_driver"
log = logging.getLogger("neuronxcc.walrus")
# Without a handler of its own, logging's last resort would print the error
# records (tracebacks included) on stderr whenever no log file is set up.
log.addHandler(logging.NullHandler())


def _parser():
    p = ToolParser(prog=PROG, description="Run walrus backend passes over a BIR module.")
    p.add_argument("--input", help="BIR JSON file (sg00/bir.json)")
    p.add_argument("--output", help="BIR JSON written after the passes")
    p.add_argument("--walrus-passes", default="", help="comma-separated pass names, run in this order")
    p.add_argument("--target", default="trn1")
    p.add_argument("--goldens", default=None, help="goldens.npz for the bir_sim pass")
    p.add_argument("--metrics", default=None, help="metrics JSON written by print_metrics")
    p.add_argument("--list-passes", action="store_true", help="list pass names and exit")
    p.add_argument("--sim-budget-instructions", type=int, default=None,
                   help="bir_sim skips programs that execute more instructions than this")
    p.add_argument("--sim-budget-bytes", type=int, default=None,
                   help="bir_sim skips programs whose I/O tensors exceed this many bytes")
    p.add_argument("--unroll-max-trip", type=int, default=None)
    p.add_argument("--verify-between-passes", action="store_true")
    p.add_argument("--no-spill", action="store_true", help="fail instead of spilling SBUF to HBM")
    p.add_argument("--no-reuse-distance", action="store_true",
                   help="allocation: lowest free bytes first instead of the bytes idle longest")
    p.add_argument("--log-file", default=None)
    p.add_argument("-v", "--verbose", action="store_true", help="also log to stderr")
    return p


def list_passes_text(target_name="trn1"):
    from neuronxcc.walrus.registry import PassContext, all_passes
    ctx = PassContext(get_target(target_name, PROG))
    lines = ["walrus passes (target %s):" % target_name]
    for name, p in all_passes():
        reason = p.noop_reason(ctx)
        status = "implemented" if reason is None else "no-op: %s" % reason
        lines.append("  %-28s %-60s [%s]" % (name, p.description, status))
    return "\n".join(lines) + "\n"


def _setup_logging(args):
    handlers = []
    path = args.log_file
    if path is None and args.output:
        path = os.path.join(os.path.dirname(os.path.abspath(args.output)), "walrus_driver.log")
    if path:
        try:
            handlers.append(logging.FileHandler(path))
        except OSError:
            pass
    if args.verbose:
        handlers.append(logging.StreamHandler(sys.stderr))
    for h in handlers:
        h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(h)
    log.setLevel(logging.DEBUG if handlers else logging.WARNING)
    log.propagate = False
    return handlers


def run(args):
    """The library entry: run the passes described by parsed ``args``. Returns the context."""
    from neuronxcc.walrus.bir import load_module, save_module
    from neuronxcc.walrus.registry import PassContext, parse_pass_list, run_passes
    target = get_target(args.target, PROG)
    names = parse_pass_list(args.walrus_passes)
    if not args.input or not args.output:
        raise errors.InvalidArgumentError("walrus_driver: --input and --output are required")
    opts = {}
    if args.sim_budget_instructions is not None:
        opts["sim_budget_instructions"] = args.sim_budget_instructions
    if args.sim_budget_bytes is not None:
        opts["sim_budget_bytes"] = args.sim_budget_bytes
    if args.unroll_max_trip is not None:
        opts["unroll_max_trip"] = args.unroll_max_trip
    if args.verify_between_passes:
        opts["verify_between_passes"] = True
    if args.no_spill:
        opts["allocator_spill"] = False
    if args.no_reuse_distance:
        opts["reuse_distance"] = False
    goldens = os.path.abspath(args.goldens) if args.goldens else None
    ctx = PassContext(target, goldens=goldens, options=opts)
    ctx.target_name = args.target
    module = load_module(args.input)
    log.info("walrus_driver: %s -> %s, passes: %s", args.input, args.output, ",".join(names))
    run_passes(module, names, ctx)
    save_module(module, args.output)
    if args.metrics:
        ctx.metrics.setdefault("pass_timings_s", {n: round(t, 6) for n, t, _ in ctx.timings})
        with atomic_output(args.metrics) as tmp, open(tmp, "w") as f:
            json.dump(ctx.metrics, f, indent=1, sort_keys=True)
    return ctx


def _main(argv):
    handlers = []
    try:
        args = _parser().parse_args(argv)
        handlers = _setup_logging(args)
        if args.list_passes:
            sys.stdout.write(list_passes_text(args.target))
            return 0
        # A compile process: the passes allocate millions of small objects and keep most of
        # them, so the cyclic collector's full scans cost ~30% of the run for ~5% of the memory
        # (measured at 32 layers: 399 MB with it off, 381 MB on); the process exits after the run.
        gc.disable()
        run(args)
        return 0
    except errors.CompilerError as e:
        if handlers:
            log.error("%s\n%s", e.one_line(), traceback.format_exc())
        raise
    except Exception:  # a compiler bug: the traceback in the log, one line on the console
        if handlers:
            log.error("internal error\n%s", traceback.format_exc())
        raise
    finally:
        for h in handlers:
            log.removeHandler(h)
            h.close()


def main(argv=None):
    return run_main(PROG, _main, argv, log, prefix=False)


if __name__ == "__main__":
    sys.exit(main())
