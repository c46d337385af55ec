"""The ``birsim`` tool: run a NEFF's BIR program on the simulator.

    birsim NEFF --inputs IN.npz --output OUT.npz [--trace trace.json] [--target trn1] [--summary S.json]
           [--sync auto|semaphores|dependencies] [--strict] [--order program|streams] [--ranks N]

IN.npz holds ``input{i}`` in parameter order; OUT.npz gets ``output{i}`` in
flattened result order. ``--trace`` writes Chrome trace-event JSON (one track
per engine and DMA queue). Each input must have the shape and the element type
of its parameter (bf16/fp8 as raw 2/1-byte void, as ``np.savez`` stores them;
numpy bool for a bool input). Exit 0 on success; 70 with one ``[NCC_...]``
line on stderr on any error (bad flags, a bad NEFF, a missing, empty,
truncated or non-npz inputs file, a missing input, a wrong shape or dtype, a
simulation fault); no output file is written then.

A multi-rank program (compiled for N ranks, or ``--ranks N``) runs on N
simulated NeuronCores (``birsim.ranks``): every ``input{i}`` has a leading
rank axis of N (an array without it goes to every rank), every ``output{i}``
gets one (index = global rank), the trace has one process per core, and the
summary adds the collective time and share per rank.
"""
import contextlib
import json
import sys

import numpy as np

from neuronxcc.common.toolshell import ToolParser, atomic_output, load_npz, require_file, run_main
from neuronxcc.starfish.birsim.inputs import check_inputs

__all__ = ["main"]

PROG = "birsim"


def _parser():
    p = ToolParser(prog=PROG, description="Run the BIR program of a NEFF on the BIR simulator.")
    p.add_argument("neff", help="the NEFF file")
    p.add_argument("--inputs", help="npz with input0, input1, ... (parameter order)")
    p.add_argument("--output", required=True, help="npz to write output0, output1, ... (flattened result order)")
    p.add_argument("--trace", help="write a Chrome trace-event JSON here")
    p.add_argument("--target", help="hardware model (default: the module's target)")
    p.add_argument("--summary", help="write the timing summary JSON here")
    p.add_argument("--sync", default="auto", choices=("auto", "semaphores", "dependencies"),
                   help="timing by semaphores or by memory dependences (default: semaphores if the program has any)")
    p.add_argument("--strict", action="store_true", help="a semaphore race is an error (exit 70)")
    p.add_argument("--order", default="program", choices=("program", "streams"),
                   help="execute in program order, or each engine's stream on its own interleaved by time")
    p.add_argument("--ranks", type=int, default=None,
                   help="simulate N NeuronCores (default: the rank count the NEFF was compiled for)")
    return p


def run(args):
    from neuronxcc.neff import read_neff
    from neuronxcc.starfish.birsim.sim import io_permutations, simulate_neff

    require_file(args.neff, "NEFF file")
    neff = read_neff(args.neff)
    module = neff.module
    given = load_npz(args.inputs) if args.inputs is not None else {}
    from neuronxcc.starfish.birsim.ranks import module_ranks, run_tool_ranks
    if (args.ranks or 1) > 1 or module_ranks(module) > 1:
        return run_tool_ranks(args, neff, given)
    inputs = check_inputs(given, module, io_permutations(neff), args.inputs)
    res = simulate_neff(neff, inputs, target=args.target, trace=bool(args.trace), sync=args.sync,
                        strict=args.strict, order=args.order)
    s = res.summary()
    with contextlib.ExitStack() as stack:           # every file renamed into place only when all are written
        tmp = stack.enter_context(atomic_output(args.output, suffix=".npz"))
        with open(tmp, "wb") as f:
            np.savez(f, **{"output%d" % i: o for i, o in enumerate(res.outputs)})
        if args.trace:
            res.write_trace(stack.enter_context(atomic_output(args.trace)))
        if args.summary:
            with open(stack.enter_context(atomic_output(args.summary)), "w") as f:
                json.dump(s, f, indent=1)
    sys.stdout.write("birsim: %d instructions, estimated %.3f us%s\n" % (
        s["instructions"], s["total_s"] * 1e6, ", %d semaphore races" % len(s["races"]) if s["races"] else ""))
    if s["utilisation"]:
        sys.stdout.write("birsim: busy " + ", ".join("%s %.1f%%" % (k, 100 * v) for k, v in s["utilisation"].items())
                         + "\n")
    return 0


def main(argv=None):
    return run_main(PROG, lambda a: run(_parser().parse_args(a)), argv)


if __name__ == "__main__":
    sys.exit(main())
