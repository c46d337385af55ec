"""birsim's sequence_bounds (nki.isa.sequence_bounds) is computed without a Python loop over the
elements; it must equal the element-by-element definition: each position gets the start and the
end (exclusive) of its run of equal segment ids, and n / -1 where the id is 0 (padding)."""
import numpy as np
from hypothesis import given, settings, strategies as st

from neuronxcc.starfish.birsim.nki_ops import sequence_bounds


def _by_element(ids):
    n = ids.size
    lo = np.zeros(n, np.int64)
    hi = np.zeros(n, np.int64)
    for i in range(n):
        if ids[i] == 0:
            lo[i] = n
        elif i and ids[i] == ids[i - 1]:
            lo[i] = lo[i - 1]
        else:
            lo[i] = i
    for i in range(n - 1, -1, -1):
        if ids[i] == 0:
            hi[i] = -1
        elif i < n - 1 and ids[i] == ids[i + 1]:
            hi[i] = hi[i + 1]
        else:
            hi[i] = i + 1
    return lo, hi


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([0.0, -0.0, 1.0, 2.0, 3.0, float("nan"), 7.5]), min_size=0, max_size=40))
def test_vectorised_sequence_bounds_match_the_definition(vals):
    ids = np.array(vals, np.float32)
    lo, hi = sequence_bounds(ids)
    want_lo, want_hi = _by_element(ids)
    np.testing.assert_array_equal(lo, want_lo)
    np.testing.assert_array_equal(hi, want_hi)


def test_the_documented_example():
    lo, hi = sequence_bounds(np.array([0, 1, 1, 2, 2, 2, 0, 3], np.float32))
    assert lo.tolist() == [8, 1, 1, 3, 3, 3, 8, 7] and hi.tolist() == [-1, 3, 3, 6, 6, 6, -1, 8]
