"""The one element-type registry and the tables that are views of it."""
import ml_dtypes
import numpy as np
import pytest

from neuronxcc.common import dtypes as R


def test_rows_are_unique_and_complete():
    assert len({d.hlo for d in R.DTYPES}) == len({d.name for d in R.DTYPES}) == len(R.DTYPES)
    codes = [d.code for d in R.DTYPES if d.code is not None]
    assert len(codes) == len(set(codes))
    # every element type XLA's proto names for arrays that ml_dtypes can hold
    for hlo in ("pred", "s4", "s8", "s16", "s32", "s64", "u4", "u8", "u16", "u32", "u64", "f16", "bf16", "f32",
                "f64", "c64", "c128", "f8e4m3fn", "f8e5m2", "f8e4m3", "f8e4m3fnuz", "f8e5m2fnuz"):
        assert hlo in R.BY_HLO, hlo


@pytest.mark.parametrize("d", R.DTYPES, ids=lambda d: d.hlo)
def test_row_facts(d):
    assert d.itemsize == np.dtype(d.np).itemsize
    assert d.kind in ("float", "int", "uint", "bool", "complex")
    if d.kind == "float":
        assert np.issubdtype(d.np, np.floating) or d.np in (np.dtype(getattr(ml_dtypes, n)) for n in
                                                              ("bfloat16", "float8_e4m3", "float8_e4m3fn",
                                                               "float8_e5m2", "float8_e3m4", "float8_e4m3fnuz",
                                                               "float8_e5m2fnuz", "float8_e4m3b11fnuz"))
    if d.hlo is None:        # BIR-only (tfloat32): float32 host arrays, no HLO spelling
        assert d.name == "tfloat32" and d.np == np.float32 and R.hlo_name_of(d.np) == "f32"
        assert R.by_name(d.name) is d and R.by_name("tf32") is d and d.name not in R.hlo_numpy()
        return
    assert R.hlo_name_of(d.np) == d.hlo
    assert R.by_name(d.name) is d and R.by_name(d.hlo) is d


def test_onchip_narrowing():
    assert [R.onchip_as(n) for n in ("int64", "uint64", "float64", "float32", "bfloat16")] == \
        ["int32", "uint32", "float32", "float32", "bfloat16"]
    assert all(R.by_name(R.onchip_as(d.name)).onchip for d in R.DTYPES if d.code is not None)


def test_hlo_model_and_interpreter_are_views():
    from neuronxcc.hlo import interp_base, model
    for d in R.DTYPES:
        if d.hlo is None:
            continue
        assert model.dtype_of(d.hlo) == d.np
        assert model.element_type_of(d.np) == d.hlo
        assert interp_base.is_low_float(d.np) == (d.kind == "float" and d.itemsize < 4)
        assert interp_base.is_int(d.np) == (d.kind in ("int", "uint"))


def test_birpy_is_the_bir_view():
    from neuronxcc.starfish.birpy import dtypes as B
    bir = [d for d in R.DTYPES if d.code is not None]
    assert sorted(B.DTYPES) == sorted(d.name for d in bir)
    for d in bir:
        b = B.get(d.name)
        assert (b.code, b.itemsize, b.is_int, b.signed, b.onchip) == (d.code, d.bir_np.itemsize, d.is_int, d.signed,
                                                                      d.onchip)
        assert B.get(d.hlo or "tf32") is b
    assert B.np_dtype("bool") == np.uint8            # BIR stores bool as one byte 0/1


def test_penguin_views():
    from neuronxcc.starfish.penguin import hlo2penguin, ir, tiles
    for hlo, name in hlo2penguin.HLO_TO_DTYPE.items():
        assert R.by_hlo(hlo).name == name and R.by_hlo(hlo).lowered
        assert ir.np_dtype(name) == R.by_name(name).np
    assert tiles.onchip_dtype("int64") == "int32"
    assert "f8e4m3" not in hlo2penguin.HLO_TO_DTYPE      # a BIR type the lowering does not accept


def test_kernel_codes_are_checked_against_the_registry():
    from neuronxcc.starfish.birsim import _kernels, state
    assert _kernels.DTYPE_CODES == {d.name: d.code for d in R.DTYPES if d.code is not None}
    state.check_kernel_codes(_kernels.DTYPE_CODES)
    wrong = dict(_kernels.DTYPE_CODES, bfloat16=2, float16=1)
    with pytest.raises(ImportError, match="dtype codes"):
        state.check_kernel_codes(wrong)


def test_nan_payload_table_is_the_registrys():
    """text_printer and text_scan read one NaN-payload table, derived from the registry rows; the
    payload width of each float type is its mantissa."""
    import ml_dtypes
    from neuronxcc.hlo import text_printer, text_scan
    assert text_printer.NAN_PAYLOAD_BITS is R.NAN_PAYLOAD_BITS is text_scan.NAN_PAYLOAD_BITS
    assert R.NAN_PAYLOAD_BITS == {d.hlo: d.nan_payload for d in R.DTYPES if d.nan_payload}
    for d in R.DTYPES:
        if d.nan_payload:
            assert d.nan_payload == ml_dtypes.finfo(d.np).nmant, d.hlo


def test_nki_dtype_tables_are_the_registrys():
    import numpy as np
    from neuronxcc.nki import language as nl
    from neuronxcc.nki._trace import dtypes as D
    assert nl.bfloat16 is R.by_name("bfloat16").np and nl.float8_e4m3fn is R.by_name("float8_e4m3fn").np
    floats = {d.np for d in R.DTYPES if d.is_float and d.onchip}
    assert set(D._FLOAT_RANK) == floats | {D.TFLOAT32}
    for d in R.DTYPES:                       # the 64-bit types a kernel may name are held in 32 bits
        if d.kind != "complex" and not d.onchip:
            assert D.np_dtype(d.np) == R.by_name(R.onchip_as(d.name)).np
    assert D.np_dtype(np.float64) == np.float32 and D.promote(nl.float16, nl.bfloat16) == np.float32


def test_round_tf32_is_rne_to_ten_mantissa_bits_and_matches_birsim():
    from neuronxcc.starfish.birsim import _kernels as K
    one = np.float32(1)
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -11 + 2 ** -20, -(1 + 2 ** -11 + 2 ** -20),
                  3.4028235e38, np.inf, -np.inf, np.nan, -0.0, 1e-45, 2 ** -130], np.float32)
    r = R.round_tf32(x)
    assert r[0] == one                                     # tie: to the even neighbour
    assert r[1] == 1 + 2 ** -9                             # tie: up to the even neighbour
    assert r[2] == 1 + 2 ** -10 and r[3] == -(1 + 2 ** -10)
    assert np.isposinf(r[4]) and np.isposinf(r[5]) and np.isneginf(r[6]) and np.isnan(r[7])
    assert r[8] == 0 and np.signbit(r[8]) and r[9] == 0 and r[10] == np.float32(2 ** -130)
    assert R.round_tf32(np.float32(1.25)).shape == ()
    rng = np.random.default_rng(0)
    y = (rng.standard_normal(20000) * 10.0 ** rng.integers(-40, 38, 20000)).astype(np.float32)
    y = np.concatenate([y, x])
    ry = R.round_tf32(y)
    assert not (ry.view(np.uint32) & np.uint32(0x1FFF)).any()            # 10 mantissa bits left
    fin = np.isfinite(y) & np.isfinite(ry)
    assert np.all(np.abs(ry[fin].astype(np.float64) - y[fin]) <= 2.0 ** -11 * np.abs(y[fin]) + 2.0 ** -137)  # half a tf32 denormal step
    out = np.zeros(y.size * 4, np.uint8)
    K.cast_f32(y, K.DTYPE_CODES["tfloat32"], out)
    assert np.array_equal(out.view(np.uint32), ry.view(np.uint32))      # birsim's encoder, bit for bit
    assert np.array_equal(R.round_to("tf32")(y).view(np.uint32), ry.view(np.uint32))


def test_auto_cast_types_are_registry_rows():
    from neuronxcc.common.tolerances import CAST_UNIT_ROUNDOFF
    from neuronxcc.starfish.penguin.autocast import TYPE_NAMES
    assert {n: R.by_name(n).mantissa_bits for n in ("f32", "bf16", "f16", "tf32", "fp8_e4m3", "f8e5m2")} == \
        {"f32": 23, "bf16": 7, "f16": 10, "tf32": 10, "fp8_e4m3": 3, "f8e5m2": 2}
    assert TYPE_NAMES == {t: R.by_name(t).name for t in R.AUTO_CAST_TYPES}
    assert CAST_UNIT_ROUNDOFF == {t: 2.0 ** -(R.by_name(t).mantissa_bits + 1) for t in R.AUTO_CAST_TYPES}
