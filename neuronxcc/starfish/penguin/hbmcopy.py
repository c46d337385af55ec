"""HBM -> HBM copies: a value that is a plain view of another tensor moves without SBUF.

Owns: ``copy(em, x, out)``, used by the elementwise kernel when the expression is
a bare ``View`` with the result's element type (the operand copy of
dynamic-update-slice, copy, a reshape or transpose that keeps long contiguous
runs). A round trip through SBUF moves every byte twice (HBM -> SBUF, SBUF -> HBM)
in [128, <= EW_FREE] tiles, one run per partition per tile; a direct DMA moves it
once, with runs as long as the views allow. Under the cost model an HBM -> HBM
byte uses HBM on both sides (``TargetModel.dma_engine_rate(2)``), which is still
cheaper than two transfers at the single-side rate.

The copy is split along its outermost axis into up to ``MAX_PARTS`` DMAs of at
least ``MIN_PART_BYTES`` each, on different queues (a queue's transfers run in
order; several queues keep more transfers in flight). Views whose innermost run
is shorter than ``MIN_RUN_BYTES`` (or that need more than 4 pattern dims, the
DMA descriptor limit) keep the tiled path, which can at least gather them into
whole partitions; a block of at most ``MIN_RUN_BYTES`` that is contiguous on both
sides (a loop's scalar state, a key) is one direct DMA instead of two through SBUF.
"""
from neuronxcc.starfish.birpy import dtypes as bdt

MIN_RUN_BYTES = 512         # innermost contiguous run (both sides) worth a direct DMA
MIN_PART_BYTES = 1 << 20    # bytes per DMA when a copy is split over queues
MAX_PARTS = 4               # DMAs (queues) one copy is split into
MAX_DIMS = 4                # pattern dims of one DMA access pattern ([NEFF] descriptors)


def copy(cg, x, out, shape):
    """Emit the copy out[...] = x[...] (both Views over SHAPE, collapsed) as HBM->HBM DMAs.
    Returns False, emitting nothing, when it does not apply."""
    from neuronxcc.starfish.penguin.views import View
    while getattr(x, "op", None) == "copy" and len(x.args) == 1 and x.args[0].dtype == x.dtype:
        x = x.args[0]       # a pass-through's copy (a loop-carried value the body returns as is)
    if not isinstance(x, View) or x.base.startswith("__") or x.dtype != out.dtype:
        return False
    m = cg.em.m
    tx, to = m.tensors.get(x.base), m.tensors.get(out.base)
    if tx is None or to is None or tx.dtype != to.dtype:
        return False
    if len(shape) > MAX_DIMS or any(n == 0 for n in shape):
        return False
    keep = [k for k, n in enumerate(shape) if n != 1]      # extent-1 axes: any stride
    shape = tuple(shape[k] for k in keep) or (1,)
    x, out = (View(v.base, v.dtype, shape, tuple(v.strides[k] for k in keep) or (1,), v.offset) for v in (x, out))
    if x.strides[-1] != 1 or out.strides[-1] != 1 or 0 in x.strides or 0 in out.strides:
        return False
    isz = bdt.itemsize(tx.dtype)
    total = isz
    for n in shape:
        total *= n
    whole = _run(shape, x.strides) * isz == total == _run(shape, out.strides) * isz
    if not (whole and total <= MIN_RUN_BYTES) and \
            (_run(shape, x.strides) * isz < MIN_RUN_BYTES or _run(shape, out.strides) * isz < MIN_RUN_BYTES):
        return False        # short runs gather better through SBUF; a small contiguous block is one DMA
    n0 = shape[0]
    parts = max(1, min(MAX_PARTS, n0, total // MIN_PART_BYTES))
    em = cg.em
    P = cg.P
    step = -(-n0 // parts)
    for a in range(0, n0, step):
        rows = min(step, n0 - a)
        sub = (rows,) + tuple(shape[1:])
        em.dma(em.hbm(out.base, _at(P, out, a), _pattern(sub, out.strides)),
               em.hbm(x.base, _at(P, x, a), _pattern(sub, x.strides)))
    return True


def _run(shape, strides):
    """Elements of the innermost contiguous run."""
    run = 1
    for n, s in zip(reversed(shape), reversed(strides)):
        if n == 1:
            continue
        if s != run:
            break
        run *= n
    return run


def _pattern(shape, strides):
    return [[int(s), int(n)] for s, n in zip(strides, shape)]


def _at(P, view, first):
    """HBM element offset (pelican Expr) of view[first, 0, ...]."""
    e = P.const(view.offset) if isinstance(view.offset, int) else view.offset
    return e + first * view.strides[0] if first else e
