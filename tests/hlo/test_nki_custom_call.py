"""The NKI kernel custom-call (AwsNeuronCustomNativeKernel) on the HLO side: the op table accepts it,
the backend_config decodes (our traced-kernel JSON) or fails in one [NCC_ENKC001] line (a config of
the closed compiler), and the interpreter's value is the kernel's BIR run alone on birsim."""
import base64
import json

import numpy as np
import pytest

from neuronxcc.errors import NkiCustomCallError
from neuronxcc.hlo import nki_call, ops, parse_hlo_text
from neuronxcc.hlo.interpreter import evaluate
from support import nki_fragments as F
from neuronxcc.common.tolerances import assert_close


def test_targets_in_the_one_op_table():
    for t in nki_call.TARGETS:
        assert ops.is_implemented("custom-call", t)


def test_interpreter_runs_the_kernel_inside_called_computations():
    m = parse_hlo_text(F.hlo_text_two_calls())
    p0, p1 = F.random_inputs(0, (128, 64), (128, 64))
    out, = evaluate(m, [p0, p1])
    assert_close(out, F.two_calls_reference(p0, p1), row="compiled")


def test_interpreter_aliased_output_keeps_unstored_elements():
    m = parse_hlo_text(F.hlo_text_aliased())
    x, o = F.random_inputs(1, (128, 64), (128, 64))
    out, = evaluate(m, [x, o])
    np.testing.assert_array_equal(out, F.aliased_reference(x, o))


def _b64(doc):
    return base64.b64encode(json.dumps(doc).encode()).decode()


@pytest.mark.parametrize("config,words", [
    ("", "empty"),
    ("%%%not-base64", "not base64-encoded JSON"),
    (_b64({"kernel_version": 1, "klir_binary": {"binary": "/tmp/k.klir", "input_names": ["p"],
                                                "output_names": ["o"]}, "func_name": "k", "grid": []}),
     "'/tmp/k.klir'"),
    (_b64({"func_name": "my_kernel", "serialized_ir": "xyz", "grid": [1]}), "closed neuronx-cc (function 'my_kernel')"),
    (_b64({"format": "neuronxcc-nki", "version": 99}), "version 99"),
])
def test_unreadable_backend_config_is_one_clear_error(config, words):
    m = parse_hlo_text(F.hlo_text_foreign(config))
    with pytest.raises(NkiCustomCallError) as ei:
        evaluate(m, [np.zeros((4, 4), np.float32)])
    msg = ei.value.one_line()
    assert msg.startswith("[NCC_ENKC001] ") and words in msg and "\n" not in msg
    assert "custom-call k at model.py:12" in msg


def test_binding_mismatch_names_the_operand():
    cfg = F.backend_config(F.scale_add(128, 64), "scale_add")
    text = F.hlo_text_foreign(cfg)          # one f32[4,4] operand for a kernel of two [128,64] inputs
    with pytest.raises(NkiCustomCallError) as ei:
        evaluate(parse_hlo_text(text), [np.zeros((4, 4), np.float32)])
    assert "1 operands for a kernel of 2 inputs" in str(ei.value)
