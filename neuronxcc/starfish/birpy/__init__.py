"""BIR: the instruction-level IR of one NeuronCore (the "BIR machine").

What it owns: the data model (``ir``), the dtype registry (``dtypes``), the
opcode table (``opcodes``), JSON serde and per-engine streams (``serde``), the
verifier (``verifier``), the static cost model (``cost``), a text printer
(``printer``) and a builder (``builder``).

The machine: HBM tensors (input/output/const/scratch); on-chip memlocs in SBUF
(128 partitions x 192 KiB on v2, 224 KiB on v3) or PSUM (128 x 16 KiB, 8 banks
of 2 KiB); engines PE (TensorE), ACT (ScalarE), DVE (VectorE), POOL (GpSimd)
and SP (sync engine; DMA triggers). Every engine can trigger DMAs; a DMA runs
on its named queue (``attrs["queue"]``).

Addressing: an AccessPattern names a target, a dtype, an element offset (a
pelican Expr over loop variables and register names) and ``[[step, num], ...]``
free dims (outermost first). On chip, partition ``p`` of the AP is memloc
partition ``ap.start_partition + p``; the memloc's absolute partition is
``memloc.start_partition + that`` and the byte address of element ``e`` is
``memloc.byte_offset + e * itemsize`` once walrus has allocated it. Before
allocation each memloc is its own private storage. HBM APs index the tensor's
row-major elements; the AP dtype equals the tensor dtype.

Control: ``Loop(var, start, stop, step, body)`` with static bounds (loops stay
loops); registers are module-wide named int32 values written by
``register_load`` (clamped to ``attrs["min"]..attrs["max"]``); ``While(cond)``
runs its body while the register is nonzero (the body reloads it); ``If(cond)``
picks ``then_body`` / ``else_body``.

Synchronisation: an instruction waits until each semaphore in ``waits`` has
reached the value (``sem >= value``; the value may be a pelican Expr of loop
variables) and adds each ``signals`` increment when it completes.

Numbers follow nki.isa; ``neuronxcc.starfish.birsim`` is the executable
definition of every opcode.
"""
from neuronxcc.starfish.birpy import dtypes, opcodes
from neuronxcc.starfish.birpy.builder import Builder, ap, row_major_pattern
from neuronxcc.starfish.birpy.ir import (AccessPattern, If, Instruction, Loop, MemLoc, Module, Tensor, While,
                                         to_expr)
from neuronxcc.starfish.birpy.opcodes import OPCODES
from neuronxcc.starfish.birpy.serde import (dumps, load, load_attrs, loads, merge_engine_streams, module_from_json,
                                            module_to_json, save, split_by_engine, stream_from_json,
                                            stream_to_json)


def to_json(module, body=True, const_data=True):
    """Module -> JSON-able dict (see serde)."""
    return module_to_json(module, body=body, const_data=const_data)


def from_json(obj):
    """JSON dict -> Module. Raises BirFormatError."""
    return module_from_json(obj)


def verify(module, target=None):
    """Check MODULE against the machine rules; raises BirVerifyError."""
    from neuronxcc.starfish.birpy.verifier import verify as _verify
    return _verify(module, target)


def format_module(module):
    """A readable text listing (for debugging and logs)."""
    from neuronxcc.starfish.birpy.printer import format_module as _fmt
    return _fmt(module)


__all__ = ["AccessPattern", "Builder", "If", "Instruction", "Loop", "MemLoc", "Module", "OPCODES", "Tensor",
           "While", "ap", "dtypes", "dumps", "format_module", "from_json", "load", "load_attrs", "loads",
           "merge_engine_streams", "module_from_json", "module_to_json", "opcodes", "row_major_pattern", "save",
           "split_by_engine", "stream_from_json", "stream_to_json", "to_expr", "to_json", "verify"]
