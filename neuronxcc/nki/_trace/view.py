"""``View``: what a traced value is -- a view over one ``Buf`` -- and the indexing that only moves it.

A view is ``(buf, dtype, p0, off, axes)``: for element ``(k_0, .., k_n)`` of the view the
partition is ``p0 + sum(k_r * pstep_r)`` (on-chip only) and the free element (HBM: the
row-major element) is ``off + sum(k_r * fstep_r)``; ``off`` is a pelican Expr over loop
variables. Each axis also names the index variable that produced it (``nl.arange``/``mgrid``),
or None, so masks can find it. Indexing follows NKI: basic (ints, slices, ``nl.ds``) or
advanced (arange/mgrid expressions) but not both; loop iterators are scalar indices.

Owns: the view data and its static indexing. The kernel's value type, ``tensor.Tensor``, is a
``View`` that adds operators and tile-valued (run-time) indices; those emit instructions, so they
live above the emission helpers (``ops``) that this module sits under. New views made here keep
their class (``type(self)``); a fresh view of a whole buffer is ``whole(buf, cls)``.
"""
import numpy as np

from neuronxcc import pelican as _pel
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import dtypes as D
from neuronxcc.nki._trace.index import DynSlice, Idx, as_expr, broadcast_shapes, new_index_var

__all__ = ["View", "Axis", "whole", "slice_parts"]


class Axis:
    __slots__ = ("size", "pstep", "fstep", "var")

    def __init__(self, size, pstep, fstep, var=None):
        self.size = int(size)
        self.pstep = int(pstep)
        self.fstep = int(fstep)
        self.var = var

    def copy(self, **kw):
        a = Axis(self.size, self.pstep, self.fstep, self.var)
        for k, v in kw.items():
            setattr(a, k, v)
        return a

    def __repr__(self):
        return "Axis(%d, p%d, f%d, %s)" % (self.size, self.pstep, self.fstep, self.var)


def whole(buf, cls=None):
    """The view of all of BUF (an instance of CLS, default ``View``)."""
    ps, fs = buf.strides()
    return (cls or View)(buf, buf.dtype, 0, _pel.const(0), [Axis(n, p, f) for n, p, f in zip(buf.shape, ps, fs)])


class View:
    """See module doc. Public attributes: shape, dtype, ndim, name."""

    __slots__ = ("buf", "dtype", "p0", "off", "axes", "_updated", "checks")
    __array_priority__ = 1000

    def __init__(self, buf, dtype, p0, off, axes, checks=()):
        self.buf = buf
        self.dtype = D.np_dtype(dtype)
        # partition start: an int, or an Expr of loop iterators (the lowering unrolls that loop)
        self.p0 = p0 if isinstance(p0, _pel.Expr) and not p0.is_const() else int(p0)
        self.off = off if isinstance(off, _pel.Expr) else as_expr(off)
        self.axes = list(axes)
        self._updated = False
        self.checks = tuple(checks)     # ((index Expr, dim size, dim), ...): bounds checked at lowering

    # -- properties -------------------------------------------------------------
    @property
    def shape(self):
        return tuple(a.size for a in self.axes)

    @property
    def ndim(self):
        return len(self.axes)

    @property
    def name(self):
        return self.buf.name

    @property
    def memory(self):
        return self.buf.memory

    @property
    def size(self):
        n = 1
        for a in self.axes:
            n *= a.size
        return n

    @property
    def itemsize(self):
        return self.dtype.itemsize

    def is_whole(self):
        w = whole(self.buf)
        return self.p0 == 0 and self.off.is_const() and int(self.off) == 0 and \
            [(a.size, a.pstep, a.fstep) for a in self.axes] == [(a.size, a.pstep, a.fstep) for a in w.axes]

    def is_tile(self):
        """On-chip operand form: axis 0 is the partition axis, no other axis moves partitions."""
        if not self.buf.onchip or not self.axes:
            return False
        a0 = self.axes[0]
        if a0.fstep != 0 and a0.size > 1:
            return False
        return all(a.pstep == 0 or a.size == 1 for a in self.axes[1:])

    def copy_view(self, **kw):
        return type(self)(self.buf, kw.get("dtype", self.dtype), kw.get("p0", self.p0), kw.get("off", self.off),
                          [a.copy() for a in kw.get("axes", self.axes)], kw.get("checks", self.checks))

    def like(self, buf, dtype, p0, off, axes, checks=()):
        """A new view of the same class as this one over BUF."""
        return type(self)(buf, dtype, p0, off, axes, checks)

    def __repr__(self):
        return "Tensor(%s, %s, %s)" % (self.buf.name, self.shape, self.dtype)

    def __bool__(self):
        raise E.err_ambiguous_tensor_truth_value(
            "Cannot evaluate truth value of a multi-element tensor (use &, |, ~ elementwise, or 'is None')")

    def __len__(self):
        return self.axes[0].size if self.axes else 0

    def __iter__(self):
        raise E.err_dynamic_control_flow_not_supported("a tensor cannot be iterated in Python")

    # -- indexing ---------------------------------------------------------------------
    def _normalise_key(self, key):
        if not isinstance(key, tuple):
            key = (key,)
        n = len(self.axes)
        if any(k is Ellipsis for k in key):
            i = [j for j, k in enumerate(key) if k is Ellipsis]
            if len(i) > 1:
                raise E.err_invalid_argument("an index can only have a single ellipsis ('...')")
            i = i[0]
            fill = n - (len(key) - 1)
            key = key[:i] + (slice(None),) * fill + key[i + 1:]
        if len(key) > n:
            raise E.err_invalid_argument("too many indices for tensor '%s' of rank %d" % (self.buf.name, n))
        return tuple(key) + (slice(None),) * (n - len(key))

    def __getitem__(self, key):
        t = self
        if self.buf.onchip and len(self.axes) == 1 and isinstance(key, tuple) and len(key) == 2 \
                and self.axes[0].fstep == 0:
            # a partition-only tile (a reduction's [P] result) is the [P, 1] tile it occupies
            t = self.copy_view(axes=self.axes + [Axis(1, 0, 0)])
        return t._index(t._normalise_key(key))

    def select(self, key):
        """Indexing with numpy's rank rule everywhere (scalars always drop their dimension): for the
        tracer's own views, e.g. one partition's rows of an on-chip tensor."""
        return self._index(self._normalise_key(key), keep_rank=False)

    def _index(self, key, keep_rank=True):
        """The view KEY selects (ints, slices, ``nl.ds``, index expressions; normalised to one per axis)."""
        adv = [k for k in key if isinstance(k, Idx) and k.shape]
        if adv and any(isinstance(k, (slice, DynSlice)) and not _is_full(k, a)
                       for k, a in zip(key, self.axes)):
            raise E.err_unsupported_mixing_basic_advanced_tensor_indexing(
                "Mixing basic tensor indexing and advanced tensor indexing is not supported")
        p0 = self.p0
        off = self.off
        out_axes = []
        adv_shape = ()
        mapping = {}
        checks = []
        if adv:
            for k in adv:
                adv_shape = broadcast_shapes(adv_shape, k.shape)
            if len(adv_shape) < 2 and self.buf.onchip:
                raise E.err_1d_arange_not_supported(
                    "indexing tensor `%s` with 1d arange is not supported (use nl.arange(n)[:, None])"
                    % self.buf.name)
            contrib = [[0, 0, None] for _ in adv_shape]
        for dim, (k, a) in enumerate(zip(key, self.axes)):
            if isinstance(k, Idx) and k.shape:
                terms = k.expr.affine()
                if terms is None:
                    raise E.err_unsupported_expression_in_mask("index %s is not affine" % k.expr)
                coeffs, const = terms
                rest = _pel.const(const)
                for v, c in coeffs.items():
                    if v in k.axes:
                        ax = k.axes[v] + len(adv_shape) - len(k.shape)
                        ct = contrib[ax]
                        ct[0] += a.pstep * c
                        ct[1] += a.fstep * c
                        if ct[2] is None:
                            ct[2] = v
                        elif ct[2] != v:
                            ct[2] = "*"
                    else:
                        rest = rest + _pel.var(v) * c
                p0, off = _advance(self, p0, off, a, rest)
                item = k.expr
            elif isinstance(k, (slice, DynSlice)):
                start, size, step = slice_parts(k, a)
                p0, off = _advance(self, p0, off, a, start)
                v = new_index_var(size)
                out_axes.append(Axis(size, a.pstep * step, a.fstep * step, v))
                item = start + _pel.var(v) * step
                if _is_full(k, a):
                    item = None if a.var is None else item
            elif isinstance(k, (Idx, int, np.integer, _pel.Expr)):
                e = as_expr(k)
                if e.is_const() and not 0 <= int(e) < a.size:
                    raise E.err_tensor_access_out_of_bound(
                        "Out-of-bound access for tensor `%s`: index %d exceeds dimension size of %d"
                        % (self.buf.name, int(e), a.size))
                p0, off = _advance(self, p0, off, a, e)
                item = e
            else:
                raise E.err_invalid_argument("unsupported index %r" % (k,))
            if item is not None:
                if a.var is not None:
                    mapping[a.var] = item
                if not (item.is_const() and 0 <= int(item) < a.size):
                    checks.append((item, a.size, dim))
        old = [(e.subs(mapping) if mapping else e, n, d) for e, n, d in self.checks]
        if self.buf.onchip and not adv and keep_rank:
            out_axes = _keep_tile_rank(self.axes, key, out_axes)
        if adv:
            first = next(i for i, k in enumerate(key) if isinstance(k, Idx) and k.shape)
            adv_axes = [Axis(n, ct[0], ct[1], None if ct[2] in (None, "*") else ct[2])
                        for n, ct in zip(adv_shape, contrib)]
            for ax, n in zip(adv_axes, adv_shape):
                if ax.var is None and n > 1:
                    ax.pstep = ax.fstep = 0
            out_axes = out_axes[:first] + adv_axes + out_axes[first:]
        return self.like(self.buf, self.dtype, p0, off, out_axes, tuple(old) + tuple(checks))


def _is_scalar_key(k):
    return not isinstance(k, (slice, DynSlice)) and not (isinstance(k, Idx) and k.shape)


def _keep_tile_rank(axes, key, out_axes):
    """NKI's rank rule for on-chip tiles indexed with scalars (ints, loop iterators).

    A scalar index drops its dimension, as in numpy, except where that would leave no tile: a scalar
    on the partition dimension keeps it as one partition (``buf[0, 0:M]`` of a ``[1, M]`` buffer is
    a ``[1, M]`` tile), and scalars on every free dimension after the partition keep one free element
    (``l_buffer[:, i]`` of a ``[P, n]`` buffer is the ``[P, 1]`` tile at column i, which can be indexed
    again with ``[:, 0]``). Block dimensions in front of the partition drop as usual.
    """
    part = next((d for d, a in enumerate(axes) if a.pstep and (a.size > 1 or a.fstep == 0)), None)
    if part is None:
        return out_axes
    out = list(out_axes)
    pos = sum(1 for k in key[:part] if not _is_scalar_key(k))       # where the partition axis lands
    if _is_scalar_key(key[part]):
        out.insert(pos, Axis(1, axes[part].pstep, 0))
    if len(axes) > part + 1 and all(_is_scalar_key(k) for k in key[part + 1:]) and len(out) == pos + 1:
        out.append(Axis(1, 0, 0))
    return out


def _is_full(k, a):
    if isinstance(k, slice):
        def is_(v, n):
            return v is None or (isinstance(v, (int, np.integer)) and int(v) == n)
        return is_(k.start, 0) and (k.stop is None or is_(k.stop, a.size)) and (k.step is None or is_(k.step, 1))
    return False


def slice_parts(k, a):
    """(start Expr, size, step) of a slice / ds on axis A."""
    if isinstance(k, DynSlice):
        start = as_expr(k.start)
        size, step = k.size, k.step
    else:
        step = 1 if k.step is None else int(k.step)
        if step <= 0:
            raise E.err_invalid_argument("slice steps must be positive")
        s = 0 if k.start is None else k.start
        e = a.size if k.stop is None else k.stop
        start = as_expr(s)
        stop = as_expr(e)
        if start.is_const() and int(start) < 0:
            start = _pel.const(int(start) + a.size)
        if stop.is_const() and int(stop) < 0:
            stop = _pel.const(int(stop) + a.size)
        span = stop - start
        if not span.is_const():
            raise E.err_invalid_argument("slice %s:%s has a symbolic size; use nl.ds(start, size)" % (start, stop))
        size = max(0, -(-int(span) // step))
    return start, size, step


def _advance(t, p0, off, a, e):
    """Move the view base by index expression E along axis A."""
    if a.pstep:
        if not e.is_const():
            if any(v.startswith("_a") or v.startswith("r_nki") for v in e.free_vars()):
                raise E.err_invalid_argument(
                    "a run-time start (%s) on the partition dimension of on-chip tensor '%s' is not supported"
                    % (e, t.buf.name))
            p0 = e * a.pstep + p0
        else:
            p0 += a.pstep * int(e)
    if a.fstep:
        off = off + e * a.fstep
    return p0, off
