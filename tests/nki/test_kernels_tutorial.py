"""The NKI tutorials' kernels (support/nki_tutorial_kernels.py) simulated on birsim and compared with numpy:
tensor addition (masked ragged tiles; out-argument SPMD form), transposes (TensorE, nl.transpose, DMA),
average pooling (5-D mgrid indexing), RMSNorm, LayerNorm (nl and bn_stats forms), softmax (activation_reduce
and nl.softmax), matmul variants (one matmul, K-tiled PSUM accumulation, hoisted loads, nl.matmul with its
own transpose) and single-head attention. Exact where the math is (adds, transposes, copies); fp32 elsewhere
within 1e-5 of the output scale."""
import numpy as np
import pytest

from neuronxcc import nki
from support import nki_tutorial_kernels as T
from neuronxcc.common.tolerances import assert_close


def _r(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("shape", [(256, 1024), (200, 700)])
def test_tensor_add(shape):
    a, b = _r(0, *shape), _r(1, *shape)
    np.testing.assert_array_equal(nki.simulate_kernel(T.tensor_add, a, b), a + b)


def test_tensor_add_out_argument_grid():
    a, b = _r(2, 384, 96), _r(3, 384, 96)
    c = np.zeros_like(a)
    nki.simulate_kernel(nki.jit(T.tensor_add_out)[3], a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_transposes_are_exact():
    x = _r(4, 96, 128)
    np.testing.assert_array_equal(nki.simulate_kernel(T.transpose_2d, x), x.T)
    y = _r(5, 256, 384)
    np.testing.assert_array_equal(nki.simulate_kernel(T.transpose_blocks, y), y.T)
    z = _r(6, 64, 32)
    np.testing.assert_array_equal(nki.simulate_kernel(T.load_transposed, z), z.T)


def test_avg_pool2d():
    x = _r(7, 64, 8, 12)
    assert_close(nki.simulate_kernel(T.avg_pool2d, x, 2), T.ref_avg_pool2d(x, 2), row="compiled")


def test_rmsnorm_ragged_rows():
    a, g = _r(8, 300, 64), _r(9, 64)
    assert_close(nki.simulate_kernel(T.rmsnorm, a, g), T.ref_rmsnorm(a, g), row="compiled")


def test_layernorm():
    x, gm, bt = _r(10, 256, 96), _r(11, 96), _r(12, 96)
    assert_close(nki.simulate_kernel(T.layernorm, x, gm, bt), T.ref_layernorm(x, gm, bt), row="compiled")


def test_layernorm_bn_stats():
    x = _r(10, 256, 96)
    assert_close(nki.simulate_kernel(T.layernorm_bn_stats, x), T.ref_layernorm(x), row="compiled")


def test_softmax_both_forms():
    x = _r(13, 256, 200) * 4
    assert_close(nki.simulate_kernel(T.softmax_rows, x), T.ref_softmax(x), row="compiled")
    y = _r(14, 128, 64)
    assert_close(nki.simulate_kernel(T.softmax_builtin, y), T.ref_softmax(y), row="compiled")


def test_matmul_variants():
    lhsT, rhs = _r(15, 128, 64), _r(16, 128, 512)
    assert_close(nki.simulate_kernel(T.matmul_basic, lhsT, rhs), lhsT.T.astype(np.float64) @ rhs, row="compiled")
    a, b = _r(17, 256, 256), _r(18, 256, 1024)
    want = a.T.astype(np.float64) @ b
    assert_close(nki.simulate_kernel(T.matmul_tiled, a, b), want, row="compiled")
    assert_close(nki.simulate_kernel(T.matmul_hoisted, a, b), want, row="compiled")
    x, y = _r(19, 64, 128), _r(20, 128, 256)
    assert_close(nki.simulate_kernel(T.matmul_plain, x, y), x.astype(np.float64) @ y, row="compiled")


def test_attention_head():
    q, k, v = _r(21, 64, 256), _r(22, 64, 256), _r(23, 256, 64)
    assert_close(nki.simulate_kernel(T.attention_head, q, k, v), T.ref_attention_head(q, k, v), row="compiled")
