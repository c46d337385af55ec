"""The stationary side of a large matmul transposed once, into HBM, instead of once per N tile.

The matmul kernel (penguin/kernels.py) streams L^T through the resident moving side of each N
tile. When L lies K-contiguous (a row-major activation: every prefill projection and FFN
matmul) each of its [128 rows, K group] loads is transposed on the PE and evicted by ACT/DVE,
and that is repeated for every N tile: the Llama-3-8B FFN did 14336 (w1, w3) and 28672 (w2)
PE transposes for 512 and 1792 distinct tiles. Here L^T is made once per value of L, 128 rows
at a time and one PSUM bank of K tiles at a time (natural loads, PE transposes, one eviction,
a store: the same instructions at every size) to an HBM scratch laid out for the kernel's loads:

    scratch[b, k, t * mb + m] = L[b * mb + m, t * TK + k]      (mb: the kernel's M tile, <= 128)

so the stationary tile of M block b, K tiles t0 .. t0+g-1 is one DMA of one contiguous run
of g * mb elements per partition, and the N-tile loop does no transposes. Several matmuls
of the same L (the FFN's w1 and w3) share the scratch (a cache on the codegen keyed by the view).
"""
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.penguin.emit import Axis, pel
from neuronxcc.starfish.penguin.views import View

PMAX = 128
NAT_BYTES = 16 * 1024    # bytes per partition of one natural load of L (K tiles of up to 128 rows as they lie)


def wants(kern, L, nb, M, K, N, TN, mb):
    """Whether the kernel should read L^T from a pre-transposed scratch: L is K-contiguous (the
    kernel would PE-transpose it), there are several N tiles to share it, the M tiles the kernel
    uses are all ``mb`` rows (None: they are not all the same), K splits into whole tiles, no
    batch dims."""
    if nb or N <= TN or not mb or mb < 2 or M % mb:
        return False
    if not isinstance(L, View) or not isinstance(L.offset, int) or L.base.startswith("__"):
        return False
    if L.strides[1] != 1 or L.strides[0] == 1:
        return False
    return K % kern.k_tile(K) == 0


def prepare(kern, L, M, K, cdt, mb):
    """The HBM scratch holding L^T in the layout above (made here on first use, else cached)."""
    cache = kern.cg.__dict__.setdefault("lhs_pre_cache", {})
    key = (L.base, L.offset, L.strides, L.shape, cdt, mb)
    if key in cache:
        return cache[key]
    em, P = kern.em, kern.P
    TK = kern.k_tile(K)
    nkt = K // TK
    name = em.tensor("lhsT_pre", "scratch", cdt, (M // mb, TK, nkt * mb))
    sm, sk = L.strides
    per = max(1, (em.tm.psum_bank_bytes // 4) // mb)      # transposes filling one PSUM bank

    # a step loads one M block's K tiles as they lie in one DMA (a fixed number of bank groups per
    # step), transposes them a PSUM bank at a time into two banks in turn, evicts each bank into
    # one buffer (ACT and DVE in turn) and stores the block's tiles in one contiguous run: stores of
    # different blocks never overlap, so they need not wait for each other. Two M blocks per step,
    # each with its own buffer, so one block's store runs while the other's banks drain.
    ch = min(nkt, max(per, (NAT_BYTES // (TK * bdt.itemsize(cdt))) // per * per))
    banks = [em.psum("psT_pre", TK, per * mb) for _ in range(2)]

    def load_block(m0, t0, c):
        nat = em.sbuf("lhs_nat", mb, c * TK, cdt)
        em.dma(em.chip(nat, cdt, mb, [[1, c * TK]]), em.hbm(L.base, P.const(L.offset) + m0 * sm + t0 * (TK * sk),
                                                            [[sm, mb], [sk, c * TK]]))
        return nat

    def block(nat, m0, t0, c):
        lt = em.sbuf("lhsT_nat", TK, c * mb, cdt)
        eng = "ACT"
        for g, j0 in enumerate(range(0, c, per)):
            cn = min(per, c - j0)
            ps = banks[g % 2]
            for j in range(cn):
                em.inst("transpose", "PE", [em.chip(ps, "float32", TK, [[1, mb]], offset=j * mb)],
                        [em.chip(nat, cdt, mb, [[1, TK]], offset=(j0 + j) * TK)])
            dst = em.chip(lt, cdt, TK, [[1, cn * mb]], offset=j0 * mb)
            src = em.chip(ps, "float32", TK, [[1, cn * mb]])
            eng = "DVE" if g % 2 else "ACT"
            if eng == "DVE":
                em.inst("tensor_copy", "DVE", [dst], [src])
            else:
                em.inst("activation", "ACT", [dst], [src], func="identity")
        # triggered by the engine of the last eviction: in SP's stream it would hold back loads
        em.dma(em.hbm(name, m0 * (TK * nkt) + t0 * mb, [[nkt * mb, TK], [1, c * mb]]),
               em.chip(lt, cdt, TK, [[1, c * mb]]), engine=eng)

    def body(starts, sizes):
        """M blocks m0 (and m0 + mb), K tiles t0 .. t0+c: both blocks' loads first."""
        m0s = [starts[0] + b * mb for b in range(sizes[0] // mb)]
        nats = [load_block(m0, starts[1], sizes[1]) for m0 in m0s]
        for nat, m0 in zip(nats, m0s):
            block(nat, m0, starts[1], sizes[1])

    em.nest([Axis(M, 2 * mb, "mt"), Axis(nkt, ch, "kt")], body, [], [])
    cache[key] = (name, nkt)
    return cache[key]


def load(kern, pre, m0, t0, kn, g, mn, cdt, st=None):
    """The stationary SBUF tile [kn, g*mn] of M rows m0.. (a multiple of mn, the scratch's block)
    and K tiles t0..: one DMA from the scratch (into buffer ST when given, else a new one)."""
    em = kern.em
    name, nkt = pre
    if st is None:
        st = em.sbuf("lhsT", kn, g * mn, cdt)
    em.dma(em.chip(st, cdt, kn, [[1, g * mn]]),
           em.hbm(name, m0 * (kn * nkt) + t0 * mn, [[nkt * mn, kn], [1, g * mn]]))
    return st


def stream(kern, kstep, TK, G, ngroups, mn, cdt):
    """The K loop of one M tile over NGROUPS groups of G K tiles read from the scratch: the groups
    rotate over two SBUF buffers (three for an odd count: the peeled lead is shorter), that many
    groups per K-loop step, so the next groups' DMAs run while this group's matmuls do (walrus's
    rotation would do it, where it rotates at all). kstep(k0, t0, buf) emits one group; the first
    step is peeled, since its first matmul zeroes the PSUM tile."""
    em = kern.em
    P = pel()
    nbuf = 2 if ngroups % 2 == 0 or ngroups < 3 else 3
    bufs = [em.sbuf("lhsT", TK, G * mn, cdt) for _ in range(nbuf)]
    lead = ngroups % nbuf

    def some(q):
        for j in range(nbuf):
            kstep((q + j) * (G * TK), (q + j) * G, bufs[j])
    for j in range(lead):
        kstep(P.const(j * G * TK), P.const(j * G), bufs[nbuf - lead + j])
    some(P.const(lead))
    if ngroups // nbuf >= 2:
        kv = em.fresh("k")
        with em.b.loop(kv, 1, ngroups // nbuf, 1) as iv:
            some(iv * nbuf + lead)
