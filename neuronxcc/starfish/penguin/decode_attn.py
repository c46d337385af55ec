"""Fused attention with few query rows per batch element (the GQA decode step): every row of
every batch element in one tile.

Owns: the lowering of an attention Plan (penguin/attention.py) whose batch elements b (the KV
heads of grouped-query decode) each have G query rows (query heads x positions) with
R = B*G <= 128 in all. ``attention.lower`` hands such plans here. Its own loop runs one 1..G-row
tile per batch element and query group; in the Llama-3-8B decode step that is 128 key-block
bodies of [1 row, 512 keys] each, DVE-bound. Here all R rows share one tile:

* Q^T block-diagonal: Q is loaded as it lies [R, K] (one DMA) and PE-transposed. It is then
  copied into ``qpad`` [K, B*R]: column block b holds head b's G columns at b*G, zeros elsewhere
  (one memset, one strided copy).
* Scores, per key block of <= 512 (one PSUM bank [R, 512]). The block's K rows are loaded as
  they lie: [keys, chunk, B, K], one run of B*K elements per key when the heads are adjacent, as
  in a KV cache. Each head's [128 keys, K] chunks are PE-transposed into one bank and evicted.
  The B matmuls qpad_b^T @ K_b^T accumulate into the score bank, and row r sees only its own
  head (qpad_b is zero outside head b's columns). ACT evicts with the leading scale.
* Softmax over the whole row at once (N <= MAX_KEYS, exact, no online rescaling): the score
  expression (mask) on [R, N], one row max, one ACT exp(x - max) that also sums the row.
* P @ V, transposed. Per 128-key chunk, P^T [keys, R] (a PE transpose) is the moving side and
  head b's V chunk [keys, Dv] the stationary side. O^T_b [Dv, R] accumulates in column block b of
  one PSUM bank [Dv, B*R].
* Store: the wanted columns (b*R + b*G + g) are one strided eviction to O^T [Dv, R]. It is
  PE-transposed back to [R, Dv], evicted by ACT with each row's 1/sum as the scale, and stored
  by one DMA.

Key blocks and heads are loops (the first block is peeled, since a PSUM accumulation starts
there), so the instruction count does not grow with N or B. Numerics as attention.py: P is
exp(x - row max) <= 1 in V's dtype, and it is normalised in fp32 at the end.
"""
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.penguin.expr import apply_view
from neuronxcc.starfish.penguin.tiles import Space, TV, TileEval, onchip_dtype

PMAX = 128
KEY_BLOCK = 512          # keys per score block: one PSUM bank of fp32
MAX_KEYS = 8192          # scores (fp32) and P of a row stay in SBUF: 6 bytes x N per partition
PSUM_BANK_F32 = 512
EARLY_V_BYTES = 32 * 1024   # SBUF per partition for the V blocks loaded before the softmax
EARLY_V_BLOCKS = 4          # at most this many (peeled: the instruction count stays bounded)


def _prod(xs):
    out = 1
    for x in xs:
        out *= int(x)
    return out


def fit(plan, QX, KX, VX, OX, expr, leaf):
    """The layout this kernel needs, or None when it does not apply (attention.py's own loop runs):
    (B, G, R, Q [R, K], K [B, K, N], V [B, N, Dv], O [R, Dv], score expression on [R, N], its leaf)."""
    n, nb = len(plan.xshape), plan.nb
    N, K, Dv = plan.N, plan.K, plan.Dv
    B, G = _prod(plan.xshape[:nb]), _prod(plan.xshape[nb:n - 1])
    R = B * G
    if nb == 0 or B < 2 or R > PMAX or B * R > PSUM_BANK_F32:
        return None
    if K > PMAX or Dv > PMAX or N > MAX_KEYS or (N > PMAX and N % PMAX):
        return None
    Q2, O2 = QX.reshape((R, K)), OX.reshape((R, Dv))
    K3, V3 = KX.reshape((B, K, N)), VX.reshape((B, N, Dv))
    if Q2 is None or O2 is None or K3 is None or V3 is None:
        return None
    if K3.strides[1] != 1 or V3.strides[2] != 1:
        return None                     # K or V rows not contiguous: not the cache layout this loads
    memo = {}
    e2 = apply_view(expr, lambda v: v.reshape((R, N)), memo)
    l2 = memo.get(id(leaf))
    if e2 is None or l2 is None:
        return None
    return B, G, R, Q2, K3, V3, O2, e2, l2


def lower(kern, plan, layout, scale, cdt1, cdt2):
    """Emit the kernel (see module doc) through Kernels KERN for LAYOUT = fit(...)."""
    B, G, R, Q2, K3, V3, O2, expr, leaf = layout
    cg, em, P = kern.cg, kern.em, kern.P
    offs = kern.offsets()
    N, K, Dv = plan.N, plan.K, plan.Dv
    f32 = "float32"
    odt = onchip_dtype(O2.dtype)
    NB = min(N, KEY_BLOCK)
    z = P.const(0)

    def ch(m, dt, pn, pat, offset=0):
        return em.chip(m, dt, pn, pat, offset=offset)

    def heads(body):
        """body(b) for b = 0 .. B-1 as one loop."""
        hv = em.fresh("h")
        with em.b.loop(hv, 0, B, 1) as b:
            body(b)

    def chunks(nk):
        """(chunks of 128 keys, partitions of a chunk) of a key block: nk is a multiple of 128 or
        the whole of N < 128."""
        return -(-nk // PMAX), min(PMAX, nk)

    # Q^T, block-diagonal over the heads
    qn = em.sbuf("dq_nat", R, K, cdt1)
    em.dma(ch(qn, cdt1, R, [[1, K]]), em.hbm(Q2.base, offs(Q2, [z, z]), [[Q2.strides[0], R], [Q2.strides[1], K]]))
    psq = em.psum("dq_qT", K, R)
    em.inst("transpose", "PE", [ch(psq, f32, K, [[1, R]])], [ch(qn, cdt1, R, [[1, K]])])
    qpad = em.sbuf("dq_qpad", K, B * R, cdt1)
    em.inst("memset", "POOL", [ch(qpad, cdt1, K, [[1, B * R]])], [], value=0.0)
    em.inst("tensor_copy", "DVE", [ch(qpad, cdt1, K, [[R + G, B], [1, G]])], [ch(psq, f32, K, [[G, B], [1, G]])])

    # scores [R, N] in SBUF (fp32), block by block
    sc = em.sbuf("dq_scores", R, N, f32)

    def kblock(n0, nk):
        nch, cn = chunks(nk)
        knat = em.sbuf("dq_knat", cn, nch * B * K, cdt1)
        sn, sb = K3.strides[2], K3.strides[0]
        pat = [[sn, cn]] + ([[PMAX * sn, nch]] if nch > 1 else []) + [[sb, B], [1, K]]
        em.dma(ch(knat, cdt1, cn, [[1, nch * B * K]]), em.hbm(K3.base, offs(K3, [z, z, n0]), pat))
        ps = em.psum("dq_s", R, nk)
        # two (PSUM bank, SBUF K^T) slots used by alternate heads: head b+1's transposes go into
        # the other bank while head b's eviction runs, so the PE does not wait for each eviction
        slots = [(em.psum("dq_kT", K, nk), em.sbuf("dq_kTs", K, nk, cdt1)) for _ in range(2 if B > 1 else 1)]

        def head(b, first, slot):
            pk, kT = slots[slot]
            for j in range(nch):
                em.inst("transpose", "PE", [ch(pk, f32, K, [[1, cn]], offset=j * PMAX)],
                        [ch(knat, cdt1, cn, [[1, K]], offset=b * K + j * B * K)])
            kern._evict_copy(ch(kT, cdt1, K, [[1, nk]]), ch(pk, f32, K, [[1, nk]]))
            em.inst("matmul", "PE", [ch(ps, f32, R, [[1, nk]])],
                    [ch(qpad, cdt1, K, [[1, R]], offset=b * R), ch(kT, cdt1, K, [[1, nk]])], psum_zero=first)

        head(z, True, 0)                # the accumulation over heads starts here
        if B > 1:
            head(P.const(1), False, 1)
        npair, odd = divmod(B - 2, 2) if B > 1 else (0, 0)
        if npair:
            hv = em.fresh("h")
            with em.b.loop(hv, 1, 1 + npair, 1) as hp:
                head(hp * 2, False, 0)
                head(hp * 2 + 1, False, 1)
        if odd:
            head(P.const(B - 1), False, 0)
        em.inst("activation", "ACT", [ch(sc, f32, R, [[1, nk]], offset=n0)], [ch(ps, f32, R, [[1, nk]])],
                func="identity", scale=scale)

    # key blocks in pairs, each with its own K buffer, so block i+1's load runs while block i's
    # transposes and matmuls do (a loop of one buffer would make each load wait for them)
    nkb, krem = divmod(N, NB)
    kpairs, kodd = divmod(nkb, 2)
    if kpairs == 1:
        kblock(z, NB)
        kblock(P.const(NB), NB)
    elif kpairs > 1:
        kv = em.fresh("kb")
        with em.b.loop(kv, 0, kpairs, 1) as kp:
            kblock(kp * (2 * NB), NB)
            kblock(kp * (2 * NB) + NB, NB)
    if kodd:
        kblock(P.const(2 * kpairs * NB), NB)
    if krem:
        kblock(P.const(nkb * NB), krem)

    # the first V blocks (up to EARLY_V_BYTES per partition and EARLY_V_BLOCKS, at least two) are loaded now: their DMAs
    # run during the scores and the softmax instead of after them, and their buffers are live at
    # once, so none waits for an earlier block's matmuls through reused bytes
    def vload(n0, nk):
        nch, cn = chunks(nk)
        vb = em.sbuf("dq_v", cn, nch * B * Dv, cdt2)
        sn, sb = V3.strides[1], V3.strides[0]
        pat = [[sn, cn]] + ([[PMAX * sn, nch]] if nch > 1 else []) + [[sb, B], [1, Dv]]
        em.dma(ch(vb, cdt2, cn, [[1, nch * B * Dv]]), em.hbm(V3.base, offs(V3, [z, n0, z]), pat))
        return vb

    nfull, rem = divmod(N, NB)
    vbytes = -(-NB // PMAX) * B * Dv * bdt.itemsize(cdt2)
    nearly = min(nfull, EARLY_V_BLOCKS, max(2, EARLY_V_BYTES // max(1, vbytes)))
    early = [vload(P.const(i * NB), NB) for i in range(nearly)]

    # the score expression (mask) and the softmax over whole rows
    te = TileEval(cg, Space(0, 1, [z, z], [R, N]))
    te.memo[id(leaf)] = TV("tile", f32, ap=ch(sc, f32, R, [[1, N]]))
    xv = te.materialise(te.value(expr))
    if xv.dtype != f32:
        xv = te.cast(xv, f32)

    def col(prefix):
        return ch(em.sbuf(prefix, R, 1, f32), f32, R, [[1, 1]])

    mx, negm, rs, rl = col("dq_max"), col("dq_negm"), col("dq_sum"), col("dq_rsum")
    em.inst("tensor_reduce", "DVE", [mx], [xv.ap], op="max", axes=1)
    em.inst("tensor_scalar", "DVE", [negm], [mx], op0="mult", operand0=-1.0)
    pm = em.sbuf("dq_p", R, N, cdt2)
    em.inst("activation", "ACT", [ch(pm, cdt2, R, [[1, N]]), rs], [xv.ap, negm], func="exp", bias_ap=True,
            reduce="add")
    em.inst("tensor_scalar", "DVE", [rl], [rs], op0="divide", operand0=1.0, reverse0=True)

    # O^T_b = V_b^T P_b^T, accumulated over the key chunks in column block b of one bank
    po = em.psum("dq_oT", Dv, B * R)

    def vblock(n0, nk, first, vb=None):
        nch, cn = chunks(nk)
        if vb is None:
            vb = vload(n0, nk)
        pps = em.psum("dq_pT", cn, nch * R)
        for j in range(nch):
            em.inst("transpose", "PE", [ch(pps, f32, cn, [[1, R]], offset=j * R)],
                    [ch(pm, cdt2, R, [[1, cn]], offset=n0 + j * PMAX)])
        pT = em.sbuf("dq_pTs", cn, nch * R, cdt2)
        kern._evict_copy(ch(pT, cdt2, cn, [[1, nch * R]]), ch(pps, f32, cn, [[1, nch * R]]))

        def head(b):
            for j in range(nch):
                em.inst("matmul", "PE", [ch(po, f32, Dv, [[1, R]], offset=b * R)],
                        [ch(vb, cdt2, cn, [[1, Dv]], offset=b * Dv + j * B * Dv), ch(pT, cdt2, cn, [[1, R]], offset=j * R)],
                        psum_zero=first and j == 0)
        heads(head)

    for i, vb in enumerate(early):
        vblock(P.const(i * NB), NB, i == 0, vb)
    # the other full blocks in pairs, each with its own V buffer (a loop of one buffer would make
    # each load wait for the previous block's matmuls)
    vpairs, vodd = divmod(nfull - len(early), 2)
    if vpairs == 1:
        vblock(P.const(2 * NB), NB, False)
        vblock(P.const(3 * NB), NB, False)
    elif vpairs > 1:
        iv_name = em.fresh("vb")
        with em.b.loop(iv_name, 1, 1 + vpairs, 1) as i:
            vblock(i * (2 * NB), NB, False)
            vblock(i * (2 * NB) + NB, NB, False)
    if vodd:
        vblock(P.const((nfull - 1) * NB), NB, False)
    if rem:
        vblock(P.const(nfull * NB), rem, nfull == 0)

    # row r = b*G + g is column b*R + r of the bank: one strided eviction, a transpose back, the
    # 1/sum scale on the last eviction, one store
    oT = em.sbuf("dq_oTs", Dv, R, f32)
    em.inst("tensor_copy", "DVE", [ch(oT, f32, Dv, [[1, R]])], [ch(po, f32, Dv, [[R + G, B], [1, G]])])
    ps2 = em.psum("dq_o", R, Dv)
    em.inst("transpose", "PE", [ch(ps2, f32, R, [[1, Dv]])], [ch(oT, f32, Dv, [[1, R]])])
    o = em.sbuf("dq_out", R, Dv, odt)
    em.inst("activation", "ACT", [ch(o, odt, R, [[1, Dv]])], [ch(ps2, f32, R, [[1, Dv]]), rl], func="identity",
            scale_ap=True)
    em.dma(em.hbm(O2.base, offs(O2, [z, z]), [[O2.strides[0], R], [O2.strides[1], Dv]]), ch(o, odt, R, [[1, Dv]]))
    cg.decode_fused = getattr(cg, "decode_fused", 0) + 1
