#!/usr/bin/env python3
"""Benchmark the HLO-breadth lowerings against the hand-written forms they should match,
measured in the same run (simulated device time on birsim's timeline and instruction count):

* torch-xla's LayerNorm (batch-norm-training on [1, rows, D], scale 1, offset 0) against
  jax's own layernorm ((x - mean) * rsqrt(var + eps)); target ratio 1.0;
* BatchNorm2d training (NCHW, batch-norm-training) against the same statistics written in
  jax (mean / var over axes 0, 2, 3); target <= 1.1;
* a logaddexp reduce (the reducer lowered as a tree of its own computation) against jax's
  logsumexp (max, exp, sum, log: ALU reductions); reported, no target;
* rng-bit-generator (Philox) bits against jax's default threefry bits (plain HLO ops),
  both compiled here; reported, no target.

    python scripts/bench_breadth.py [--quick]

Never asserts; prints one table.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from neuronxcc.hlo import load_module, parse_hlo_text  # noqa: E402
from neuronxcc.starfish.birsim import simulate  # noqa: E402
from support.hlo_reducers import logaddexp_reducer  # noqa: E402
from neuronxcc.starfish.penguin.codegen import lower_graph  # noqa: E402
from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin  # noqa: E402


def _from_jax(f, *args):
    pb = jax.jit(f).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    return lower_graph(hlo_to_penguin(load_module(pb)))


def _from_text(text):
    return lower_graph(hlo_to_penguin(parse_hlo_text(text)))


def _measure(module, inputs):
    res = simulate(module, inputs)
    return res.timeline.end, len(list(module.instructions()))


LN = """HloModule ln
ENTRY main {
  x = f32[1,%(r)d,%(d)d] parameter(0)
  one = f32[] constant(1)
  zero = f32[] constant(0)
  sc = f32[%(r)d] broadcast(one), dimensions={}
  of = f32[%(r)d] broadcast(zero), dimensions={}
  bn = (f32[1,%(r)d,%(d)d], f32[%(r)d], f32[%(r)d]) batch-norm-training(x, sc, of), epsilon=1e-05, feature_index=1
  ROOT y = f32[1,%(r)d,%(d)d] get-tuple-element(bn), index=0
}"""

BN2D = """HloModule bn2d
ENTRY main {
  x = f32[%(n)d,%(c)d,%(h)d,%(h)d] parameter(0)
  s = f32[%(c)d] parameter(1)
  o = f32[%(c)d] parameter(2)
  ROOT bn = (f32[%(n)d,%(c)d,%(h)d,%(h)d], f32[%(c)d], f32[%(c)d]) batch-norm-training(x, s, o), epsilon=1e-05, feature_index=1
}"""

LAE = """HloModule lae
""" + logaddexp_reducer("lae").replace("%", "%%") + """ENTRY main {
  x = f32[%(r)d,%(d)d] parameter(0)
  z = f32[] constant(-inf)
  ROOT r = f32[%(r)d] reduce(x, z), dimensions={1}, to_apply=lae
}"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args(argv)
    rows, d = (256, 128) if a.quick else (1024, 512)
    n, c, h = (4, 16, 14) if a.quick else (8, 64, 28)
    bits = 1 << (14 if a.quick else 18)
    r = np.random.default_rng(0)
    table = []

    x = r.standard_normal((1, rows, d)).astype(np.float32)

    def jax_ln(x):
        mu = x.mean(-1, keepdims=True)
        return (x - mu) * lax.rsqrt(((x - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    table.append(("LayerNorm [%d,%d]" % (rows, d), _measure(_from_text(LN % {"r": rows, "d": d}), [x]),
                  _measure(_from_jax(jax_ln, x[0]), [x[0]]), "jax layernorm", "1.0"))

    xb = r.standard_normal((n, c, h, h)).astype(np.float32)
    s, o = np.ones(c, np.float32), np.zeros(c, np.float32)

    def jax_bn(x, s, o):
        m = x.mean((0, 2, 3), keepdims=True)
        v = ((x - m) ** 2).mean((0, 2, 3), keepdims=True)
        y = (x - m) * lax.rsqrt(v + 1e-5) * s[None, :, None, None] + o[None, :, None, None]
        return y, m.reshape(-1), v.reshape(-1)
    table.append(("BatchNorm2d [%d,%d,%d,%d]" % (n, c, h, h),
                  _measure(_from_text(BN2D % {"n": n, "c": c, "h": h}), [xb, s, o]),
                  _measure(_from_jax(jax_bn, xb, s, o), [xb, s, o]), "jax batch stats", "<= 1.1"))

    xl = r.standard_normal((rows, d)).astype(np.float32)
    table.append(("logaddexp reduce [%d,%d]" % (rows, d), _measure(_from_text(LAE % {"r": rows, "d": d}), [xl]),
                  _measure(_from_jax(lambda v: jax.nn.logsumexp(v, axis=1), xl), [xl]), "jax logsumexp", "-"))

    key = np.array([1, 2, 3, 4], np.uint32)
    tkey = np.asarray(jax.random.key_data(jax.random.key(0)))
    table.append(("rng bits u32[%d]" % bits,
                  _measure(_from_jax(lambda k: lax.rng_bit_generator(k, (bits,), dtype=jnp.uint32)[1], key), [key]),
                  _measure(_from_jax(lambda k: jax.random.bits(jax.random.wrap_key_data(k), (bits,)), tkey), [tkey]),
                  "jax threefry (HLO ops)", "-"))

    print("%-28s %12s %8s %12s %8s %7s  %-22s %s" % ("program", "device us", "instrs", "ref us", "instrs",
                                                   "ratio", "reference", "target"))
    for name, (t, ni), (rt, rni), ref, target in table:
        print("%-28s %12.2f %8d %12.2f %8d %7.2f  %-22s %s" % (name, t * 1e6, ni, rt * 1e6, rni, t / rt, ref, target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
