"""nki.FrameworkKernel, the legacy producer API framework integrations subclass: dump_config gives the
backend_config and the operand/result names of one AwsNeuronCustomNativeKernel custom-call, the kernel's
write-only parameters being results (not operands) as the original's example maps them; the call placed in
HLO is computed by the interpreter and by the compiled program (spliced, birsim) alike."""
import numpy as np

import neuronxcc.nki.language as nl
from neuronxcc.hlo import parse_hlo_text
from neuronxcc.hlo.interpreter import evaluate
from neuronxcc.nki._framework import FrameworkKernel
from neuronxcc.starfish.birsim import run_module
from neuronxcc.starfish.penguin.codegen import lower_graph
from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin


class Tensor:
    """A stand-in framework tensor."""

    def __init__(self, a):
        self.a = a


class ToyFrameworkKernel(FrameworkKernel):
    def translate_to_neuron_dtype(self, dtype):
        return np.dtype({"f32": np.float32}[dtype])

    def is_framework_tensor(self, t):
        return isinstance(t, Tensor)

    def map_framework_tensor(self, t):
        return t.a.shape, "f32"


def example_kernel(in1, in2, out):
    i = nl.program_id(0)
    rows = nl.ds(i * 128, 128)
    nl.store(out[rows, :], value=nl.add(nl.load(in1[rows, :]), nl.load(in2[rows, :])))


def accumulate_kernel(x, acc):
    nl.store(acc, value=nl.add(nl.load(acc), nl.load(x)))


def _hlo(cfg, n_in, shape="f32[256,64]"):
    params = "\n".join("  p%d = %s parameter(%d)" % (i, shape, i) for i in range(n_in))
    return """HloModule fk, entry_computation_layout={(%s)->%s}

ENTRY main {
%s
  ROOT k = %s custom-call(%s), custom_call_target="AwsNeuronCustomNativeKernel", api_version=API_VERSION_UNSPECIFIED, metadata={op_type="xla___op_NkiKernelCallImpl" op_name="xla___op_NkiKernelCallImpl"}, backend_config="%s"
}
""" % (", ".join([shape] * n_in), shape, params, shape, ", ".join("p%d" % i for i in range(n_in)), cfg)


def _both(text, inputs):
    m = parse_hlo_text(text)
    return evaluate(m, inputs)[0], run_module(lower_graph(hlo_to_penguin(m)), inputs)[0]


def test_write_only_out_parameter_is_the_result_not_an_operand():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((256, 64)).astype(np.float32) for _ in range(2))
    kernel = ToyFrameworkKernel(func_name=example_kernel.__name__, func=example_kernel, grid=(2,))
    cfg, ins, outs = kernel.dump_config(Tensor(a), Tensor(b), Tensor(np.zeros_like(a)))
    assert ins == ["in1", "in2"] and len(outs) == 1
    ref, compiled = _both(_hlo(cfg, 2), [a, b])
    np.testing.assert_array_equal(ref, a + b)
    np.testing.assert_array_equal(compiled, a + b)


def test_read_and_written_parameter_is_operand_and_result():
    rng = np.random.default_rng(1)
    x, acc = (rng.standard_normal((128, 64)).astype(np.float32) for _ in range(2))
    cfg, ins, outs = ToyFrameworkKernel(func=accumulate_kernel).dump_config(x, Tensor(acc))
    assert ins == ["x", "acc"] and len(outs) == 1
    ref, compiled = _both(_hlo(cfg, 2, "f32[128,64]"), [x, acc])
    np.testing.assert_array_equal(ref, x + acc)
    np.testing.assert_array_equal(compiled, x + acc)


def test_public_name():
    from neuronxcc import nki
    assert nki.FrameworkKernel is FrameworkKernel
