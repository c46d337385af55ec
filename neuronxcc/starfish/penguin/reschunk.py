"""The matmul kernel's resident moving side loaded in a few chunks, ahead of the N tile that uses it.

The matmul kernel (penguin/kernels.py) keeps R[:, n0:n0+nn] (all of K) resident for one N tile
while the M loop streams L^T through it, and walrus rotates the resident buffer over two copies
so that the next N tile's R loads during this one's M loop. Loaded as one transfer (4 MiB for a
Llama-3-8B projection: 4096 x 512 bf16) it needs all 16 DMA engines for about 22 us at once; the
M loop's L^T loads, issued before it, hold the engines every few microseconds, so the big
transfer found no gap until the M loop had ended and the PE waited for it at every N tile
(about 2.3 ms of the prefill layer's 22 ms). Here R is loaded as at most ``MAX_CHUNKS``
transfers of whole K tiles, each into its own SBUF buffer (so each is still written whole at
the start of its N iteration and walrus still rotates it), triggered from GpSimd (idle in a
plain matmul, so a trigger waits only for its own buffer's previous readers) on a queue of
their own (no L^T load queues behind them). Each piece fits between L^T loads.

For fp32 with more than two K groups the chunks are one loop: chunk c, a DMA of ``rc`` whole K
tiles, writes columns [c * rc * nn, (c + 1) * rc * nn) of one SBUF tile laid out as
``resident.load``'s (tile t at column block t), so the loop writes all of it in each N iteration,
walrus still sees it defined afresh there and rotates it, and the K groups are the kernel's
ordinary K loop (``lhs_pre.stream``): the code is the same at every K. Otherwise each chunk keeps a buffer of its own and
the groups are written out (at most ``MAX_GROUPS`` of them and ``MAX_CHUNKS`` loads), each group
waiting only for its own chunks. One loop makes every group wait for all the chunks, which the
fp32 PE's long groups hide (birsim: matmul 4096 fp32 -0.1%, the matmul+gradient graph at 4096
+0.1%) but bf16 does not: a 4096 bf16 matmul +1.4% with a loop per group's chunks, +2.5% with one
loop; the Llama-3-8B prefill layer +0.5% with loops for its 7-group down projection only, +2.8%
with one loop everywhere.
"""
from neuronxcc.starfish.penguin.emit import pel

MAX_CHUNKS = 8          # transfers per resident tile
MAX_GROUPS = 8          # L^T groups of a K that is chunked (more: one transfer)
CHUNK_BYTES = 4096      # aim: bytes per partition of one chunk (16 engines x 8 partitions x 4 KiB = 512 KiB)
QUEUE = "q8"            # a queue of the 16 outside the Emitter's rotation of eight
ENGINE = "POOL"


def plan(K, TK, G, nn, isz, nterms):
    """K tiles per chunk, or None to keep one transfer: one term, K whole tiles in at most
    MAX_GROUPS groups of G, the tile wider than one chunk's aim."""
    if nterms != 1 or K % TK:
        return None
    nfull = K // TK
    if nfull % G or nfull // G > MAX_GROUPS or nfull * nn * isz <= CHUNK_BYTES:
        return None
    per = max(1, CHUNK_BYTES // (nn * isz))
    for rc in range(per, nfull + 1):
        if nfull % rc == 0 and nfull // rc <= MAX_CHUNKS:
            return rc
    return None


def looped(nfull, G, cdt):
    """Are the chunk loads and the K groups loops (fp32, more than two groups; module doc)?"""
    return cdt == "float32" and nfull // G > 2


def banks(nfull, G, rc, cdt):
    """[(first tile, tiles)] of the SBUF tiles the resident side is split into: one for all of K,
    written by a loop of chunk DMAs, when ``looped``; else one per chunk."""
    if looped(nfull, G, cdt):
        return [(0, nfull)]
    return [(t0, rc) for t0 in range(0, nfull, rc)]


def load(kern, R, nb, bs, n0, nn, K, TK, G, rc, cdt):
    """((buffer, first tile, tiles), ...), a tuple (the matmul kernel tells it from a plain
    resident buffer by that): per bank (``banks``) the SBUF tile
    rr[k, (t - first)*nn + n] = R[b, t*TK + k, n0 + n], written by chunk DMAs of ``rc`` tiles each
    (a loop of them when the bank holds several), triggered from ``ENGINE`` on ``QUEUE``."""
    em = kern.em
    P = pel()
    offs = kern.offsets()
    sk_r, sn_r = R.strides[nb], R.strides[nb + 1]
    out = []
    for first, ntl in banks(K // TK, G, rc, cdt):
        rr = em.sbuf("rhs_res", TK, ntl * nn, cdt)

        def chunk(c):
            em.dma(em.chip(rr, cdt, TK, [[1, rc * nn]], offset=c * (rc * nn)),
                   em.hbm(R.base, offs(R, bs + [(c * rc + first) * TK, n0]),
                          [[sk_r, TK], [TK * sk_r, rc], [sn_r, nn]]),
                   queue=QUEUE, engine=ENGINE)
        if ntl == rc:
            chunk(P.const(0))
        else:
            with em.b.loop(em.fresh("rc"), 0, ntl // rc, 1) as c:
                chunk(c)
        out.append((rr, first, ntl))
    return tuple(out)


def operand(em, banks, t, kn, nn, cdt):
    """The moving operand of K tile ``t`` (a constant, or any Expr when there is one bank)."""
    if len(banks) > 1:
        t = int(t)
    for buf, first, ntl in banks:
        if len(banks) == 1 or first <= t < first + ntl:
            return em.chip(buf, cdt, kn, [[1, nn]], offset=(t - first) * nn)
    raise ValueError("reschunk: K tile %s outside the resident tile" % (t,))

