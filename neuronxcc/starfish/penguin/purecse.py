"""Values computed from nothing but constants, iota and scalars, materialised once per program.

A program often computes the same input-independent table more than once: the Llama rotary
embedding builds cos(pos * inv) and sin(pos * inv) for q and again for k (jax emits both, and
the HLO we get has not been through XLA's CSE). Such an expression depends on no input and no
buffer that is ever written, so a second materialisation of an equal expression can read the
first one's tensor. Only tensors written at the top level of the program (not inside a loop or
a branch, which might not run before a later use) are remembered.

The key is structural (op, attributes, dtype, shape, arguments; a view by its base, strides and
offset; a constant tensor by its data), like TileEval's CSE key within a tile.
"""
import hashlib

import numpy as np

from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.tiles import IOTA_BASE
from neuronxcc.starfish.penguin.views import Splat, View


def key(cg, x, memo=None):
    """The structural key of x when every leaf is a constant tensor, an iota or a scalar, else None."""
    memo = {} if memo is None else memo
    i = id(x)
    if i in memo:
        return memo[i]
    if isinstance(x, Splat):
        k = ("s", repr(x.value), x.dtype)
    elif isinstance(x, View):
        t = cg.m.tensors.get(x.base)
        if x.base == IOTA_BASE:
            base = x.base
        elif t is not None and t.kind == "const" and t.data is not None:
            # two HLO constants with the same data are the same table (each hashed once per compile)
            hashes = getattr(cg, "const_hashes", None)
            base = hashes.get(x.base) if hashes is not None else None
            if base is None:
                data = np.ascontiguousarray(t.data)
                base = ("c", str(data.dtype), data.shape, hashlib.sha1(data.tobytes()).hexdigest())
                if hashes is not None:
                    hashes[x.base] = base
        else:
            base = None
        k = None if base is None else ("v", base, x.dtype, tuple(x.shape), tuple(x.strides), str(x.offset))
    elif isinstance(x, Node):
        args = []
        for a in x.args:               # stop at the first input-dependent argument
            args.append(key(cg, a, memo))
            if args[-1] is None:
                break
        k = None if args and args[-1] is None else \
            ("n", x.op, repr(sorted(x.attrs.items())), x.dtype, tuple(x.shape), tuple(args))
    else:
        k = None
    memo[i] = k
    return k


def at_top_level(cg):
    """Is code being emitted outside every loop and branch, for one core? (With LNC=2 the kernels
    are split over two cores, and a later kernel on the other core would not wait for the table.)"""
    return cg.em.b.depth == 1 and getattr(cg, "lnc", None) is None
