"""Every implemented nki.language function traced, simulated on birsim and compared with numpy
(exact where the math is exact; otherwise the per-dtype tolerances of neuronxcc.common.tolerances)."""
import math

import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.common.tolerances import assert_close
import neuronxcc.nki.language as nl

RNG = np.random.default_rng(11)
_erf = np.vectorize(math.erf)


def rand(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.log1p(np.exp(x))


UNARY = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": _sig, "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x * _sig(x), "erf": _erf, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "square": np.square, "abs": np.abs, "sign": np.sign, "sin": np.sin, "cos": np.cos, "arctan": np.arctan,
    "softplus": _softplus, "mish": lambda x: x * np.tanh(_softplus(x)), "negative": np.negative,
    "reciprocal": lambda x: 1 / x, "tan": np.tan, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc,
}
POSITIVE = {"log", "sqrt", "rsqrt", "reciprocal"}


def unary_kernel(name):
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, getattr(nl, name)(nl.load(a)))
        return out
    return k


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    a = rand(64, 48, lo=0.1, hi=3.0) if name in POSITIVE else rand(64, 48, lo=-1.2, hi=1.2)
    if name in ("floor", "ceil", "trunc"):
        a = np.concatenate([rand(64, 40, lo=-50, hi=50), np.tile(np.float32([-2, -1.5, -0.5, 0, 0.5, 1, 1.5, 3]),
                                                                 (64, 1))], axis=1)
    got = nki.simulate_kernel(unary_kernel(name), a)
    assert_close(got, UNARY[name](a.astype(np.float64)).astype(np.float32), what=name)


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide,
    "maximum": np.maximum, "minimum": np.minimum, "power": np.power,
}
EXACT = {"add", "subtract", "multiply", "maximum", "minimum"}


def binary_kernel(name, col=False, scalar=None):
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        y = scalar if scalar is not None else nl.load(b)
        nl.store(out, getattr(nl, name)(x, y))
        return out
    return k


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_tile_tile(name):
    a = rand(32, 40, lo=0.5, hi=2.0)
    b = rand(32, 40, lo=0.5, hi=2.0)
    got = nki.simulate_kernel(binary_kernel(name), a, b)
    ref = BINARY[name](a, b).astype(np.float32)
    if name in EXACT:
        np.testing.assert_array_equal(got, ref)
    else:
        assert_close(got, ref, what=name)


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "divide", "maximum"])
def test_binary_column_and_scalar_broadcast(name):
    a = rand(32, 40, lo=0.5, hi=2.0)
    b = rand(32, 1, lo=0.5, hi=2.0)
    got = nki.simulate_kernel(binary_kernel(name), a, b)
    assert_close(got, BINARY[name](a, b).astype(np.float32), what=name)
    got = nki.simulate_kernel(binary_kernel(name, scalar=1.5), a, b)
    assert_close(got, BINARY[name](a, np.float32(1.5)).astype(np.float32), what=name)


def test_reverse_scalar_operand():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(out, 1.0 - x)
        return out
    a = rand(8, 8)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), np.float32(1.0) - a)


@pytest.mark.parametrize("name,ref", [("equal", np.equal), ("not_equal", np.not_equal), ("greater", np.greater),
                                      ("greater_equal", np.greater_equal), ("less", np.less),
                                      ("less_equal", np.less_equal)])
def test_comparisons(name, ref):
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=nl.uint8, buffer=nl.shared_hbm)
        nl.store(out, getattr(nl, name)(nl.load(a), nl.load(b)))
        return out
    a = RNG.integers(0, 3, (16, 16)).astype(np.float32)
    b = RNG.integers(0, 3, (16, 16)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a, b), ref(a, b).astype(np.uint8))


def test_integer_bitwise_ops():
    def k(a, b):
        o1 = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        o3 = nl.ndarray(a.shape, dtype=nl.int32, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        nl.store(o1, nl.bitwise_and(x, y))
        nl.store(o2, nl.bitwise_xor(x, y))
        nl.store(o3, nl.left_shift(x, 2))
        return o1, o2, o3
    a = RNG.integers(0, 1 << 20, (8, 32)).astype(np.int32)
    b = RNG.integers(0, 1 << 20, (8, 32)).astype(np.int32)
    r1, r2, r3 = nki.simulate_kernel(k, a, b)
    np.testing.assert_array_equal(r1, a & b)
    np.testing.assert_array_equal(r2, a ^ b)
    np.testing.assert_array_equal(r3, a << 2)


@pytest.mark.parametrize("name,ref", [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean),
                                      ("prod", np.prod), ("var", np.var)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(name, ref, keepdims):
    def k(a):
        r = getattr(nl, name)(nl.load(a), axis=1, keepdims=True)
        out = nl.ndarray(r.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, r)
        return out
    a = rand(64, 16, lo=0.5, hi=1.5)
    assert_close(nki.simulate_kernel(k, a), ref(a, axis=1, keepdims=True), what=name)
    if not keepdims:
        def k2(a):
            r = getattr(nl, name)(nl.load(a), axis=1)
            assert r.shape == (64,)
            out = nl.ndarray((64,), dtype=a.dtype, buffer=nl.shared_hbm)
            nl.store(out, r)
            return out
        assert_close(nki.simulate_kernel(k2, a), ref(a, axis=1), what=name)


def test_reduce_two_free_axes():
    def k(a):
        out = nl.ndarray((16, 1, 1), dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.sum(nl.load(a), axis=(1, 2), keepdims=True))
        return out
    a = rand(16, 4, 8)
    assert_close(nki.simulate_kernel(k, a), a.sum(axis=(1, 2), keepdims=True))


def test_softmax_and_rms_norm():
    def k(a, w):
        o1 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(o1, nl.softmax(x, axis=1))
        nl.store(o2, nl.rms_norm(x, nl.load(w).broadcast_to(a.shape), axis=1, n=a.shape[1]))
        return o1, o2
    a, w = rand(32, 64), rand(1, 64)
    s, r = nki.simulate_kernel(k, a, w)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    assert_close(s, e / e.sum(axis=1, keepdims=True))
    assert_close(r, a / np.sqrt((a * a).mean(axis=1, keepdims=True) + 1e-6) * w)


def test_where_copy_zeros_full():
    def k(a):
        o = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        o3 = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x = nl.load(a)
        nl.store(o, nl.where(nl.greater(x, 0.0), x, nl.zeros(a.shape, nl.float32)))
        nl.store(o2, nl.copy(x, dtype=nl.bfloat16))
        nl.store(o3, nl.full(a.shape, 2.5, nl.float32) + nl.ones(a.shape, nl.float32))
        return o, o2, o3
    a = rand(16, 24)
    o, o2, o3 = nki.simulate_kernel(k, a)
    np.testing.assert_array_equal(o, np.where(a > 0, a, 0))
    np.testing.assert_array_equal(o2.view(np.uint16), a.astype(nl.bfloat16).view(np.uint16))
    np.testing.assert_array_equal(o3, np.full(a.shape, 3.5, np.float32))


@pytest.mark.parametrize("transpose_x", [False, True])
def test_matmul(transpose_x):
    def k(x, y):
        out = nl.ndarray((x.shape[1] if transpose_x else x.shape[0], y.shape[1]), dtype=nl.float32,
                         buffer=nl.shared_hbm)
        nl.store(out, nl.matmul(nl.load(x), nl.load(y), transpose_x=transpose_x))
        return out
    x = rand(128, 96) if transpose_x else rand(96, 128)
    y = rand(128, 200)
    assert_close(nki.simulate_kernel(k, x, y), (x.T if transpose_x else x) @ y)


@pytest.mark.parametrize("shape", [(128, 64), (16, 24)])
def test_transpose_and_load_transpose2d(shape):
    def k(a):
        o1 = nl.ndarray(shape[::-1], dtype=a.dtype, buffer=nl.shared_hbm)
        o2 = nl.ndarray(shape[::-1], dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(o1, nl.transpose(nl.load(a)))
        nl.store(o2, nl.load_transpose2d(a))
        return o1, o2
    a = rand(*shape)
    o1, o2 = nki.simulate_kernel(k, a)
    np.testing.assert_array_equal(o1, a.T)
    np.testing.assert_array_equal(o2, a.T)


def test_block_dimension_tensor_and_partition_broadcast():
    def k(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        buf = nl.ndarray((4, nl.par_dim(32), 16), dtype=a.dtype, buffer=nl.sbuf)
        row = nl.load(b)
        for i in nl.affine_range(4):
            buf[i] = nl.add(nl.load(a[i]), row)
        for i in nl.affine_range(4):
            nl.store(out[i], buf[i])
        return out
    a, b = rand(4, 32, 16), rand(1, 16)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a, b), a + b)


def test_sequential_range_carries_a_value():
    def k(a):
        out = nl.ndarray((8, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros((8, 16), nl.float32)
        for i in nl.sequential_range(a.shape[0] // 8):
            acc[...] = nl.add(acc, nl.load(a[i * 8:(i + 1) * 8, :]))
        nl.store(out, acc)
        return out
    a = RNG.integers(-4, 4, (32, 16)).astype(np.float32)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a.reshape(4, 8, 16).sum(axis=0))


def test_static_range_unrolls_and_ds():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.static_range(3):
            assert isinstance(i, int)
            nl.store(out[nl.ds(i * 8, 8), :], nl.multiply(nl.load(a[nl.ds(i * 8, 8), :]), float(i)))
        return out
    a = rand(24, 8)
    ref = a * np.repeat(np.arange(3, dtype=np.float32), 8)[:, None]
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), ref)


def test_promotion_rules():
    from neuronxcc.nki._trace.dtypes import promote
    assert promote(np.float16, nl.bfloat16) == np.float32
    assert promote(nl.float8_e4m3, nl.float8_e5m2) == nl.bfloat16
    assert promote(np.int8, np.uint8) == np.int16
    assert promote(np.int32, np.uint32) == np.float32
    assert promote(np.int32, np.float16) == np.float16
    assert promote(nl.float8_e4m3, np.float16) == np.float16

    def k(a):
        t = nl.load(a)
        assert (t * 2).dtype == np.int32 and (t * 1.5).dtype == np.float32
        assert nl.add(t, t, dtype=nl.bfloat16).dtype == nl.bfloat16
    nki.simulate_kernel(k, np.zeros((4, 4), np.int8))


def test_static_cast_and_tile_size():
    x = nl.static_cast(np.array([1.0, 2.5], np.float32), nl.bfloat16)
    assert x.dtype == nl.bfloat16
    assert nl.tile_size.pmax == 128 and nl.tile_size.gemm_moving_fmax == 512
    assert nl.tile_size.gemm_stationary_fmax == 128 and nl.tile_size.psum_fmax == 512


def test_reduction_result_broadcasts_partition_first():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        nl.store(out, nl.subtract(t, nl.max(t, axis=1)))     # (P,) against (P, F)
        return out
    a = rand(16, 8)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a - a.max(axis=1, keepdims=True))


def test_mask_index_variables_not_on_the_operands_apply_by_position():
    def k(a):
        out = nl.ndarray((128, 8), dtype=a.dtype, buffer=nl.shared_hbm)
        i_p = nl.arange(128)[:, None]
        t = nl.zeros((128, 8), nl.float32)
        nisa_src = a[0:128, 0:8]
        t[0:128, 0:8] = nl.load(nisa_src, mask=(i_p < a.shape[0]))
        nl.store(out, t)
        return out
    a = rand(100, 8)
    ref = np.zeros((128, 8), np.float32)
    ref[:100] = a
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), ref)


def test_partition_start_moved_by_an_iterator_unrolls_that_loop():
    def k(a):
        out = nl.ndarray((128, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 16), dtype=a.dtype)
        for i in nl.affine_range(2):
            t[i * 64:(i + 1) * 64, :] = nl.load(a[i])
        nl.store(out, t)
        return out
    a = rand(2, 64, 16)
    tk = nki.jit(k).trace(a)
    assert not any(n.kind == "loop" and n.trip_count > 1 for n in tk.module.walk())
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a.reshape(128, 16))


def test_if_on_a_loop_iterator_guards_its_block():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(4):
            nl.store(out[i], nl.load(a[i]))
            if i >= 2:
                t = nl.load(a[i])
                nl.store(out[i], nl.multiply(t, 10.0))
        return out
    a = rand(4, 8, 8)
    ref = a.copy()
    ref[2:] *= np.float32(10.0)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), ref)

    def k2(a):
        for i in nl.affine_range(4):
            if i >= 2:
                return None              # only one path of a per-iteration condition could be traced
    from neuronxcc.nki import errors as E
    with pytest.raises(E.err_dynamic_control_flow_not_supported):
        nki.simulate_kernel(k2, a)
