"""Every corpus program, lowered by JAX to HloModuleProto and to HLO text,
evaluates through the reference interpreter to XLA:CPU's results within the
per-dtype tolerances of neuronxcc.common.tolerances; proto and text agree
bit for bit."""
import pytest

from support import corpus


@pytest.mark.parametrize("program", corpus.CORPUS, ids=lambda p: p.name)
def test_corpus_program_matches_xla(program):
    args = program.make_args(0, "small")
    problems = corpus.interpreter_mismatches(program.fn, args)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("name", ["transformer_block", "sort", "gather_scatter", "conv_grads", "int_zoo"])
def test_corpus_program_matches_xla_other_seed(name):
    program = corpus.get(name)
    problems = corpus.interpreter_mismatches(program.fn, program.make_args(7, "small"))
    assert not problems, "\n".join(problems)


def test_corpus_covers_the_required_families():
    names = {p.name for p in corpus.CORPUS}
    for required in ("mlp_gelu_softmax", "layernorm", "rmsnorm_rotary", "causal_attention", "transformer_block",
                     "conv_relu_maxpool", "embedding_lookup", "top_k", "argmax", "int_zoo", "shape_ops", "loops",
                     "conditional", "bf16_matmul", "kv_cache_update", "batched_einsum", "mlp_train_step",
                     "cumsum", "sort", "gather_scatter", "tuple_outputs", "matmul_grad"):
        assert required in names
    dtypes = set()
    for p in corpus.CORPUS:
        dtypes.update(p.dtypes)
    assert {"f32", "bf16", "s32", "pred"} <= dtypes


@pytest.mark.parametrize("size", corpus.SIZES)
def test_argument_builders_are_seeded(size):
    import numpy as np
    for p in corpus.CORPUS:
        a, b = p.make_args(3, size), p.make_args(3, size)
        assert all(np.array_equal(x, y, equal_nan=True) for x, y in zip(a, b)), p.name


def test_tiled_sizes_span_several_tiles():
    import numpy as np
    x = corpus.get("mlp_gelu_softmax").make_args(0, "tiled")[0]
    assert all(d > 128 for d in x.shape) and any(d % 128 for d in x.shape)
    n = corpus.get("matmul_grad").make_args(0, "tiled")[0].shape[0]
    assert n > 256 and n % 128
    assert np.all(corpus.get("embedding_lookup").make_args(0, "tiled")[1] < 1000)


@pytest.mark.parametrize("name", ["transformer_block", "matmul_grad", "gather_scatter", "conv_variants", "sort"])
def test_tiled_size_matches_xla(name):
    # shapes spanning several 128-partition tiles, not multiples of 128
    program = corpus.get(name)
    problems = corpus.interpreter_mismatches(program.fn, program.make_args(1, "tiled"))
    assert not problems, "\n".join(problems)
