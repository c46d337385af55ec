"""The one place numerical tolerances are stated, and the one comparison (``mismatch``).

Two rows per element type:
  interpreter  the HLO reference interpreter (xla_infergoldens) against XLA:CPU
               (``jax.jit(f)(...)``);
  compiled     compiled code run on birsim against a reference (the compiler's own bir_sim
               check against the goldens, and every test of compiled code against jax/numpy).

A result ``a`` matches a reference ``b`` when every element satisfies
``|a - b| <= atol * scale + rtol * |b|`` with ``scale = max(1, max|b|)`` over the finite elements
of ``b`` (absolute error is judged against the tensor's magnitude, so sums of many terms are not
held to a per-element bound they cannot meet), plus ``SPREAD_K * spread`` elementwise when the
caller passes the reference's own sensitivity (``spread``, see walrus/passes/simcheck.py); non-finite
elements agree exactly (NaN matches NaN, an infinity the same infinity). Integers and pred are
bit-exact (``None`` below); complex numbers compare their real and imaginary parts.

Why these numbers. Interpreter: f32 results differ from XLA:CPU by summation order and by the
transcendental approximations XLA:CPU uses (a few ulp, ~1e-6 relative); 1e-5 leaves room for
chains of such ops; bf16 has an 8-bit significand (ulp = 2^-7 relative at worst), two ulps cover
one extra rounding step. Compiled: fp32 leaves room for a different summation order in K-tiled
matmuls and reductions and the engines' activation-function approximations; the narrow floats for
one rounding step.

Cast rows (``--auto-cast``): fp32 data whose matmul operands the compiler rounded to a narrow type
(``matmult``/``all``, products accumulated in fp32 in PSUM, the result fp32), compared with an fp32
reference computed on the unrounded operands, is judged by ``CAST_TOLERANCES[type]`` under the
precision name ``cast_precision(type)`` (``"f32/matmult-bf16"``), usable wherever a dtype is. Each
operand rounding has relative error <= u (the type's unit roundoff, RNE), so a product is off by
<= 2u of its size and a K-term dot by a sum of K such errors of random sign: about u * sqrt(K) *
rms(a_k b_k), while the tensor's largest element grows as sqrt(K) * rms(a_k b_k) too (or as K when
the data have a mean). Against ``atol * max|reference|`` the error therefore does not grow with the
contracted size; measured on N(0,1) and N(0.5,1) data at K = 64 .. 16384 the worst element stayed
below 0.8u of the tensor's magnitude for bf16, fp16 and fp8_e4m3 (tests/common/test_cast_tolerance.py
pins that), so no K factor is needed. 4u leaves room for the elementwise chains after the matmul
(gelu, softmax's exp of a logit off by u * |logit|). The same rows judge the compile's own bir_sim
check under ``--auto-cast matmult``: the goldens round the operands the same way, but an operand
computed on chip may land on the other side of a rounding boundary than the golden's (one ulp of the
narrow type in that element), which is the same size of error.
"""
import numpy as np

from neuronxcc.common import dtypes as _dt

__all__ = ["TOLERANCES", "ROWS", "SPREAD_K", "CAST_UNIT_ROUNDOFF", "CAST_TOLERANCES", "cast_precision",
           "tolerance", "mismatch", "assert_close"]

ROWS = ("interpreter", "compiled")

# HLO element type (a BIR-only type: its BIR name) -> {row: (rtol, atol) or None (exact)}. A type not listed is exact in both rows.
TOLERANCES = {
    "f64": {"interpreter": (1e-12, 1e-12), "compiled": (1e-3, 1e-4)},
    "f32": {"interpreter": (1e-5, 1e-5), "compiled": (1e-3, 1e-4)},
    "f16": {"interpreter": (2e-3, 2e-3), "compiled": (5e-3, 1e-3)},
    "bf16": {"interpreter": (1.6e-2, 1.6e-2), "compiled": (2e-2, 1e-2)},
    "f8e4m3fn": {"interpreter": (1.3e-1, 1.3e-1), "compiled": (1.25e-1, 1e-2)},
    "f8e5m2": {"interpreter": (2.5e-1, 2.5e-1), "compiled": (2.5e-1, 1e-2)},
    "f8e4m3": {"interpreter": None, "compiled": (1.25e-1, 1e-2)},
    # tf32 (BIR-only, keyed by its BIR name): 11 significant bits as fp16, fp32's range
    "tfloat32": {"interpreter": (2e-3, 2e-3), "compiled": (5e-3, 1e-3)},
    "c64": {"interpreter": (1e-5, 1e-5), "compiled": None},      # real and imaginary parts each as f32
    "c128": {"interpreter": (1e-12, 1e-12), "compiled": None},
}
# --auto-cast-type -> unit roundoff of the type the PE operands are rounded to (RNE: half an ulp at 1),
# from the registry: bf16 8 significant bits (2^-8), fp16 and tf32 11 (2^-11), fp8_e4m3 (Neuron's
# FP8_EXP4) 4 (2^-4).
CAST_UNIT_ROUNDOFF = {t: _dt.by_name(t).unit_roundoff for t in _dt.AUTO_CAST_TYPES}
CAST_K = 4.0
# precision name -> {row: (rtol, atol)}: fp32 results of matmuls on operands rounded to the type
CAST_TOLERANCES = {"f32/matmult-%s" % t: {"interpreter": (CAST_K * u, CAST_K * u), "compiled": (CAST_K * u, CAST_K * u)}
                   for t, u in CAST_UNIT_ROUNDOFF.items()}


def cast_precision(type_flag):
    """The precision name of fp32 results computed through matmuls on operands rounded to
    ``type_flag`` (an --auto-cast-type spelling); a key of CAST_TOLERANCES, usable as a dtype."""
    name = "f32/matmult-%s" % type_flag
    if name not in CAST_TOLERANCES:
        raise ValueError("no cast tolerance for --auto-cast-type %r (one of %s)"
                         % (type_flag, ", ".join(CAST_UNIT_ROUNDOFF)))
    return name


# The reference's spread (its own change under a few-ulp perturbation of the inputs) is one
# sample; a different but correct evaluation lands anywhere in a similar cloud, so a few times it.
SPREAD_K = 4.0


def _row_of(dtype):
    if isinstance(dtype, str):
        return _dt.by_name(dtype) if dtype in _dt.BY_NAME or dtype in _dt.ALIASES else None
    name = _dt.hlo_name_of(dtype)
    return _dt.by_hlo(name) if name else None


def tolerance(dtype, row="interpreter"):
    """(rtol, atol) for ``dtype`` (a numpy dtype, an HLO or a BIR name, or a cast precision name
    from ``cast_precision``) in ``row``; None: exact."""
    if row not in ROWS:
        raise ValueError("tolerance row must be one of %s, not %r" % (ROWS, row))
    if isinstance(dtype, str) and dtype in CAST_TOLERANCES:
        return CAST_TOLERANCES[dtype][row]
    d = _row_of(dtype)
    if d is None:
        return None
    return TOLERANCES.get(d.hlo or d.name, {}).get(row)


def mismatch(actual, expected, row="interpreter", dtype=None, spread=None, what="result",
             reference="the reference"):
    """'' when ``actual`` matches ``expected`` within ``row``'s tolerance for ``dtype`` (default:
    ``expected``'s dtype), else one line naming ``what``, the count and the worst element.

    The interpreter row also requires the same numpy dtype; compiled code may store a type in
    another host type (BIR ``bool`` is uint8) and is compared by value."""
    a = np.asarray(actual)
    b = np.asarray(expected)
    if a.shape != b.shape:
        return "%s has shape %s, %s %s" % (what, list(a.shape), reference, list(b.shape))
    if row == "interpreter" and a.dtype != b.dtype:
        return "%s has dtype %s, %s %s" % (what, a.dtype, reference, b.dtype)
    tol = tolerance(b.dtype if dtype is None else dtype, row)
    if tol is not None and b.dtype.kind == "c":
        for part, fn in (("real part", np.real), ("imaginary part", np.imag)):
            why = _compare(fn(a), fn(b), tol, None, "%s (%s)" % (what, part), reference, b.dtype)
            if why:
                return why
        return ""
    return _compare(a, b, tol, spread, what, reference, b.dtype if dtype is None else dtype)


def _compare(a, b, tol, spread, what, reference, dtype_name):
    if tol is None:
        if a.dtype.kind == "c" or b.dtype.kind == "c":
            g, w = a, b
        else:
            g = a.astype(np.int64) if a.dtype != np.uint64 and a.dtype.kind in "biu" else a
            w = b.astype(np.int64) if b.dtype != np.uint64 and b.dtype.kind in "biu" else b
        with np.errstate(invalid="ignore"):
            bad = ~((g == w) | (_isnan(g) & _isnan(w)))
            err = np.where(bad, np.abs(np.asarray(g, np.complex128 if g.dtype.kind == "c" else np.float64)
                                       - np.asarray(w, np.complex128 if w.dtype.kind == "c" else np.float64)), 0.0)
        tol_text = "exact"
    else:
        rtol, atol = tol
        with np.errstate(invalid="ignore", over="ignore"):     # NaNs of f8/bf16 widen with a warning
            g = a.astype(np.float64)
            w = b.astype(np.float64)
        fin = np.isfinite(w)
        # An all-finite reference (the common case) needs neither the masks nor the exact
        # matching of non-finite values below: the same test in a third of the array passes.
        all_fin = bool(fin.all())
        absw = np.abs(w)
        if all_fin:
            scale = max(1.0, float(np.max(absw))) if w.size else 1.0
        else:
            scale = max(1.0, float(np.max(absw[fin]))) if fin.any() else 1.0
        extra = 0.0
        if spread is not None and np.size(spread) == w.size:
            sp = np.asarray(spread, np.float64).reshape(w.shape)
            extra = SPREAD_K * (sp if np.isfinite(sp).all() else np.nan_to_num(sp, nan=0.0, posinf=0.0))
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(g - w)
            if all_fin:      # a NaN or inf got gives a NaN or inf err: not <=, so bad
                ok = err <= atol * scale + rtol * absw + extra
            else:
                both_nan = np.isnan(g) & np.isnan(w)
                same_inf = np.isinf(g) & np.isinf(w) & (np.sign(g) == np.sign(w))
                ok = np.where(fin, err <= atol * scale + rtol * np.where(fin, absw, 0.0) + extra,
                              both_nan | same_inf)       # a non-finite reference is matched exactly
            bad = ~ok
        err = np.where(bad, np.where(np.isnan(err), np.inf, err), 0.0)
        tol_text = "%g + rtol %g*|want|%s" % (atol * scale, rtol, " + %g*spread" % SPREAD_K if spread is not None
                                              else "")
    nbad = int(np.count_nonzero(bad))
    if not nbad:
        return ""
    err = np.abs(err)
    k = int(np.argmax(err))
    idx = [int(j) for j in np.unravel_index(k, a.shape)] if a.ndim else []
    return ("%s (%s%s) differs from %s at %d of %d elements; worst |got - want| = %.6g at %s "
            "(got %r, want %r; tolerance %s)"
            % (what, dtype_name, list(a.shape), reference, nbad, a.size, float(err.reshape(-1)[k]), idx,
               a.reshape(-1)[k].item(), b.reshape(-1)[k].item(), tol_text))


def _isnan(x):
    return np.isnan(x) if x.dtype.kind in "fc" else np.zeros(x.shape, bool)


def assert_close(actual, expected, what="result", row="interpreter", dtype=None):
    """AssertionError with ``mismatch``'s line when ``actual`` does not match ``expected``."""
    why = mismatch(actual, expected, row=row, dtype=dtype, what=what)
    if why:
        raise AssertionError(why)
