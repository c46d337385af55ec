"""BIR data model: Module, Tensor, MemLoc, AccessPattern, Instruction, Loop, While, If.

Invariants:
  * names of tensors, memlocs and registers are unique in a module;
  * every body node (Instruction, Loop, While, If) has an integer ``id``,
    unique in the module; ``Module.renumber()`` assigns them in pre-order
    program order, and ``merge_engine_streams`` relies on id order being
    program order;
  * AccessPattern offsets are pelican ``Expr`` (elements of the AP's dtype)
    over loop variables and register names; ``pattern`` is ``[[step, num], ...]``
    outermost first, steps in elements (may be 0 or negative);
  * for SBUF/PSUM targets ``start_partition`` (relative to the memloc) and
    ``num_partitions`` are ints; for HBM tensors both are None and ``pattern``
    covers every dim of the access.
"""
from neuronxcc.starfish.birpy import dtypes as _dt

__all__ = ["Tensor", "MemLoc", "AccessPattern", "Instruction", "Loop", "While", "If", "Module",
           "to_expr", "TENSOR_KINDS"]

TENSOR_KINDS = ("input", "output", "const", "scratch")


_PEL = None
_CONSTS = {}


def pelican_lib():
    global _PEL
    if _PEL is None:
        from neuronxcc import pelican
        _PEL = pelican
    return _PEL


def to_expr(x):
    """An int, a str (pelican text) or an Expr -> Expr."""
    pel = _PEL or pelican_lib()
    if isinstance(x, pel.Expr):
        return x
    if isinstance(x, bool):
        raise TypeError("offset must be an int or Expr, not bool")
    if isinstance(x, int):
        e = _CONSTS.get(x)
        if e is None:
            e = pel.const(int(x))
            if len(_CONSTS) < 4096:
                _CONSTS[x] = e
        return e
    if hasattr(x, "__index__"):
        return pel.const(int(x))
    if isinstance(x, str):
        return pel.parse(x)
    raise TypeError("cannot make a pelican Expr from %r" % (x,))


class Tensor:
    """An HBM tensor. kind: input | output | const | scratch; data: numpy array for const.

    ``arena_offset`` (scratch only): its byte offset in the module's one shared scratch
    arena, where tensors whose lifetimes do not overlap share bytes (``birpy/hbm.py``);
    None: its own storage."""

    __slots__ = ("name", "kind", "dtype", "shape", "data", "arena_offset")

    def __init__(self, name, kind, dtype, shape, data=None, arena_offset=None):
        if kind not in TENSOR_KINDS:
            raise ValueError("tensor kind must be one of %s, got %r" % (TENSOR_KINDS, kind))
        self.name = name
        self.kind = kind
        self.dtype = _dt.get(dtype).name
        self.shape = tuple(int(s) for s in shape)
        self.data = data
        self.arena_offset = None if arena_offset is None else int(arena_offset)

    memory = "HBM"

    @property
    def num_elements(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self):
        return self.num_elements * _dt.itemsize(self.dtype)

    def __repr__(self):
        return "Tensor(%r, %r, %r, %r)" % (self.name, self.kind, self.dtype, self.shape)

    def __eq__(self, other):
        if not isinstance(other, Tensor):
            return NotImplemented
        if (self.name, self.kind, self.dtype, self.shape, self.arena_offset) != \
                (other.name, other.kind, other.dtype, other.shape, other.arena_offset):
            return False
        if (self.data is None) != (other.data is None):
            return False
        if self.data is None:
            return True
        import numpy as np
        a = np.ascontiguousarray(np.asarray(self.data).astype(_dt.np_dtype(self.dtype), copy=False))
        b = np.ascontiguousarray(np.asarray(other.data).astype(_dt.np_dtype(other.dtype), copy=False))
        return a.shape == b.shape and a.tobytes() == b.tobytes()


class MemLoc:
    """An on-chip allocation: memory SBUF | PSUM, partitions x bytes_per_partition.

    start_partition / byte_offset are absolute addresses in the shared array,
    set by the walrus allocators (None before allocation).
    """

    __slots__ = ("name", "memory", "partitions", "bytes_per_partition", "start_partition", "byte_offset")

    def __init__(self, name, memory, partitions, bytes_per_partition, start_partition=None, byte_offset=None):
        if memory not in ("SBUF", "PSUM"):
            raise ValueError("memloc memory must be SBUF or PSUM, got %r" % (memory,))
        self.name = name
        self.memory = memory
        self.partitions = int(partitions)
        self.bytes_per_partition = int(bytes_per_partition)
        self.start_partition = None if start_partition is None else int(start_partition)
        self.byte_offset = None if byte_offset is None else int(byte_offset)

    @property
    def allocated(self):
        return self.start_partition is not None and self.byte_offset is not None

    def __repr__(self):
        return "MemLoc(%r, %r, %d, %d, %r, %r)" % (self.name, self.memory, self.partitions,
                                                   self.bytes_per_partition, self.start_partition, self.byte_offset)

    def __eq__(self, other):
        if not isinstance(other, MemLoc):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)


class AccessPattern:
    """One operand: target (tensor or memloc name), dtype, offset Expr, [[step, num], ...]."""

    __slots__ = ("target", "dtype", "offset", "pattern", "start_partition", "num_partitions")

    def __init__(self, target, dtype, offset=0, pattern=None, start_partition=None, num_partitions=None):
        self.target = target
        self.dtype = _dt.get(dtype).name
        self.offset = to_expr(offset)
        self.pattern = [[int(s), int(n)] for s, n in (pattern if pattern is not None else [[1, 1]])]
        self.start_partition = None if start_partition is None else int(start_partition)
        self.num_partitions = None if num_partitions is None else int(num_partitions)

    @property
    def is_hbm(self):
        return self.num_partitions is None

    @property
    def free_shape(self):
        return [n for _, n in self.pattern]

    @property
    def free_size(self):
        """Elements per partition (on-chip) or all elements (HBM)."""
        n = 1
        for _, k in self.pattern:
            n *= k
        return n

    @property
    def shape(self):
        """Logical shape: [partitions, *nums] on chip, [*nums] for HBM."""
        if self.num_partitions is None:
            return self.free_shape
        return [self.num_partitions] + self.free_shape

    @property
    def num_elements(self):
        return self.free_size * (self.num_partitions or 1)

    @property
    def itemsize(self):
        return _dt.itemsize(self.dtype)

    def element_extent(self):
        """(lo, hi) element offsets reached relative to the offset expression."""
        lo = hi = 0
        for s, n in self.pattern:
            if n <= 0:
                continue
            d = s * (n - 1)
            if d < 0:
                lo += d
            else:
                hi += d
        return lo, hi

    def copy(self, **changes):
        ap = AccessPattern.__new__(AccessPattern)
        for k in self.__slots__:
            setattr(ap, k, changes.get(k, getattr(self, k)))
        if "offset" in changes:
            ap.offset = to_expr(changes["offset"])
        ap.pattern = [list(p) for p in ap.pattern]
        return ap

    def __eq__(self, other):
        if not isinstance(other, AccessPattern):
            return NotImplemented
        return (self.target, self.dtype, self.pattern, self.start_partition, self.num_partitions) == \
            (other.target, other.dtype, other.pattern, other.start_partition, other.num_partitions) and \
            str(self.offset) == str(other.offset)

    def __repr__(self):
        if self.num_partitions is None:
            return "%s:%s[%s + %s]" % (self.target, self.dtype, self.offset, self.pattern)
        return "%s:%s[p%d+%d][%s + %s]" % (self.target, self.dtype, self.start_partition, self.num_partitions,
                                           self.offset, self.pattern)


class Instruction:
    """opcode, engine, dsts/srcs APs, attrs, waits [(sem, value)], signals [(sem, increment)], id.

    A wait value may be a pelican Expr over loop variables (evaluated per
    iteration). ``name`` is a free-form debug label (e.g. the HLO op).
    """

    __slots__ = ("opcode", "engine", "dsts", "srcs", "attrs", "waits", "signals", "id", "name")

    def __init__(self, opcode, engine, dsts=(), srcs=(), attrs=None, waits=(), signals=(), id=None, name=None):
        self.opcode = opcode
        self.engine = engine
        self.dsts = list(dsts)
        self.srcs = list(srcs)
        self.attrs = dict(attrs or {})
        self.waits = [(str(s), v) for s, v in waits]
        self.signals = [(str(s), int(v)) for s, v in signals]
        self.id = id
        self.name = name

    kind = "inst"

    @property
    def operands(self):
        return self.dsts + self.srcs

    def __repr__(self):
        return "Instruction(#%s %s@%s)" % (self.id, self.opcode, self.engine)

    def __eq__(self, other):
        if not isinstance(other, Instruction):
            return NotImplemented
        return (self.opcode, self.engine, self.dsts, self.srcs, self.attrs, self.signals, self.id, self.name) == \
            (other.opcode, other.engine, other.dsts, other.srcs, other.attrs, other.signals, other.id, other.name) \
            and [(s, str(v)) for s, v in self.waits] == [(s, str(v)) for s, v in other.waits]


class Loop:
    """for var in range(start, stop, step): body. Static bounds; the var is a pelican name."""

    __slots__ = ("var", "start", "stop", "step", "body", "id")
    kind = "loop"

    def __init__(self, var, start, stop, step=1, body=None, id=None):
        if int(step) == 0:
            raise ValueError("loop step must be nonzero")
        self.var = var
        self.start = int(start)
        self.stop = int(stop)
        self.step = int(step)
        self.body = list(body or [])
        self.id = id

    @property
    def trip_count(self):
        # arithmetic, not len(range(...)): bounds past the C ssize_t range stay exact
        if self.step > 0:
            return max(0, -((self.start - self.stop) // self.step))
        return max(0, -((self.stop - self.start) // -self.step))

    @property
    def var_range(self):
        """Inclusive (lo, hi) of the loop variable, or None for zero trips."""
        n = self.trip_count
        if not n:
            return None
        last = self.start + (n - 1) * self.step
        return (min(self.start, last), max(self.start, last))

    def children(self):
        return [self.body]

    def __eq__(self, other):
        if not isinstance(other, Loop):
            return NotImplemented
        return (self.var, self.start, self.stop, self.step, self.body, self.id) == \
            (other.var, other.start, other.stop, other.step, other.body, other.id)

    def __repr__(self):
        return "Loop(#%s %s in %d:%d:%d, %d nodes)" % (self.id, self.var, self.start, self.stop, self.step, len(self.body))


class While:
    """while register[cond] != 0: body. The body must reload the register."""

    __slots__ = ("cond", "body", "id", "max_trips")
    kind = "while"

    def __init__(self, cond, body=None, id=None, max_trips=None):
        self.cond = cond
        self.body = list(body or [])
        self.id = id
        self.max_trips = max_trips

    def children(self):
        return [self.body]

    def __eq__(self, other):
        if not isinstance(other, While):
            return NotImplemented
        return (self.cond, self.body, self.id, self.max_trips) == (other.cond, other.body, other.id, other.max_trips)

    def __repr__(self):
        return "While(#%s %s, %d nodes)" % (self.id, self.cond, len(self.body))


class If:
    """if register[cond] != 0: then_body else: else_body."""

    __slots__ = ("cond", "then_body", "else_body", "id")
    kind = "if"

    def __init__(self, cond, then_body=None, else_body=None, id=None):
        self.cond = cond
        self.then_body = list(then_body or [])
        self.else_body = list(else_body or [])
        self.id = id

    def children(self):
        return [self.then_body, self.else_body]

    def __eq__(self, other):
        if not isinstance(other, If):
            return NotImplemented
        return (self.cond, self.then_body, self.else_body, self.id) == \
            (other.cond, other.then_body, other.else_body, other.id)

    def __repr__(self):
        return "If(#%s %s)" % (self.id, self.cond)


class Module:
    """One NeuronCore program: HBM tensors, on-chip memlocs, a body of nodes."""

    def __init__(self, name="module", target="trn1"):
        self.name = name
        self.target = target
        self.tensors = {}          # name -> Tensor (insertion ordered)
        self.memlocs = {}          # name -> MemLoc
        self.inputs = []           # input tensor names, parameter order
        self.outputs = []          # output tensor names, flattened result order
        self.body = []
        self.attrs = {}            # free-form module metadata (JSON-able)

    # -- construction ---------------------------------------------------
    def add_tensor(self, name, kind, dtype, shape, data=None):
        if name in self.tensors or name in self.memlocs:
            raise ValueError("duplicate name %r" % name)
        t = Tensor(name, kind, dtype, shape, data)
        self.tensors[name] = t
        if kind == "input":
            self.inputs.append(name)
        elif kind == "output":
            self.outputs.append(name)
        return t

    def add_memloc(self, name, memory, partitions, bytes_per_partition, start_partition=None, byte_offset=None):
        if name in self.tensors or name in self.memlocs:
            raise ValueError("duplicate name %r" % name)
        m = MemLoc(name, memory, partitions, bytes_per_partition, start_partition, byte_offset)
        self.memlocs[name] = m
        return m

    def target_of(self, ap):
        """The Tensor or MemLoc an AP (or a name) refers to. Raises KeyError."""
        name = ap if isinstance(ap, str) else ap.target
        t = self.tensors.get(name)
        return t if t is not None else self.memlocs[name]

    def memory_of(self, ap):
        return self.target_of(ap).memory

    # -- traversal ------------------------------------------------------
    def walk(self, body=None):
        """Yield every node in pre-order (program order)."""
        for node in (self.body if body is None else body):
            yield node
            if node.kind != "inst":
                for child in node.children():
                    yield from self.walk(child)

    def instructions(self):
        return [n for n in self.walk() if n.kind == "inst"]

    def renumber(self):
        """Assign ids 0, 1, 2, ... to every node in pre-order program order."""
        for i, n in enumerate(self.walk()):
            n.id = i
        return self

    def ensure_ids(self):
        """Renumber if any node lacks an id or ids are not increasing in program order."""
        last = -1
        for n in self.walk():
            if n.id is None or n.id <= last:
                return self.renumber()
            last = n.id
        return self

    def __eq__(self, other):
        if not isinstance(other, Module):
            return NotImplemented
        return (self.name, self.target, list(self.tensors.values()), list(self.memlocs.values()), self.inputs,
                self.outputs, self.body, self.attrs) == \
            (other.name, other.target, list(other.tensors.values()), list(other.memlocs.values()), other.inputs,
             other.outputs, other.body, other.attrs)

    def __repr__(self):
        return "Module(%r, %d tensors, %d memlocs, %d instructions)" % (
            self.name, len(self.tensors), len(self.memlocs), len(self.instructions()))
