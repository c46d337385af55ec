#!/usr/bin/env python3
"""Probe the compiler with the HLO real clients bring, end to end, and classify what happens.

Every case is handed to ``neuronx-cc compile MODEL --framework XLA --target trn1 --output x.neff``
as a separate process (as libneuronxla does), and a NEFF it writes is run on birsim and compared
with XLA:CPU (JAX) within ``neuronxcc.common.tolerances``. Sources:

* ``lax``      - tests/hlo/test_interp_lax.py's single-op cases (edge semantics XLA's own op tests
                 check: saturating converts, NaN ordering, out-of-range shifts, window/pad forms ...);
* ``lax64``    - its 64-bit cases (jax_enable_x64; the device computes 64-bit integers in 32 bits);
* ``programs`` - tests/hlo/test_interp_programs.py's whole programs (decode step, ResNet training,
                 Adam, vmap, scan ...), so far only run through the interpreter;
* ``pieces``   - common model pieces as JAX emits them (scripts/probe_hlo_cases.py);
* ``offcpu``   - JAX programs as JAX lowers them for a platform without LAPACK custom calls (as a
                 Neuron client does: the cholesky / triangular-solve opcodes), XLA:CPU's results;
* ``scale``    - one layer of real models at their own widths (BERT-base, a Llama MLP in bf16,
                 a 32k-vocab LM head with its gradient, a ResNet conv/BN block, GQA decode);
* ``text``     - hand-written HLO text in the forms XLA's HLO tests and torch-xla use
                 (scripts/probe_hlo_cases.py), XLA:CPU as the reference;
* ``xlaops``   - more of both (scripts/probe_hlo_xla.py): XLA's op semantics at their edges
                 (integer division by zero, roundings, reduce-precision, opt-barrier, clamp with
                 scalar bounds, sorts and reductions along major dimensions ...) and forms
                 jax.nn / jnp emit (activations, remat, take / pad modes, searchsorted, switch).

Outcome per case: ``pass``; ``unsupported`` (exit 70, one NCC_ line naming an op / type the
device lowering refuses: correct behaviour when no real client needs it); ``error70`` (exit 70
with some other NCC_ line); ``wrong`` (a NEFF whose results differ: always a bug); ``crash`` (an
exit status other than 0/70, a traceback on the console, or birsim raising: always a bug);
``narrow64`` (results that differ only in 64-bit outputs, which the device computes in 32 bits as
the README says, or any results of a case whose 64-bit integer inputs hold values beyond 32 bits,
which the device holds as their low word); ``timeout``.

    python scripts/probe_hlo.py [--sources lax,lax64,programs,pieces,text,offcpu,scale,xlaops] [-k SUBSTR]
                                [--client plain|nxd|zml] [--table out.md] [--keep DIR]

Prints one table and a summary; never asserts.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))
sys.path.insert(0, HERE)
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import numpy as np  # noqa: E402

import jax  # noqa: E402

from neuronxcc.common.tolerances import mismatch  # noqa: E402
from support.cli import _env, ncc_command  # noqa: E402

MEM_LIMIT = 6000000000


def _jax_cases(source, table):
    for name, (fn, args) in sorted(table.items()):
        yield source, name, ("jax", fn, list(args))


def collect(sources):
    import probe_hlo_cases
    out = []
    if "lax" in sources:
        from hlo import test_interp_lax
        out += list(_jax_cases("lax", test_interp_lax.CASES))
    if "lax64" in sources:
        from hlo import test_interp_lax
        out += [("lax64", n, ("jax64", fn, list(args))) for n, (fn, args) in sorted(test_interp_lax.X64_CASES.items())]
    if "programs" in sources:
        from hlo import test_interp_programs
        out += list(_jax_cases("programs", test_interp_programs.PROGRAMS))
    if "pieces" in sources:
        out += list(_jax_cases("pieces", probe_hlo_cases.PIECES))
    if "offcpu" in sources:
        out += [("offcpu", n, ("jaxoff", fn, list(args))) for n, (fn, args) in sorted(probe_hlo_cases.OFFCPU.items())]
    if "scale" in sources:
        out += list(_jax_cases("scale", probe_hlo_cases.SCALE))
    if "text" in sources:
        for name, (text, args) in sorted(probe_hlo_cases.TEXTS.items()):
            out.append(("text", name, ("text", text, list(args))))
    if "xlaops" in sources:
        import probe_hlo_xla
        out += list(_jax_cases("xlaops", probe_hlo_xla.PIECES))
        for name, (text, args) in sorted(probe_hlo_xla.TEXTS.items()):
            out.append(("xlaops", name, ("text", text, list(args))))
    return out


def _model_and_reference(kind, a, b):
    """(model bytes or text, file suffix, inputs, reference outputs or None, reference name)."""
    if kind == "jax64":
        jax.config.update("jax_enable_x64", True)
        try:
            return _model_and_reference("jax", a, b)
        finally:
            jax.config.update("jax_enable_x64", False)
    if kind == "jaxoff":
        from jax import export
        from jax._src.lib import _jax
        fn, args = a, b
        mlir = export.export(jax.jit(fn), platforms=["tpu"])(*args).mlir_module()
        comp = _jax.mlir.mlir_module_to_xla_computation(mlir, use_tuple_args=False, return_tuple=False)
        ref = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
        return comp.as_serialized_hlo_module_proto(), ".hlo_module.pb", args, ref, "jax"
    if kind == "jax":
        fn, args = a, b
        lowered = jax.jit(fn).lower(*args)
        comp = lowered.compiler_ir("hlo")
        ref = [np.asarray(o) for o in jax.tree_util.tree_leaves(jax.jit(fn)(*args))]
        # JAX drops the arguments a program does not read from its HLO (and from the call)
        kept = (getattr(lowered, "_lowering", None) and lowered._lowering.compile_args.get("kept_var_idx"))
        if kept is not None:
            args = [x for k, x in enumerate(args) if k in kept]
        return comp.as_serialized_hlo_module_proto(), ".hlo_module.pb", args, ref, "jax"
    text, args = a, b
    from support.corpus import xla_run
    try:
        jax.config.update("jax_enable_x64", True)      # s64 / u64 parameters stay 64-bit
        try:
            return text, ".hlo", args, xla_run(text, args), "xla"
        finally:
            jax.config.update("jax_enable_x64", False)
    except Exception as e:  # noqa: BLE001 - XLA:CPU refusing the text: fall back to the interpreter
        from neuronxcc.hlo import parse_hlo_text
        from neuronxcc.hlo.interpreter import evaluate
        try:
            return text, ".hlo", args, [np.asarray(o) for o in evaluate(parse_hlo_text(text), list(args))], "interp"
        except Exception as e2:  # noqa: BLE001
            return text, ".hlo", args, None, "none (%s / %s)" % (type(e).__name__, type(e2).__name__)


def _ncc_line(stderr):
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    codes = [ln for ln in lines if "NCC_" in ln]
    return (codes[-1] if codes else (lines[-1] if lines else "")).strip()


# the flags real clients add (docs/reference: NxD's defaults, ZML's libneuronxla argv)
CLIENT_FLAGS = {
    "plain": [],
    "nxd": ["--auto-cast=none", "--model-type=transformer", "-O1", "--enable-saturate-infinity",
            "--enable-internal-neff-wrapper", "--verbose=35"],
    "zml": ["--enable-internal-neff-wrapper", "--optlevel=1", "--model-type=transformer", "--auto-cast=none",
            "--enable-fast-loading-neuron-binaries"],
}


def run_case(case, workdir, timeout, client="plain"):
    source, name, (kind, a, b) = case
    model, suffix, args, ref, refname = _model_and_reference(kind, a, b)
    path = os.path.join(workdir, ("file.code" if client == "zml" else "model" + suffix))
    with open(path, "wb" if isinstance(model, bytes) else "w") as f:
        f.write(model)
    neff = os.path.join(workdir, "out.neff")
    cmd = ["prlimit", "--as=%d" % MEM_LIMIT] + ncc_command() + [
        "compile", path, "--framework", "XLA", "--target", "trn1", "--output", neff] + CLIENT_FLAGS[client]
    t0 = time.time()
    try:
        r = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=_env())
    except subprocess.TimeoutExpired:
        return "timeout", "compile > %d s" % timeout, time.time() - t0
    dt = time.time() - t0
    console = r.stdout + r.stderr
    if "Traceback (most recent call last)" in console:
        return "crash", "traceback on the console: " + _ncc_line(r.stderr), dt
    if r.returncode == 70:
        line = _ncc_line(r.stderr)
        unsupported = any(c in line for c in ("NCC_EVRF", "NCC_EUOC", "not supported", "unsupported",
                                              "cannot lower", "not lowered"))
        if not unsupported and "bir_sim" in line and any(t in line for t in ("int64", "float64", "uint64")):
            return "narrow64", line, dt
        return ("unsupported" if unsupported else "error70"), line, dt
    if r.returncode != 0:
        return "crash", "exit %d: %s" % (r.returncode, _ncc_line(r.stderr)), dt
    if not os.path.exists(neff):
        return "crash", "exit 0 without a NEFF", dt
    from neuronxcc.starfish.birsim import run_neff
    try:
        outs = run_neff(neff, list(args))
    except Exception as e:  # noqa: BLE001 - the probe records every failure
        return "crash", "birsim: %s: %s" % (type(e).__name__, str(e).splitlines()[0][:200] if str(e) else ""), dt
    if ref is None:
        return "pass?", "ran; no reference (%s)" % refname, dt
    if len(outs) != len(ref):
        return "wrong", "%d outputs, %s gives %d" % (len(outs), refname, len(ref)), dt
    bad = [(k, why, np.asarray(e).dtype) for k, (o, e) in enumerate(zip(outs, ref))
           for why in [mismatch(np.asarray(o), np.asarray(e))] if why]
    if bad:
        detail = ("vs %s: " % refname) + "; ".join("output%d: %s" % (k, why) for k, why, _ in bad)[:300]
        # the device computes 64-bit types in 32 bits (README): a difference only there is that
        if all(d.itemsize == 8 for _, _, d in bad):
            return "narrow64", detail, dt
        wide = [k for k, a in enumerate(args) if _beyond_32_bits(a)]
        if wide:    # the device holds a 64-bit input as its low word: everything computed from it differs
            return "narrow64", "inputs %s need 64 bits; %s" % (wide, detail), dt
        return "wrong", detail, dt
    return "pass", "vs " + refname, dt


def _beyond_32_bits(a):
    """True for a 64-bit integer input holding a value outside the 32-bit word the device keeps."""
    a = np.asarray(a)
    if a.dtype.kind not in "iu" or a.dtype.itemsize != 8 or a.size == 0:
        return False
    lo, hi = (-2 ** 31, 2 ** 31 - 1) if a.dtype.kind == "i" else (0, 2 ** 32 - 1)
    return bool((a < lo).any() or (a > hi).any())


def _run_or_skip(case, d, timeout, client):
    try:
        return run_case(case, d, timeout, client)
    except Exception as e:  # noqa: BLE001 - a case JAX itself cannot lower or run
        return "skipped", "reference: %s: %s" % (type(e).__name__, str(e)[:150]), 0.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sources", default="lax,lax64,programs,pieces,text,offcpu,scale,xlaops")
    ap.add_argument("-k", default="", help="only cases whose source/name contains this")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--client", choices=sorted(CLIENT_FLAGS), default="plain",
                    help="add the flags this client passes (nxd: NxD's defaults; zml: libneuronxla's argv)")
    ap.add_argument("--table", help="also write the table (markdown) here")
    ap.add_argument("--keep", help="compile each case in KEEP/<source>.<case> and keep it (logs, NEFF)")
    a = ap.parse_args(argv)
    cases = [c for c in collect(a.sources.split(",")) if a.k in "%s/%s" % (c[0], c[1])]
    rows = []
    for case in cases:
        if a.keep:
            d = os.path.join(a.keep, "%s.%s" % case[:2])
            os.makedirs(d, exist_ok=True)
            outcome, detail, dt = _run_or_skip(case, d, a.timeout, a.client)
        else:
            with tempfile.TemporaryDirectory(prefix="probe_hlo_") as d:
                outcome, detail, dt = _run_or_skip(case, d, a.timeout, a.client)
        rows.append((case[0], case[1], outcome, dt, detail))
        print("%-9s %-34s %-11s %6.1fs  %s" % (case[0], case[1], outcome, dt, detail), flush=True)
    counts = {}
    for r in rows:
        counts[r[2]] = counts.get(r[2], 0) + 1
    total = sum(v for k, v in counts.items() if k != "skipped")
    summary = "passed %d of %d (%s)" % (counts.get("pass", 0), total,
                                       ", ".join("%s %d" % kv for kv in sorted(counts.items())))
    print(summary)
    if a.table:
        with open(a.table, "w") as f:
            f.write("| source | case | outcome | compile s | detail |\n|---|---|---|---|---|\n")
            for s, n, o, dt, det in rows:
                f.write("| %s | %s | %s | %.1f | %s |\n" % (s, n, o, dt, det.replace("|", "/")))
            f.write("\n%s\n" % summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
