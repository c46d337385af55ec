"""The NEFF packager: Kelper's writer, the shared reader, neff-info, custom ops.

    from neuronxcc.neff import write_neff, read_neff
    write_neff(path, module, name=..., fast_loading=False, io_transposes=None)
    neff = read_neff(path)

Modules: ``header`` (the 1024-byte header), ``container`` (tar/payload/hash,
member safety), ``writer`` (members from a BIR module, atomic write),
``reader`` (``Neff``), ``info`` (neff-info text), ``customop`` (registry,
ucode_lib, the builtin libraries through ctypes).
"""
from neuronxcc.errors import NeffFormatError
from neuronxcc.neff.header import NeffHeader
from neuronxcc.neff.reader import Neff, NeffVar, read_neff
from neuronxcc.neff.writer import write_neff

__all__ = ["write_neff", "read_neff", "Neff", "NeffVar", "NeffHeader", "NeffFormatError"]
