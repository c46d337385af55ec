"""Split-K for matmuls whose long K leaves the resident moving side narrow.

The matmul kernel (penguin/kernels.py) keeps the moving side R of one N tile (all of K) resident
and streams L^T through it, so L crosses HBM once per N tile. With a long K the double-buffered
resident tile is narrow (the Llama-3-8B FFN's w2, K = 14336 bf16: 256 columns, 16 N tiles) and
L's traffic dominates (940 MB for w2, against 117 MB of weights). Here K is cut in two halves:
the first half's products go to an fp32 HBM scratch, the second half's matmul adds them on its
evicted fp32 tile before the dot's own epilogue (or the cast to the result type). Each half's
resident tile is 512 columns wide, so L crosses HBM half as often, for one extra write and
read of the fp32 partial sums (2 x M x N x 4 bytes). Numerics: one fp32 rounding more than a
single accumulation group, the result rounded to its type once, as the whole dot would be.
"""
from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.views import View, row_major_strides

WIDE = 512          # the resident N tile each half gets (one PSUM bank of fp32)


def wants(kern, terms, nb, M, N, TN, isz):
    """Split when one term, no batch dims, the tile the budget allows is narrower than WIDE, N
    is whole WIDE tiles (two or more), K is an even number of whole K tiles and a half's WIDE
    tile fits the same double-buffered budget."""
    if len(terms) != 1 or nb or TN >= WIDE or N % WIDE or N < 2 * WIDE:
        return False
    L, R, K = terms[0]
    if not (isinstance(L, View) and isinstance(R, View)):
        return False
    TK = kern.k_tile(K)
    if K % TK or (K // TK) % 2:
        return False
    return (K // TK // 2) * WIDE * isz <= kern._res_budget()


def _substitute(expr, leaf, new, memo=None):
    """expr with the leaf object replaced by ``new`` (Nodes rebuilt, DAG sharing kept)."""
    if memo is None:
        memo = {}
    if expr is leaf:
        return new
    if not isinstance(expr, Node):
        return expr
    if id(expr) in memo:
        return memo[id(expr)]
    out = Node(expr.op, [_substitute(a, leaf, new, memo) for a in expr.args], expr.attrs, expr.dtype, expr.shape,
               expr.loc)
    memo[id(expr)] = out
    return out


def lower(kern, terms, O, M, N, epilogue):
    L, R, K = terms[0]
    em = kern.em
    TK = kern.k_tile(K)
    Kh = (K // TK // 2) * TK
    L1, L2 = L.slice([0, 0], [M, Kh], [1, 1]), L.slice([0, Kh], [M, K], [1, 1])
    R1, R2 = R.slice([0, 0], [Kh, N], [1, 1]), R.slice([Kh, 0], [K, N], [1, 1])
    name = em.tensor("splitk", "scratch", "float32", (M, N))
    part = View.contiguous(name, "float32", (M, N))
    kern.matmul_terms([(L1, R1, Kh)], part, 0, M, N)
    leaf = View("__dot__splitk_%s" % name, "float32", (M, N), row_major_strides((M, N)), 0)
    total = Node("add", [leaf, part], {}, "float32", (M, N))
    if epilogue is None:
        expr = total if O.dtype == "float32" else Node("convert", [total], {}, O.dtype, (M, N))
    else:
        e, l, ddt = epilogue
        dot = total if ddt == "float32" else Node("convert", [total], {}, ddt, (M, N))
        expr = _substitute(e, l, dot)
    kern.matmul_terms([(L2, R2, K - Kh)], O, 0, M, N, epilogue=(expr, leaf, "float32"))
