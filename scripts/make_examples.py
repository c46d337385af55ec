#!/usr/bin/env python3
"""Regenerate the bundled examples in examples/ (needs jax).

Each example directory holds the HLO module a framework would hand
neuronx-cc (serialized HloModuleProto and HLO text), seeded inputs, and the
outputs JAX itself computes for them (the reference the quick start checks
the simulator against).
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mlp():
    import jax
    import jax.numpy as jnp

    def f(x, w1, b1, w2, b2):
        h = jax.nn.gelu(x @ w1 + b1)
        return jax.nn.softmax(h @ w2 + b2, axis=-1)

    rng = np.random.default_rng(0)
    args = [rng.standard_normal(s).astype(np.float32) * sc
            for s, sc in [((64, 256), 1.0), ((256, 512), 0.06), ((512,), 0.1), ((512, 128), 0.04), ((128,), 0.1)]]
    return f, args


EXAMPLES = {"mlp": mlp}


def write_example(name, f, args):
    import jax

    out = os.path.join(HERE, "examples", name)
    os.makedirs(out, exist_ok=True)
    comp = jax.jit(f).lower(*args).compiler_ir("hlo")
    with open(os.path.join(out, "model.hlo_module.pb"), "wb") as fh:
        fh.write(comp.as_serialized_hlo_module_proto())
    with open(os.path.join(out, "model.hlo"), "w") as fh:
        fh.write(comp.as_hlo_text())
    np.savez(os.path.join(out, "inputs.npz"), **{"input%d" % i: a for i, a in enumerate(args)})
    res = jax.jit(f)(*args)
    res = res if isinstance(res, (tuple, list)) else [res]
    np.savez(os.path.join(out, "expected.npz"), **{"output%d" % i: np.asarray(r) for i, r in enumerate(res)})
    print("wrote", out)


def main(argv):
    for name in argv or sorted(EXAMPLES):
        f, args = EXAMPLES[name]()
        write_example(name, f, args)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
