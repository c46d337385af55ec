"""fusion / call / map computations inlined before lowering, add-dependency, scalar operands
of clamp and select, and element types the device cannot hold refused with one clean line."""
import numpy as np
import pytest

from hlo_text_helpers import check_text, compile_text
from support.hlo_reducers import logaddexp_reducer
from neuronxcc.common.tolerances import assert_close

R = np.random.default_rng(3)

FUSED = """HloModule xla_dump
fused_exp_add {
  a = f32[16,8] parameter(0)
  b = f32[8] parameter(1)
  bb = f32[16,8] broadcast(b), dimensions={1}
  e = f32[16,8] exponential(a)
  ROOT s = f32[16,8] add(e, bb)
}
sum {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y)
}
fused_reduce {
  p = f32[16,8] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[16] reduce(p, z), dimensions={1}, to_apply=sum
}
helper {
  h = f32[16] parameter(0)
  ROOT t = (f32[16], f32[16]) tuple(h, h)
}
ENTRY main {
  a = f32[16,8] parameter(0)
  b = f32[8] parameter(1)
  f = f32[16,8] fusion(a, b), kind=kLoop, calls=fused_exp_add
  r = f32[16] fusion(f), kind=kInput, calls=fused_reduce
  c = (f32[16], f32[16]) call(r), to_apply=helper
  tok = token[] after-all()
  g0 = f32[16] get-tuple-element(c), index=0
  d = f32[16] add-dependency(g0, tok)
  ROOT out = (f32[16,8], f32[16]) tuple(f, d)
}"""


def test_fusion_call_and_add_dependency_inlined():
    a = R.standard_normal((16, 8)).astype(np.float32)
    b = R.standard_normal(8).astype(np.float32)
    outs, _ = check_text(FUSED, [a, b])
    assert_close(outs[1], (np.exp(a) + b).sum(1), row="compiled")


MAP = "HloModule m\n" + logaddexp_reducer("logaddexp") + """ENTRY main {
  a = f32[64,20] parameter(0)
  b = f32[64,20] parameter(1)
  ROOT m = f32[64,20] map(a, b), dimensions={0,1}, to_apply=logaddexp
}"""


def test_map_applies_its_computation_elementwise():
    a = R.standard_normal((64, 20)).astype(np.float32) * 4
    b = R.standard_normal((64, 20)).astype(np.float32) * 4
    check_text(MAP, [a, b], expected=[np.logaddexp(a, b)])


SCALARS = """HloModule s
ENTRY main {
  x = f32[40,30] parameter(0)
  lo = f32[] parameter(1)
  p = pred[] parameter(2)
  hi = f32[] constant(0.5)
  c = f32[40,30] clamp(lo, x, hi)
  y = f32[40,30] negate(x)
  s = f32[40,30] select(p, c, y)
  i = s32[40,30] convert(x)
  m1 = s32[] constant(-1)
  p1 = s32[] constant(1)
  ic = s32[40,30] clamp(m1, i, p1)
  ROOT t = (f32[40,30], f32[40,30], s32[40,30]) tuple(c, s, ic)
}"""


@pytest.mark.parametrize("pv", [True, False])
def test_scalar_operands_of_clamp_and_select(pv):
    x = R.standard_normal((40, 30)).astype(np.float32) * 2
    lo = np.float32(-0.25)
    c = np.clip(x, lo, 0.5)
    check_text(SCALARS, [x, lo, np.bool_(pv)],
               expected=[c, c if pv else -x, np.clip(x.astype(np.int32), -1, 1)])


@pytest.mark.parametrize("et", ["c64", "c128"])
def test_complex_refused_with_one_clean_line(et):
    from neuronxcc.errors import UnsupportedOperatorError
    text = """HloModule c
ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  c = %s[4] complex(a, b)
  ROOT r = f32[4] real(c)
}""" % et
    text = text.replace("f32", "f64") if et == "c128" else text
    with pytest.raises(UnsupportedOperatorError) as ei:
        compile_text(text)
    line = ei.value.one_line()
    assert line.startswith("[NCC_") and "\n" not in line and "complex" in line and " c " in line + " "
