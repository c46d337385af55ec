"""Every stage besides walrus does work linear in the program: the unrolled Llama-shaped decode
step (tests/support/llama.py, small dims) at 2 and 8 layers through hlo2penguin, the Frontend's
codegen, StaticIOTranspose, Kelper's NEFF writer, xla_infergoldens' interpreter and birsim.

The work of a stage is the number of Python-level calls it makes (``sys.setprofile``: Python
functions and the builtins / compiled functions they call), a deterministic count rather than a
time. Four times the layers must cost at most ``MAX_RATIO`` times the calls (a stage with fixed
start-up work stays below 4; the Frontend recomputing the residual stream from every earlier
layer gave 5.2), and the artifacts handed between stages (Penguin ops, BIR instructions, HBM
tensors, NEFF bytes) grow by at most the same factor. Walrus has its own structural tests
(tests/walrus: dependences per instruction bounded, one analysis per program state)."""
import os
import sys

import numpy as np

from support import llama

SMALL, LARGE = 2, 8
MAX_RATIO = 4.4


class _Calls:
    def __init__(self):
        self.n = 0

    def __call__(self, frame, event, arg):
        if event == "call" or event == "c_call":
            self.n += 1


def _counted(fn, *args):
    c = _Calls()
    sys.setprofile(c)
    try:
        out = fn(*args)
    finally:
        sys.setprofile(None)
    return out, c.n


def _measure(layers, tmp):
    import jax
    from neuronxcc.hlo import interpreter, load_module
    from neuronxcc.neff import write_neff
    from neuronxcc.starfish import birpy, birsim
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    from neuronxcc.starfish.penguin.io_transpose import write_io_transposes
    fn, args = llama.program("decode", layers, llama.SMALL, concrete=True)
    pb = jax.jit(fn).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    work, size = {}, {}
    graph, work["hlo2penguin"] = _counted(lambda: hlo_to_penguin(load_module(pb)))
    bir, work["frontend"] = _counted(lower_graph, graph)
    path = os.path.join(tmp, "bir%d.json" % layers)
    birpy.save(bir, path)
    _, work["static_io_transpose"] = _counted(write_io_transposes, path, os.path.join(tmp, "io%d.json" % layers))
    neff = os.path.join(tmp, "m%d.neff" % layers)
    _, work["kelper"] = _counted(write_neff, neff, bir)
    inputs = [np.asarray(a) for a in args]
    module = load_module(pb)
    _, work["xla_infergoldens"] = _counted(interpreter.evaluate, module, inputs)
    _, work["birsim"] = _counted(birsim.simulate, bir, inputs)
    size["penguin ops"] = len(graph.ops)
    size["BIR instructions"] = len(bir.instructions())
    size["HBM tensors"] = len(bir.tensors)
    size["NEFF bytes"] = os.path.getsize(neff)
    return work, size


def test_stages_other_than_walrus_are_linear_in_layers(tmp_path):
    w_small, s_small = _measure(SMALL, str(tmp_path))
    w_large, s_large = _measure(LARGE, str(tmp_path))
    factor = LARGE / SMALL
    bad = ["%s: %d -> %d calls (%.2fx for %gx the layers)" % (k, w_small[k], w_large[k], w_large[k] / w_small[k],
                                                              factor)
           for k in w_small if w_large[k] > MAX_RATIO * w_small[k]]
    bad += ["%s: %d -> %d (%.2fx)" % (k, s_small[k], s_large[k], s_large[k] / s_small[k])
            for k in s_small if s_large[k] > MAX_RATIO * s_small[k]]
    assert not bad, "superlinear in layers:\n" + "\n".join(bad)
    # the program really grew: the counts are not dominated by fixed work
    assert s_large["BIR instructions"] > 3 * s_small["BIR instructions"]
    assert w_large["frontend"] > 3 * w_small["frontend"]
