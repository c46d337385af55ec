"""Interpreter handler for the NKI kernel custom-call (``AwsNeuronCustomNativeKernel``).

The reference value of a kernel inside an HLO program is what the NKI simulator path
computes for it: the kernel's BIR (decoded from the backend_config, see ``nki_call``) run
alone on birsim, in program order with unallocated memory. The simulator reads only that
BIR; this handler is the one place the HLO side hands a kernel to it. The compiled program
(the same BIR spliced into the program's BIR, then scheduled and allocated by walrus) is
checked against these values by ``bir_sim``, so a wrong binding of the kernel's I/O to the
program's tensors, or a scheduling/allocation bug around the kernel, is caught.
"""
import numpy as np

from neuronxcc.hlo import nki_call
from neuronxcc.hlo.interp_base import cast, dtype_of, is_tuple_shape, preparer, handler


def _runner(inst):
    call = nki_call.kernel_call_of(inst)
    module = nki_call.program_module(call)
    leaves = nki_call.result_leaves(inst.shape)
    tuple_result = is_tuple_shape(inst.shape)

    def run(args):
        from neuronxcc.starfish.birsim import simulate
        inputs = {n: np.ascontiguousarray(a) for n, a in zip(call.input_names, args)}
        res = simulate(module, [inputs[n] for n in module.inputs])
        by_name = dict(zip(module.outputs, res.outputs))
        outs = []
        for name, s in zip(call.output_names, leaves):
            v = by_name[name] if name in by_name else res.tensor(name)
            outs.append(cast(np.asarray(v).reshape(s.dims), dtype_of(s)))
        return tuple(outs) if tuple_result else outs[0]
    return run


@preparer("custom_nki_kernel")
def prep_nki_kernel(ev, inst):
    return _runner(inst)


@handler("custom_nki_kernel")
def h_nki_kernel(ev, inst, args):
    return _runner(inst)(args)
