"""A row-tile matmul (penguin/mmfuse.py) stored in the layout its consuming matmuls read.

A dot ``O[M, N] = L[M, K] @ R[K, N]`` that mmfuse materialises at once (its L a layernorm computed
on the row tiles, its result read by several kernels) is stored row-major. When its columns are
split (jax's ``split`` of a fused QKV projection) and a part only flows, through reshapes and
transposes, into another matmul that contracts over those columns (the scores ``Q @ K^T``), that
matmul wants the part with the contracted dim on the partitions and its free dim contiguous in
HBM: row-major, its loads put one row per partition and the PE transposes every tile
(penguin/kernels.py ``_lhsT``, penguin/resident.py), fp32 transposes at a quarter of the PE rate.

Here each part of the split gets an HBM tensor of its own in the layout its consumer reads:
  * a part whose consumer's free dim is its row axis M is stored transposed, ``T[n, M]``: computed
    transposed on the PE, R's columns stationary and the row tiles' L^T moving (the L^T chunks the
    row-form matmul needs anyway, so no extra PE work), all of M in one PSUM bank per 128 columns,
    stored as contiguous rows of M;
  * any other part is stored row-major, computed row tile by row tile as mmfuse does.
L (the layernorm and its PE transposes) is computed once per row tile for all the parts.

Only for M <= one PSUM bank of fp32 (512 rows) in at most ``mmfuse.UNROLL_TILES`` row tiles (the
tiles are emitted one by one, so every L^T chunk is live until the transposed parts are done);
otherwise mmfuse's row-major path runs unchanged. This module decides (``plan``); mmfuse emits
(``mmfuse.materialise_parts``).
"""
from neuronxcc.starfish.penguin.tiles import onchip_dtype
from neuronxcc.starfish.penguin.views import View

PMAX = 128
MAX_CHAIN = 6               # reshapes / transposes followed from a part to its consuming matmul


def _uniq(ops):
    seen, out = set(), []
    for op in ops:
        if id(op) not in seen:
            seen.add(id(op))
            out.append(op)
    return out


def _consumer(cg, name):
    """(dot op, operand index, view ops on the way) when value NAME flows only through reshapes and
    transposes into one operand of one dot; else None."""
    outs = set(cg.g.outputs)
    chain, cur = [], name
    while True:
        us = _uniq(cg.users.get(cur, []))
        if cur in outs or len(us) != 1:
            return None
        u = us[0]
        if u.kind == "dot":
            idx = [i for i, x in enumerate(u.inputs) if x == cur]
            return (u, idx[0], chain) if len(idx) == 1 else None
        if u.kind not in ("reshape", "transpose") or len(chain) >= MAX_CHAIN:
            return None
        chain.append(u)
        cur = u.outputs[0]


def _free_stride(cg, dot, idx, chain, probe):
    """The stride, in PROBE's layout, of the consumer operand's one free dim (not batch, not
    contracted, longer than 1); None when there is not exactly one or a view cannot be replayed."""
    v = probe
    for op in chain:
        if op.kind == "transpose":
            v = v.transpose(op.attrs["permutation"])
        else:
            v = v.reshape(cg.g.values[op.outputs[0]].shape)
        if v is None:
            return None
    side = "lhs" if idx == 0 else "rhs"
    a = dot.attrs
    used = set(a[side + "_batch_dims"] or ()) | set(a[side + "_contracting_dims"] or ())
    free = [d for d in range(len(v.shape)) if d not in used and v.shape[d] > 1]
    return v.strides[free[0]] if len(free) == 1 else None


def wants_transposed(cg, name, M, n):
    """True when value NAME ([M, n]) is read by one matmul whose free dim is contiguous only if
    NAME is stored transposed (column-major)."""
    c = _consumer(cg, name)
    if c is None:
        return False
    dot, idx, chain = c
    row = _free_stride(cg, dot, idx, chain, View("__probe__", "float32", (M, n), (n, 1), 0))
    col = _free_stride(cg, dot, idx, chain, View("__probe__", "float32", (M, n), (1, M), 0))
    return row is not None and row != 1 and col == 1


def plan(kern, op, M, N, dtype, max_tiles):
    """[(slice op, column start, column end, transposed)] when dot OP's [M, N] result is only read
    through slices of its columns and some slice wants the transposed layout; else None."""
    cg = kern.cg
    o = op.outputs[0]
    if not getattr(cg, "mm_layout", True):
        return None
    if tuple(cg.g.values[o].shape) != (M, N) or o in cg.out_tensor or o in set(cg.g.outputs):
        return None
    if dtype not in ("float32", "bfloat16", "float16") or onchip_dtype(dtype) != dtype:
        return None
    if M * 4 > kern.em.tm.psum_bank_bytes or -(-M // PMAX) > max_tiles:
        return None
    users = _uniq(cg.users.get(o, []))
    parts, cols = [], set()
    for u in users:
        if u.kind != "slice" or len(u.outputs) != 1:
            return None
        s, lim, st = list(u.attrs["starts"]), list(u.attrs["limits"]), list(u.attrs["strides"])
        if s[0] != 0 or lim[0] != M or st != [1, 1] or u.outputs[0] in cg.out_tensor:
            return None
        span = set(range(s[1], lim[1]))
        if span & cols:
            return None                     # overlapping slices: a column would be stored twice
        cols |= span
        parts.append((u, s[1], lim[1], wants_transposed(cg, u.outputs[0], M, lim[1] - s[1])))
    if not parts or not any(p[3] for p in parts):
        return None
    return parts
