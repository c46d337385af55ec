"""Proto and text of the same JAX-lowered module read to equal models, and our
writers round-trip: XLA renders our re-serialised proto and our printed text
exactly as it renders JAX's original module."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reader_corpus as rc  # noqa: E402

from neuronxcc.hlo import load_module, parse_hlo_text  # noqa: E402
from neuronxcc.hlo.compare import diff_modules  # noqa: E402
from neuronxcc.hlo import module_to_proto_bytes, module_to_text

NAMES = sorted(rc.PROGRAMS)


@pytest.mark.parametrize("name", NAMES)
def test_proto_and_text_read_equal(name):
    pb, text_md, text_plain = rc.lowered(name)
    from_proto = load_module(pb)
    # XLA's full text (metadata resolved through its stack-frame sections) equals the proto, metadata included
    assert diff_modules(from_proto, load_module(text_md.encode())) == []
    # as_hlo_text() prints no metadata: everything else is equal
    assert diff_modules(from_proto, parse_hlo_text(text_plain), metadata=False) == []


@pytest.mark.parametrize("name", NAMES)
def test_writers_round_trip(name):
    pb, _, _ = rc.lowered(name)
    m = load_module(pb)
    again = load_module(module_to_proto_bytes(m))
    assert diff_modules(m, again) == []
    assert diff_modules(m, parse_hlo_text(module_to_text(m))) == []
    assert module_to_proto_bytes(again) == module_to_proto_bytes(m)


@pytest.mark.parametrize("name", NAMES)
def test_xla_reads_our_output_back_identically(name):
    pb, _, _ = rc.lowered(name)
    m = load_module(pb)
    original = rc.xla_text(pb)
    assert rc.xla_text(module_to_proto_bytes(m)) == original
    assert rc.xla_text(module_to_text(m)) == original


def test_corpus_covers_the_op_families():
    seen = set()
    for name in NAMES:
        seen.update(i.opcode for i in load_module(rc.lowered(name)[0]).instructions())
    for op in ("dot", "convolution", "reduce", "reduce-window", "select-and-scatter", "gather", "scatter", "sort",
               "while", "conditional", "call", "rng-bit-generator", "custom-call", "topk", "tuple",
               "get-tuple-element", "pad", "concatenate", "slice", "dynamic-slice", "dynamic-update-slice",
               "iota", "bitcast-convert", "reduce-precision", "reverse", "transpose", "convert", "compare",
               "select", "clamp", "popcnt", "count-leading-zeros", "shift-right-logical"):
        assert op in seen, op


def test_literals_of_every_framework_dtype():
    m = load_module(rc.lowered("constants")[0])
    import numpy as np
    lits = [i.literal for i in m.instructions() if i.opcode == "constant"]
    for et, want in rc._CONSTS.items():
        same = [x for x in lits if x.dtype == want.dtype and x.shape == want.shape
                and x.view(np.uint8).tobytes() == want.view(np.uint8).tobytes()]
        assert same, "no %s constant equal to %r" % (et, want)


def test_metadata_carries_source_lines():
    m = load_module(rc.lowered("mlp")[0])
    dots = [i for i in m.instructions() if i.opcode == "dot"]
    assert dots and all(i.metadata["source_file"].endswith("reader_corpus.py") for i in dots)
    assert all(i.metadata["source_line"] > 0 for i in dots)
    assert "reader_corpus.py:" in dots[0].source_location()
