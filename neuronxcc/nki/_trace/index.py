"""Symbolic indices: loop iterators, ``nl.arange`` / ``nl.mgrid`` index tensors, ``nl.ds`` slices
and mask predicates.

``Idx`` is an affine integer expression (a pelican ``Expr``) over two kinds of variables:
loop variables (``affine_range`` / ``sequential_range`` iterators and ``program_id``; names
``i<n>`` / ``pid<n>``) and index variables (one per ``arange`` / ``mgrid`` axis; names ``_a<n>``,
value k at position k of that axis). ``shape`` is the numpy-style broadcast shape of the index
tensor (``()`` for a loop iterator) and ``axes`` maps each index variable to its axis.

Comparisons give a ``Pred``: a conjunction of atoms ``(expr, op)`` meaning ``expr op 0``,
joined with ``&`` (a mask is a compile-time predicate; ``and``/``or``/``if`` on it are errors).
"""
import numbers

from neuronxcc import pelican as _pel
from neuronxcc.nki import errors as E

__all__ = ["Idx", "Pred", "DynSlice", "IndexVars", "as_expr", "new_index_var", "is_symbolic", "broadcast_shapes",
           "mgrid"]

_OPS = ("lt", "le", "gt", "ge", "eq", "ne")
_NEG = {"lt": "ge", "le": "gt", "gt": "le", "ge": "lt", "eq": "ne", "ne": "eq"}


class IndexVars:
    """Registry of index variables of one trace: name -> size."""

    def __init__(self):
        self.sizes = {}

    def new(self, size):
        name = "_a%d" % len(self.sizes)
        self.sizes[name] = int(size)
        return name


_GLOBAL_VARS = IndexVars()


def _registry():
    from neuronxcc.nki._trace.active import current_or_none
    ctx = current_or_none()
    return ctx.index_vars if ctx is not None else _GLOBAL_VARS


def new_index_var(size):
    return _registry().new(size)


def index_var_size(name):
    s = _registry().sizes.get(name)
    if s is None:
        s = _GLOBAL_VARS.sizes.get(name)
    return s


def is_index_var(name):
    return name.startswith("_a")


def broadcast_shapes(s1, s2):
    n = max(len(s1), len(s2))
    a = (1,) * (n - len(s1)) + tuple(s1)
    b = (1,) * (n - len(s2)) + tuple(s2)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise E.err_invalid_argument("index shapes %s and %s do not broadcast" % (tuple(s1), tuple(s2)))
        out.append(max(x, y))
    return tuple(out)


def as_expr(v):
    """An int / Idx (scalar) / pelican Expr -> pelican Expr."""
    if isinstance(v, Idx):
        return v.expr
    if isinstance(v, _pel.Expr):
        return v
    if hasattr(v, "__index__"):
        return _pel.const(int(v))
    raise E.err_invalid_argument("expected an integer index, got %r" % (v,))


def is_symbolic(v):
    return isinstance(v, Idx) and not v.expr.is_const()


class Idx:
    """An affine index expression with a broadcast shape (see module doc)."""

    __slots__ = ("expr", "shape", "axes")
    __array_priority__ = 1000

    def __init__(self, expr, shape=(), axes=None):
        self.expr = expr
        self.shape = tuple(int(s) for s in shape)
        self.axes = dict(axes or {})

    # -- construction helpers ---------------------------------------------
    @staticmethod
    def arange(start, stop=None, step=1):
        if stop is None:
            start, stop = 0, start
        start, stop, step = int(start), int(stop), int(step)
        n = len(range(start, stop, step))
        v = new_index_var(n)
        return Idx(_pel.var(v) * step + start, (n,), {v: 0})

    def _aligned(self, rank):
        k = rank - len(self.shape)
        return {v: a + k for v, a in self.axes.items()}

    def _combine(self, other, fn):
        if isinstance(other, Idx):
            shape = broadcast_shapes(self.shape, other.shape)
            axes = self._aligned(len(shape))
            for v, a in other._aligned(len(shape)).items():
                axes[v] = a
            return Idx(fn(self.expr, other.expr), shape, axes)
        if isinstance(other, _pel.Expr) or hasattr(other, "__index__"):
            return Idx(fn(self.expr, as_expr(other)), self.shape, self.axes)
        if isinstance(other, numbers.Number) and not isinstance(other, numbers.Integral):
            raise E.NkiNotImplementedError("a loop iterator or index in arithmetic with %r" % (other,),
                                           "an iterator is an integer index expression while tracing; make the "
                                           "values as data with nl.arange / nisa.iota")
        return NotImplemented

    # -- arithmetic ------------------------------------------------------------
    def __add__(self, o):
        return self._combine(o, lambda a, b: a + b)

    __radd__ = __add__

    def __sub__(self, o):
        return self._combine(o, lambda a, b: a - b)

    def __rsub__(self, o):
        return self._combine(o, lambda a, b: b - a)

    def __mul__(self, o):
        def mul(a, b):
            if not (a.is_const() or b.is_const()):
                raise E.err_unsupported_expression_in_mask("index expressions must be affine: cannot multiply %s by %s"
                                                           % (a, b))
            return a * b
        return self._combine(o, mul)

    __rmul__ = __mul__

    def __floordiv__(self, o):
        return self._combine(o, self._div("//"))

    def __mod__(self, o):
        return self._combine(o, self._div("%"))

    @staticmethod
    def _div(op):
        def f(a, b):
            if not b.is_const() or int(b) <= 0:
                raise E.err_unsupported_expression_in_mask("an index can only be divided by a positive constant")
            return a // b if op == "//" else a % b
        return f

    def __neg__(self):
        return Idx(-self.expr, self.shape, self.axes)

    def __pos__(self):
        return self

    def __index__(self):
        if self.expr.is_const() and not self.shape:
            return int(self.expr)
        raise E.err_dynamic_control_flow_not_supported(
            "a loop iterator or index (%s) is symbolic while tracing and cannot be used as a Python int" % self.expr)

    __int__ = __index__

    # -- numpy-style axis insertion: nl.arange(n)[:, None] ----------------------
    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        if len(self.shape) != 1:
            raise E.err_invalid_argument("only a 1-D arange can be indexed with [:, None] / [None, :]")
        shape, axes, seen = [], {}, False
        for k in key:
            if k is None:
                shape.append(1)
            elif isinstance(k, slice) and k == slice(None):
                if seen:
                    raise E.err_invalid_argument("arange[...] takes one ':'")
                seen = True
                for v in self.axes:
                    axes[v] = len(shape)
                shape.append(self.shape[0])
            else:
                raise E.err_invalid_argument("arange can only be indexed with ':' and None, got %r" % (k,))
        if not seen:
            raise E.err_invalid_argument("arange[...] needs one ':'")
        return Idx(self.expr, tuple(shape), axes)

    @property
    def ndim(self):
        return len(self.shape)

    # -- comparisons -> predicates -------------------------------------------------
    def _cmp(self, o, op):
        d = self._combine(o, lambda a, b: a - b)
        if d is NotImplemented:
            return NotImplemented
        return Pred([(d.expr, op)], d.shape, d.axes)

    def __lt__(self, o):
        return self._cmp(o, "lt")

    def __le__(self, o):
        return self._cmp(o, "le")

    def __gt__(self, o):
        return self._cmp(o, "gt")

    def __ge__(self, o):
        return self._cmp(o, "ge")

    def __eq__(self, o):
        if isinstance(o, (Idx, int)) or hasattr(o, "__index__"):
            return self._cmp(o, "eq")
        return NotImplemented

    def __ne__(self, o):
        if isinstance(o, (Idx, int)) or hasattr(o, "__index__"):
            return self._cmp(o, "ne")
        return NotImplemented

    __hash__ = object.__hash__

    def __bool__(self):
        if self.expr.is_const() and not self.shape:
            return bool(int(self.expr))
        raise E.err_dynamic_control_flow_not_supported("control flow cannot depend on the symbolic index %s"
                                                       % self.expr)

    def __repr__(self):
        return "Idx(%s, shape=%s)" % (self.expr, self.shape)


class Pred:
    """A compile-time mask: the conjunction of ``expr op 0`` atoms."""

    __slots__ = ("atoms", "shape", "axes")

    def __init__(self, atoms, shape=(), axes=None):
        self.atoms = list(atoms)
        self.shape = tuple(shape)
        self.axes = dict(axes or {})

    def __and__(self, o):
        if isinstance(o, Pred):
            shape = broadcast_shapes(self.shape, o.shape)
            axes = {v: a + len(shape) - len(self.shape) for v, a in self.axes.items()}
            axes.update({v: a + len(shape) - len(o.shape) for v, a in o.axes.items()})
            return Pred(self.atoms + o.atoms, shape, axes)
        if isinstance(o, bool):
            return self if o else Pred([(_pel.const(1), "lt")])
        return NotImplemented

    __rand__ = __and__

    def __invert__(self):
        if len(self.atoms) != 1:
            raise E.err_unsupported_expression_in_mask("only a single comparison can be negated with ~")
        e, op = self.atoms[0]
        return Pred([(e, _NEG[op])], self.shape, self.axes)

    def __or__(self, o):
        raise E.err_unsupported_expression_in_mask("masks are conjunctions: join comparisons with '&', not '|'")

    __ror__ = __or__

    def __bool__(self):
        if any(any(is_index_var(v) for v in e.free_vars()) for e, _ in self.atoms):
            raise E.err_control_flow_condition_depending_on_arange(
                "Control-flow depending on `nl.arange` or `nl.mgrid` is not supported")
        if all(e.is_const() for e, _ in self.atoms):
            return all(_holds(int(e), op) for e, op in self.atoms)
        from neuronxcc.nki._trace.active import current_or_none
        ctx = current_or_none()
        if ctx is not None and not any(v.startswith("r_nki") for e, _ in self.atoms for v in e.free_vars()):
            from neuronxcc.nki._trace.guards import add_guard
            return add_guard(ctx, self)
        raise E.err_dynamic_control_flow_not_supported(
            "control flow cannot depend on a loop iterator inside affine_range/sequential_range "
            "(use static_range, or a mask)")

    def __repr__(self):
        return " & ".join("(%s %s 0)" % (e, op) for e, op in self.atoms)


def _holds(x, op):
    return {"lt": x < 0, "le": x <= 0, "gt": x > 0, "ge": x >= 0, "eq": x == 0, "ne": x != 0}[op]


def holds(x, op):
    return _holds(x, op)


class DynSlice:
    """``nl.ds(start, size)``: a slice of SIZE elements starting at START (may be symbolic)."""

    __slots__ = ("start", "size", "step")

    def __init__(self, start, size, step=1):
        self.start = start
        self.size = int(size)
        self.step = int(step)

    def __repr__(self):
        return "ds(%s, %d)" % (self.start, self.size)


class MGridResult(tuple):
    """The index expressions of one ``nl.mgrid[...]``; ``.p``, ``.x``, ``.y``, ``.z`` name them."""

    @property
    def p(self):
        return self[0]

    @property
    def x(self):
        return self[1]

    @property
    def y(self):
        return self[2]

    @property
    def z(self):
        return self[3]


class MGrid:
    """``nl.mgrid[0:P, 0:F]``: one index expression per slice, all of the grid's shape."""

    def __getitem__(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        shape = []
        parts = []
        for s in key:
            if not isinstance(s, slice):
                raise E.err_invalid_argument("mgrid takes slices, e.g. nl.mgrid[0:128, 0:512]")
            start = 0 if s.start is None else int(s.start)
            step = 1 if s.step is None else int(s.step)
            r = range(start, int(s.stop), step)
            shape.append(len(r))
            parts.append((start, step, len(r)))
        out = []
        for k, (start, step, n) in enumerate(parts):
            v = new_index_var(n)
            out.append(Idx(_pel.var(v) * step + start, tuple(shape), {v: k}))
        return MGridResult(out)


mgrid = MGrid()
