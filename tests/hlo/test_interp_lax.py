"""Single XLA ops in the configurations the corpus does not reach, emitted by
jax.lax and checked against XLA:CPU through the reference interpreter
(proto and text forms)."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import lax

import ml_dtypes

from support.corpus import interpreter_mismatches

R = np.random.RandomState(1)


def f32(*shape):
    return R.randn(*shape).astype(np.float32)


SPECIAL = np.array([0.0, -0.0, 1.5, -1.5, 2.5, -2.5, 0.49999997, 1e10, -1e10, 3e9, -3e9, np.nan, np.inf, -np.inf,
                    255.7, -128.9, 65535.5, 4294967296.0, 9.3e18, -9.3e18], np.float32)

CASES = {
    # float -> int conversions saturate, NaN -> 0
    "convert_saturating": (lambda x: tuple(x.astype(t) for t in (jnp.int8, jnp.uint8, jnp.int16, jnp.uint16,
                                                                  jnp.int32, jnp.uint32, jnp.bool_)), [SPECIAL]),
    "convert_bf16_to_int": (lambda x: (x.astype(jnp.int32), x.astype(jnp.uint8), x.astype(jnp.float32)),
                            [SPECIAL.astype(ml_dtypes.bfloat16)]),
    "convert_int_to_float": (lambda x: (x.astype(jnp.float32), x.astype(jnp.bfloat16), x.astype(jnp.int8),
                                        x.astype(jnp.uint16)),
                             [np.array([0, 1, -1, 2 ** 24 + 1, 2 ** 31 - 1, -2 ** 31, 300, -129], np.int32)]),
    "round_ops": (lambda x: (lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
                             lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), jnp.sign(x), jnp.floor(x)),
                  [SPECIAL]),
    "bitcast_convert": (lambda x: (lax.bitcast_convert_type(x, jnp.int32), lax.bitcast_convert_type(x, jnp.uint8),
                                   lax.bitcast_convert_type(lax.bitcast_convert_type(x, jnp.uint16),
                                                            jnp.float32)), [f32(3, 4)]),
    "bitcast_convert_scalar": (lambda s: (lax.bitcast_convert_type(s, jnp.int32),
                                          lax.bitcast_convert_type(s, jnp.uint8),
                                          lax.bitcast_convert_type(lax.bitcast_convert_type(s, jnp.uint16),
                                                                   jnp.float32)), [np.float32(-1.75)]),
    "reduce_precision": (lambda x: (lax.reduce_precision(x, 8, 7), lax.reduce_precision(x, 5, 10),
                                    lax.reduce_precision(x, 4, 3), lax.reduce_precision(x * 1e5, 5, 2)),
                         [np.concatenate([SPECIAL, f32(20)])]),
    "int_bits_u8": (lambda a: (lax.population_count(a), lax.clz(a), lax.shift_right_arithmetic(a, jnp.uint8(3)),
                               a // jnp.uint8(0), lax.clz(a.astype(jnp.int16) - 100)),
                    [np.arange(0, 256, 7, dtype=np.uint8)]),
    "shifts_out_of_range": (lambda a, s: (lax.shift_left(a, s), lax.shift_right_logical(a, s),
                                          lax.shift_right_arithmetic(a, s)),
                            [np.array([1, -1, 12345, -12345, 7, -8], np.int32),
                             np.array([0, 31, 32, 33, -1, 100], np.int32)]),
    "int_div_rem_by_zero": (lambda a, b: (lax.div(a, b), lax.rem(a, b)),
                            [np.array([7, -7, 0, -2 ** 31, -2 ** 31, 5], np.int32),
                             np.array([0, 0, 0, -1, 0, -3], np.int32)]),
    "uint_div_rem": (lambda a, b: (lax.div(a, b), lax.rem(a, b)),
                     [np.array([7, 9, 2 ** 32 - 1], np.uint32), np.array([0, 4, 2], np.uint32)]),
    "min_max_nan": (lambda a, b: (jnp.maximum(a, b), jnp.minimum(a, b), lax.max(a, b), lax.clamp(-1.0, a, b)),
                    [np.array([1, np.nan, 2, -0.0, np.inf], np.float32),
                     np.array([np.nan, 1, 3, 0.0, 1], np.float32)]),
    "compare_total_order": (lambda a, b: (a < b, a == b, a >= b),
                            [np.array([np.nan, -0.0, 1.0, -np.inf], np.float32),
                             np.array([np.nan, 0.0, 1.0, np.inf], np.float32)]),
    "pad_negative_interior": (lambda x: (lax.pad(x, -1.0, ((2, -3, 2), (-1, 1, 1))),
                                         lax.pad(x, 0.0, ((-1, -1, 0), (0, 0, 3)))), [f32(4, 5)]),
    "reduce_window_dilated": (lambda x: (lax.reduce_window(x, 0.0, lax.add, (2, 3), (1, 2), ((1, 2), (0, 1)),
                                                           base_dilation=(2, 1), window_dilation=(1, 2)),
                                         lax.reduce_window(x, -jnp.inf, lax.max, (3, 3), (2, 2), "SAME")),
                              [f32(6, 7)]),
    "reduce_window_nonidentity_init": (lambda x: (lax.reduce_window(x, 1.0, lax.add, (3,), (2,), ((2, 1),)),
                                                  lax.reduce_window(x, 0.5, lax.max, (2,), (1,), ((1, 1),),
                                                                    base_dilation=(2,))), [f32(7) - 2]),
    "reduce_window_variadic": (lambda x, i: lax.reduce_window(
        (x, i), (-jnp.inf, jnp.int32(0)),
        lambda a, b: (jnp.maximum(a[0], b[0]), jnp.where(a[0] >= b[0], a[1], b[1])), (2, 2), (1, 1), "VALID"),
        [f32(5, 6), np.arange(30, dtype=np.int32).reshape(5, 6)]),
    "reduce_variadic_generic": (lambda x: lax.reduce((x, -x), (0.0, 1.0),
                                                     lambda a, b: (a[0] + b[0], jnp.maximum(a[1], b[1]) * 1.0), (1,)),
                                [f32(4, 5) * 0.5]),
    "reduce_int_and_bool": (lambda a, m: (jnp.prod(a, axis=0), jnp.max(a, axis=1), jnp.min(a),
                                          jnp.any(m), jnp.all(m, axis=0), jnp.sum(m)),
                            [R.randint(-3, 4, size=(4, 5)).astype(np.int32), R.rand(4, 5) > 0.3]),
    "conv_batch_groups": (lambda x, w: lax.conv_general_dilated(
        x, w, (1,), "VALID", dimension_numbers=("NCH", "OIH", "NCH"), batch_group_count=2),
        [f32(4, 3, 7), f32(6, 3, 2)]),
    "conv_feature_groups_nhwc": (lambda x, w: lax.conv_general_dilated(
        x, w, (2, 1), ((1, 0), (2, 2)), lhs_dilation=(1, 2), rhs_dilation=(2, 1), feature_group_count=2,
        dimension_numbers=("NHWC", "HWIO", "NHWC")), [f32(2, 7, 5, 4), f32(2, 3, 2, 6)]),
    "conv_3d": (lambda x, w: lax.conv_general_dilated(x, w, (1, 2, 1), "SAME"), [f32(1, 2, 4, 5, 3),
                                                                                f32(3, 2, 2, 3, 2)]),
    "dot_general_batch": (lambda a, b: (lax.dot_general(a, b, (((2,), (1,)), ((0,), (2,)))),
                                        lax.dot_general(a, b, (((1, 2), (0, 1)), ((), ())))),
                          [f32(3, 4, 5), f32(4, 5, 3)]),
    "dot_int": (lambda a, b: (a @ b, jnp.dot(a.astype(jnp.int8), b.astype(jnp.int8),
                                             preferred_element_type=jnp.int32)),
                [R.randint(-9, 9, size=(3, 4)).astype(np.int32), R.randint(-9, 9, size=(4, 2)).astype(np.int32)]),
    "dot_bf16": (lambda a, b: (a @ b, lax.dot(a, b, preferred_element_type=jnp.float32)),
                 [f32(5, 64).astype(ml_dtypes.bfloat16), f32(64, 3).astype(ml_dtypes.bfloat16)]),
    "gather_batching_dims": (lambda x, i: jax.vmap(lambda r, j: r[j])(x, i), [f32(3, 6, 2),
                                                                             np.array([[0, 5], [2, 2], [1, 4]],
                                                                                      np.int32)]),
    "gather_clamps": (lambda x, i: lax.dynamic_slice(x, (i, i), (2, 3)), [f32(5, 6), np.int32(9)]),
    "gather_2d_indices": (lambda x, i: x[i[:, 0], i[:, 1]], [f32(5, 6), np.array([[0, 1], [4, 5], [2, 0]],
                                                                                 np.int32)]),
    "scatter_out_of_bounds_dropped": (lambda x, i, u: (x.at[i].add(u, mode="drop"), x.at[i].set(u, mode="drop")),
                                      [f32(5, 3), np.array([1, 7, -9, 1], np.int32), f32(4, 3)]),
    "scatter_batched": (lambda x, i, u: jax.vmap(lambda r, j, v: r.at[j].add(v))(x, i, u),
                        [f32(3, 6), np.array([[0, 0], [5, 1], [2, 3]], np.int32), f32(3, 2)]),
    "scatter_mul_min": (lambda x, i, u: (x.at[i].multiply(u), x.at[i].min(u)),
                        [f32(6), np.array([1, 1, 3], np.int32), f32(3)]),
    "sort_multi_key_and_stable": (lambda k1, k2, v: lax.sort((k1, k2, v), num_keys=2, is_stable=True),
                                  [R.randint(0, 3, size=(4, 9)).astype(np.int32),
                                   R.randint(0, 3, size=(4, 9)).astype(np.float32), f32(4, 9)]),
    "sort_descending_bf16": (lambda x: (-jnp.sort(-x, axis=0), jnp.argsort(x, axis=1, descending=True)),
                             [f32(7, 5).astype(ml_dtypes.bfloat16)]),
    "sort_bool_uint": (lambda m, u: (jnp.sort(m, axis=-1), jnp.sort(u)), [R.rand(3, 6) > 0.5,
                                                                        np.array([3, 2 ** 31 + 5, 0, 7], np.uint32)]),
    "top_k_ties_nan": (lambda x: lax.top_k(x, 4), [np.array([[1, 3, 3, np.nan, -np.inf, 3, 0, -0.0]],
                                                            np.float32)]),
    "top_k_int": (lambda x: lax.top_k(x, 3), [R.randint(-5, 5, size=(3, 8)).astype(np.int32)]),
    "select_and_scatter_padded": (lambda x: jax.grad(lambda y: jnp.sum(lax.reduce_window(
        y, -jnp.inf, lax.max, (3, 3), (2, 2), "SAME") ** 2))(x), [f32(5, 7)]),
    "map_op": (lambda x, y: lax.map(lambda t: t[0] * 2 + jnp.sin(t[1]), (x, y)), [f32(4), f32(4)]),
    "switch_index_clamped": (lambda i, x: lax.switch(i, [lambda v: v, lambda v: v * 2, lambda v: v - 3], x),
                             [np.int32(-4), f32(3)]),
    "nested_while": (lambda x: lax.fori_loop(0, 3, lambda i, c: lax.fori_loop(0, i + 1, lambda j, d: d * 1.1 + j,
                                                                             c), x), [f32(4)]),
    "iota_types": (lambda x: (lax.iota(jnp.float32, 5) + x, lax.broadcasted_iota(jnp.int32, (3, 4), 1),
                              lax.iota(jnp.uint8, 7)), [f32(5)]),
    "rng_uniform_bits": (lambda k: jax.random.bits(k, (4, 5), jnp.uint32), [np.array([3, 9], np.uint32)]),
    "erf_and_friends": (lambda x: (lax.erf(x), lax.erfc(x), lax.lgamma(jnp.abs(x) + 0.5),
                                   lax.digamma(jnp.abs(x) + 0.5), jnp.log(jnp.abs(x)), lax.logistic(x * 30)),
                        [f32(50) * 2]),
    "optimization_barrier": (lambda x: lax.optimization_barrier((x, x + 1)), [f32(3)]),
    "complex_parts": (lambda x: (lax.real(x), lax.imag(x), jnp.abs(x), x * x),
                      [(f32(4) + 1j * f32(4)).astype(np.complex64)]),
    "rng_bit_generator_rbg": (lambda x: (jax.random.bits(jax.random.key(7, impl="rbg"), (3, 5)),
                                         jax.random.normal(jax.random.key(3, impl="unsafe_rbg"), (9,)) + x,
                                         jax.random.bits(jax.random.key(1, impl="rbg"), (7,), jnp.uint8)),
                              [f32(9)]),
    "f8_convert_and_dot": (lambda x: (x.astype(jnp.float8_e4m3fn), x.astype(jnp.float8_e5m2),
                                      (x * 100).astype(jnp.float8_e4m3fn).astype(jnp.float32),
                                      jnp.dot(x.astype(jnp.float8_e4m3fn), x.astype(jnp.float8_e4m3fn).T,
                                              preferred_element_type=jnp.float32)),
                           [np.concatenate([f32(2, 6), np.array([[1e5, -1e5, np.nan, 0.3, 448.0, 500.0]],
                                                                  np.float32)])]),
    "fft_kinds": (lambda x: (jnp.fft.fft(x), jnp.fft.rfft(x.real), jnp.fft.irfft(jnp.fft.rfft(x.real), n=8),
                             jnp.fft.ifft2(x.reshape(2, 4)), jnp.fft.rfft2(x.real.reshape(2, 4))),
                  [(f32(8) + 1j * f32(8)).astype(np.complex64)]),
    "large_constant": (lambda x: x + jnp.asarray(np.arange(300, dtype=np.float32).reshape(3, 100)),
                       [f32(3, 100)]),
    "zero_size": (lambda a, b, e: (a @ b, jnp.sum(e, axis=1), jnp.max(e, axis=1, initial=-jnp.inf),
                                   jnp.concatenate([e, e], axis=1), jnp.sort(e, axis=1), jnp.cumsum(e, axis=1)),
                  [f32(3, 0), f32(0, 4), f32(2, 0)]),
    "f16_arith": (lambda a, b: (a + b, a * b, a / b, jnp.exp(a), a.astype(jnp.float32)),
                  [f32(10).astype(np.float16), (f32(10) + 3).astype(np.float16)]),
}


# 64-bit types need jax_enable_x64 while lowering and running.
X64_CASES = {
    "rng_bit_generator_philox_carry": (lambda s: (lax.rng_bit_generator(s, (2, 7), jnp.uint32),
                                                  lax.rng_bit_generator(s, (5,), jnp.uint64,
                                                                        lax.RandomAlgorithm.RNG_PHILOX),
                                                  lax.rng_bit_generator(s, (9,), jnp.uint16),
                                                  lax.rng_bit_generator(s, (3, 3), jnp.uint32,
                                                                        lax.RandomAlgorithm.RNG_THREE_FRY),
                                                  lax.rng_bit_generator(s, (5,), jnp.uint64,
                                                                        lax.RandomAlgorithm.RNG_THREE_FRY),
                                                  lax.rng_bit_generator(s, (7,), jnp.uint8,
                                                                        lax.RandomAlgorithm.RNG_THREE_FRY),
                                                  lax.rng_bit_generator(s, (3, 4, 6), jnp.uint32,
                                                                        lax.RandomAlgorithm.RNG_THREE_FRY),
                                                  lax.rng_bit_generator(s, (1, 3), jnp.uint16,
                                                                        lax.RandomAlgorithm.RNG_THREE_FRY),
                                                  lax.rng_bit_generator(s, (3, 5, 4), jnp.uint32,
                                                                        lax.RandomAlgorithm.RNG_THREE_FRY),
                                                  lax.rng_bit_generator(s, (2, 3), jnp.uint64,
                                                                        lax.RandomAlgorithm.RNG_THREE_FRY)),
                                       [np.array([0x0123456789ABCDEF, 0xFFFFFFFFFFFFFFFE], np.uint64)]),
    "int_bits_s64": (lambda b: (lax.clz(b), lax.population_count(b), b * b, b >> 3),
                     [np.array([0, 1, -1, 2 ** 40, -2 ** 62, 12345], np.int64)]),
    "f64_arith": (lambda a: (a * a, jnp.sin(a), jnp.sum(a), a.astype(jnp.int64)),
                  [np.arange(5, dtype=np.float64) * 0.7 - 1.0]),
    "convert_f64_to_s64_saturating": (lambda a: (a.astype(jnp.int64), a.astype(jnp.uint64)),
                                      [np.array([9.3e18, -9.3e18, 2.0 ** 63, np.nan, -1.5, 1e300], np.float64)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_lax_op_matches_xla(name):
    fn, args = CASES[name]
    problems = interpreter_mismatches(fn, args)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", sorted(X64_CASES))
def test_lax_op_64bit_matches_xla(name):
    fn, args = X64_CASES[name]
    jax.config.update("jax_enable_x64", True)
    try:
        problems = interpreter_mismatches(fn, args)
    finally:
        jax.config.update("jax_enable_x64", False)
    assert not problems, "\n".join(problems)
