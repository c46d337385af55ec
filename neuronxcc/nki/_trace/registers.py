"""Dynamic scalars: a single-element tile used in an index expression (``t[ix, off_tile[0, i] + iy]``)
becomes a sequencer register (a pelican variable ``r_nki<n>`` in the access pattern's offset), loaded
by a ``register_load`` on the consuming instruction's engine right before every instruction that
uses it (so the value read is the tile's current one, inside loops too; ``ops.emit`` does that)."""
import numpy as np

from neuronxcc import pelican as _pel
from neuronxcc.nki._trace import ops
from neuronxcc.nki._trace.context import current
from neuronxcc.nki._trace.index import Idx
from neuronxcc.nki._trace.movement import load

__all__ = ["as_register"]


def as_register(t, hi=None):
    """t's value as register ``r_nki<n>`` (an Idx); hi: the largest value it may take (a tile used directly as
    the index of a dimension of n elements: n - 1), so walrus's verifier can bound the addresses it reaches."""
    ctx = current()
    regs = ctx.__dict__.setdefault("registers", {})
    bounds = ctx.__dict__.setdefault("register_bounds", {})
    if t.buf.memory == "HBM":
        t = load(t.copy_view(axes=[]) if t.axes else t)
    if t.dtype != np.dtype(np.int32) or t.buf.memory != "SBUF":
        c = ops.new_tile((1, 1), np.int32, "SBUF", "reg32")
        ops.emit("tensor_copy", "DVE", [c], [t.copy_view(axes=[])])
        t = c
    name = "r_nki%d" % len(regs)
    regs[name] = t
    if hi is not None:
        bounds[name] = (0, int(hi))
    return Idx(_pel.var(name))
