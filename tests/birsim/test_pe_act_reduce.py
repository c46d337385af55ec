"""matmul / transpose / activation / reductions / DMA through birsim vs numpy.

Tolerances: matmul fp32 accumulate vs float64 numpy: rtol 1e-5 (bf16 inputs
are exact in fp32 products); activation fp32: rtol 2e-6 / atol 1e-6 against
float64 numpy (erf-based: 1e-6); reductions: fp32 sum order, rtol 1e-6."""
import math

import ml_dtypes
import numpy as np
import pytest

from birsim.birsim_helpers import Prog, rand
from neuronxcc.common.tolerances import assert_close

BF16 = ml_dtypes.bfloat16


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_matmul_one_group(dt):
    k, m, n = 96, 80, 200
    a, b = rand((k, m), 1), rand((k, n), 2)
    p = Prog()
    ta, tb = p.load("a", a, dtype=dt), p.load("b", b, dtype=dt)
    ps = p.tile("ps", m, n, "float32", memory="PSUM")
    p.inst("matmul", "PE", [ps], [ta, tb], psum_zero=True)
    p.store(ps)
    if dt == "bfloat16":
        a, b = a.astype(BF16).astype(np.float32), b.astype(BF16).astype(np.float32)
    ref = a.astype(np.float64).T @ b.astype(np.float64)
    assert_close(p.run1(), ref, row="compiled")


def test_matmul_accumulation_group_over_k_tiles():
    kt, m, n = 3, 64, 128
    a = rand((kt * 128, m), 3)
    b = rand((kt * 128, n), 4)
    p = Prog()
    ta = [p.load("a%d" % i, a[i * 128:(i + 1) * 128]) for i in range(kt)]
    tb = [p.load("b%d" % i, b[i * 128:(i + 1) * 128]) for i in range(kt)]
    ps = p.tile("ps", m, n, "float32", memory="PSUM")
    for i in range(kt):
        p.inst("matmul", "PE", [ps], [ta[i], tb[i]], psum_zero=(i == 0))
    p.store(ps)
    assert_close(p.run1(), a.astype(np.float64).T @ b, row="compiled")


def test_matmul_without_start_reads_stale_psum():
    a, b = rand((8, 4), 1), rand((8, 4), 2)
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b)
    ps = p.tile("ps", 4, 4, "float32", memory="PSUM")
    p.inst("matmul", "PE", [ps], [ta, tb], psum_zero=True)
    p.inst("matmul", "PE", [ps], [ta, tb], psum_zero=False)
    p.store(ps)
    assert_close(p.run1(), 2 * (a.T @ b), row="compiled")
    # fresh PSUM is poisoned (NaN): accumulating without psum_zero shows it
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b)
    ps = p.tile("ps", 4, 4, "float32", memory="PSUM")
    p.inst("matmul", "PE", [ps], [ta, tb], psum_zero=False)
    p.store(ps)
    assert np.isnan(p.run1()).all()


def test_pe_and_dve_transpose():
    x = rand((100, 70), 5)
    y = np.arange(32 * 20, dtype=np.int32).reshape(32, 20)
    p = Prog()
    tx, ty = p.load("x", x, dtype="bfloat16"), p.load("y", y)
    ps = p.tile("ps", 70, 100, "float32", memory="PSUM")
    p.inst("transpose", "PE", [ps], [tx])
    o2 = p.tile("o2", 20, 32, "int32")
    p.inst("transpose", "DVE", [o2], [ty])
    p.store(ps)
    p.store(o2)
    r1, r2 = p.run()
    np.testing.assert_array_equal(r1, x.astype(BF16).astype(np.float32).T)
    np.testing.assert_array_equal(r2, y.T)


def _erf(v):
    return np.vectorize(math.erf)(v.astype(np.float64))


ACT_REF = {
    "identity": lambda x: x, "copy": lambda x: x, "exp": np.exp, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1 + np.exp(-x)), "erf": _erf, "square": lambda x: x * x, "abs": np.abs,
    "sign": np.sign, "sin": np.sin, "arctan": np.arctan, "softplus": lambda x: np.log1p(np.exp(x)),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))),
    "gelu_apprx_sigmoid": lambda x: x / (1 + np.exp(-1.702 * x)),
}


@pytest.mark.parametrize("func", sorted(ACT_REF))
def test_activation_functions(func):
    x = rand((32, 40), 6, -3, 3)
    p = Prog()
    tx = p.load("x", x)
    o = p.tile("o", 32, 40)
    p.inst("activation", "ACT", [o], [tx], func=func, scale=1.0)
    p.store(o)
    ref = ACT_REF[func](x.astype(np.float64))
    assert_close(p.run1(), ref, row="compiled")


@pytest.mark.parametrize("func,lo,hi,ref", [
    ("log", 0.01, 10, np.log), ("sqrt", 0.01, 10, np.sqrt), ("rsqrt", 0.01, 10, lambda x: 1 / np.sqrt(x)),
    ("reciprocal", 0.1, 10, lambda x: 1 / x)])
def test_activation_positive_domain(func, lo, hi, ref):
    x = rand((16, 64), 7, lo, hi)
    p = Prog()
    tx = p.load("x", x)
    o = p.tile("o", 16, 64)
    p.inst("activation", "ACT", [o], [tx], func=func)
    p.store(o)
    assert_close(p.run1(), ref(x.astype(np.float64)), row="compiled")


def test_activation_scale_bias_ap_and_reduce_into_bf16_out():
    x = rand((64, 50), 8)
    bias = rand((64, 1), 9)
    scale = rand((64, 1), 10)
    p = Prog()
    tx, tb, ts = p.load("x", x), p.load("bias", bias), p.load("scale", scale)
    o = p.tile("o", 64, 50, "bfloat16")
    acc = p.tile("acc", 64, 1)
    p.inst("activation", "ACT", [o, acc], [tx, tb, ts], func="exp", bias_ap=True, scale_ap=True, reduce="add")
    p.store(o)
    p.store(acc)
    r, ra = p.run()
    y = np.exp((x * scale + bias).astype(np.float32))
    np.testing.assert_array_equal(r.view(np.uint16), y.astype(BF16).view(np.uint16))
    assert_close(ra[:, 0], y.astype(np.float64).sum(1), row="compiled")


@pytest.mark.parametrize("op,ref", [("add", np.sum), ("max", np.max), ("min", np.min), ("mult", np.prod)])
def test_tensor_reduce_innermost_axes(op, ref):
    x = rand((32, 4 * 6 * 5), 11, 0.5, 1.5)
    p = Prog()
    tx = p.load("x", x)
    src = tx.copy(pattern=[[30, 4], [5, 6], [1, 5]])
    o1 = p.tile("o1", 32, 24)
    o2 = p.tile("o2", 32, 4)
    p.inst("tensor_reduce", "DVE", [o1], [src], op=op, axes=1)
    p.inst("tensor_reduce", "DVE", [o2], [src], op=op, axes=2, negate=True)
    p.store(o1)
    p.store(o2)
    r1, r2 = p.run()
    x3 = x.reshape(32, 4, 6, 5).astype(np.float64)
    assert_close(r1, ref(x3, axis=3).reshape(32, 24), row="compiled")
    assert_close(r2, -ref(x3, axis=(2, 3)), row="compiled")


def test_reduce_int_on_pool_and_partition_reduce():
    x = np.random.default_rng(12).integers(0, 2**20, (16, 12)).astype(np.int32)
    p = Prog()
    tx = p.load("x", x)
    o1 = p.tile("o1", 16, 1, "int32")
    p.inst("tensor_reduce", "POOL", [o1], [tx], op="bitwise_or", axes=1)
    o2 = p.tile("o2", 1, 12, "int32")
    p.inst("partition_reduce", "POOL", [o2], [tx], op="add")
    o3 = p.tile("o3", 1, 12, "int32")
    p.inst("partition_reduce", "POOL", [o3], [tx], op="max")
    for o in (o1, o2, o3):
        p.store(o)
    r1, r2, r3 = p.run()
    np.testing.assert_array_equal(r1[:, 0], np.bitwise_or.reduce(x, axis=1))
    np.testing.assert_array_equal(r2[0], x.sum(0))
    np.testing.assert_array_equal(r3[0], x.max(0))


def test_dma_strided_cast_hbm_to_hbm_and_int64():
    from neuronxcc.starfish import birpy as B
    x = rand((8, 6, 10), 13)
    ids = np.arange(-20, 20, dtype=np.int64).reshape(4, 10) * 3
    p = Prog()
    m, b = p.m, p.b
    m.add_tensor("x", "input", "float32", x.shape)
    m.add_tensor("ids", "input", "int64", ids.shape)
    p.inputs += [x, ids]
    m.add_memloc("t", "SBUF", 10, 8 * 6 * 2)
    # x[:, :, j] -> partition j (a transposing DMA), cast to bf16
    b.inst("dma_copy", "SP", [B.AccessPattern("t", "bfloat16", 0, [[1, 48]], 0, 10)],
           [B.AccessPattern("x", "float32", 0, [[1, 10], [10, 48]])], queue="q0")
    m.add_tensor("y", "output", "bfloat16", (10, 48))
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("t", "bfloat16", 0, [[1, 48]], 0, 10)], queue="q0")
    m.add_tensor("z", "output", "float32", (6, 8))     # HBM -> HBM: x[:, :, 3].T
    b.inst("dma_copy", "SP", [b.ap("z")], [B.AccessPattern("x", "float32", 3, [[10, 6], [60, 8]])], queue="q1")
    m.add_memloc("ti", "SBUF", 4, 40)
    b.inst("dma_copy", "SP", [B.AccessPattern("ti", "int32", 0, [[1, 10]], 0, 4)], [b.ap("ids")], queue="q1")
    m.add_tensor("w", "output", "int32", (4, 10))
    b.inst("dma_copy", "SP", [b.ap("w")], [B.AccessPattern("ti", "int32", 0, [[1, 10]], 0, 4)], queue="q1")
    y, z, w = p.run()
    np.testing.assert_array_equal(y.view(np.uint16),
                                  x.transpose(2, 0, 1).reshape(10, 48).astype(BF16).view(np.uint16))
    np.testing.assert_array_equal(z, x[:, :, 3].T)
    np.testing.assert_array_equal(w, ids.astype(np.int32))


def test_tensor_tensor_scan_cumsum_and_recurrence():
    x = rand((8, 40), 14)
    decay = rand((8, 40), 15, 0.5, 1.0)
    init = rand((8, 1), 16)
    p = Prog()
    tx, td, ti = p.load("x", x), p.load("d", decay), p.load("i", init)
    ones = p.tile("ones", 8, 40)
    p.inst("memset", "DVE", [ones], [], value=1.0)
    o1, o2 = p.tile("o1", 8, 40), p.tile("o2", 8, 40)
    p.inst("tensor_tensor_scan", "DVE", [o1], [ones, tx], op0="mult", op1="add", initial=0.0)   # cumsum
    p.inst("tensor_tensor_scan", "DVE", [o2], [td, tx, ti], op0="mult", op1="add", initial_ap=True)
    p.store(o1)
    p.store(o2)
    r1, r2 = p.run()
    assert_close(r1, np.cumsum(x.astype(np.float64), axis=1), row="compiled")
    ref = np.empty_like(x)
    prev = init[:, 0].copy()
    for i in range(40):
        prev = (decay[:, i] * prev + x[:, i]).astype(np.float32)
        ref[:, i] = prev
    np.testing.assert_array_equal(r2, ref)
