"""The resident moving side of a matmul: R[b, :, n0:n0+nn] (all of K) loaded once into one SBUF
tile rr[k, t*nn + n] = R[t*TK + k, n0 + n] (TK = the matmul K tile), so that no DMA moves one
element per descriptor: when R lies K-contiguous (the K^T of attention scores, a transposed
weight) it is loaded as it lies, 128 N rows at a time, and transposed on the PE. Used by the
matmul kernel (penguin/kernels.py) and the fused attention (penguin/attention.py)."""
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.penguin.emit import Axis

PMAX = 128
RHS_T_CHUNK_BYTES = 16 * 1024   # bytes per partition of one natural (untransposed) load


def load(kern, R, nb, bs, n0, nn, K, cdt):
    """The moving side R[b, :, n0:n0+nn] (all of K) in one SBUF tile rr[k, t*nn + n] =
    R[t*TK + k, n0 + n] (TK = kern.k_tile(K)), loaded so that no DMA moves one element per descriptor."""
    em = kern.em
    P = kern.P
    offs = kern.offsets()
    TK = kern.k_tile(K)
    nfull, rem = divmod(K, TK)
    rr = em.sbuf("rhs_res", TK, (nfull + (1 if rem else 0)) * nn, cdt)
    sk_r, sn_r = R.strides[nb], R.strides[nb + 1]
    if sk_r == 1 and sn_r != 1 and nn > 1:
        # R^T lies row-major (K contiguous): a transposing DMA would move one element per
        # descriptor; load it as it lies and transpose it on the PE instead
        _transposed(kern, R, nb, offs, bs, n0, nn, K, TK, rr, cdt)
        return rr
    if nfull:
        # one DMA writes the whole resident tile, so walrus sees it defined afresh in each
        # N iteration and double-buffers it (the next N tile loads during this one's M loop)
        em.dma(em.chip(rr, cdt, TK, [[1, nfull * nn]]),
               em.hbm(R.base, offs(R, bs + [P.const(0), n0]), [[sk_r, TK], [TK * sk_r, nfull], [sn_r, nn]]))
    if rem:
        em.dma(em.chip(rr, cdt, rem, [[1, nn]], offset=nfull * nn),
               em.hbm(R.base, offs(R, bs + [P.const(nfull * TK), n0]), [[sk_r, rem], [sn_r, nn]]))
    return rr


def _transposed(kern, R, nb, offs, bs, n0, nn, K, TK, rr, cdt):
    """Resident moving side rr[k, t*nn + n] = R[t*TK + k, n0 + n] when R is contiguous along K:
    blocks of <= 128 N rows are loaded as they lie ([rows, K chunk], one descriptor per row),
    transposed on the PE tile by tile into one PSUM bank and evicted into rr. Both the N blocks
    and the K chunks are loops, so the instruction count does not grow with K or N."""
    em = kern.em
    P = kern.P
    sn_r = R.strides[nb + 1]
    nfull, rem = divmod(K, TK)
    chunk = max(1, (RHS_T_CHUNK_BYTES // bdt.itemsize(cdt)) // TK)     # K tiles per natural load
    per = max(1, (em.tm.psum_bank_bytes // 4) // PMAX)                  # transposes per PSUM bank
    # two PSUM banks used in turn (a fresh one per group would let the scheduler keep many live)
    # sized to what one group writes: a narrow bank is written whole by its first transpose, so walrus
    # sees it defined afresh each iteration (a partly written one stays live over the whole loop)
    width = min(per, max(min(chunk, nfull), 1)) * min(nn, PMAX)
    banks = [em.psum("psT", TK, width) for _ in range(2)]

    def tiles(b0, bn, t0, tc, kn_last):
        """Tiles t0 .. t0+tc-1 (t0 a pelican Expr or int) of one N block; all TK rows but the
        last, which has kn_last."""
        kc = (tc - 1) * TK + kn_last
        nat = em.sbuf("rhs_nat", bn, kc, cdt)
        em.dma(em.chip(nat, cdt, bn, [[1, kc]]),
               em.hbm(R.base, offs(R, bs + [P.const(0) + t0 * TK, n0 + b0]), [[sn_r, bn], [1, kc]]))
        for g, j0 in enumerate(range(0, tc, per)):
            c = min(per, tc - j0)
            ps = banks[g % 2]
            last = kn_last if j0 + c == tc else TK
            for j in range(c):
                kn = last if j == c - 1 else TK
                em.inst("transpose", "PE", [em.chip(ps, "float32", kn, [[1, bn]], offset=j * bn)],
                        [em.chip(nat, cdt, bn, [[1, kn]], offset=(j0 + j) * TK)])
            # full tiles share one eviction; a short last tile (K % TK rows) goes alone
            full = c if last == TK else c - 1
            for (a, n_, kn) in ((0, full, TK), (full, c - full, last)):
                if n_ <= 0:
                    continue
                dst = em.chip(rr, cdt, kn, [[nn, n_], [1, bn]], offset=(t0 + j0 + a) * nn + b0)
                src = em.chip(ps, "float32", kn, [[bn, n_], [1, bn]], offset=a * bn)
                kern._evict_copy(dst, src)

    if nfull:
        em.nest([Axis(nn, PMAX, "nt"), Axis(nfull, chunk, "kt")],
                lambda st, sz: tiles(st[0], sz[0], st[1], sz[1], TK))
    if rem:
        em.nest([Axis(nn, PMAX, "nt")], lambda st, sz: tiles(st[0], sz[0], P.const(nfull), 1, rem))
