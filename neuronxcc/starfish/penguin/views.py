"""Strided views of HBM tensors: how Penguin shape ops become access patterns.

A ``View`` names an HBM tensor (``base``) and maps an index ``(i0..in-1)`` of
its own ``shape`` to the element ``offset + sum(ik * strides[k])`` of the base
(row-major element numbering). Broadcast (stride 0), transpose (permuted
strides), slice (offset, scaled strides), reverse (negative strides) and most
reshapes are pure views: no data moves until a kernel reads the view through
a DMA access pattern. A reshape that cannot be expressed returns None and the
caller materialises a contiguous copy first.

``Splat`` is a constant of one value (no storage); ``Iota`` is an index
generator along one axis. Both can stand wherever a View leaf can.

Invariants: ``len(shape) == len(strides)``; strides are ints, the offset an
int or (dynamic slices) a pelican Expr over registers; views never own data.
"""
import numpy as np


class View:
    __slots__ = ("base", "dtype", "shape", "strides", "offset")

    def __init__(self, base, dtype, shape, strides, offset=0):
        self.base = base
        self.dtype = dtype
        self.shape = tuple(int(s) for s in shape)
        self.strides = tuple(int(s) for s in strides)
        # an int, or a pelican Expr when the view starts at a register-computed position
        self.offset = int(offset) if isinstance(offset, (int, np.integer)) else offset
        assert len(self.shape) == len(self.strides)

    @classmethod
    def contiguous(cls, base, dtype, shape):
        return cls(base, dtype, shape, row_major_strides(shape), 0)

    def is_contiguous(self):
        return isinstance(self.offset, int) and self.offset == 0 and self.strides == row_major_strides(self.shape)

    @property
    def static(self):
        return isinstance(self.offset, int)

    def with_dtype(self, dtype):
        return View(self.base, dtype, self.shape, self.strides, self.offset)

    # -- the view ops ---------------------------------------------------------
    def broadcast(self, shape, dims):
        strides = [0] * len(shape)
        for k, d in enumerate(dims):
            if self.shape[k] != 1:
                strides[d] = self.strides[k]
        return View(self.base, self.dtype, shape, strides, self.offset)

    def transpose(self, perm):
        return View(self.base, self.dtype, [self.shape[p] for p in perm], [self.strides[p] for p in perm],
                    self.offset)

    def slice(self, starts, limits, steps):
        off = self.offset
        shape, strides = [], []
        for k, (s, l, t) in enumerate(zip(starts, limits, steps)):
            off += s * self.strides[k]
            shape.append(max(0, -(-(l - s) // t)))
            strides.append(self.strides[k] * t)
        return View(self.base, self.dtype, shape, strides, off)

    def reverse(self, dims):
        off = self.offset
        strides = list(self.strides)
        for d in dims:
            off += (self.shape[d] - 1) * strides[d]
            strides[d] = -strides[d]
        return View(self.base, self.dtype, self.shape, strides, off)

    def reshape(self, shape):
        strides = reshape_strides(self.shape, self.strides, shape)
        if strides is None:
            return None
        return View(self.base, self.dtype, shape, strides, self.offset)

    def dynamic_slice(self, starts, sizes):
        """starts: pelican Exprs (already clamped), sizes: ints."""
        off = self.offset
        for k, st in enumerate(starts):
            if self.strides[k]:
                off = st * self.strides[k] + off
        return View(self.base, self.dtype, sizes, self.strides, off)

    def split_axis(self, axis, inner):
        """Split axis into (n // inner, inner)."""
        n = self.shape[axis]
        s = self.strides[axis]
        shape = self.shape[:axis] + (n // inner, inner) + self.shape[axis + 1:]
        strides = self.strides[:axis] + (s * inner, s) + self.strides[axis + 1:]
        return View(self.base, self.dtype, shape, strides, self.offset)

    def element(self, index):
        return self.offset + sum(i * s for i, s in zip(index, self.strides))

    def __repr__(self):
        return "View(%s%s st=%s off=%d %s)" % (self.base, list(self.shape), list(self.strides), self.offset,
                                               self.dtype)


class Splat:
    """A constant of one value broadcast to ``shape``."""
    __slots__ = ("value", "dtype", "shape")

    def __init__(self, value, dtype, shape):
        self.value = value
        self.dtype = dtype
        self.shape = tuple(shape)

    def with_shape(self, shape):
        return Splat(self.value, self.dtype, shape)

    def __repr__(self):
        return "Splat(%r %s%s)" % (self.value, self.dtype, list(self.shape))


class Iota:
    """value[i0..] = offset + sum(ik * strides[k]) (an index generator)."""
    __slots__ = ("dtype", "shape", "strides", "offset")

    def __init__(self, dtype, shape, strides, offset=0):
        self.dtype = dtype
        self.shape = tuple(shape)
        self.strides = tuple(strides)
        self.offset = offset

    def as_view_like(self):
        return self

    def __repr__(self):
        return "Iota(%s st=%s off=%d %s)" % (list(self.shape), list(self.strides), self.offset, self.dtype)


def row_major_strides(shape):
    strides = [1] * len(shape)
    acc = 1
    for k in range(len(shape) - 1, -1, -1):
        strides[k] = acc
        acc *= shape[k]
    return tuple(strides)


def reshape_strides(in_shape, in_strides, out_shape):
    """Strides for out_shape over the same elements, or None if not a view."""
    out = [int(n) for n in out_shape]
    if any(n == 0 for n in in_shape):
        return row_major_strides(out)
    old = [(n, s) for n, s in zip(in_shape, in_strides) if n != 1]
    res = [0] * len(out)
    oi = oj = 0
    while oi < len(old) and oj < len(out):
        i0, j0 = oi, oj
        pi, pj = old[oi][0], out[oj]
        while pi != pj:
            if pi < pj:
                oi += 1
                if oi >= len(old):
                    return None
                pi *= old[oi][0]
            else:
                oj += 1
                if oj >= len(out):
                    return None
                pj *= out[oj]
        for k in range(i0, oi):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        res[oj] = old[oi][1]
        for k in range(oj, j0, -1):
            res[k - 1] = res[k] * out[k]
        oi += 1
        oj += 1
    if oi < len(old) or any(out[k] != 1 for k in range(oj, len(out))):
        return None
    return tuple(res)


def collapse(shape, strides_list):
    """Merge adjacent dims that every stride list allows; drop size-1 dims.

    Returns (shape, [strides...]) with the same element mapping."""
    dims = [k for k, n in enumerate(shape) if n != 1]
    if not dims:
        return (), [() for _ in strides_list]
    new_shape = [shape[dims[0]]]
    new_strides = [[st[dims[0]]] for st in strides_list]
    for k in dims[1:]:
        n = shape[k]
        if all(ns[-1] == st[k] * n for ns, st in zip(new_strides, strides_list)):
            new_shape[-1] *= n
            for ns, st in zip(new_strides, strides_list):
                ns[-1] = st[k]
        else:
            new_shape.append(n)
            for ns, st in zip(new_strides, strides_list):
                ns.append(st[k])
    return tuple(new_shape), [tuple(ns) for ns in new_strides]
