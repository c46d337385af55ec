"""The one place numerical tolerances are stated, per result dtype.

A result ``a`` matches a reference ``b`` (XLA:CPU, i.e. ``jax.jit(f)(...)``)
when every element satisfies ``|a - b| <= atol * scale + rtol * |b|`` with
``scale = max(1, max|b|)`` over the finite elements of ``b`` (absolute error
is judged against the tensor's magnitude, so sums of many terms are not held
to a per-element bound they cannot meet), and non-finite elements agree
exactly (same NaN positions, same infinities). Integers and pred must be
bit-exact.

Why these numbers: f32 results differ from XLA:CPU by summation order and by
the transcendental approximations XLA:CPU uses (a few ulp, ~1e-6 relative);
1e-5 leaves room for chains of such ops. bf16 has an 8-bit significand
(ulp = 2^-7 relative at worst); two ulps cover one extra rounding step.
"""
import numpy as np

import ml_dtypes

# element type -> (rtol, atol); None means exact.
TOLERANCES = {
    "pred": None, "s4": None, "s8": None, "s16": None, "s32": None, "s64": None,
    "u4": None, "u8": None, "u16": None, "u32": None, "u64": None,
    "f64": (1e-12, 1e-12),
    "f32": (1e-5, 1e-5),
    "f16": (2e-3, 2e-3),
    "bf16": (1.6e-2, 1.6e-2),
    "f8e4m3fn": (1.3e-1, 1.3e-1),
    "f8e5m2": (2.5e-1, 2.5e-1),
    "c64": (1e-5, 1e-5),          # real and imaginary parts each as f32
    "c128": (1e-12, 1e-12),
}

_NAMES = {np.dtype(np.bool_): "pred", np.dtype(np.int8): "s8", np.dtype(np.int16): "s16",
          np.dtype(np.int32): "s32", np.dtype(np.int64): "s64", np.dtype(np.uint8): "u8",
          np.dtype(np.uint16): "u16", np.dtype(np.uint32): "u32", np.dtype(np.uint64): "u64",
          np.dtype(np.float16): "f16", np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
          np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(ml_dtypes.float8_e4m3fn): "f8e4m3fn",
          np.dtype(ml_dtypes.float8_e5m2): "f8e5m2", np.dtype(np.complex64): "c64",
          np.dtype(np.complex128): "c128"}


def tolerance(dtype):
    """(rtol, atol) for a numpy dtype, or None for exact comparison."""
    name = _NAMES.get(np.dtype(dtype))
    if name is None:
        return None
    return TOLERANCES[name]


def mismatch(actual, expected):
    """'' when ``actual`` matches ``expected`` within the dtype's tolerance, else a reason."""
    a = np.asarray(actual)
    b = np.asarray(expected)
    if a.shape != b.shape:
        return "shape %s != %s" % (a.shape, b.shape)
    if a.dtype != b.dtype:
        return "dtype %s != %s" % (a.dtype, b.dtype)
    tol = tolerance(b.dtype)
    if tol is None:
        bad = a != b
        if np.any(bad):
            k = int(np.flatnonzero(bad.reshape(-1))[0])
            return "%d of %d elements differ (exact dtype %s); first at flat index %d: %r != %r" % (
                int(bad.sum()), bad.size, b.dtype, k, a.reshape(-1)[k], b.reshape(-1)[k])
        return ""
    if b.dtype.kind == "c":
        for part, fn in (("real part", np.real), ("imaginary part", np.imag)):
            why = _mismatch_float(fn(a), fn(b), tol, b.dtype)
            if why:
                return "%s: %s" % (part, why)
        return ""
    return _mismatch_float(a, b, tol, b.dtype)


def _mismatch_float(a, b, tol, dtype):
    rtol, atol = tol
    with np.errstate(invalid="ignore"):         # NaNs of f8/bf16 widen with a warning
        a64 = a.astype(np.float64)
        b64 = b.astype(np.float64)
    fin = np.isfinite(b64)
    nonfin_a, nonfin_b = a64[~fin], b64[~fin]
    if not np.array_equal(np.isnan(nonfin_a), np.isnan(nonfin_b)) or \
            not np.array_equal(nonfin_a[~np.isnan(nonfin_a)], nonfin_b[~np.isnan(nonfin_b)]):
        return "non-finite elements differ"
    if not np.all(np.isfinite(a64[fin])):
        return "non-finite results where the reference is finite"
    if not np.any(fin):
        return ""
    scale = max(1.0, float(np.max(np.abs(b64[fin]))))
    err = np.abs(a64[fin] - b64[fin])
    allowed = atol * scale + rtol * np.abs(b64[fin])
    bad = err > allowed
    if np.any(bad):
        k = int(np.argmax(err - allowed))
        return "%d of %d elements outside rtol=%g atol=%g*%g (dtype %s); worst: %r vs %r" % (
            int(bad.sum()), bad.size, rtol, atol, scale, dtype, a64[fin][k], b64[fin][k])
    return ""


def assert_close(actual, expected, what="result"):
    why = mismatch(actual, expected)
    if why:
        raise AssertionError("%s: %s" % (what, why))
