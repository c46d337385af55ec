"""Causal masks of the fused attention (penguin/attention.py): recognising k <= q + c in the score
expression, the query bands of the causal fast path, and the SBUF tables of the mask matmul.
"""
from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.views import Splat, View

PMAX = 128
KEY_BLOCK = 512            # keys per block: one PSUM bank of fp32 scores (as penguin/attention.py)
MAX_BANDS = 4              # causal: query bands with their own key-loop bounds (static code copies)
MASKED_AT_MOST = -1e9      # a masked score this low gives exp(x - m) == 0 against any visible row max
MASK_BIAS = -1e30          # what the mask matmul adds to a hidden score (bf16-representable)


def _iota_axis(x, n):
    """(axis, offset) when x is the index grid of one X axis (stride 1, nothing else), else None."""
    if not isinstance(x, View) or x.base != "__iota__" or not isinstance(x.offset, int) or len(x.strides) != n:
        return None
    axes = [k for k, st in enumerate(x.strides) if st and x.shape[k] > 1]
    if len(axes) != 1 or x.strides[axes[0]] != 1:
        return None
    return axes[0], x.offset


def _causal_offset(cg, expr, leaf, n):
    """c when expr is select(k <= q + c, scores, masked) over X (q = axis n-2, k = axis n-1) with the
    masked value low enough that exp(masked - row max) is exactly 0; else None. The predicate may be
    wrapped as select(pred, True, False) (jnp.tril) and written either way round (q >= k, k <= q, >, <)."""
    if not isinstance(expr, Node) or expr.op != "select" or len(expr.args) != 3 or expr.args[1] is not leaf:
        return None
    neg = expr.args[2]
    if not isinstance(neg, Splat):
        return None
    try:
        if not float(neg.value) <= MASKED_AT_MOST:
            return None
    except (TypeError, ValueError):
        return None
    pred = expr.args[0]
    if isinstance(pred, Node) and pred.op == "select" and len(pred.args) == 3 and \
            all(isinstance(a, Splat) for a in pred.args[1:]) and \
            bool(pred.args[1].value) is True and bool(pred.args[2].value) is False:
        pred = pred.args[0]
    if not isinstance(pred, Node) or pred.op != "compare" or len(pred.args) != 2:
        return None
    a, b = (_iota_axis(x, n) for x in pred.args)
    d = pred.attrs.get("direction")
    if a is None or b is None or d not in ("GE", "GT", "LE", "LT"):
        return None
    if d in ("LE", "LT"):                       # b >= a / b > a
        a, b, d = b, a, "GE" if d == "LE" else "GT"
    if a[0] != n - 2 or b[0] != n - 1:          # the query side must be the larger one
        return None
    # q + oa >= k + ob  <=>  k <= q + (oa - ob); '>' is one less
    return a[1] - b[1] - (1 if d == "GT" else 0)


def causal_bands(cg, plan, expr, leaf, scale, Mi, TM, NB):
    """The number of query bands for the causal fast path, or None when it does not apply: the mask
    is exactly k <= q (every row sees key 0, so skipping hidden blocks is exact), the scores are
    square in whole key blocks, query tiles of 128 and a positive scale (the mask matmul adds
    MASK_BIAS before the eviction scales)."""
    n = len(plan.xshape)
    if not getattr(cg, "causal_blocks", True):
        return None
    if _causal_offset(cg, expr, leaf, n) != 0 or Mi != plan.N or plan.N % NB:
        return None
    one = NB == plan.N < KEY_BLOCK          # one key block of any length (260 keys)
    if TM != PMAX or not (one or (NB == KEY_BLOCK and NB % TM == 0)) or not scale * -MASK_BIAS > -MASKED_AT_MOST:
        return None
    ng = plan.N // NB
    return max(d for d in range(1, min(ng, MAX_BANDS) + 1) if ng % d == 0)


def mask_tables(em, mn, N):
    """SBUF constants of the causal mask matmul, made once per kernel on POOL: the identity
    [128, mn] (stationary) and the bias table [128, d0 + NB] with 0 where column - row <= d0
    and MASK_BIAS elsewhere (d0 = 384 + 512 (MAX_BANDS - 1) for blocks of 512; for one block
    of N < 512 keys, the last query tile's start). The key block at k0 of query tile m0 reads
    its NB columns from d0 + k0 - m0: MASK_BIAS exactly where key > query, nothing when the
    block lies wholly below the diagonal. Returns (identity, table, d0)."""
    bf = "bfloat16"
    if N < KEY_BLOCK:
        d0 = (N - 1) // PMAX * PMAX
        cols = d0 + N
    else:
        d0 = KEY_BLOCK - PMAX + KEY_BLOCK * (MAX_BANDS - 1)
        cols = d0 + KEY_BLOCK
    ones = em.chip(em.sbuf("fa_ones", PMAX, mn, bf), bf, PMAX, [[1, mn]])
    em.inst("memset", "POOL", [ones], [], value=1.0)
    ident = em.chip(em.sbuf("fa_ident", PMAX, mn, bf), bf, PMAX, [[1, mn]])
    em.inst("affine_select", "POOL", [ident], [ones],
            pattern=[[-1, mn]], offset=0, channel_multiplier=1, cmp="eq", on_false=0.0)
    zeros = em.chip(em.sbuf("fa_zeros", PMAX, cols, bf), bf, PMAX, [[1, cols]])
    em.inst("memset", "POOL", [zeros], [], value=0.0)
    table = em.chip(em.sbuf("fa_mask", PMAX, cols, bf), bf, PMAX, [[1, cols]])
    # visible iff d0 - column + row >= 0
    em.inst("affine_select", "POOL", [table], [zeros], pattern=[[-1, cols]], offset=d0,
            channel_multiplier=1, cmp="ge", on_false=MASK_BIAS)
    return ident, table, d0
