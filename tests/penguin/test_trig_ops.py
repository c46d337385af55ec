"""acos/acosh/asin/asinh/atanh/cosh/sinh as HLO opcodes (as MHLO's exporter prints them):
interpreter against XLA:CPU (jax's arccos ... on the same values), device against both."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from hlo_text_helpers import check_text

R = np.random.default_rng(9)
DOMAIN = {"acos": (-1, 1), "asin": (-1, 1), "atanh": (-0.99, 0.99), "acosh": (1, 40), "asinh": (-30, 30),
          "cosh": (-9, 9), "sinh": (-9, 9)}
JAX = {"acos": jnp.arccos, "asin": jnp.arcsin, "atanh": jnp.arctanh, "acosh": jnp.arccosh, "asinh": jnp.arcsinh,
       "cosh": jnp.cosh, "sinh": jnp.sinh}


def _values(op, dt):
    lo, hi = DOMAIN[op]
    x = R.uniform(lo, hi, 200)
    x[:6] = [lo, hi, 0.0, 1e-3 * np.sign(hi), -1e-4, (lo + hi) / 2]
    if op == "acosh":
        x[2:5] = [1.0, 1.0001, 1e20]
    if op == "asinh":
        x[3:5] = [1e20, -3e19]
    return x.astype(dt).reshape(8, 25)


@pytest.mark.parametrize("op", sorted(DOMAIN))
def test_inverse_and_hyperbolic_trig(op):
    text = "HloModule t\nENTRY main {\n  p = f32[8,25] parameter(0)\n  ROOT r = f32[8,25] %s(p)\n}\n" % op
    x = _values(op, np.float32)
    want = np.asarray(jax.jit(JAX[op])(x))
    check_text(text, [x], expected=[want])      # device against XLA:CPU
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.hlo.interpreter import evaluate
    from penguin_helpers import assert_close
    assert_close(evaluate(parse_hlo_text(text), [x])[0], want, "interpreter")


def test_bf16_sinh_acos():
    text = ("HloModule t\nENTRY main {\n  p = bf16[8,25] parameter(0)\n  s = bf16[8,25] sinh(p)\n"
            "  c = bf16[8,25] clamp(bf16[] constant(-1), p, bf16[] constant(1))\n"
            "  a = bf16[8,25] acos(c)\n  ROOT t = (bf16[8,25], bf16[8,25]) tuple(s, a)\n}\n")
    x = _values("sinh", ml_dtypes.bfloat16)
    check_text(text.replace("clamp(bf16[] constant(-1), p, bf16[] constant(1))", "clamp(lo, p, hi)").replace(
        "  c = ", "  lo = bf16[] constant(-1)\n  hi = bf16[] constant(1)\n  c = "), [x])


@pytest.mark.parametrize("e,m", [(5, 10), (8, 7), (4, 3), (5, 2), (6, 12), (8, 1), (3, 23)])
def test_reduce_precision_any_widths_against_xla(e, m):
    """jax.lax.reduce_precision runs on XLA:CPU; the device matches it bit for bit (f32 denormal
    inputs aside: XLA:CPU runs with denormals flushed, and is only held to the f32 tolerance there)."""
    from jax import lax
    x = (R.standard_normal(400) * np.exp(R.uniform(-30, 30, 400))).astype(np.float32)
    x[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -3e38, 65504.0]
    x = x.reshape(16, 25)
    want = np.asarray(jax.jit(lambda v: lax.reduce_precision(v, e, m))(x))
    text = ("HloModule rp\nENTRY main {\n  p = f32[16,25] parameter(0)\n"
            "  ROOT r = f32[16,25] reduce-precision(p), exponent_bits=%d, mantissa_bits=%d\n}\n" % (e, m))
    outs, _ = check_text(text, [x], expected=[want])
    same = (outs[0] == want) | (np.isnan(outs[0]) & np.isnan(want)) | (np.abs(x) < np.finfo(np.float32).tiny)
    assert same.all(), (x[~same][:4], outs[0][~same][:4], want[~same][:4])
