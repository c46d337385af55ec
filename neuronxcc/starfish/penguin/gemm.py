"""Matmuls whose moving side fits SBUF whole: each operand crosses HBM once, in long runs, and
each L tile is PE-transposed once.

Owns: ``out[m, n] = sum_k L[m, k] R[k, n]`` (one term, no batch dims, L row-major so its transpose
must come from the PE) when R[:, n0:n0+NS] for all of K fits the resident budget, with NS = N or
N/2 (a multiple of 512, at most NS_MAX). The general kernel (penguin/kernels.py) keeps a 512-wide R
tile resident and loads and PE-transposes all of L again for every such tile: at 1024 x 1024 bf16
it moves L twice in 1 KiB runs and runs twice the transposes. Here:

* R, per N super-tile, in ``parts`` (4, or 2) K parts. Each part is one SBUF tile written by one
  DMA, so the first matmuls need only part 0. Within a part R is K-permuted in groups of c tiles:
  partition p of group g holds rows h*K/parts + g*128c + p*c + i (i < c). When NS = N those rows
  are one contiguous run of c*N elements (4 KiB at 1024 bf16); otherwise they are c runs of NS.
  c keeps the PE's strided read of the L tile at c * itemsize <= 16 bytes (the public rule: wider
  innermost strides halve the SBUF bandwidth) and a group within one PSUM bank.
* L, per M tile of 128 rows, is loaded as it lies (one run of K elements per row). Its K columns
  {h*K/parts + g*128c + p*c + i : p} are PE-transposed (a strided read) group by group into two
  PSUM banks used in turn, and evicted. This is L^T in R's K order, once per M tile and super-tile.
* Per 512-wide N tile, the K loop accumulates in one PSUM bank. ACT evicts into one SBUF row
  block of NS columns, and one DMA per M tile stores it. The store is triggered by the evicting
  engine: SP issues in order, and a store there would hold back the next tiles' loads. A fused
  epilogue instead goes through the kernel's ``_mm_evict`` per N tile.

Order: the DMA queues share the engines in issue order. So L tiles 0 and 1 and R's parts are
issued first, and both tiles' products take R's parts as they arrive. Their results are stored
just before the last tile's products: a loop buffer placed where they lie would otherwise make
the loop's loads wait for those stores. From tile 2 on the loop is software-pipelined. Step m
loads and transposes tile m+1 into the other of two L^T buffers before tile m's products, so the
PE does not wait for the transposes' evictions. Two sets of accumulator banks alternate by tile
parity. K groups, tile pairs and super-tiles are loops, and the instruction count does not grow
with M, N or K.
"""
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.penguin.tiles import onchip_dtype

PMAX = 128
NT = 512                 # output columns per PSUM bank (fp32)
NS_MAX = 1024            # N super-tile: two accumulator banks per M tile, two sets by parity
R_PARTS = 4              # K parts of R per super-tile (separate tiles: the first matmuls need only part 0)
DEFER = True
SHARED_OUT = True
K_MAX = 2048             # tuned and measured at K <= 2048; larger K (the prefill layer's 4096) keeps the general kernel
MAX_READ_STRIDE = 16     # bytes: the PE's strided read of the L tile stays within this


def plan(kern, term, M, N, nb, cdt):
    """(NS, parts, c) when this kernel applies, else None: the N super-tile, R's K parts per super-tile
    and the K-permutation group."""
    L, R, K = term
    if nb or M < 2 * PMAX or M % PMAX or N < NT or N % NT or K % (2 * PMAX) or K < 2 * PMAX:
        return None
    if L.strides[1] != 1 or L.strides[0] == 1 or R.strides[1] != 1:
        return None
    if kern.k_tile(K) != PMAX or K > K_MAX:
        return None
    isz = bdt.itemsize(cdt)
    KT = K // PMAX
    budget = kern._res_budget()
    fits = [ns for ns in range(min(N, NS_MAX), NT - 1, -NT) if N % ns == 0 and KT * ns * isz <= budget]
    if not fits or N // fits[0] > 2:
        return None                     # more super-tiles re-read and re-transpose L more often
    parts = R_PARTS if KT % R_PARTS == 0 else 2
    tb = max(1, (kern.em.tm.psum_bank_bytes // 4) // PMAX)       # transposes of 128 rows per PSUM bank
    c = max(d for d in (8, 4, 2, 1) if (KT // parts) % d == 0 and d * isz <= MAX_READ_STRIDE and d <= tb)
    return fits[0], parts, c


def lower(kern, term, O, M, N, epilogue, cdt, layout):
    NS, parts, c = layout
    L, R, K = term
    em, P = kern.em, kern.P
    offs = kern.offsets()
    f32 = "float32"
    KT = K // PMAX
    tpp = KT // parts                  # K tiles per part
    ngroups = tpp // c                 # K-permutation groups per part
    odt = onchip_dtype(epilogue[2] if epilogue else em.m.tensors[O.base].dtype)
    sm_l, sk_r = L.strides[0], R.strides[0]
    z = P.const(0)

    def loop(name, n, body, start=0):
        if n - start == 1:
            body(P.const(start))
        elif n - start > 1:
            with em.b.loop(em.fresh(name), start, n, 1) as iv:
                body(iv)

    def load_r(n0, out, hs):
        """Parts HS of R[:, n0:n0+NS] along K (see module doc), one SBUF tile and DMA each, onto OUT."""
        for h in hs:
            rr = em.sbuf("gemm_r", PMAX, tpp * NS, cdt)
            pat = [[c * sk_r, PMAX], [PMAX * c * sk_r, ngroups], [sk_r, c], [1, NS]]
            em.dma(em.chip(rr, cdt, PMAX, [[1, tpp * NS]]), em.hbm(R.base, offs(R, [P.const(h * tpp * PMAX), n0]), pat))
            out.append(rr)
        return out

    def load_l(m0):
        """L[m0:m0+128, :] as it lies: one run of K elements per row."""
        nat = em.sbuf("gemm_l", PMAX, K, cdt)
        em.dma(em.chip(nat, cdt, PMAX, [[1, K]]), em.hbm(L.base, offs(L, [m0, z]), [[sm_l, PMAX], [1, K]]))
        return nat

    def transposed(nat, lt, banks):
        """The L rows in NAT PE-transposed into LT [128, KT * 128]: tile (h, g, i) at column block
        (h*tpp + g*c + i) * 128, evicted group by group (the PSUM banks in turn)."""
        mn = PMAX

        def tgroup(h, g):
            ps = banks[h % len(banks)]
            for i in range(c):
                em.inst("transpose", "PE", [em.chip(ps, f32, PMAX, [[1, mn]], offset=i * mn)],
                        [em.chip(nat, cdt, mn, [[c, PMAX]], offset=g * (PMAX * c) + (h * tpp * PMAX + i))])
            # on DVE: ACT's in-order stream carries the accumulators' evictions and the stores they
            # trigger (which wait for the evictions); L^T queued behind them would stall the PE
            em.inst("tensor_copy", "DVE", [em.chip(lt, cdt, PMAX, [[1, c * mn]], offset=(g * c + h * tpp) * mn)],
                    [em.chip(ps, f32, PMAX, [[1, c * mn]])])
        for h in range(parts):
            loop("gt", ngroups, lambda g, h=h: tgroup(h, g))

    def accumulate(jobs):
        """The K loop (R's parts, K groups of c tiles) over JOBS = [(L^T tile, PSUM bank AP, output
        block j)], every job taking each K group in turn: with several jobs the PE works on a part of R
        as soon as it has arrived. The first group zeroes the banks."""
        mn = PMAX

        def kgroup(h, g, first):
            for lt, ps_ap, j in jobs:
                for i in range(c):
                    t = g * c + i
                    em.inst("matmul", "PE", [ps_ap],
                            [em.chip(lt, cdt, PMAX, [[1, mn]], offset=(t + h * tpp) * mn),
                             em.chip(rparts[h], cdt, PMAX, [[1, NT]], offset=t * NS + j * NT)],
                            psum_zero=first and i == 0)
        kgroup(0, z, True)
        loop("kg", ngroups, lambda g: kgroup(0, g, False), start=1)
        for h in range(1, parts):
            loop("kg", ngroups, lambda g, h=h: kgroup(h, g, False))

    def evict(m0, n0, j, ps_ap, ev):
        """Output block j (512 columns) of rows m0.. from PSUM: the fused epilogue, or into EV."""
        if epilogue:
            kern._mm_evict(O, 0, [], m0, n0 + j * NT, PMAX, NT, ps_ap, epilogue)
        elif bdt.is_int(odt):
            em.inst("tensor_copy", "DVE", [em.chip(ev, odt, PMAX, [[1, NT]], offset=j * NT)], [ps_ap])
        else:
            em.inst("activation", "ACT", [em.chip(ev, odt, PMAX, [[1, NT]], offset=j * NT)], [ps_ap],
                    func="identity")

    def store(m0, n0, ev):
        """One DMA of EV to rows m0.., columns n0 .. n0+NS, triggered by the evicting engine: SP, which
        issues in order, would otherwise wait here before issuing the next tiles' loads."""
        if ev is not None:
            em.dma(em.hbm(O.base, offs(O, [m0, n0]), [[O.strides[0], PMAX], [O.strides[1], NS]]),
                   em.chip(ev, odt, PMAX, [[1, NS]]), engine="DVE" if bdt.is_int(odt) else "ACT")

    def products(m0, n0, lt, accs, ev=None):
        """Output rows m0 .. m0+128, columns n0 .. n0+NS: per 512 columns the K loop in one PSUM bank,
        evicted into one SBUF row block, stored by one DMA."""
        if ev is None and not epilogue:
            ev = em.sbuf("gemm_out", PMAX, NS, odt)
        for j in range(NS // NT):
            ps_ap = em.chip(accs[j], f32, PMAX, [[1, NT]])
            accumulate([(lt, ps_ap, j)])
            evict(m0, n0, j, ps_ap, ev)
        store(m0, n0, ev)

    def products_first(m0s, lts2, accs2, defer=False, outs=None):
        """Output rows of the first M tiles, all NS columns, with the K loop outermost: their
        len(m0s) x NS/NT accumulation banks take each of R's K parts in turn, so the PE works on part h
        as soon as it has arrived instead of waiting for all of R before the first tile's first bank is
        done. Evictions and stores as ``products``; returns the deferred stores."""
        evs = [None if epilogue else outs[t] if outs and t < len(outs) else em.sbuf("gemm_out", PMAX, NS, odt)
               for t in range(len(m0s))]
        aps = [[em.chip(accs[j], f32, PMAX, [[1, NT]]) for j in range(NS // NT)] for accs in accs2]
        accumulate([(lt, ap[j], j) for lt, ap in zip(lts2, aps) for j in range(NS // NT)])
        stores = []
        for m0, ev, ap in zip(m0s, evs, aps):
            for j in range(NS // NT):
                evict(m0, n0s[0], j, ap[j], ev)
            st = (lambda m0=m0, ev=ev: store(m0, n0s[0], ev))
            if not defer or (outs and ev in outs):
                st()          # a shared block is live until the loop: its store cannot hold a load
            else:
                stores.append(st)
        return stores

    def n_super(n0):
        """Software-pipelined over the M tiles: step m transposes tile m+1 into the other of two L^T
        buffers before tile m's products, so the PE never waits for the transposes' evictions."""
        MT = M // PMAX
        lts = [em.sbuf("gemm_lT", PMAX, KT * PMAX, cdt) for _ in range(2)]
        # PSUM shared by every tile of the super-tile (a fresh bank per tile would let the scheduler
        # keep more of them live than PSUM holds): transpose banks used in turn (four when the
        # super-tile is the whole of N, so a transpose group never waits for the eviction of the
        # group before; with an N loop walrus rotates them, two), one bank per 512 output columns
        # for even and one for odd tiles. The first T tiles take R's parts as they arrive, K part
        # by K part; with three of them (their own L^T and banks) the PE's work per part
        # (3 x NS/NT x K/parts/128 matmuls) outlasts a part's DMA, so it no longer waits between
        # parts. Both only when they fit PSUM.
        bank = em.tm.psum_bank_bytes
        one = N == NS
        tb = min(4 if one else 2, parts)
        T = 3 if one and MT >= 5 and 3 * (NS // NT) * bank + tb * c * PMAX * 4 <= em.tm.psum_partition_bytes else 2
        banks = [em.psum("gemm_psT", PMAX, c * PMAX) for _ in range(tb)]
        accs = [[em.psum("gemm_ps", PMAX, NT) for _ in range(NS // NT)] for _ in range(2)]   # by parity
        lts_t = lts + [em.sbuf("gemm_lT", PMAX, KT * PMAX, cdt) for _ in range(T - 2)]
        accs_t = accs + [[em.psum("gemm_ps", PMAX, NT) for _ in range(NS // NT)] for _ in range(T - 2)]
        del rparts[:]
        nats = [load_l(z)]
        load_r(n0, rparts, [0])
        nats += [load_l(P.const(t * PMAX)) for t in range(1, T)]
        load_r(n0, rparts, range(1, parts))
        for nat, lt in zip(nats, lts_t):
            transposed(nat, lt, banks)
        # their results are stored later (before the last tile's products): a buffer of the loop
        # placed where they lie would make the loop's loads wait for those stores
        n0s[:] = [n0]
        # one output row block per parity, shared by every tile (the loop's too): a first tile's block
        # stays live until the loop, so the loop's loads never take its bytes and wait for its store
        outs = [em.sbuf("gemm_out", PMAX, NS, odt) for _ in range(2)] if SHARED_OUT and not epilogue else None
        stores = products_first([P.const(t * PMAX) for t in range(T)], lts_t, accs_t,
                                defer=DEFER and MT > T + 1, outs=outs)
        if MT > T:
            transposed(load_l(P.const(T * PMAX)), lts[T % 2], banks)

        def step(m, parity, has_next):
            if has_next:
                transposed(load_l((m + 1) * PMAX), lts[1 - parity], banks)
            products(m * PMAX, n0, lts[parity], accs[parity], ev=outs[parity] if outs else None)

        # pairs of steps from tile T that both have a next tile; tile m uses the buffers of parity m % 2
        npair = max(0, (MT - T - 1) // 2)
        loop("mp", npair, lambda p: (step(p * 2 + T, T % 2, True), step(p * 2 + T + 1, 1 - T % 2, True)))
        m = T + 2 * npair
        while m < MT:
            if DEFER and m == MT - 1 and MT > T + 1:
                for st in stores:
                    st()
            step(P.const(m), m % 2, m + 1 < MT)
            m += 1

    n0s, rparts = [], []          # the super-tile's first column and R's parts (set by n_super)
    loop("ns", N // NS, lambda iv: n_super(iv * NS))
    kern.cg.mm_gemm = getattr(kern.cg, "mm_gemm", 0) + 1
