"""Property tests of interpreter building blocks against independent
definitions (ml_dtypes rounding, Python integer arithmetic)."""
import math

import numpy as np
from hypothesis import given, settings, strategies as st

import ml_dtypes

from neuronxcc.hlo.interp_elementwise import (BINARY, convert, reduce_precision, total_order_key)

f32_bits = st.integers(0, 2 ** 32 - 1)
i32 = st.integers(-2 ** 31, 2 ** 31 - 1)


def _f32(bits):
    return np.array(bits, np.uint32).view(np.float32)


@settings(max_examples=120, deadline=None)
@given(st.lists(f32_bits, min_size=1, max_size=64))
def test_reduce_precision_8_7_is_bf16_rounding(bits):
    x = _f32(bits)
    got = reduce_precision(x, 8, 7)
    want = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(np.isnan(got), np.isnan(x))
    fin = ~np.isnan(x)
    assert np.array_equal(got[fin].view(np.uint32), want[fin].view(np.uint32))


@settings(max_examples=120, deadline=None)
@given(st.lists(st.floats(-65000, 65000, width=32), min_size=1, max_size=64))
def test_reduce_precision_5_10_is_f16_rounding_for_normals(vals):
    x = np.array(vals, np.float32)
    x = x[(np.abs(x) >= 2.0 ** -14) | (x == 0)]
    got = reduce_precision(x, 5, 10)
    want = x.astype(np.float16).astype(np.float32)
    assert np.array_equal(got, want)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(i32, i32), min_size=1, max_size=64))
def test_integer_divide_and_remainder_follow_xla(pairs):
    x = np.array([p[0] for p in pairs], np.int32)
    y = np.array([p[1] for p in pairs], np.int32)
    q = BINARY["divide"](x, y)
    r = BINARY["remainder"](x, y)
    for a, b, qq, rr in zip(x.tolist(), y.tolist(), q.tolist(), r.tolist()):
        if b == 0:
            assert qq == -1 and rr == a
        elif a == -2 ** 31 and b == -1:
            assert qq == -2 ** 31 and rr == 0
        else:
            want_q = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
            assert qq == want_q and rr == a - want_q * b


@settings(max_examples=120, deadline=None)
@given(st.lists(f32_bits, min_size=1, max_size=64))
def test_convert_f32_to_s32_truncates_and_saturates(bits):
    x = _f32(bits)
    got = convert(x, np.dtype(np.int32))
    for v, g in zip(x.tolist(), got.tolist()):
        if math.isnan(v):
            want = 0
        elif v >= 2 ** 31:
            want = 2 ** 31 - 1
        elif v <= -2 ** 31:
            want = -2 ** 31
        else:
            want = int(v)
        assert g == want


@settings(max_examples=120, deadline=None)
@given(st.lists(f32_bits, min_size=2, max_size=64))
def test_total_order_key_orders_like_xla_totalorder(bits):
    x = _f32(bits)
    k = total_order_key(x)

    def rank(v_bits):
        # XLA TOTALORDER: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN, by sign and magnitude bits
        neg = v_bits >> 31
        mag = v_bits & 0x7FFFFFFF
        return -mag - 1 if neg else mag
    want = [rank(b) for b in bits]
    order_k = np.argsort(k, kind="stable")
    order_w = np.argsort(np.array(want, np.int64), kind="stable")
    assert np.array_equal(order_k, order_w)
