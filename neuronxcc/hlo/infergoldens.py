"""``xla_infergoldens``: golden inputs and outputs of an HLO program, computed
by the reference interpreter (the XLAInferGoldens / InferGoldens jobs run it).

    xla_infergoldens MODEL --output OUT.npz [--inputs IN.npz] [--seed N] [--size-budget BYTES]
                     [--max-while-trips N] [--ranks N]

OUT.npz holds ``input{i}`` (entry parameter leaves in parameter order) and
``output{i}`` (the result's leaves, flattened), and for each floating-point
output ``spread{i}``: float32, same shape, elementwise |output - output'|
where output' is the program run once more on the same inputs with every
float input multiplied by 1 + 4*eps*N(0,1) (eps of its dtype, seeded): the
golden's own sensitivity to a few ulp of input rounding, so a consumer can
tell an ill-conditioned program (a chaotic recurrence) from a wrong one.
Without ``--inputs`` the
inputs are drawn from a seeded generator, valid per dtype: floats standard
normal, signed ints in [-8, 8), unsigned in [0, 16), pred fair coins, and
parameters that feed gather/scatter/dynamic-slice indices in range for every
dimension they index; a parameter a model directory binds to one of its
weights takes that weight. A program whose tensors total more than the size
budget is skipped: one line on stderr saying so, exit 3 (``EXIT_SKIPPED``: no
goldens, which the caller must not take for success), no output file. A program whose
while loops together run more than ``--max-while-trips`` trips (a loop that
never ends on these inputs would otherwise hang the compile) fails with
EvaluationLimitError naming the loop.

A multi-rank program (``neuronxcc.hlo.ranks.rank_space``: replica_count x
num_partitions from the module, else from its replica groups, else
``--ranks``) runs every rank (``evaluate_ranks``); then every ``input{i}``,
``output{i}`` and ``spread{i}`` has a leading rank axis (index = global device
id), and the key ``rank_space`` (int64 [num_replicas, num_partitions]) marks
the file as per-rank. ``--inputs`` may give ``input{i}`` with that axis, or
without it (every rank gets the same array); random inputs are seeded per rank.

Arrays of types numpy lacks (bf16, f8) are stored by ``np.savez`` as raw bits
(void dtype); ``read_npz(path, module)`` gives them back typed.

Exit status: 0; 3 when the size budget skipped the program; 70 with one
``[NCC_...]`` line on stderr for bad input (bad flags; a missing, empty,
truncated or non-npz inputs file; a missing input) and nothing written.
"""
import logging
import os
import sys

import numpy as np

from neuronxcc.common import toolshell
from neuronxcc.errors import HloVerifyError, InputFileError, TensorTooLargeError

log = logging.getLogger("neuronxcc.hlo.infergoldens")

PROG = "xla_infergoldens"
DEFAULT_SIZE_BUDGET = 512 * 1000 * 1000   # bytes of all tensors of one program
# Exit status of a run the size budget skipped: not a success (no goldens), not an error either.
EXIT_SKIPPED = 3
DEFAULT_MAX_WHILE_TRIPS = 1000 * 1000     # all while-loop trips of one evaluation (~30 us each)

_PASS_THROUGH = {"convert", "reshape", "broadcast", "bitcast", "copy", "transpose", "slice", "concatenate",
                 "reverse", "optimization-barrier"}


def _parser():
    p = toolshell.ToolParser(prog=PROG,
                   description="Compute golden inputs/outputs of an HLO program with the reference interpreter.")
    p.add_argument("model", metavar="MODEL", help="HLO module: HloModuleProto, HloProto, HLO text or model directory")
    p.add_argument("--output", required=True, metavar="OUT.npz", help="where to write input{i}/output{i}")
    p.add_argument("--inputs", metavar="IN.npz", help="input{i} arrays in parameter order (else seeded random)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--auto-cast", default="none", choices=("none", "matmult", "matmul", "all", "fp32"),
                   help="the compile's --auto-cast: matmult/all round fp32 dot/convolution operands to "
                        "--auto-cast-type first, as the compiled program's PE does")
    p.add_argument("--auto-cast-type", default="bf16", choices=("bf16", "fp16", "tf32", "fp8_e4m3"))
    p.add_argument("--size-budget", type=int, default=DEFAULT_SIZE_BUDGET, metavar="BYTES",
                   help="skip programs whose tensors total more bytes than this (default %d)" % DEFAULT_SIZE_BUDGET)
    p.add_argument("--ranks", type=int, default=None, metavar="N",
                   help="the rank count of a multi-rank program whose module does not state it")
    p.add_argument("--max-while-trips", type=int, default=DEFAULT_MAX_WHILE_TRIPS, metavar="N",
                   help="fail when the program's while loops run more trips than this in all "
                        "(default %d)" % DEFAULT_MAX_WHILE_TRIPS)
    p.add_argument("--serial", action="store_true",
                   help="run the perturbed run (the spreads) after the goldens run in this process, not beside "
                        "it in a forked one (the default on a machine with more than one core)")
    return p


def main(argv=None):
    toolshell.console_logging(sys.stdout)
    return toolshell.run_main(PROG, lambda a: _run(_parser().parse_args(a)), argv, log, prefix=False)


def _run(args):
    from neuronxcc.hlo.interp_linalg import matmul_operand_cast
    rounding = None
    if getattr(args, "auto_cast", "none") in ("matmult", "matmul", "all"):
        rounding = {"fp8_e4m3": "float8_e4m3"}.get(args.auto_cast_type, args.auto_cast_type)
    with matmul_operand_cast(rounding):
        return _run_cast(args)


def _run_cast(args):
    from neuronxcc.hlo import load_module
    from neuronxcc.hlo.interpreter import DEFAULT_MAX_TENSOR_BYTES, Evaluator

    module = load_module(args.model)
    total = program_bytes(module)
    if total > args.size_budget:
        if os.path.exists(args.output):
            os.remove(args.output)
        sys.stderr.write("xla_infergoldens: skipped: no goldens for %s: its tensors total %d bytes, over the size "
                         "budget of %d bytes (--size-budget); nothing written to %s (exit %d)\n"
                         % (module.name, total, args.size_budget, args.output, EXIT_SKIPPED))
        return EXIT_SKIPPED
    for s in parameter_leaves(module):
        if s.nbytes() > DEFAULT_MAX_TENSOR_BYTES:
            raise TensorTooLargeError("xla_infergoldens: parameter of shape %s needs %d bytes, more than the %d "
                                      "bytes one tensor may take" % (s.to_text(layout=False), s.nbytes(),
                                                                     DEFAULT_MAX_TENSOR_BYTES))
    from neuronxcc.hlo.ranks import rank_space
    space = rank_space(module, getattr(args, "ranks", None))
    if space.size > 1:
        return _run_ranks(args, module, space)
    if args.inputs:
        inputs = read_inputs(args.inputs, module)
    else:
        inputs = random_inputs(module, args.seed)
    # One evaluator for the goldens and the perturbed run: the module's plans are built once.
    ev = Evaluator(module, max_while_trips=args.max_while_trips)
    # the evaluator accepts these (it casts e.g. int64 to an f32 parameter); store what it runs on
    typed = [np.asarray(a).astype(s.numpy_dtype(), copy=False) for a, s in zip(inputs, parameter_leaves(module))]
    pert = perturbed_inputs(typed, args.seed)
    beside = None
    if pert is not None and not args.serial and _may_fork():
        ev.prepare()          # the entry's plan is built once, before the fork, for both runs
        beside = _ForkedRun(_rerun(ev), pert)
    try:
        outputs = ev.evaluate_entry(inputs)
    except BaseException:
        if beside is not None:
            beside.cancel()
        raise
    if pert is None:
        spreads = {}
    else:
        outs2, failure = beside.result() if beside is not None else _try_run(_rerun(ev), pert)
        spreads = _spreads(module, outputs, outs2) if failure is None else _no_spreads(failure)
    write_npz(args.output, typed, outputs, spreads)
    log.info("xla_infergoldens: wrote %d inputs, %d outputs and %d spreads to %s", len(inputs), len(outputs),
             len(spreads), args.output)
    return 0


def _rerun(ev):
    """Another evaluation of the entry on ``ev``'s plans, with its own while-trip budget (as a new
    evaluator would have)."""
    def run(inputs):
        ev.while_trips = 0
        return ev.evaluate_entry(inputs)
    return run


def _run_ranks(args, module, space):
    """Goldens of an N-rank program: every array with a leading rank axis (module docstring)."""
    from neuronxcc.hlo.interpreter import evaluate_ranks

    n = space.size
    shapes = parameter_leaves(module)
    if args.inputs:
        given = read_inputs(args.inputs, module, ranks=n)
        per_rank = [[a[d] for a in given] for d in range(n)]
    else:
        per_rank = [random_inputs(module, [args.seed, d]) for d in range(n)]
    per_rank = [[np.asarray(a).astype(s.numpy_dtype(), copy=False) for a, s in zip(ins, shapes)]
                for ins in per_rank]

    def run(stacked_inputs):
        outs = evaluate_ranks(module, [[a[d] for a in stacked_inputs] for d in range(n)], space,
                              max_while_trips=args.max_while_trips)
        return [np.stack([outs[d][k] for d in range(n)]) for k in range(len(outs[0]))]

    inputs = [np.stack([ins[k] for ins in per_rank]) for k in range(len(shapes))]
    outputs = run(inputs)
    spreads = output_spreads(module, inputs, outputs, args.seed, args.max_while_trips, run=run)
    write_npz(args.output, inputs, outputs, spreads,
              extra={"rank_space": np.array([space.num_replicas, space.num_partitions], np.int64)})
    log.info("xla_infergoldens: %d ranks (%d replicas x %d partitions): wrote %d inputs, %d outputs and %d spreads "
             "per rank to %s", n, space.num_replicas, space.num_partitions, len(inputs), len(outputs), len(spreads),
             args.output)
    return 0


def program_bytes(module):
    """Sum of the bytes of every array value the program defines (all computations)."""
    total = 0
    for comp in module.computations.values():
        for inst in comp.instructions:
            total += inst.shape.nbytes()
    return total


def parameter_leaves(module):
    """Array shapes of the entry's inputs in order (tuple parameters flattened, tokens dropped)."""
    out = []
    for p in module.entry.parameters:
        out.extend(s for s in p.shape.leaves() if s.is_array)
    return out


def _typed(a, shape):
    a = np.asarray(a)
    dt = shape.numpy_dtype()
    if a.dtype.kind == "V" and a.dtype.itemsize == dt.itemsize:
        return a.view(dt)
    return a


def read_inputs(path, module, ranks=None):
    """input{i} of IN.npz typed; with RANKS, each with a leading rank axis (added when absent)."""
    shapes = parameter_leaves(module)
    try:
        arrays = toolshell.load_npz(path, "inputs file")
    except InputFileError as e:
        raise toolshell.named(e, PROG) from None
    inputs = []
    for i, s in enumerate(shapes):
        key = "input%d" % i
        if key not in arrays:
            raise HloVerifyError("xla_infergoldens: %s has no %s for parameter leaf %d (%s)"
                                 % (path, key, i, s.to_text(layout=False)))
        a = _typed(arrays[key], s)
        if ranks is not None:
            dims = tuple(s.dims)
            if a.shape == dims:
                a = np.broadcast_to(a, (ranks,) + dims)
            elif a.shape != (ranks,) + dims:
                raise HloVerifyError("xla_infergoldens: %s in %s has shape %s; a %d-rank program takes %s "
                                     "(rank axis first) or %s" % (key, path, list(a.shape), ranks,
                                                                  [ranks] + list(dims), list(dims)))
        inputs.append(a)
    return inputs


def read_npz(path, module):
    """(inputs, outputs) of a goldens file, typed by the module's parameter and result shapes."""
    with np.load(path, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    ins = [_typed(arrays["input%d" % i], s) for i, s in enumerate(parameter_leaves(module))]
    res = [s for s in module.entry.root.shape.leaves() if s.is_array]
    outs = [_typed(arrays["output%d" % i], s) for i, s in enumerate(res) if "output%d" % i in arrays]
    return ins, outs


def _float_eps(dt):
    """eps of a floating dtype (numpy's or ml_dtypes'), else None."""
    dt = np.dtype(dt)
    if dt in (np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)):
        return float(np.finfo(dt).eps)
    if dt.kind in "fV":  # ml_dtypes' floats: float8_e5m2 says kind 'f', the others 'V'; numpy's finfo refuses both
        try:
            import ml_dtypes
            return float(ml_dtypes.finfo(dt).eps)
        except (ImportError, ValueError, TypeError):
            return None
    return None


PERTURB_ULPS = 4


def output_spreads(module, inputs, outputs, seed=0, max_while_trips=DEFAULT_MAX_WHILE_TRIPS, run=None):
    """{output index: float32 |out - out'|} for float outputs, out' the program on the inputs with
    every float input scaled by 1 + PERTURB_ULPS*eps*N(0,1). Non-finite differences count 0 (they
    cannot widen a tolerance). {} when no input is float or the second run fails (logged)."""
    from neuronxcc.hlo.interpreter import evaluate
    pert = perturbed_inputs(inputs, seed)
    if pert is None:
        return {}
    outs2, failure = _try_run(run if run is not None else
                              (lambda xs: evaluate(module, xs, max_while_trips=max_while_trips)), pert)
    return _spreads(module, outputs, outs2) if failure is None else _no_spreads(failure)


def perturbed_inputs(inputs, seed=0):
    """The inputs of the perturbed run (output_spreads), or None when no input is float."""
    rng = np.random.default_rng([seed, 0x5eed])
    pert, any_float = [], False
    for a in inputs:
        a = np.asarray(a)
        eps = _float_eps(a.dtype)
        if eps is None or a.size == 0:
            pert.append(a)
            continue
        any_float = True
        f = a.astype(np.float64) * (1.0 + PERTURB_ULPS * eps * rng.standard_normal(a.shape))
        pert.append(f.astype(a.dtype))
    return pert if any_float else None


def _try_run(run, pert):
    """(outputs, None), or (None, "Type: message") when the run raised: a perturbed run may e.g.
    loop longer; the goldens stand without spreads."""
    try:
        return run(pert), None
    except Exception as e:
        return None, "%s: %s" % (type(e).__name__, e)


def _no_spreads(failure):
    log.info("xla_infergoldens: no spreads: the perturbed run failed: %s", failure)
    return {}


def _may_fork():
    """True when the perturbed run can go to a forked process beside the goldens run: fork exists,
    this process may use more than one core, and it has no other thread (a fork copies only the
    calling thread; a lock another thread held would stay held in the child)."""
    if not hasattr(os, "fork"):
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    if cores < 2:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        import threading
        return threading.active_count() == 1


class _ForkedRun:
    """``run(args)`` in a forked child while this process goes on; ``result()`` is what
    ``_try_run(run, args)`` would have returned here. The child's result comes back pickled through
    a pipe; it prints nothing and ends with os._exit (no exit hooks, no stdio flushed twice).

    The child is this process's helper, not a tool of its own: faulthandler is off in it (a crash
    there is a failed perturbed run, reported as no spreads, not a second traceback on the
    console), and it ends when this process does, however that happens: it holds the read end of
    a lifeline pipe whose only write end is here, and a thread of its own exits when the pipe
    reads end-of-file (portable where PR_SET_PDEATHSIG is Linux's alone)."""

    def __init__(self, run, args):
        import pickle

        sys.stdout.flush()
        sys.stderr.flush()
        r, w = os.pipe()
        life_r, life_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                os.close(r)
                os.close(life_w)
                _child_setup(life_r)
                res = _try_run(run, args)
                try:
                    data = pickle.dumps(res, protocol=pickle.HIGHEST_PROTOCOL)
                except Exception as e:   # an output pickle cannot carry: no spreads, said so
                    data = pickle.dumps((None, "the perturbed run's outputs cannot be returned: %s" % e))
                with os.fdopen(w, "wb") as f:
                    f.write(data)
                status = 0
            finally:
                os._exit(status)
        os.close(w)
        os.close(life_r)
        self.pid, self.fd, self.lifeline = pid, r, life_w

    def result(self):
        import pickle

        with os.fdopen(self.fd, "rb") as f:
            data = f.read()
        _, status = os.waitpid(self.pid, 0)
        os.close(self.lifeline)
        if not data or os.waitstatus_to_exitcode(status) != 0:
            return None, "the forked perturbed run ended with status %d" % os.waitstatus_to_exitcode(status)
        return pickle.loads(data)

    def cancel(self):
        import signal

        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        os.close(self.fd)
        os.close(self.lifeline)
        os.waitpid(self.pid, 0)


def _child_setup(lifeline):
    """In the forked child: faulthandler off, and a daemon thread that ends the child when the
    parent's end of ``lifeline`` closes (the parent ended)."""
    import faulthandler
    import threading

    faulthandler.disable()

    def watch():
        try:
            while os.read(lifeline, 1):
                pass
        except OSError:
            pass
        os._exit(1)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()


def _spreads(module, outputs, outs2):
    """{output index: float32 |out - out'|} of the float outputs (output_spreads)."""
    res = [s for s in module.entry.root.shape.leaves() if s.is_array]
    spreads = {}
    for i, (o, o2) in enumerate(zip(outputs, outs2)):
        dt = res[i].numpy_dtype() if i < len(res) else np.asarray(o).dtype
        if _float_eps(dt) is None:
            continue
        a = _typed(o, res[i]) if i < len(res) else np.asarray(o)
        b = _typed(o2, res[i]) if i < len(res) else np.asarray(o2)
        with np.errstate(invalid="ignore", over="ignore"):
            d = np.abs(np.asarray(a).astype(np.float64) - np.asarray(b).astype(np.float64))
        d = np.where(np.isfinite(d), d, 0.0)
        spreads[i] = np.ascontiguousarray(d.astype(np.float32).reshape(np.shape(a)))
    return spreads


_NATIVE_KINDS = frozenset("biufcUSV")
_NUMPY_FLOATS = frozenset(np.dtype(t) for t in (np.float16, np.float32, np.float64, np.longdouble))


def _storable(a):
    """A as np.save can write and np.load read back: ml_dtypes arrays (bf16, the f8s) as raw bits.
    (np.save writes float8_e5m2 with the descriptor '<f1', which np.load refuses.)"""
    a = np.asarray(a)
    if a.dtype.kind == "V" and a.dtype.fields is None and a.dtype.type is np.void:
        return a
    if a.dtype.kind not in _NATIVE_KINDS or (a.dtype.kind in "fV" and a.dtype not in _NUMPY_FLOATS):
        return np.ascontiguousarray(a).view(np.dtype("V%d" % a.dtype.itemsize))
    return a


def write_npz(path, inputs, outputs, spreads=None, extra=None):
    """Write input{i}/output{i} (and spread{i}, {i: array}) atomically (temp file + rename)."""
    d = {"input%d" % i: _storable(a) for i, a in enumerate(inputs)}
    d.update(("output%d" % i, _storable(np.asarray(a, order="C"))) for i, a in enumerate(outputs))  # keeps rank 0
    d.update(("spread%d" % i, np.asarray(a)) for i, a in (spreads or {}).items())
    d.update(extra or {})
    try:
        with toolshell.atomic_output(path, suffix=".npz") as tmp, open(tmp, "wb") as f:
            np.savez(f, **d)
    except InputFileError as e:
        raise toolshell.named(e, PROG) from None


# --- random inputs ----------------------------------------------------------------


def index_limits(module):
    """{(parameter number, leaf index): exclusive upper bound} for entry parameters that
    feed gather/scatter/dynamic-slice indices (through shape ops, converts, selects, calls)."""
    callers = {}
    for comp in module.computations.values():
        for inst in comp.instructions:
            for c in inst.called_computations:
                callers.setdefault(id(c), []).append(inst)
    limits = {}
    work = []
    for comp in module.computations.values():
        for inst in comp.instructions:
            for op, lim in _index_uses(inst):
                work.append((op, lim))
    seen = set()
    while work:
        inst, lim = work.pop()
        key = (id(inst), lim)
        if key in seen or lim is None:
            continue
        seen.add(key)
        opc = inst.opcode
        if opc == "parameter":
            comp = inst.parent
            if comp is module.entry:
                pn = inst.parameter_number
                limits[pn] = min(limits.get(pn, lim), lim)
            else:
                for call in callers.get(id(comp), ()):
                    if call.opcode == "call" and inst.parameter_number < len(call.operands):
                        work.append((call.operands[inst.parameter_number], lim))
        elif opc in _PASS_THROUGH:
            for op in inst.operands[:1] if opc not in ("concatenate",) else inst.operands:
                work.append((op, lim))
        elif opc == "select":
            work.extend((op, lim) for op in inst.operands[1:])
        elif opc == "clamp":
            work.append((inst.operands[1], lim))
        elif opc == "call":
            comp = inst.called_computations[0] if inst.called_computations else None
            if comp is not None:
                work.append((comp.root, lim))
    return limits


def _index_uses(inst):
    """(operand instruction, exclusive bound) for each index operand of ``inst``."""
    from neuronxcc.hlo.interp_attrs import gather_dims, int_list, scatter_dims
    opc = inst.opcode
    try:
        if opc == "gather":
            g = gather_dims(inst)
            opnd = inst.operands[0].shape.dims
            sizes = g["slice_sizes"]
            lim = min([opnd[d] - sizes[d] + 1 for d in g["start_index_map"]] or [1])
            return [(inst.operands[1], max(lim, 1))]
        if opc == "scatter":
            s = scatter_dims(inst)
            n = (len(inst.operands) - 1) // 2
            opnd = inst.operands[0].shape.dims
            upd = inst.operands[n + 1].shape.dims
            uwd = s["update_window_dims"]
            wdims = [d for d in range(len(opnd)) if d not in s["inserted_window_dims"]
                     and d not in s["input_batching_dims"]]
            lims = []
            for d in s["scatter_dims_to_operand_dims"]:
                w = upd[uwd[wdims.index(d)]] if d in wdims else 1
                lims.append(opnd[d] - w + 1)
            return [(inst.operands[n], max(min(lims or [1]), 1))]
        if opc == "dynamic-slice":
            sizes = int_list(inst, "dynamic_slice_sizes") or list(inst.shape.dims)
            opnd = inst.operands[0].shape.dims
            return [(op, max(opnd[d] - sizes[d] + 1, 1)) for d, op in enumerate(inst.operands[1:])
                    if d < len(opnd)]
        if opc == "dynamic-update-slice":
            opnd = inst.operands[0].shape.dims
            upd = inst.operands[1].shape.dims
            return [(op, max(opnd[d] - upd[d] + 1, 1)) for d, op in enumerate(inst.operands[2:])
                    if d < len(opnd)]
    except (IndexError, ValueError, HloVerifyError):
        return []
    return []


_SCALE_THROUGH = {"convert", "reshape", "broadcast", "bitcast", "copy", "transpose", "slice", "reverse",
                  "optimization-barrier"}


def dot_fan_in(module):
    """{entry parameter number: contracted size K} for float parameters that feed a dot operand
    (through shape ops and converts): their golden inputs are drawn with variance 1/K, so a stack
    of dots keeps its activations near unit scale (N(0,1) weights grow them by sqrt(K) a layer)."""
    fan = {}
    for comp in module.computations.values():
        for inst in comp.instructions:
            if inst.opcode != "dot":
                continue
            for side, op in (("lhs", inst.operands[0]), ("rhs", inst.operands[1])):
                dims = op.shape.dims
                k = 1
                for d in inst.attrs.get(side + "_contracting_dims", ()) or ():
                    if 0 <= d < len(dims):
                        k *= int(dims[d])
                while op.opcode in _SCALE_THROUGH and op.operands:
                    op = op.operands[0]
                if op.opcode == "parameter" and op.parent is module.entry and k > 1:
                    fan[op.parameter_number] = max(fan.get(op.parameter_number, 1), k)
    return fan


def random_inputs(module, seed=0, scale_dots=True):
    """Seeded inputs for the entry's parameter leaves, valid for each dtype and index use; a
    parameter a model directory binds to a weight (``module.weight_parameters``) gets the weight.
    Floats are N(0,1), scaled by 1/sqrt(K) when they feed a dot contracting K (``dot_fan_in``);
    integers that index (gather/scatter/dynamic-slice) stay inside the indexed extent."""
    rng = np.random.default_rng(seed)
    limits = index_limits(module)
    fan = dot_fan_in(module) if scale_dots else {}
    weights = getattr(module, "weights", {})
    bound = getattr(module, "weight_parameters", {})
    out = []
    for p in module.entry.parameters:
        if p.parameter_number in bound:          # a model directory's weight (checked against the shape)
            out.append(np.array(weights[bound[p.parameter_number]]))
            continue
        for s in p.shape.leaves():
            if not s.is_array:
                continue
            dt = s.numpy_dtype()
            dims = s.dims
            if p.parameter_number in limits and dt.kind in "iu":
                a = rng.integers(0, limits[p.parameter_number], size=dims)
            elif dt == np.bool_:
                a = rng.random(size=dims) < 0.5
            elif dt.kind == "i":
                a = rng.integers(-8, 8, size=dims)
            elif dt.kind == "u":
                a = rng.integers(0, 16, size=dims)
            elif dt.kind == "c":
                a = rng.standard_normal(size=dims) + 1j * rng.standard_normal(size=dims)
            else:
                a = rng.standard_normal(size=dims, dtype=np.float32)
                if p.parameter_number in fan:
                    a = a / np.float32(np.sqrt(fan[p.parameter_number]))
            out.append(np.asarray(a).astype(dt))
    return out


if __name__ == "__main__":
    sys.exit(main())
