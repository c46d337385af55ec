"""bitcast reinterprets bytes: layouts honoured, element bits reinterpreted (never converted by
value). XLA:CPU refuses a bitcast before its own layout assignment, so each case is checked
against the jax program that spells the same reinterpretation (transpose to the physical
order, reshape, lax.bitcast_convert_type), run on XLA:CPU, and against the interpreter."""
import jax
import ml_dtypes
import numpy as np
import pytest
from jax import lax

from hlo_text_helpers import check_text

R = np.random.default_rng(5)

CASES = [
    # (operand shape text, result shape text, numpy operand, jax program with the same meaning)
    ("f32[3,4]{0,1}", "f32[4,3]{1,0}", lambda: R.standard_normal((3, 4)).astype(np.float32),
     lambda x: x.T),
    ("f16[8,6]{1,0}", "s16[8,6]{1,0}", lambda: R.standard_normal((8, 6)).astype(np.float16),
     lambda x: lax.bitcast_convert_type(x, np.int16)),
    ("s32[6,5]{1,0}", "f32[5,6]{0,1}", lambda: R.integers(0, 2 ** 30, (6, 5)).astype(np.int32),
     lambda x: lax.bitcast_convert_type(x, np.float32).T),
    ("f32[2,3,4]{1,2,0}", "f32[24]{0}", lambda: R.standard_normal((2, 3, 4)).astype(np.float32),
     lambda x: x.transpose(0, 2, 1).reshape(24)),
    ("bf16[4,8]{0,1}", "f16[8,4]{1,0}", lambda: R.standard_normal((4, 8)).astype(ml_dtypes.bfloat16),
     lambda x: lax.bitcast_convert_type(x, np.float16).T),
    ("s16[10]{0}", "f16[2,5]{1,0}", lambda: R.integers(0, 2 ** 14, 10).astype(np.int16),
     lambda x: lax.bitcast_convert_type(x, np.float16).reshape(2, 5)),
]


@pytest.mark.parametrize("src,dst,make,ref", CASES, ids=["%s->%s" % (c[0], c[1]) for c in CASES])
def test_bitcast_layout_and_dtype(src, dst, make, ref):
    text = "HloModule bc\nENTRY main {\n  p = %s parameter(0)\n  b = %s bitcast(p)\n  ROOT c = %s copy(b)\n}\n" % (
        src, dst, dst.split("{")[0])
    x = make()
    want = np.asarray(jax.jit(ref)(x))
    outs, _ = check_text(text, [x])                       # device == interpreter
    assert outs[0].dtype == want.dtype
    np.testing.assert_array_equal(outs[0].view(np.uint8), np.ascontiguousarray(want).view(np.uint8))
