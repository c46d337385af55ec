"""bir_sim: run birsim on the golden inputs and compare with the golden outputs.

Owns: the size budget that keeps big compiles fast. The tolerances are the
compiled-code row of ``neuronxcc.common.tolerances`` (the one table).

  * no ``--goldens`` (the driver passes them only when goldens.npz exists):
    skipped, with a log line;
  * over budget -- more than ``sim_budget_instructions`` executed instructions
    (loops multiplied out; a While counts ``max_trips`` or 1000 trips) or more
    than ``sim_budget_bytes`` of I/O tensors: skipped, with a log line; the
    check costs time proportional to the tensors, the compile must not;
  * else ``birsim.simulate`` on inputs ``input{i}`` (in the layout the module
    stores them: ``module.attrs['io_transposes']`` permutations applied; a
    golden of the same element count but another shape, e.g. a scalar as
    [1], is reshaped); every output ``output{i}``
    must satisfy |got - want| <= atol * scale + rtol * |want|, scale = max(1,
    largest finite |want| of that output) (integers and bool:
    exactly, a 64-bit integer golden as the device holds it, its low word;
    NaN matches NaN, inf matches the same inf); otherwise
    NumericalMismatchError naming the output, the worst element and the count;
  * a float output with a ``spread{i}`` in the goldens (the golden's own
    change under a few-ulp perturbation of the inputs, see xla_infergoldens)
    gets ``SPREAD_K * spread`` more, elementwise: an ill-conditioned program
    (a chaotic recurrence on N(0,1) inputs) amplifies rounding differences
    that any correct evaluation order makes, and the golden cannot be trusted
    beyond its own sensitivity. A wrong constant in a well-conditioned program
    has spread ~0, so it is still caught. An output whose largest spread is
    over SPREAD_ILL * scale is ill-conditioned at these inputs: it is logged,
    and every element of it is allowed SPREAD_K * that largest spread -- in a
    chaotic recurrence every element depends on all the others, and one
    perturbed run is one sample (an element whose sample happened to land
    near the golden is no better determined than its neighbours).

The estimated device time of the run (birsim's timeline) goes into the metrics.
"""
import logging

import numpy as np

from neuronxcc import errors
from neuronxcc.common.tolerances import CAST_UNIT_ROUNDOFF, SPREAD_K, cast_precision, mismatch, tolerance
from neuronxcc.walrus.pass_names import bir_sim_skip
from neuronxcc.walrus.program import program
from neuronxcc.walrus.contract import WalrusPass

log = logging.getLogger("neuronxcc.walrus")

WHILE_TRIPS_GUESS = 1000
SPREAD_ILL = 1e-2


def precision_dtype(module, dtype_name):
    """The precision whose tolerance judges an fp32 output of DTYPE_NAME, following what the compile
    cast (module.attrs["auto_cast"], written by the Penguin frontend): under --auto-cast all with
    elementwise operations computed in a narrow type, that type's own row; when only matmul operands
    were rounded (--auto-cast matmult, or all with tf32, whose elementwise results are fp32-sized),
    the cast row of common.tolerances (cast_precision): the goldens round the operands the same way,
    but an operand computed on chip can round to the neighbouring narrow value; else DTYPE_NAME."""
    ac = module.attrs.get("auto_cast") or {}
    narrow = ac.get("dtype")
    counts = ac.get("counts") or {}
    if not narrow or dtype_name not in ("float32", "float64") or not counts:
        return dtype_name
    if counts.get("elementwise") and ac.get("type") != "tf32" and tolerance(narrow, "compiled") is not None:
        return narrow
    if ac.get("type") in CAST_UNIT_ROUNDOFF:
        return cast_precision(ac["type"])
    return dtype_name


def executed_instructions(module, ctx):
    prog = program(module, ctx)
    total = 0
    for s in prog.sites:
        n = 1
        for li in s.loops:
            if li.trip is not None:
                n *= li.trip
            elif li.kind == "while":
                n *= getattr(li.node, "max_trips", None) or WHILE_TRIPS_GUESS
        total += n
    return total


def io_bytes(module):
    return sum(t.nbytes for t in module.tensors.values() if t.kind in ("input", "output"))


def compare(name, got, want, dtype_name, spread=None):
    """None when equal within the compiled-code tolerance of ``dtype_name`` (+ SPREAD_K * spread
    elementwise for floats, when given), else the one-line description of the worst error."""
    got = np.asarray(got)
    want = np.asarray(want)
    if got.shape != want.shape and got.size == want.size:
        got = got.reshape(want.shape)     # e.g. a scalar stored as [1]: same elements, same order
    why = mismatch(got, want, row="compiled", dtype=dtype_name, spread=spread, what=name, reference="the golden")
    return why or None


def device_word(want, dtype):
    """A 64-bit integer golden as the device holds it: its low 32-bit word, sign-extended for
    int64, zero-extended for uint64 (README: int64 is computed in 32 bits on this target)."""
    w = np.asarray(want)
    if w.dtype.kind not in "iu" or w.dtype.itemsize != 8:
        return want
    lo = w.astype(np.uint64) & np.uint64(0xFFFFFFFF)
    if dtype == "uint64":
        return lo.astype(w.dtype)
    return lo.astype(np.uint32).view(np.int32).astype(np.int64).astype(w.dtype)


def ill_conditioned(want, spread):
    """(largest spread, scale) when the output's spread exceeds SPREAD_ILL of its magnitude, else None."""
    if spread is None or np.size(spread) == 0:
        return None
    w = np.asarray(want)
    if w.dtype.kind != "f":      # the largest |value| of a float array is exact in its own type
        w = w.astype(np.float64)
    fin = np.isfinite(w)
    if fin.all():
        scale = max(1.0, float(np.max(np.abs(w)))) if w.size else 1.0
    else:
        scale = max(1.0, float(np.max(np.abs(w[fin])))) if fin.any() else 1.0
    sp = np.asarray(spread, np.float64)
    worst = float(np.max(sp if np.isfinite(sp).all() else np.nan_to_num(sp, nan=0.0, posinf=0.0)))
    return (worst, scale) if worst > SPREAD_ILL * scale else None


WEAK_SPREAD = 0.25


_UNSET = object()


def weak_reason(want, spread, ill=_UNSET):
    """Why a golden output proves little ('' when it does not): non-finite values, or a spread (its
    change under a few-ulp input perturbation) that is a large fraction of its magnitude.
    ``ill``: ``ill_conditioned(want, spread)`` when the caller has it already."""
    w = np.asarray(want)
    if w.dtype.kind not in "fc":
        return ""
    bad = int(np.size(w) - np.count_nonzero(np.isfinite(w)))
    if bad:
        return "has %d non-finite of %d values at the golden inputs" % (bad, np.size(w))
    if ill is _UNSET:
        ill = ill_conditioned(want, spread)
    if ill and ill[0] > WEAK_SPREAD * ill[1]:
        return "moves by up to %.6g (magnitude %.6g) under a few-ulp input change" % ill
    return ""


def run_birsim(module, inputs, target):
    from neuronxcc.starfish.birsim import run_module
    return run_module(module, inputs, target=target)


def random_inputs(module, seed=0):
    """Seeded inputs in module.inputs order: floats N(0,1), integers in [-8, 8) (bool 0/1)."""
    from neuronxcc.starfish.birpy import dtypes as dt
    rng = np.random.default_rng(seed)
    out = []
    for name in module.inputs:
        t = module.tensors[name]
        d = dt.get(t.dtype)
        if t.dtype == "bool":
            a = rng.integers(0, 2, t.shape)
        elif d.is_int:
            lo = 0 if not d.signed else -8
            a = rng.integers(lo, 8, t.shape)
        else:
            a = rng.standard_normal(t.shape)
        out.append(np.asarray(a).astype(d.np))
    return out


def _typed(a, npdt):
    """npz stores ml_dtypes arrays (bf16, fp8) as raw void: view them as the tensor's dtype."""
    a = np.asarray(a)
    if a.dtype.kind == "V" and a.dtype.itemsize == np.dtype(npdt).itemsize:
        return a.view(npdt)
    return a


def _io_permutations(module):
    """{tensor name: permutation} of I/O stored transposed (module.attrs['io_transposes'])."""
    out = {}
    attrs = module.attrs if isinstance(module.attrs, dict) else {}
    for t in attrs.get("io_transposes", []) or []:
        try:
            out[t["name"]] = list(t["permutation"])
        except (KeyError, TypeError):
            continue
    return out


class BirSim(WalrusPass):
    name = "bir_sim"

    def run(self, module, ctx):
        if bir_sim_skip([self.name], bool(ctx.goldens)):
            log.info("bir_sim: skipped: no goldens (goldens.npz absent)")
            ctx.metrics["bir_sim"] = "skipped: no goldens"
            return False
        why = bir_sim_skip([self.name], True, executed_instructions(module, ctx), io_bytes(module), ctx.options)
        if why:
            log.info("bir_sim: skipped: program over the simulation size budget (%s)", why)
            ctx.metrics["bir_sim"] = "skipped: " + why
            return False
        try:
            g = np.load(ctx.goldens)
        except (OSError, ValueError) as e:
            raise errors.InputFileError("bir_sim: cannot read goldens '%s': %s" % (ctx.goldens, e)) from e
        with g:
            keys = set(g.files)
            inputs = []
            for i, name in enumerate(module.inputs):
                k = "input%d" % i
                if k not in keys:
                    raise errors.InputFileError("bir_sim: goldens lack %s (for %s)" % (k, name))
                inputs.append(g[k])
            wants = []
            for i in range(len(module.outputs)):
                k = "output%d" % i
                if k not in keys:
                    raise errors.InputFileError("bir_sim: goldens lack %s" % k)
                wants.append(g[k])
            spreads = [g["spread%d" % i] if "spread%d" % i in keys else None for i in range(len(module.outputs))]
            nranks = int(np.prod(g["rank_space"])) if "rank_space" in keys else 0
        if nranks:
            return self._run_ranks(module, ctx, nranks, inputs, wants, spreads)
        from neuronxcc.starfish.birpy import dtypes as dt
        inputs = [_typed(a, dt.np_dtype(module.tensors[n].dtype)) for a, n in zip(inputs, module.inputs)]
        wants = [_typed(a, dt.np_dtype(module.tensors[n].dtype)) for a, n in zip(wants, module.outputs)]
        perms = _io_permutations(module)
        inputs = [np.transpose(a, perms[n]) if n in perms else a for a, n in zip(inputs, module.inputs)]
        wants = [np.transpose(a, perms[n]) if n in perms else a for a, n in zip(wants, module.outputs)]
        spreads = [np.transpose(a, perms[n]) if a is not None and n in perms and a.ndim == len(perms[n]) else a
                   for a, n in zip(spreads, module.outputs)]    # same layout as the wants
        inputs = [a.reshape(module.tensors[n].shape) if a.size == module.tensors[n].num_elements else a
                  for a, n in zip(inputs, module.inputs)]
        from neuronxcc.starfish.birsim import simulate
        res = simulate(module, inputs, target=ctx.target)
        self._passed(ctx, self._compare(module, res.outputs, wants, spreads, ""))
        ctx.metrics["birsim_estimated_time_s"] = float(res.total_s)
        log.info("bir_sim: %d outputs match the goldens (%d instructions executed, birsim time %.3f us)",
                 len(wants), res.instructions, res.total_s * 1e6)
        return False

    def _run_ranks(self, module, ctx, n, inputs, wants, spreads):
        """Per-rank goldens (a leading rank axis, xla_infergoldens on an N-rank program): every rank
        simulated on its own core (birsim.ranks), each rank's outputs checked."""
        from neuronxcc.starfish.birpy import dtypes as dt
        from neuronxcc.starfish.birsim import simulate_ranks
        perms = _io_permutations(module)

        def per_rank(arrs, names, d):
            out = []
            for a, nm in zip(arrs, names):
                if a is None:
                    out.append(None)
                    continue
                a = _typed(a[d], dt.np_dtype(module.tensors[nm].dtype))
                if nm in perms and a.ndim == len(perms[nm]):
                    a = np.transpose(a, perms[nm])
                out.append(a.reshape(module.tensors[nm].shape) if a.size == module.tensors[nm].num_elements else a)
            return out
        ins = [per_rank(inputs, module.inputs, d) for d in range(n)]
        res = simulate_ranks(module, ins, nranks=n, target=ctx.target)
        weak = []
        for d in range(n):
            weak += self._compare(module, res.outputs[d], per_rank(wants, module.outputs, d),
                                  per_rank(spreads, module.outputs, d), "rank %d " % d)
        s = res.summary()
        self._passed(ctx, weak)
        ctx.metrics["birsim_estimated_time_s"] = float(res.total_s)
        ctx.metrics["birsim_ranks"] = n
        ctx.metrics["birsim_collective_share"] = max(s["collective_share"])
        log.info("bir_sim: %d ranks: every rank's %d outputs match the goldens (birsim time %.3f us, collectives "
                 "up to %.1f%% of it)", n, len(wants), res.total_s * 1e6, 100 * max(s["collective_share"]))
        return False

    @staticmethod
    def _passed(ctx, weak):
        """Record the outcome: 'passed', or 'weak: ...' (matched, but the goldens prove little)."""
        if weak:
            ctx.metrics["bir_sim"] = "weak: " + "; ".join(weak[:3]) + ("; ..." if len(weak) > 3 else "")
            log.warning("bir_sim: the outputs match, but the check is weak: %s", "; ".join(weak))
        else:
            ctx.metrics["bir_sim"] = "passed"

    def _compare(self, module, outputs, wants, spreads, who):
        weak = []
        for i, (got, want, name) in enumerate(zip(outputs, wants, module.outputs)):
            ill = ill_conditioned(want, spreads[i])
            w = weak_reason(want, spreads[i], ill)
            if w:
                weak.append("%soutput%d '%s' %s" % (who, i, name, w))
            spread = spreads[i]
            if ill:
                spread = np.full(np.shape(spread), ill[0], np.float64)   # one sample: use its worst
                log.info("bir_sim: output%d '%s' is ill-conditioned at the golden inputs: a few-ulp change of "
                         "the inputs moves it by up to %.6g (magnitude %.6g); allowing %g * that spread",
                         i, name, ill[0], ill[1], SPREAD_K)
            if module.tensors[name].dtype in ("int64", "uint64"):
                word = device_word(want, module.tensors[name].dtype)
                if not np.array_equal(np.asarray(word), np.asarray(want)):
                    log.warning("bir_sim: %soutput%d '%s' holds 64-bit values beyond 32 bits; the device keeps "
                                "their low 32-bit word (64-bit integers are computed in 32 bits on this "
                                "target), so it is compared on that word", who, i, name)
                want = word
            msg = compare("%soutput%d '%s'" % (who, i, name), got, want,
                          precision_dtype(module, module.tensors[name].dtype), spread)
            if msg:
                if ill:
                    msg += "; the output is ill-conditioned at these inputs (spread up to %.6g)" % ill[0]
                raise errors.NumericalMismatchError("bir_sim: " + msg)
        return weak
