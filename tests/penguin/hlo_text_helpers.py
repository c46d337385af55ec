"""Test helpers for HLO written as text: HLO -> Penguin -> BIR -> birsim, checked against the
reference interpreter (itself checked against XLA:CPU through jax in tests/hlo)."""
import numpy as np

from penguin_helpers import assert_close, run_bir


def compile_text(text):
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    module = parse_hlo_text(text)
    return module, lower_graph(hlo_to_penguin(module))


def check_text(text, inputs, expected=None):
    """Compile HLO text, run it on birsim, compare every output with the interpreter (or ``expected``)."""
    from neuronxcc.hlo.interpreter import evaluate
    module, bir = compile_text(text)
    outs = run_bir(bir, inputs)
    exp = expected if expected is not None else evaluate(module, inputs)
    assert len(outs) == len(exp), (len(outs), len(exp))
    for k, (a, e) in enumerate(zip(outs, exp)):
        assert_close(a, np.asarray(e), "output%d" % k, row="compiled")
    return outs, bir
