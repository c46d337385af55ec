"""Lazy elementwise expressions: how chains of elementwise ops get fused.

While lowering, a Penguin value that is produced by elementwise ops is not
computed right away: it is a ``Node`` DAG whose leaves are ``View``s of HBM
tensors or ``Splat`` constants. Shape ops (broadcast, transpose, slice,
reshape, reverse) are pushed through the DAG down to its leaves, because
elementwise ops commute with re-indexing. A kernel that finally needs the
value evaluates the DAG tile by tile on chip (``tiles.py``) - that is the
fusion of the whole chain onto ACT/DVE/POOL, with broadcasts done by the
leaves' access patterns (stride 0).

Invariants: every Node/leaf has ``shape`` and ``dtype``; a Node's args all
have the Node's shape (ops are strictly elementwise); DAG sharing is kept by
memoising on ``id`` when transforming.
"""
from neuronxcc.starfish.penguin.views import Splat, View, row_major_strides


class Node:
    __slots__ = ("op", "args", "attrs", "dtype", "shape", "loc")

    def __init__(self, op, args, attrs, dtype, shape, loc=None):
        self.op = op
        self.args = list(args)
        self.attrs = dict(attrs or {})
        self.dtype = dtype
        self.shape = tuple(shape)
        self.loc = loc

    def __repr__(self):
        return "Node(%s %s%s)" % (self.op, self.dtype, list(self.shape))


def _dummy(shape, dtype):
    return View("__shape__", dtype, shape, row_major_strides(shape), 0)


def apply_view(x, fn, memo=None):
    """Apply a View -> View transform to every leaf of X; None if some leaf cannot take it."""
    if memo is None:
        memo = {}
    key = id(x)
    if key in memo:
        return memo[key]
    if isinstance(x, View):
        res = fn(x)
    elif isinstance(x, Splat):
        d = fn(_dummy(x.shape, x.dtype))
        res = None if d is None else x.with_shape(d.shape)
    else:
        d = fn(_dummy(x.shape, x.dtype))
        if d is None:
            res = None
        else:
            args = []
            res = None
            for a in x.args:
                b = apply_view(a, fn, memo)
                if b is None:
                    break
                args.append(b)
            else:
                res = Node(x.op, args, x.attrs, x.dtype, d.shape, x.loc)
    memo[key] = res
    return res


def leaves(x, out=None, seen=None):
    """All distinct View leaves of X (Splats excluded), in first-visit order."""
    if out is None:
        out, seen = [], set()
    if id(x) in seen:
        return out
    seen.add(id(x))
    if isinstance(x, View):
        out.append(x)
    elif isinstance(x, Node):
        for a in x.args:
            leaves(a, out, seen)
    return out


def count_ops(x, seen=None):
    if seen is None:
        seen = set()
    if id(x) in seen or not isinstance(x, Node):
        return 0
    seen.add(id(x))
    return 1 + sum(count_ops(a, seen) for a in x.args)
