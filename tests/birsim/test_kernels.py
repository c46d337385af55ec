"""The Cython cast kernels against ml_dtypes (round-to-nearest-even, overflow,
NaN/inf, subnormals) and the float->int rule (truncate, saturate, NaN -> 0)."""
import ml_dtypes
import numpy as np
import pytest

from neuronxcc.starfish.birpy import dtypes as D
from neuronxcc.starfish.birsim import _kernels as K
from neuronxcc.starfish.birsim import _rawcopy as RC


def _samples():
    rng = np.random.default_rng(0)
    normal = rng.standard_normal(50000).astype(np.float32) * np.float32(10.0) ** rng.integers(-10, 8, 50000).astype(np.float32)
    bits = rng.integers(0, 2**32, 50000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 65504, 65520, 240, 248, 448, 464, 57344, 61440,
                        2.0**-24, 2.0**-25, 3 * 2.0**-25, 2.0**-9, 2.0**-10, 1 + 2.0**-8, 1 + 3 * 2.0**-8], np.float32)
    return np.concatenate([normal, bits, special, -special])


@pytest.mark.parametrize("name", ["bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn"])
def test_float_casts_match_ml_dtypes(name):
    x = _samples()
    d = D.get(name)
    out = np.zeros(x.size * d.itemsize, np.uint8)
    K.cast_f32(x, d.code, out)
    got = out.view(d.np).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(d.np).astype(np.float32)
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    assert same.all(), (x[~same][:5], ref[~same][:5], got[~same][:5])
    # signed zeros keep their sign
    assert np.array_equal(np.signbit(got[ref == 0]), np.signbit(ref[ref == 0]))


@pytest.mark.parametrize("name,lo,hi", [("int8", -128, 127), ("uint8", 0, 255), ("int16", -32768, 32767),
                                        ("uint16", 0, 65535), ("int32", -2**31, 2**31 - 1), ("uint32", 0, 2**32 - 1)])
def test_float_to_int_truncates_and_saturates(name, lo, hi):
    x = np.array([0.5, -0.5, 1.9, -1.9, 1e10, -1e10, np.nan, np.inf, -np.inf, 100.7, -100.7], np.float32)
    d = D.get(name)
    out = np.zeros(x.size * d.itemsize, np.uint8)
    K.cast_f32(x, d.code, out)
    with np.errstate(invalid="ignore"):
        ref = np.where(np.isnan(x), 0, np.clip(np.trunc(x.astype(np.float64)), lo, hi))
    np.testing.assert_array_equal(out.view(d.np).astype(np.float64), ref)


def test_strided_read_write_roundtrip():
    buf = np.arange(4 * 64, dtype=np.float32).view(np.uint8).copy()
    strides = np.array([0, 0, 0, 256, 32, 8], np.intp)      # 4 rows of 256 B, [8 x step 8 elems], [4 x step 2]
    # base 4: element 1 of each row
    nums = np.array([1, 1, 1, 4, 8, 4], np.intp)
    out = np.empty(4 * 8 * 4, np.float32)
    K.read_f32(buf, 0, 4, strides, nums, out)
    ref = np.arange(4 * 64, dtype=np.float32).reshape(4, 64)
    want = np.array([[ref[r, 1 + 8 * i + 2 * j] for i in range(8) for j in range(4)] for r in range(4)], np.float32)
    np.testing.assert_array_equal(out.reshape(4, 32), want)
    out2 = np.zeros_like(buf)
    K.write_f32(out, out2, 1, 0, np.array([0, 0, 0, 128, 16, 4], np.intp), nums)   # bf16, dense-ish
    got = out2[:4 * 128].view(ml_dtypes.bfloat16).reshape(4, 64)[:, ::2][:, :32].astype(np.float32)
    np.testing.assert_array_equal(got, want.astype(ml_dtypes.bfloat16).astype(np.float32))


def _walk_cases():
    """Random 6-dim walks (zero, negative and repeated strides, empty dims) over a byte buffer."""
    rng = np.random.default_rng(7)
    for _ in range(150):
        isz = int(rng.choice([1, 2, 4, 8]))
        nums = rng.integers(1, 4, 6)
        nums[rng.integers(0, 6, rng.integers(0, 4))] = 1
        if rng.random() < 0.05:
            nums[rng.integers(0, 6)] = 0
        strides = rng.integers(-3, 5, 6) * isz
        lo = sum(min(0, s * (n - 1)) for s, n in zip(strides, nums))
        hi = sum(max(0, s * (n - 1)) for s, n in zip(strides, nums))
        yield isz, -lo + isz * int(rng.integers(0, 3)), strides.astype(np.intp), nums.astype(np.intp), hi - lo + 4 * isz


def _numpy_offsets(base, strides, nums):
    """Byte offset of element j (row-major over nums), by numpy broadcasting."""
    off = np.full([int(n) for n in nums], base, np.int64)
    for k in range(6):
        shape = [1] * 6
        shape[k] = int(nums[k])
        off = off + (np.arange(int(nums[k])) * int(strides[k])).reshape(shape)
    return off.reshape(-1)


def test_every_walk_visits_the_elements_numpy_indexing_gives():
    """The kernels share one strided walk (Rows); each walk against numpy's offsets."""
    for isz, base, strides, nums, span in _walk_cases():
        buf = np.random.default_rng(int(base)).integers(0, 256, base + span + 8, dtype=np.uint8)
        offs = _numpy_offsets(base, strides, nums)
        want = buf[offs[:, None] + np.arange(isz)].reshape(-1)
        got = np.empty(offs.size * isz, np.uint8)
        RC.gather_raw(buf, isz, base, strides, nums, got)
        np.testing.assert_array_equal(got, want)
        dst = np.zeros_like(buf)
        vals = np.arange(offs.size * isz, dtype=np.uint8)
        RC.scatter_raw(vals, dst, isz, base, strides, nums)
        ref = np.zeros_like(buf)
        for j, o in enumerate(offs):                      # sequential: a repeated address keeps the last
            ref[o:o + isz] = vals[j * isz:(j + 1) * isz]
        np.testing.assert_array_equal(dst, ref)
        if isz == 4:
            f = np.empty(offs.size, np.float32)
            K.read_f32(buf, 0, base, strides, nums, f)
            np.testing.assert_array_equal(f.view(np.uint32), want.view(np.uint32))
            i = np.empty(offs.size, np.int64)
            K.read_i64(buf, 14, base, strides, nums, i)
            np.testing.assert_array_equal(i, want.view(np.int32))
            dst2 = np.zeros_like(buf)
            K.write_i64(np.arange(offs.size, dtype=np.int64), dst2, 14, base, strides, nums)
            ref2 = np.zeros_like(buf)
            for j, o in enumerate(offs):
                ref2[o:o + 4] = np.array([j], np.int32).view(np.uint8)
            np.testing.assert_array_equal(dst2, ref2)
            dst3 = np.zeros_like(buf)
            K.write_f32(np.arange(offs.size, dtype=np.float32), dst3, 0, base, strides, nums)
            ref3 = np.zeros_like(buf)
            for j, o in enumerate(offs):
                ref3[o:o + 4] = np.array([j], np.float32).view(np.uint8)
            np.testing.assert_array_equal(dst3, ref3)


def test_small_matmul_sums_fp32_products_over_k_in_order():
    """birsim's small PE matmul: each result is the fp32 sum over k in order of the fp32 products
    (numpy float32 ops, one rounding each: no fused multiply-add), on strided operands."""
    rng = np.random.default_rng(3)
    for _ in range(200):
        k, m, n = (int(v) for v in rng.integers(1, 9, 3))
        s = (rng.standard_normal((k, 2 * m)) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)[:, ::2]
        w = rng.standard_normal((k, n)).astype(np.float32)
        want = s[0][:, None] * w[0][None, :]
        for i in range(1, k):
            want = want + s[i][:, None] * w[i][None, :]
        got = K.small_matmul(s, w)
        assert got.dtype == np.float32 and got.shape == (m, n)
        np.testing.assert_array_equal(got, want)


def test_pe_matmul_is_the_in_order_sum_at_every_size():
    """birsim's PE kernel (``_pe``, every matmul size): the bits of the in-order sum of unfused fp32
    products, on sizes across its 8 / 4 / 2 / 1-row and 32-column blocks (packed and in place),
    strided and non-fp32 operands, NaN and infinity; accumulation adds the old value last."""
    from neuronxcc.starfish.birsim import _pe
    rng = np.random.default_rng(5)
    sizes = [(1, 1, 1), (128, 128, 512), (75, 4, 384), (3, 9, 33), (128, 15, 130), (64, 128, 31)]
    sizes += [tuple(int(v) for v in rng.integers(1, 140, 3)) for _ in range(12)]
    for i, (k, m, n) in enumerate(sizes):
        s = (rng.standard_normal((k, 2 * m)) * 10.0 ** rng.integers(-3, 4)).astype(np.float32)[:, ::2]
        w = rng.standard_normal((k, n + 3)).astype(np.float32)[:, 3:]
        if i % 3 == 1:
            s[k // 2, m // 2] = np.nan
            w[k - 1, n - 1] = -np.inf
        want = s[0][:, None] * w[0][None, :]
        for j in range(1, k):
            want = want + s[j][:, None] * w[j][None, :]
        got = _pe.matmul(s, w)
        assert got.dtype == np.float32 and got.shape == (m, n)
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    got = _pe.matmul(np.ones((4, 3), np.float16), np.ones((4, 40), np.float64))
    np.testing.assert_array_equal(got, np.full((3, 40), 4, np.float32))
    with pytest.raises(ValueError):
        _pe.matmul(np.ones((4, 3), np.float32), np.ones((5, 3), np.float32))


def test_pe_transpose32_moves_the_bits_at_every_size():
    """birsim's PE transpose of 4-byte elements (8 x 8 register blocks and the edges): numpy's
    transpose bit for bit, signalling-NaN patterns included."""
    from neuronxcc.starfish.birsim import _pe
    rng = np.random.default_rng(6)
    for a, b in [(1, 1), (8, 8), (128, 128), (65, 128), (4, 65), (33, 17), (128, 7)] + \
            [tuple(int(v) for v in rng.integers(1, 140, 2)) for _ in range(10)]:
        x = rng.integers(0, 2 ** 32, (a, b), dtype=np.uint64).astype(np.uint32)
        x.flat[::7] = 0x7F800001           # a signalling NaN as float32
        np.testing.assert_array_equal(_pe.transpose32(x), x.T)
        np.testing.assert_array_equal(_pe.transpose32(x.view(np.float32)).view(np.uint32), x.T)


def test_gelu_passes_match_the_numpy_float64_expression():
    """alu's GELU (the typed passes around numpy's float64 exp) gives the bits of the numpy expression
    it replaces, (0.5 * x64 * (1 + erf64(x / sqrt 2))).astype(float32), on finite values of every
    magnitude, infinities, zeros and subnormals; NaN stays NaN."""
    from neuronxcc.starfish.birsim import alu
    rng = np.random.default_rng(5)
    x = np.concatenate([(rng.standard_normal(20000) * s).astype(np.float32) for s in (1e-40, 1e-3, 1, 4, 30, 1e30)]
                       + [np.array([0.0, -0.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38], np.float32)])
    with np.errstate(all="ignore"):
        want = (0.5 * x.astype(np.float64) * (1.0 + alu._erf64(x / np.sqrt(2.0)))).astype(np.float32)
        got = alu.act("gelu", x.reshape(-1, 8))
    assert got.shape == (x.size // 8, 8)
    assert got.reshape(-1).tobytes() == want.tobytes()
    with np.errstate(all="ignore"):
        assert np.isnan(alu.act("gelu", np.array([np.nan, -np.nan], np.float32))).all()


def test_tanh_gelu_matches_the_float32_expression():
    """alu's tanh-approximated GELU (two arrays, operations in place) gives the bits of the float32
    expression it replaces, operation for operation."""
    from neuronxcc.starfish.birsim import alu
    f = np.float32
    rng = np.random.default_rng(6)
    x = np.concatenate([(rng.standard_normal(20000) * s).astype(f) for s in (1e-3, 1, 4, 30, 1e20)]
                       + [np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 3.4e38, -3.4e38], f)]).reshape(-1, 8)
    with np.errstate(all="ignore"):
        want = f(0.5) * x * (f(1) + np.tanh(f(0.7978845608028654) * (x + f(0.044715) * x * x * x)))
        got = alu.act("gelu_apprx_tanh", x)
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "bool"])
@pytest.mark.parametrize("layout", ["dense", "strided", "unaligned"])
def test_integer_runs_convert_as_the_element_rules(name, layout):
    """The integer <-> fp32 and integer <-> int64 runs (the dtype hoisted out of the element loop)
    against the one-element rules: to fp32 as numpy's cast (round to nearest even), from fp32 as
    cast_f32 (encode_f32: truncate, saturate, NaN -> 0; bool: nonzero and not NaN), to int64
    extended, from int64 wrapped (bool: nonzero). Dense aligned runs, strided and unaligned ones."""
    d = D.get(name)
    isz = d.itemsize
    n = 4099
    step = {"dense": 1, "strided": 3, "unaligned": 1}[layout]
    base = 1 if layout == "unaligned" else 0
    strides = np.array([0, 0, 0, 0, 0, step * isz], np.intp)
    nums = np.array([1, 1, 1, 1, 1, n], np.intp)
    rng = np.random.default_rng(7)
    raw = rng.integers(0, 256, base + n * step * isz + 8).astype(np.uint8)
    if name == "bool":
        raw = (raw % 2).astype(np.uint8)
    vals = np.frombuffer(raw[base:base + n * step * isz].tobytes(), d.np)[::step]
    f = np.empty(n, np.float32)
    K.read_f32(raw, d.code, base, strides, nums, f)
    np.testing.assert_array_equal(f, vals.astype(np.float32))
    q = np.empty(n, np.int64)
    K.read_i64(raw, d.code, base, strides, nums, q)
    np.testing.assert_array_equal(q, vals.astype(np.int64))
    # fp32 -> the dtype: the run against the one-element rule (cast_f32)
    x = np.concatenate([rng.uniform(-3e9, 3e9, n - 12).astype(np.float32),
                        np.array([0.5, -0.5, -0.0, np.nan, np.inf, -np.inf, 255.9, 256.0, -128.9, 65535.5, 2.0 ** 31,
                                  -2.0 ** 31 - 512], np.float32)])
    ref = np.zeros(n * isz, np.uint8)
    K.cast_f32(x, d.code, ref)
    out = np.zeros_like(raw)
    K.write_f32(x, out, d.code, base, strides, nums)
    got = np.frombuffer(out[base:base + n * step * isz].tobytes(), np.uint8).reshape(n, step * isz)[:, :isz]
    np.testing.assert_array_equal(got.reshape(-1), ref)
    # int64 -> the dtype, wrapped (bool: nonzero)
    w = rng.integers(-2 ** 40, 2 ** 40, n)
    w[:3] = [0, 256, -65536]
    out = np.zeros_like(raw)
    K.write_i64(w, out, d.code, base, strides, nums)
    got = np.frombuffer(out[base:base + n * step * isz].tobytes(), np.uint8).reshape(n, step * isz)[:, :isz]
    want = (w != 0).astype(np.uint8) if name == "bool" else w.astype(d.np)
    np.testing.assert_array_equal(got.reshape(-1), np.frombuffer(want.tobytes(), np.uint8))
