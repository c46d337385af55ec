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

The K loop over L^T groups is then unrolled (at most ``MAX_GROUPS`` groups, so the instruction
count stays bounded by a constant at every size); a kernel whose K needs more groups keeps the
single transfer.
"""
from neuronxcc.starfish.penguin.emit import pel

MAX_CHUNKS = 8          # transfers per resident tile (and SBUF buffers)
MAX_GROUPS = 8          # L^T groups of the unrolled K loop
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


def load(kern, R, nb, bs, n0, nn, K, TK, rc, cdt):
    """[(buffer, first tile)] of the chunks of R[b, :, n0:n0+nn]: buffer [TK, rc * nn] holds
    K tiles first .. first + rc - 1 (tile t at column block t - first)."""
    em = kern.em
    P = pel()
    offs = kern.offsets()
    sk_r, sn_r = R.strides[nb], R.strides[nb + 1]
    out = []
    for t0 in range(0, K // TK, rc):
        buf = em.sbuf("rhs_res", TK, rc * nn, cdt)
        em.dma(em.chip(buf, cdt, TK, [[1, rc * nn]]),
               em.hbm(R.base, offs(R, bs + [P.const(t0 * TK), n0]), [[sk_r, TK], [TK * sk_r, rc], [sn_r, nn]]),
               queue=QUEUE, engine=ENGINE)
        out.append((buf, t0))
    return out


def operand(em, chunks, rc, t, kn, nn, cdt):
    """The moving operand of K tile T (an int) in the chunked resident tile."""
    buf, t0 = chunks[t // rc]
    return em.chip(buf, cdt, kn, [[1, nn]], offset=(t - t0) * nn)
