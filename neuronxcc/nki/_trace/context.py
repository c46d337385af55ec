"""The trace of one kernel: buffers, the traced instruction tree, loops, the current context.

A kernel function runs once under a ``TraceContext``. Every nl/nisa call appends a ``TInst``
(opcode, engine, destination and source ``Tensor`` views, attributes, mask, axis links, the
kernel's file:line) to the innermost open body; ``affine_range`` / ``sequential_range`` open a
``TLoop`` whose body is traced once with a symbolic iterator. ``lower`` turns the tree into BIR.

``Buf`` is one storage object: an HBM tensor (kernel parameter, shared_hbm / hbm allocation) or an
on-chip SBUF / PSUM tensor (a BIR memloc; its partition dimension is ``pdim``, every other dim is
laid out row-major in the free bytes of each partition).
"""
from neuronxcc import pelican as _pel
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import dtypes as D
from neuronxcc.nki._trace.active import current, current_or_none, set_current  # noqa: F401 (re-exported)
from neuronxcc.nki._trace.index import IndexVars

__all__ = ["TraceContext", "TInst", "TLoop", "Buf", "current", "current_or_none"]


class Buf:
    """A storage object (see module doc). ``memory``: HBM | SBUF | PSUM."""

    __slots__ = ("name", "memory", "shape", "dtype", "pdim", "kind", "producer", "uses", "param_index",
                 "written", "read", "level", "alloc", "data", "origin")

    def __init__(self, name, memory, shape, dtype, pdim=0, kind="scratch"):
        self.name = name
        self.memory = memory
        self.shape = tuple(int(s) for s in shape)
        self.dtype = D.np_dtype(dtype)
        self.pdim = pdim
        self.kind = kind              # HBM: input | shared | private ; on chip: tile | ndarray
        self.producer = None          # the TInst that created this tile (fresh result tiles)
        self.uses = 0
        self.param_index = None
        self.written = False
        self.read = False
        self.level = 0
        self.alloc = None             # direct allocation (ncc.sbuf.mod_alloc ...) or None
        self.data = None              # const HBM data
        self.origin = None            # (body list, item before the allocation) where it was created

    @property
    def onchip(self):
        return self.memory != "HBM"

    def strides(self):
        """(partition stride per dim, free element stride per dim)."""
        n = len(self.shape)
        ps, fs = [0] * n, [0] * n
        step = 1
        for d in range(n - 1, -1, -1):
            if self.onchip and d == self.pdim:
                ps[d] = 1
                continue
            fs[d] = step
            step *= self.shape[d]
        return ps, fs

    @property
    def partitions(self):
        return self.shape[self.pdim] if self.onchip else 1

    @property
    def free_elems(self):
        n = 1
        for d, s in enumerate(self.shape):
            if not (self.onchip and d == self.pdim):
                n *= s
        return n

    def __repr__(self):
        return "Buf(%s %s %s %s)" % (self.name, self.memory, self.shape, self.dtype)


class TInst:
    __slots__ = ("opcode", "engine", "dsts", "srcs", "attrs", "mask", "links", "loc", "parent", "guard", "gkey")

    def __init__(self, opcode, engine, dsts, srcs, attrs, mask, links, loc):
        self.opcode = opcode
        self.engine = engine
        self.dsts = list(dsts)
        self.srcs = list(srcs)
        self.attrs = dict(attrs)
        self.mask = mask
        self.links = links
        self.loc = loc
        self.parent = None
        self.guard = None           # a rewrite.Cond over loop variables (if/else on an iterator) or None
        self.gkey = ()              # identity of the guard blocks it was traced in (see ops.same_guard)

    kind = "inst"

    @property
    def operands(self):
        return self.dsts + self.srcs


class TLoop:
    __slots__ = ("var", "start", "stop", "step", "body", "loop_kind", "loc")

    def __init__(self, var, start, stop, step, loop_kind, loc):
        self.var = var
        self.start, self.stop, self.step = int(start), int(stop), int(step)
        self.body = []
        self.loop_kind = loop_kind
        self.loc = loc

    kind = "loop"

    @property
    def var_range(self):
        r = range(self.start, self.stop, self.step)
        if not len(r):
            return None
        return (min(r[0], r[-1]), max(r[0], r[-1]))


class TraceContext:
    """The trace of one kernel. TENSOR_TYPE is the class of the values the kernel sees (``nki.tensor``,
    given by ``trace_kernel``); ``ops.new_tile`` makes fresh tiles of it (default: the plain ``View``)."""

    def __init__(self, func_name, target="trn1", grid=(), tensor_type=None):
        self.func_name = func_name
        self.tensor_type = tensor_type
        self.target = target
        self.grid = tuple(int(g) for g in grid)
        self.index_vars = IndexVars()
        self.body = []
        self._stack = [self.body]
        self.bufs = {}
        self.params = []            # Bufs of the tensor parameters, positional order
        self.loop_vars = {}         # name -> (lo, hi) inclusive
        self.loops = []             # open TLoops
        self._names = {}
        self.nloops = 0
        self.direct_alloc = False
        self.prints = []
        self.consts = {}

    # -- context ----------------------------------------------------------------
    def __enter__(self):
        if current_or_none() is not None:
            raise E.err_nested_kernel_with_spmd_grid("a kernel is already being traced")
        set_current(self)
        return self

    def __exit__(self, *exc):
        set_current(None)
        return False

    # -- names -------------------------------------------------------------------
    def fresh(self, prefix):
        prefix = "".join(c if c.isalnum() or c == "_" else "_" for c in (prefix or "t")) or "t"
        n = self._names.get(prefix, 0)
        self._names[prefix] = n + 1
        name = prefix if n == 0 and prefix not in self.bufs else "%s_%d" % (prefix, n)
        while name in self.bufs:
            n += 1
            self._names[prefix] = n + 1
            name = "%s_%d" % (prefix, n)
        return name

    def new_buf(self, prefix, memory, shape, dtype, pdim=0, kind="tile"):
        b = Buf(self.fresh(prefix), memory, shape, dtype, pdim, kind)
        b.level = len(self.loops)
        body = self._stack[-1]
        b.origin = (body, body[-1] if body else None)
        self.bufs[b.name] = b
        return b

    # -- emission ----------------------------------------------------------------
    def emit_at_origin(self, buf, inst):
        """Insert INST where BUF was created (after the instructions traced before it, in its body)."""
        body, anchor = buf.origin
        at = 0
        if anchor is not None:
            at = next(i for i, x in enumerate(body) if x is anchor) + 1
        body.insert(at, inst)
        return inst

    def emit(self, inst):
        self._stack[-1].append(inst)
        return inst

    @property
    def last(self):
        body = self._stack[-1]
        return body[-1] if body else None

    def open_loop(self, start, stop, step, kind, loc):
        name = "i%d" % self.nloops
        self.nloops += 1
        lp = TLoop(name, start, stop, step, kind, loc)
        self._stack[-1].append(lp)
        self._stack.append(lp.body)
        self.loops.append(lp)
        self.loop_vars[name] = lp.var_range
        return lp

    def close_loop(self, lp):
        if self.loops and self.loops[-1] is lp:
            self.loops.pop()
            self._stack.pop()

    def var_ranges(self):
        return {k: v for k, v in self.loop_vars.items() if v is not None}


def loop_iter(start, stop, step, kind, loc):
    """The generator behind affine_range / sequential_range: one symbolic iteration."""
    from neuronxcc.nki._trace.index import Idx
    ctx = current()
    lp = ctx.open_loop(start, stop, step, kind, loc)
    try:
        yield Idx(_pel.var(lp.var))
    finally:
        ctx.close_loop(lp)
