"""Every corpus program at the "small" size: HLO -> hlo2penguin -> Penguin codegen -> birsim,
compared with jax.jit on fresh inputs (the CLI path runs the "tiled" size in tests/e2e)."""
import pytest

from neuronxcc.common.tolerances import assert_close
from support import corpus


@pytest.mark.parametrize("name", [p.name for p in corpus.CORPUS])
def test_small_corpus_program_on_birsim(name):
    from neuronxcc.hlo import load_module
    from neuronxcc.starfish import birsim
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    prog = corpus.get(name)
    proto, _ = corpus.lower(prog, prog.make_args(0, "small"))
    module = lower_graph(hlo_to_penguin(load_module(proto)))
    args = prog.make_args(3, "small")
    outs = birsim.run_module(module, args)
    ref = corpus.reference(prog, args)
    assert len(outs) == len(ref)
    for k, (a, e) in enumerate(zip(outs, ref)):
        assert_close(a, e, "%s output%d" % (name, k), row="compiled")
