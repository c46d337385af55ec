"""The engine selectors and instruction enums of ``nki.isa`` (re-exported there), and the BIR engine
name each selector means. Imports nothing of the tracer."""
from enum import IntEnum

from neuronxcc.nki import errors as E

__all__ = ["dge_mode", "engine", "nc_version", "oob_mode", "reduce_cmd", "ENGINE_NAMES", "engine_name"]


class dge_mode(IntEnum):
    none = 0
    swdge = 1
    hwdge = 2
    unknown = 3


class engine(IntEnum):
    tensor = 1
    vector = 5
    scalar = 2
    gpsimd = 3
    sync = 6
    unknown = 0


class nc_version(IntEnum):
    gen2 = 2
    gen3 = 3


class oob_mode(IntEnum):
    error = 0
    skip = 1


class reduce_cmd(IntEnum):
    idle = 0
    reset = 1
    reset_reduce = 3
    reduce = 2


ENGINE_NAMES = {engine.tensor: "PE", engine.vector: "DVE", engine.scalar: "ACT", engine.gpsimd: "POOL",
                engine.sync: "SP"}


def engine_name(e, default="DVE", allowed=("DVE", "ACT", "POOL")):
    """The BIR engine of selector E (an ``engine`` member or a BIR name); DEFAULT for none / unknown."""
    if e is None or e == engine.unknown:
        return default
    name = ENGINE_NAMES.get(e, e if isinstance(e, str) else None)
    if name not in allowed:
        raise E.err_invalid_argument("engine %r is not supported here (allowed: %s)" % (e, ", ".join(allowed)))
    return name
