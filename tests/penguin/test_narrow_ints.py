"""s4 / u4 / s2 / u2: stored one value per byte; integer arithmetic and integer converts wrap to
the width, float converts saturate (NaN -> 0), as XLA:CPU computes them (checked through jax);
jax's int4 weights (x.astype(jnp.int4) then back to f32 for a matmul) against XLA:CPU."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from hlo_text_helpers import check_text
from penguin_helpers import check

R = np.random.default_rng(4)

TEXT = """HloModule narrow
ENTRY main {
  w = s4[16,8] parameter(0)
  u = u4[16,8] parameter(1)
  x = f32[16,8] parameter(2)
  wf = f32[16,8] convert(w)
  uf = f32[16,8] convert(u)
  xs = s4[16,8] convert(x)
  xu = u4[16,8] convert(x)
  sum = s4[16,8] add(w, xs)
  prod = u4[16,8] multiply(u, xu)
  i = s32[16,8] convert(x)
  t = s2[16,8] convert(i)
  tf = f32[16,8] convert(t)
  y = f32[16,8] multiply(wf, uf)
  ROOT r = (f32[16,8], s4[16,8], u4[16,8], s4[16,8], f32[16,8], u4[16,8]) tuple(y, xs, xu, sum, tf, prod)
}"""


def test_s4_u4_s2_storage_convert_and_wrapping_arithmetic():
    w = R.integers(-8, 8, (16, 8)).astype(ml_dtypes.int4)
    u = R.integers(0, 16, (16, 8)).astype(ml_dtypes.uint4)
    x = (R.standard_normal((16, 8)) * 9).astype(np.float32)
    check_text(TEXT, [w, u, x])


def test_jax_int4_weights():
    w = R.integers(-8, 8, (32, 16)).astype(np.float32)
    x = R.standard_normal((8, 32)).astype(np.float32)
    check(lambda x, w: x @ w.astype(jnp.int4).astype(jnp.float32), x, w)


def test_converts_into_sub_byte_types_match_xla():
    x = np.array([9.7, -9.5, 100.0, 7.9, -8.2, 3.5, np.nan, np.inf, -np.inf, -0.5, 1e10, 15.5], np.float32)
    i = np.array([9, -9, 100, 7, -8, 3, 0, 15, 16, -1, 2 ** 30, -17], np.int32)

    def f(x, i):
        return (x.astype(jnp.int4), x.astype(jnp.uint4), i.astype(jnp.int4), i.astype(jnp.uint4),
                i.astype(jnp.int2), (i.astype(jnp.int4) * 3).astype(jnp.int32))
    check(f, x, i)
