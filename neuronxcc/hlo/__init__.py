"""HLO front door: readers (HloModuleProto, HloProto, HLO text, model
directories), the module model, writers (proto, text) and verification.

See docs/INTERFACES.md section 3 for the API other layers use.
"""
from neuronxcc.hlo.model import (HloComputation, HloInstruction, HloModule, Shape, WindowDim, ConvDims,  # noqa: F401
                                 dtype_of, element_type_of)
from neuronxcc.hlo.loader import detect_format, load_module, load_module_bytes  # noqa: F401


def parse_hlo_text(text, verify=True):
    """HloModule from HLO text (str or bytes). Errors: HloParseError with line/column."""
    from neuronxcc.hlo.text_parser import parse_hlo_text as _parse
    return _parse(text, verify=verify)


def module_from_proto_bytes(data, verify=True):
    """HloModule from HloModuleProto/HloProto bytes."""
    from neuronxcc.hlo.proto_io import module_from_proto_bytes as _read
    return _read(data, verify=verify)


def module_to_proto_bytes(module):
    """Deterministic HloModuleProto bytes (equal modules give equal bytes); XLA loads them."""
    from neuronxcc.hlo.proto_io import module_to_proto_bytes as _write
    return _write(module)


def module_to_text(module, print_metadata=True):
    """XLA's HLO text syntax (XLA's parser reads it back to the same module)."""
    from neuronxcc.hlo.text_printer import module_to_text as _print
    return _print(module, print_metadata=print_metadata)


def clone_module(module):
    """An independent copy; weights are shared, not copied."""
    from neuronxcc.hlo.proto_io import clone_module as _clone
    return _clone(module)


def verify_module(module):
    from neuronxcc.hlo.verifier import verify_module as _verify
    return _verify(module)
