"""The one tolerance table and mismatch()."""
import ml_dtypes
import numpy as np
import pytest

from neuronxcc.common import dtypes as R
from neuronxcc.common.tolerances import ROWS, SPREAD_K, TOLERANCES, assert_close, mismatch, tolerance


def test_every_entry_names_a_registered_type_and_both_rows():
    for hlo, rows in TOLERANCES.items():
        assert hlo in R.BY_HLO or R.by_name(hlo).hlo is None      # a BIR-only type by its BIR name
        assert set(rows) == set(ROWS)
    assert tolerance("tf32", "compiled") == TOLERANCES["tfloat32"]["compiled"]


def test_rows_and_lookup_by_any_spelling():
    assert tolerance(np.float32) == (1e-5, 1e-5) == tolerance("f32") == tolerance("float32")
    assert tolerance(np.float32, "compiled") == (1e-3, 1e-4) == tolerance("float32", "compiled")
    assert tolerance(np.int32) is None and tolerance("bool", "compiled") is None
    with pytest.raises(ValueError):
        tolerance(np.float32, "device")


def test_float_within_and_outside():
    b = np.array([1.0, 2.0, 3.0], np.float32)
    assert mismatch(b * (1 + 5e-6), b) == ""
    why = mismatch(b * (1 + 1e-3), b)
    assert "differs from the reference at 3 of 3 elements" in why and "float32" in why
    assert mismatch(b * (1 + 1e-3), b, row="compiled") == ""          # the looser compiled-code row
    assert mismatch(b * (1 + 3e-3), b, row="compiled") != ""


def test_scale_is_the_tensors_magnitude():
    b = np.array([1000.0, 0.0], np.float32)
    assert mismatch(np.array([1000.0, 5e-3], np.float32), b) == ""      # atol * 1000
    assert mismatch(np.array([1000.0, 5e-2], np.float32), b) != ""


def test_non_finite_must_agree():
    b = np.array([np.nan, np.inf, 1.0], np.float32)
    assert mismatch(b.copy(), b) == ""
    assert mismatch(np.array([0.0, np.inf, 1.0], np.float32), b) != ""
    assert mismatch(np.array([np.nan, -np.inf, 1.0], np.float32), b) != ""
    assert mismatch(np.array([np.nan, np.inf, np.nan], np.float32), b) != ""


def test_finite_reference_catches_non_finite_results_and_names_the_worst():
    b = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    for bad in (np.nan, np.inf, -np.inf):
        a = b.copy()
        a[2] = bad
        why = mismatch(a, b)
        assert "at 1 of 4 elements" in why and "at [2]" in why and "worst |got - want| = inf" in why
    why = mismatch(np.array([1.0, 2.5, np.nan, 4.0], np.float32), b)
    assert "at 2 of 4 elements" in why and "at [2]" in why            # NaN counts as the worst
    assert mismatch(np.zeros(0, np.float32), np.zeros(0, np.float32)) == ""


def test_spread_widens_elementwise_and_non_finite_spread_widens_nothing():
    b = np.array([1.0, 1.0], np.float32)
    a = np.array([1.1, 1.1], np.float32)
    assert "at 2 of 2" in mismatch(a, b, row="compiled")
    assert mismatch(a, b, row="compiled", spread=np.array([0.1 / SPREAD_K, 0.1 / SPREAD_K], np.float32)) == ""
    why = mismatch(a, b, row="compiled", spread=np.array([0.1 / SPREAD_K, np.nan], np.float32))
    assert "at 1 of 2" in why and "at [1]" in why
    why = mismatch(a, b, row="compiled", spread=np.array([np.inf, 0.1 / SPREAD_K], np.float32))
    assert "at 1 of 2" in why and "at [0]" in why


def test_integers_and_pred_exact():
    assert mismatch(np.array([1, 2], np.int32), np.array([1, 2], np.int32)) == ""
    assert "exact" in mismatch(np.array([1, 3], np.int32), np.array([1, 2], np.int32))
    assert mismatch(np.array([True]), np.array([False])) != ""
    # compiled code holds bool as uint8: compared by value in the compiled row, not by host type
    assert mismatch(np.array([1, 0], np.uint8), np.array([True, False]), row="compiled", dtype="bool") == ""
    assert "dtype" in mismatch(np.array([1, 0], np.uint8), np.array([True, False]))


def test_shape_and_dtype_named():
    assert "shape" in mismatch(np.zeros(3, np.float32), np.zeros(4, np.float32))
    assert "dtype" in mismatch(np.zeros(3, np.float64), np.zeros(3, np.float32))


def test_bf16_and_complex():
    bf = ml_dtypes.bfloat16
    b = np.array([1.0, 2.0], bf)
    assert mismatch(np.array([1.0078125, 2.0], bf), b) == ""          # one ulp
    assert mismatch(np.array([1.25, 2.0], bf), b) != ""
    c = np.array([1 + 1j, 2 - 1j], np.complex64)
    assert mismatch(c.copy(), c) == ""
    assert "imaginary part" in mismatch(np.array([1 + 1j, 2 - 1.1j], np.complex64), c)


def test_spread_widens_elementwise():
    want = np.array([1.0, 1.0], np.float32)
    got = np.array([1.0, 1.5], np.float32)
    assert mismatch(got, want, row="compiled", spread=np.array([0.0, 0.5 / SPREAD_K + 1e-3])) == ""
    assert mismatch(got, want, row="compiled", spread=np.array([0.5 / SPREAD_K + 1e-3, 0.0])) != ""


def test_assert_close_raises_with_the_line():
    with pytest.raises(AssertionError, match="out0"):
        assert_close(np.array([2.0], np.float32), np.array([1.0], np.float32), "out0")


def test_no_test_or_benchmark_states_its_own_tolerance():
    """Every numerical comparison goes through mismatch / assert_close (this module's rows): no
    numpy allclose / isclose / assert_allclose / almost_equal and no local close helper."""
    import os
    import re
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    pat = re.compile(r"assert_allclose|\ballclose\(|\bisclose\(|almost_equal|^\s*def _?(assert_)?close\((?!self)", re.M)
    bad = []
    for top in ("tests", "scripts", "neuronxcc"):
        for dp, _, fns in os.walk(os.path.join(root, top)):
            for fn in fns:
                path = os.path.join(dp, fn)
                if fn.endswith(".py") and path != os.path.join(root, "neuronxcc", "common", "tolerances.py"):
                    text = open(path, encoding="utf-8").read()
                    bad.extend("%s:%d" % (os.path.relpath(path, root), text.count("\n", 0, m.start()) + 1)
                               for m in pat.finditer(text) if path != os.path.abspath(__file__))
    assert bad == [], "compare with neuronxcc.common.tolerances.mismatch / assert_close:\n" + "\n".join(bad)
