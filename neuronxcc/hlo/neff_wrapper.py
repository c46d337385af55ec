"""``hlo-neff-wrapper``: the compiled NEFF wrapped back into HLO.

    hlo-neff-wrapper MODEL --neff file.neff --output wrapped_neff.hlo

Writes the input module (HloModuleProto bytes) with its entry computation
reduced to its parameters plus one ``custom-call`` to ``AwsNeuronNeff``: its
operands are the parameters in order, its shape the entry's result shape,
its ``backend_config`` the raw NEFF bytes and its frontend attribute
``valid_inputs`` "1,1,..." (one per parameter). Computations the new entry no
longer calls are dropped; the module name, frontend attributes and
input/output aliasing are kept. ``wrap_neff`` is the library form.
"""
import logging

from neuronxcc.errors import InputFileError
from neuronxcc.hlo.model import HloComputation, HloInstruction, HloModule
from neuronxcc.common import toolshell
from neuronxcc.hlo import module_to_proto_bytes

log = logging.getLogger("neuronxcc.hlo.neff_wrapper")

TARGET = "AwsNeuronNeff"


def wrap_neff(module, neff_bytes):
    """A new HloModule: ``module``'s entry parameters feeding one AwsNeuronNeff custom-call."""
    if not neff_bytes:
        raise InputFileError("the NEFF to wrap is empty")
    entry = module.entry
    params = []
    for p in entry.parameters:
        params.append(HloInstruction(p.name, "parameter", p.shape, parameter_number=p.parameter_number,
                                     metadata=p.metadata, frontend_attributes=p.frontend_attributes))
    root = entry.root
    used = {p.name for p in params}
    name = "neff_custom_call"
    k = 0
    while name in used:
        k += 1
        name = "neff_custom_call.%d" % k
    call = HloInstruction(name, "custom-call", root.shape, operands=params,
                          attrs={"custom_call_target": TARGET,
                                 "backend_config": bytes(neff_bytes).decode("utf-8", "surrogateescape"),
                                 "api_version": "API_VERSION_ORIGINAL", "custom_call_has_side_effect": False},
                          frontend_attributes={"valid_inputs": ",".join("1" for _ in params)})
    if root.frontend_attributes.get("neff_output_names"):
        call.frontend_attributes["neff_output_names"] = root.frontend_attributes["neff_output_names"]
    new_entry = HloComputation(entry.name, params + [call], root=call)
    wrapped = HloModule(module.name, [new_entry], new_entry, frontend_attributes=module.frontend_attributes,
                        input_output_alias=module.input_output_alias)
    wrapped.verify()
    return wrapped


def _parser():
    p = toolshell.ToolParser(prog="hlo-neff-wrapper",
                           description="Wrap a compiled NEFF into the HLO module as one AwsNeuronNeff custom-call.")
    p.add_argument("model", metavar="MODEL", help="the HLO module the NEFF was compiled from (any form)")
    p.add_argument("--neff", required=True, help="the compiled NEFF")
    p.add_argument("--output", required=True, help="where to write the wrapped HloModuleProto")
    return p


def _body(argv):
    from neuronxcc.hlo.loader import load_module, read_input_bytes
    args = _parser().parse_args(argv)
    module = load_module(args.model)
    neff = read_input_bytes(args.neff)
    wrapped = wrap_neff(module, neff)
    toolshell.atomic_write(args.output, module_to_proto_bytes(wrapped))
    log.info("hlo-neff-wrapper: wrapped %d NEFF bytes for %d inputs into %s", len(neff),
             len(wrapped.entry.parameters), args.output)
    return 0


def main(argv=None):
    toolshell.console_logging()
    return toolshell.run_main("hlo-neff-wrapper", _body, argv, log, prefix=False)
