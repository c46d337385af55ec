"""The ``birsim`` tool: run a NEFF's BIR program on the simulator.

    birsim NEFF --inputs IN.npz --output OUT.npz [--trace trace.json] [--target trn1] [--summary S.json]
           [--sync auto|semaphores|dependencies] [--strict] [--order program|streams] [--ranks N]

IN.npz holds ``input{i}`` in parameter order; OUT.npz gets ``output{i}`` in
flattened result order. ``--trace`` writes Chrome trace-event JSON (one track
per engine and DMA queue). Exit 0 on success; 70 with one ``[NCC_...]`` line
on stderr on any compiler error (bad NEFF, bad inputs, a simulation fault).

A multi-rank program (compiled for N ranks, or ``--ranks N``) runs on N
simulated NeuronCores (``birsim.ranks``): every ``input{i}`` has a leading
rank axis of N (an array without it goes to every rank), every ``output{i}``
gets one (index = global rank), the trace has one process per core, and the
summary adds the collective time and share per rank.
"""
import argparse
import json
import os
import sys

import numpy as np

from neuronxcc.errors import CompilerError, InputFileError, InternalCompilerError

__all__ = ["main"]


def _parser():
    p = argparse.ArgumentParser(prog="birsim", description="Run the BIR program of a NEFF on the BIR simulator.")
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


def _load_inputs(path):
    if path is None:
        return {}
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError) as e:
        raise InputFileError("cannot read inputs %s: %s" % (path, e))


def run(args):
    from neuronxcc.neff import read_neff
    from neuronxcc.starfish.birsim.sim import simulate_neff

    if not os.path.isfile(args.neff):
        raise InputFileError("NEFF file %s does not exist" % args.neff)
    given = _load_inputs(args.inputs)
    neff = read_neff(args.neff)
    module = neff.module
    from neuronxcc.starfish.birsim.ranks import module_ranks, run_tool_ranks
    if (args.ranks or 1) > 1 or module_ranks(module) > 1:
        return run_tool_ranks(args, neff, given)
    inputs = []
    for i, name in enumerate(module.inputs):
        key = "input%d" % i
        if key not in given:
            raise InputFileError("inputs file has no %s (the program takes %d inputs)" % (key, len(module.inputs)))
        inputs.append(given[key])
    res = simulate_neff(neff, inputs, target=args.target, trace=bool(args.trace), sync=args.sync,
                        strict=args.strict, order=args.order)
    tmp_out = args.output + ".tmp.npz"
    np.savez(tmp_out, **{"output%d" % i: o for i, o in enumerate(res.outputs)})
    os.replace(tmp_out, args.output)
    if args.trace:
        res.write_trace(args.trace)
    s = res.summary()
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(s, f, indent=1)
    sys.stdout.write("birsim: %d instructions, estimated %.3f us%s\n" % (
        s["instructions"], s["total_s"] * 1e6, ", %d semaphore races" % len(s["races"]) if s["races"] else ""))
    if s["utilisation"]:
        sys.stdout.write("birsim: busy " + ", ".join("%s %.1f%%" % (k, 100 * v) for k, v in s["utilisation"].items())
                         + "\n")
    return 0


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        return run(args)
    except CompilerError as e:
        sys.stderr.write(e.one_line() + "\n")
        return 70
    except (OSError, ValueError, KeyError, TypeError) as e:
        err = InternalCompilerError("birsim failed: %s: %s" % (type(e).__name__, e))
        sys.stderr.write(err.one_line() + "\n")
        return 70


if __name__ == "__main__":
    sys.exit(main())
