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

Order: the DMA queues share the engines in issue order. So the first T tiles' L (T = 2 or 3) and
R's parts are issued first, in the order the PE needs them (L0, R part 0, the other first tiles,
R's parts but the last, tile T, R's last part, tile T+1), and the first tiles' products take R's
parts as they arrive, each tile transposed just before its part-0 products. Tile T is transposed
before the last part's products: its evictions then hold the PSUM port (shared by ACT and DVE)
before the first tiles' accumulator evictions do. Tiles T and T+1 are loaded before any of this is
computed, so their buffers are live with the first tiles' and never share their bytes. The first
tiles' results are stored just before the last tile's products: a loop buffer placed where they
lie would otherwise make the loop's loads wait for those stores. From tile T on the loop is
software-pipelined: step m loads tile m+2 and transposes tile m+1 (loaded a step earlier) after
the first 512 columns of tile m's products, so the transposes wait for no load of their own step
and their evictions run beside tile m's last block of matmuls. Two sets of accumulator banks and
L^T buffers alternate by tile parity. K groups, tile pairs and super-tiles are loops, and the
instruction count does not grow with M, N or K.
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

    def load_l(m0, nat=None):
        """L[m0:m0+128, :] as it lies: one run of K elements per row (into NAT, else a new tile)."""
        nat = nat or em.sbuf("gemm_l", PMAX, K, cdt)
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

    def accumulate(jobs, hs=None):
        """The K loop (R's parts HS, default all; K groups of c tiles) over JOBS = [(L^T tile, PSUM bank
        AP, output block j)], every job taking each K group in turn: with several jobs the PE works on a
        part of R as soon as it has arrived. The first group zeroes the banks."""
        mn = PMAX
        hs = range(parts) if hs is None else hs

        def kgroup(h, g, first):
            for lt, ps_ap, j in jobs:
                for i in range(c):
                    t = g * c + i
                    em.inst("matmul", "PE", [ps_ap],
                            [em.chip(lt, cdt, PMAX, [[1, mn]], offset=(t + h * tpp) * mn),
                             em.chip(rparts[h], cdt, PMAX, [[1, NT]], offset=t * NS + j * NT)],
                            psum_zero=first and i == 0)
        for h in hs:
            if h == 0:
                kgroup(0, z, True)
                loop("kg", ngroups, lambda g: kgroup(0, g, False), start=1)
            else:
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

    def products(m0, n0, lt, accs, ev=None, mid=None):
        """Output rows m0 .. m0+128, columns n0 .. n0+NS: per 512 columns the K loop in one PSUM bank,
        evicted into one SBUF row block, stored by one DMA. MID (the next tile's transposes) goes
        after the first block: its evictions then overlap this tile's last block of matmuls instead
        of waiting behind that block's eviction for the PSUM port ACT and DVE share."""
        if ev is None and not epilogue:
            ev = em.sbuf("gemm_out", PMAX, NS, odt)
        for j in range(NS // NT):
            ps_ap = em.chip(accs[j], f32, PMAX, [[1, NT]])
            accumulate([(lt, ps_ap, j)])
            if j == 0 and mid is not None and NS // NT > 1:
                mid()
                mid = None
            evict(m0, n0, j, ps_ap, ev)
        if mid is not None:
            mid()
        store(m0, n0, ev)

    def products_first(m0s, nats, lts2, accs2, banks, defer=False, outs=None, before_last=None):
        """Output rows of the first M tiles, all NS columns, with the K loop outermost: their
        len(m0s) x NS/NT accumulation banks take each of R's K parts in turn, so the PE works on part h
        as soon as it has arrived instead of waiting for all of R before the first tile's first bank is
        done. Each tile's transposes (of NATS into LTS2) go just before its part-0 products, in the
        order its L arrives, so the PE does not wait for the last of these tiles to start.
        Evictions and stores as ``products``; returns the deferred stores."""
        evs = [None if epilogue else outs[t] if outs and t < len(outs) else em.sbuf("gemm_out", PMAX, NS, odt)
               for t in range(len(m0s))]
        aps = [[em.chip(accs[j], f32, PMAX, [[1, NT]]) for j in range(NS // NT)] for accs in accs2]
        for nat, lt, ap in zip(nats, lts2, aps):
            transposed(nat, lt, banks)
            accumulate([(lt, ap[j], j) for j in range(NS // NT)], [0])
        jobs = [(lt, ap[j], j) for lt, ap in zip(lts2, aps) for j in range(NS // NT)]
        accumulate(jobs, range(1, parts - 1))
        if before_last is not None:
            before_last()     # the next tile's transposes: evicted before these tiles' banks hold the port
        if parts > 1:
            accumulate(jobs, [parts - 1])
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
        """Software-pipelined over the M tiles: step m loads tile m+2 and transposes tile m+1 (loaded a
        step earlier) into the other of two L^T buffers amid tile m's products, so the PE never waits
        for the transposes' loads or evictions."""
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
        t3 = one and MT >= 5 and 3 * (NS // NT) * bank + tb * c * PMAX * 4 <= em.tm.psum_partition_bytes
        # L two tiles ahead in the loop (see ``step``) when the steps from tile T pair up evenly: three
        # first tiles then only when MT is odd. Measured on one super-tile only (1024 x 1024 bf16: 38.2 ->
        # 37.7 us with T = 2; 2048 bf16, two super-tiles: 1.5% slower), so two or more keep one ahead
        T = 3 if t3 and (MT - 3) % 2 == 0 else 2
        ahead = 2 if one and (MT - T) % 2 == 0 else 1
        banks = [em.psum("gemm_psT", PMAX, c * PMAX) for _ in range(tb)]
        accs = [[em.psum("gemm_ps", PMAX, NT) for _ in range(NS // NT)] for _ in range(2)]   # by parity
        # the first tiles' L^T buffers leave lts[T % 2] free: tile T is transposed into it before their
        # last K part
        lts_t = [lts[1 - T % 2]] + [em.sbuf("gemm_lT", PMAX, KT * PMAX, cdt) for _ in range(T - 1)]
        accs_t = accs + [[em.psum("gemm_ps", PMAX, NT) for _ in range(NS // NT)] for _ in range(T - 2)]
        del rparts[:]
        nats = [load_l(z)]
        load_r(n0, rparts, [0])
        nats += [load_l(P.const(t * PMAX)) for t in range(1, T)]
        load_r(n0, rparts, range(1, parts - 1))
        # tile T before R's last part (its transposes go before the last part's products) and T+1 (read
        # by the loop's first step) after it, both before the first tiles' products: their tiles are
        # then live together with the first tiles', so the allocator gives them bytes of their own and
        # their loads wait for no transpose of those tiles
        nat_t = load_l(P.const(T * PMAX)) if MT > T else None
        load_r(n0, rparts, range(max(1, parts - 1), parts))
        nat_b = load_l(P.const((T + 1) * PMAX)) if ahead == 2 and MT > T + 1 else None
        # their results are stored later (before the last tile's products): a buffer of the loop
        # placed where they lie would make the loop's loads wait for those stores
        n0s[:] = [n0]
        # one output row block per parity, shared by every tile (the loop's too): a first tile's block
        # stays live until the loop, so the loop's loads never take its bytes and wait for its store
        outs = [em.sbuf("gemm_out", PMAX, NS, odt) for _ in range(2)] if SHARED_OUT and not epilogue else None
        first_t = (lambda: transposed(nat_t, lts[T % 2], banks)) if nat_t is not None and parts > 1 else None
        stores = products_first([P.const(t * PMAX) for t in range(T)], nats, lts_t, accs_t, banks,
                                defer=DEFER and MT > T + 1, outs=outs, before_last=first_t)
        if nat_t is not None and first_t is None:
            transposed(nat_t, lts[T % 2], banks)
        nat_a = em.sbuf("gemm_l", PMAX, K, cdt) if ahead == 2 else None

        def step(m, parity, has_next, src=None, dst=None):
            """Tile m's products, with tile m+1's transposes after their first 512 columns. Two ahead,
            the step loads tile m+2 into DST and transposes tile m+1 from SRC (loaded a step earlier):
            the transposes wait for no load of their own step. One ahead, it loads tile m+1 itself."""
            if dst is not None:
                load_l((m + 2) * PMAX, dst)
            elif has_next and src is None:
                src = load_l((m + 1) * PMAX)
            mid = (lambda: transposed(src, lts[1 - parity], banks)) if has_next else None
            products(m * PMAX, n0, lts[parity], accs[parity], ev=outs[parity] if outs else None, mid=mid)

        # pairs of steps from tile T that both have a next tile; tile m uses the buffers of parity m % 2.
        # Two ahead, the first step of a pair reads nat_b (loaded by the pair before) and loads nat_a,
        # the second the other way round; the last pair loads the last tile (MT - T is even)
        npair = max(0, (MT - T - 1) // 2)
        if ahead == 2:
            loop("mp", npair, lambda p: (step(p * 2 + T, T % 2, True, nat_b, nat_a),
                                         step(p * 2 + T + 1, 1 - T % 2, True, nat_a, nat_b)))
        else:
            loop("mp", npair, lambda p: (step(p * 2 + T, T % 2, True), step(p * 2 + T + 1, 1 - T % 2, True)))
        m = T + 2 * npair
        while m < MT:
            if DEFER and m == MT - 1 and MT > T + 1:
                for st in stores:
                    st()
            step(P.const(m), m % 2, m + 1 < MT, nat_b)
            m += 1

    n0s, rparts = [], []          # the super-tile's first column and R's parts (set by n_super)
    loop("ns", N // NS, lambda iv: n_super(iv * NS))
    kern.cg.mm_gemm = getattr(kern.cg, "mm_gemm", 0) + 1
