"""Hand-written BIR programs for the elementwise opcodes, checked against numpy.

Tolerances: fp32 results exact where numpy does the same fp32 operation
(add/sub/mult/div/max/min/compare), 2 ulp-ish (rtol 1e-6) for pow/fmod;
integers exact."""
import ml_dtypes
import numpy as np
import pytest

from birsim.birsim_helpers import Prog, rand
from neuronxcc.common.tolerances import assert_close

P, F = 64, 48


@pytest.mark.parametrize("op,ref", [
    ("add", np.add), ("subtract", np.subtract), ("mult", np.multiply), ("divide", np.divide),
    ("max", np.maximum), ("min", np.minimum), ("rsub", lambda a, b: b - a),
    ("average", lambda a, b: (a + b) * np.float32(0.5)), ("abs_max", lambda a, b: np.maximum(abs(a), abs(b))),
])
def test_tensor_tensor_fp32_exact(op, ref):
    a, b = rand((P, F), 1), rand((P, F), 2)
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b)
    o = p.tile("o", P, F)
    p.inst("tensor_tensor", "DVE", [o], [ta, tb], op=op)
    p.store(o)
    np.testing.assert_array_equal(p.run1(), ref(a, b).astype(np.float32))


def test_tensor_tensor_pow_mod_and_psum_input():
    a, b = rand((P, F), 1, 0.1, 3.0), rand((P, F), 2, -2, 2)
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b, memory="PSUM")
    o1, o2 = p.tile("o1", P, F), p.tile("o2", P, F)
    p.inst("tensor_tensor", "DVE", [o1], [ta, tb], op="pow")
    p.inst("tensor_tensor", "DVE", [o2], [tb, ta], op="mod")
    p.store(o1)
    p.store(o2)
    r1, r2 = p.run()
    assert_close(r1, np.power(a, b), row="compiled")
    assert_close(r2, np.fmod(b, a), row="compiled")


@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"])
def test_compare_and_logical_give_0_1(op):
    a = np.random.default_rng(3).integers(-2, 3, (P, F)).astype(np.float32)
    b = np.random.default_rng(4).integers(-2, 3, (P, F)).astype(np.float32)
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b)
    o = p.tile("o", P, F, "uint8")
    p.inst("tensor_tensor", "DVE", [o], [ta, tb], op=op)
    p.store(o)
    ref = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
           "logical_and": (a != 0) & (b != 0), "logical_or": (a != 0) | (b != 0),
           "logical_xor": (a != 0) ^ (b != 0)}[op]
    np.testing.assert_array_equal(p.run1(), ref.astype(np.uint8))


@pytest.mark.parametrize("engine", ["DVE", "POOL"])
@pytest.mark.parametrize("op,ref", [
    ("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor),
    ("arith_shift_left", lambda a, s: np.left_shift(a, s)), ("arith_shift_right", lambda a, s: np.right_shift(a, s)),
    ("logical_shift_right", lambda a, s: (a.view(np.uint32) >> s.astype(np.uint32)).view(np.int32)),
])
def test_bitvec_int32_exact(engine, op, ref):
    rng = np.random.default_rng(5)
    a = rng.integers(-2**31, 2**31, (P, F), dtype=np.int64).astype(np.int32)
    b = rng.integers(0, 31, (P, F)).astype(np.int32) if "shift" in op else \
        rng.integers(-2**31, 2**31, (P, F), dtype=np.int64).astype(np.int32)
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b)
    o = p.tile("o", P, F, "int32")
    p.inst("tensor_tensor", engine, [o], [ta, tb], op=op)
    p.store(o)
    np.testing.assert_array_equal(p.run1(), ref(a, b).astype(np.int32))


def test_pool_integer_arith_exact_dve_through_fp32():
    a = np.full((P, 4), 2**24 + 1, np.int32)
    b = np.ones((P, 4), np.int32)
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b)
    o1, o2 = p.tile("o1", P, 4, "int32"), p.tile("o2", P, 4, "int32")
    p.inst("tensor_tensor", "POOL", [o1], [ta, tb], op="add")
    p.inst("tensor_tensor", "DVE", [o2], [ta, tb], op="add")
    p.store(o1)
    p.store(o2)
    r_pool, r_dve = p.run()
    assert (r_pool == 2**24 + 2).all()           # GpSimd: native int32
    assert (r_dve == np.int32(np.float32(2**24 + 1) + np.float32(1))).all()   # DVE: fp32 (2^24+1 rounds)


def test_pool_integer_divide_mod_pow_semantics():
    a = np.array([[7, -7, 7, -7, 5, 0, -9, 3]], np.int32).repeat(4, 0)
    b = np.array([[2, 2, -2, -2, 0, 3, 4, -1]], np.int32).repeat(4, 0)
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b)
    outs = []
    for op in ("divide", "mod"):
        o = p.tile("o" + op, 4, 8, "int32")
        p.inst("tensor_tensor", "POOL", [o], [ta, tb], op=op)
        p.store(o)
    e = p.load("e", np.array([[2, 0, -1, 3, -2, 31, 1, 2]], np.int32).repeat(4, 0))
    bb = p.load("base", np.array([[3, 5, 1, -2, -1, 2, 0, -3]], np.int32).repeat(4, 0))
    o = p.tile("opow", 4, 8, "int32")
    p.inst("tensor_tensor", "POOL", [o], [bb, e], op="pow")
    p.store(o)
    div, mod, pw = p.run()
    assert div[0].tolist() == [3, -3, -3, 3, -1, 0, -2, -3]        # truncation, x/0 = -1
    assert mod[0].tolist() == [1, -1, 1, -1, 5, 0, -1, 0]          # sign of dividend, x%0 = x
    assert pw[0].tolist() == [9, 1, 1, -8, 1, np.int32(np.int64(2**31) - 2**32), 0, 9]


def test_tensor_scalar_float_and_vector_operands():
    a = rand((P, F), 1)
    s = rand((P, 1), 2)
    p = Prog()
    ta, ts = p.load("a", a), p.load("s", s)
    o1, o2, o3 = p.tile("o1", P, F), p.tile("o2", P, F), p.tile("o3", P, F)
    p.inst("tensor_scalar", "DVE", [o1], [ta], op0="mult", operand0=3.0, op1="add", operand1=-1.5)
    p.inst("tensor_scalar", "DVE", [o2], [ta, ts], op0="subtract", operand0_ap=True, reverse0=True)
    p.inst("tensor_scalar", "ACT", [o3], [ta, ts], op0="mult", operand0_ap=True, op1="add", operand1=2.0)
    for o in (o1, o2, o3):
        p.store(o)
    r1, r2, r3 = p.run()
    f = np.float32
    np.testing.assert_array_equal(r1, (a * f(3)) + f(-1.5))
    np.testing.assert_array_equal(r2, s - a)
    np.testing.assert_array_equal(r3, a * s + f(2))


def test_tensor_scalar_pool_int_and_bitvec():
    a = np.arange(P * 8, dtype=np.int32).reshape(P, 8) * 1000003
    p = Prog()
    ta = p.load("a", a)
    o1, o2 = p.tile("o1", P, 8, "int32"), p.tile("o2", P, 8, "int32")
    p.inst("tensor_scalar", "POOL", [o1], [ta], op0="mult", operand0=7, op1="subtract", operand1=5)
    p.inst("tensor_scalar", "DVE", [o2], [ta], op0="bitwise_and", operand0=0xFFFF, op1="arith_shift_right", operand1=3)
    p.store(o1)
    p.store(o2)
    r1, r2 = p.run()
    np.testing.assert_array_equal(r1, (a.astype(np.int64) * 7 - 5).astype(np.int32))
    np.testing.assert_array_equal(r2, (a & 0xFFFF) >> 3)


def test_scalar_tensor_tensor():
    a, b = rand((P, F), 1), rand((P, F), 2)
    p = Prog()
    ta, tb = p.load("a", a), p.load("b", b)
    o = p.tile("o", P, F)
    p.inst("scalar_tensor_tensor", "DVE", [o], [ta, tb], op0="mult", operand0=0.5, op1="add")
    p.store(o)
    np.testing.assert_array_equal(p.run1(), a * np.float32(0.5) + b)


def test_tensor_copy_casts_and_bit_exact():
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((P, F)) * 1000).astype(np.float32)
    x[0, :6] = [np.nan, np.inf, -np.inf, 3e9, -3e9, -0.0]
    p = Prog()
    tx = p.load("x", x)
    ob, oi, of8 = p.tile("ob", P, F, "bfloat16"), p.tile("oi", P, F, "int32"), p.tile("o8", P, F, "float8_e4m3")
    oh = p.tile("oh", P, F, "float16")
    p.inst("tensor_copy", "DVE", [ob], [tx])
    p.inst("tensor_copy", "POOL", [oi], [tx])
    p.inst("tensor_copy", "ACT", [of8], [tx])
    p.inst("tensor_copy", "DVE", [oh], [tx])
    for o in (ob, oi, of8, oh):
        p.store(o)
    rb, ri, r8, rh = p.run()
    np.testing.assert_array_equal(rb.view(np.uint16), x.astype(ml_dtypes.bfloat16).view(np.uint16))
    with np.errstate(invalid="ignore"):
        ref_i = np.where(np.isnan(x), 0, np.clip(np.trunc(x.astype(np.float64)), -2**31, 2**31 - 1)).astype(np.int32)
    np.testing.assert_array_equal(ri, ref_i)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(r8.astype(np.float32), x.astype(ml_dtypes.float8_e4m3).astype(np.float32))
        np.testing.assert_array_equal(rh, x.astype(np.float16))


def test_same_dtype_copy_is_bit_exact_on_dve():
    bits = np.random.default_rng(8).integers(0, 2**32, (P, F), dtype=np.uint64).astype(np.uint32)
    bits[:, 0] = 0x7FC12345     # a NaN payload survives a DVE copy
    x = bits.view(np.float32)
    p = Prog()
    tx = p.load("x", x)
    o = p.tile("o", P, F)
    p.inst("tensor_copy", "DVE", [o], [tx])
    p.store(o)
    np.testing.assert_array_equal(p.run1().view(np.uint32), bits)


def test_iota_memset_select_affine_select():
    p = Prog()
    io = p.tile("io", 16, 12, "int32")
    p.inst("iota", "POOL", [io], [], pattern=[[10, 3], [1, 4]], offset=5, channel_multiplier=100)
    iof = p.tile("iof", 16, 12, "float32")
    p.inst("iota", "POOL", [iof], [], pattern=[[1, 12]], offset=-3, channel_multiplier=-1)
    ms = p.tile("ms", 16, 12, "bfloat16")
    p.inst("memset", "DVE", [ms], [], value=1.5)
    pred = p.load("pred", (np.arange(16 * 12).reshape(16, 12) % 3 == 0).astype(np.uint8))
    t = p.load("t", rand((16, 12), 1))
    f = p.load("f", rand((16, 12), 2))
    sel = p.tile("sel", 16, 12)
    p.inst("select", "DVE", [sel], [pred, t, f])
    af = p.tile("af", 16, 12)
    # causal mask: keep x[p, j] where p - j >= 0 else -1e9
    p.inst("affine_select", "POOL", [af], [t], pattern=[[-1, 12]], offset=0, channel_multiplier=1, cmp="ge",
           on_false=-1e9)
    for o in (io, iof, ms, sel, af):
        p.store(o)
    r_io, r_iof, r_ms, r_sel, r_af = p.run()
    pp = np.arange(16)[:, None]
    ref_io = 5 + 100 * pp + (10 * np.arange(3)[:, None] + np.arange(4)[None, :]).reshape(1, 12)
    np.testing.assert_array_equal(r_io, ref_io)
    np.testing.assert_array_equal(r_iof, (-3 - pp + np.arange(12)[None, :]).astype(np.float32))
    assert (r_ms.astype(np.float32) == 1.5).all()
    tt, ff = rand((16, 12), 1), rand((16, 12), 2)
    np.testing.assert_array_equal(r_sel, np.where(np.arange(16 * 12).reshape(16, 12) % 3 == 0, tt, ff))
    np.testing.assert_array_equal(r_af, np.where(pp - np.arange(12)[None, :] >= 0, tt, np.float32(-1e9)))


@pytest.mark.parametrize("dt", ["float32", "bfloat16", "int32"])
def test_negative_and_zero_steps(dt):
    """Reversed (step -1) and broadcast (step 0) free patterns on reads."""
    x = np.arange(16 * 10, dtype=np.float32).reshape(16, 10)
    p = Prog()
    tx = p.load("x", x, dtype=dt)
    rev = tx.copy(offset=9, pattern=[[-1, 10]])
    bc = tx.copy(offset=2, pattern=[[0, 4], [1, 3]])
    o1, o2 = p.tile("o1", 16, 10, dt), p.tile("o2", 16, 12, dt)
    p.inst("tensor_copy", "DVE", [o1], [rev])
    p.inst("tensor_copy", "DVE", [o2], [bc])
    p.store(o1)
    p.store(o2)
    r1, r2 = p.run()
    np.testing.assert_array_equal(r1.astype(np.float32), x[:, ::-1])
    np.testing.assert_array_equal(r2.astype(np.float32), np.tile(x[:, 2:5], (1, 4)))


def test_bool_outputs_come_back_as_numpy_bool():
    a = rand((8, 8), 1)
    p = Prog()
    ta = p.load("a", a)
    o = p.tile("o", 8, 8, "bool")
    p.inst("tensor_scalar", "DVE", [o], [ta], op0="gt", operand0=0.0)
    p.store(o)
    r = p.run1()
    assert r.dtype == np.bool_
    np.testing.assert_array_equal(r, a > 0)
