"""A small convenience layer for writing BIR by hand or from codegen.

``Builder(module)`` appends instructions to the current body; ``loop``,
``while_``, ``if_`` / ``else_`` are context managers that nest. ``ap()``
makes access patterns with sensible defaults (whole tensor row-major, or a
memloc's partitions with a contiguous free range).
"""
import contextlib

from neuronxcc.starfish.birpy import dtypes as _dt
from neuronxcc.starfish.birpy.ir import AccessPattern, If, Instruction, Loop, While, pelican_lib

__all__ = ["Builder", "ap", "row_major_pattern"]


def row_major_pattern(shape):
    """[[step, num], ...] that walks SHAPE row-major (elements)."""
    pat = []
    step = 1
    for n in reversed(list(shape)):
        pat.append([step, int(n)])
        step *= int(n)
    return list(reversed(pat)) or [[1, 1]]


def ap(module, target, dtype=None, offset=0, pattern=None, start_partition=0, num_partitions=None, free=None):
    """An AccessPattern on TARGET with defaults.

    HBM tensor: dtype = the tensor's, pattern = row-major over its shape.
    Memloc: start_partition 0, num_partitions = memloc partitions,
    pattern = [[1, free]] (free defaults to the whole partition in DTYPE).
    """
    t = module.target_of(target)
    if t.memory == "HBM":
        dtype = dtype or t.dtype
        if pattern is None:
            pattern = row_major_pattern(t.shape)
        return AccessPattern(target, dtype, offset, pattern)
    if dtype is None:
        dtype = "float32"
    if num_partitions is None:
        num_partitions = t.partitions - start_partition
    if pattern is None:
        if free is None:
            free = t.bytes_per_partition // _dt.itemsize(dtype)
        pattern = [[1, free]]
    return AccessPattern(target, dtype, offset, pattern, start_partition, num_partitions)


class Builder:
    def __init__(self, module):
        self.module = module
        self._stack = [module.body]
        self._last_if = None

    @property
    def body(self):
        return self._stack[-1]

    @property
    def depth(self):
        """How many bodies are open: 1 at the top level of the module, one more per loop or branch."""
        return len(self._stack)

    def inst(self, opcode, engine, dsts=(), srcs=(), waits=(), signals=(), name=None, **attrs):
        i = Instruction(opcode, engine, dsts, srcs, attrs, waits, signals, name=name)
        self.body.append(i)
        return i

    def ap(self, target, **kw):
        return ap(self.module, target, **kw)

    @contextlib.contextmanager
    def loop(self, var, start, stop, step=1):
        lp = Loop(var, start, stop, step)
        self.body.append(lp)
        self._stack.append(lp.body)
        try:
            yield pelican_lib().var(var)
        finally:
            self._stack.pop()

    @contextlib.contextmanager
    def while_(self, cond, max_trips=None):
        w = While(cond, max_trips=max_trips)
        self.body.append(w)
        self._stack.append(w.body)
        try:
            yield w
        finally:
            self._stack.pop()

    @contextlib.contextmanager
    def if_(self, cond):
        node = If(cond)
        self.body.append(node)
        self._stack.append(node.then_body)
        try:
            yield node
        finally:
            self._stack.pop()
            self._last_if = node

    @contextlib.contextmanager
    def else_(self):
        node = self._last_if
        if node is None:
            raise ValueError("else_ without a preceding if_")
        self._stack.append(node.else_body)
        try:
            yield node
        finally:
            self._stack.pop()
            self._last_if = None

    def finish(self):
        return self.module.renumber()
