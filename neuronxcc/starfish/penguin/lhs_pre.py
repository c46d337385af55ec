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
from neuronxcc.starfish.penguin.emit import Axis
from neuronxcc.starfish.penguin.views import View

PMAX = 128


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

    def body(starts, sizes):
        """M rows m0 .. m0+mb, K tiles t0 .. t0+c: loaded as they lie, PE-transposed into one
        bank, evicted, stored to the scratch as one run of c*mb per partition."""
        m0, t0, c = starts[0], starts[1], sizes[1]
        nat = em.sbuf("lhs_nat", mb, c * TK, cdt)
        em.dma(em.chip(nat, cdt, mb, [[1, c * TK]]), em.hbm(L.base, P.const(L.offset) + m0 * sm + t0 * (TK * sk),
                                                            [[sm, mb], [sk, c * TK]]))
        ps = em.psum("psT_pre", TK, c * mb)
        for j in range(c):
            em.inst("transpose", "PE", [em.chip(ps, "float32", TK, [[1, mb]], offset=j * mb)],
                    [em.chip(nat, cdt, mb, [[1, TK]], offset=j * TK)])
        lt = em.chip(em.sbuf("lhsT_nat", TK, c * mb, cdt), cdt, TK, [[1, c * mb]])
        kern._evict_copy(lt, em.chip(ps, "float32", TK, [[1, c * mb]]))
        em.dma(em.hbm(name, m0 * (TK * nkt) + t0 * mb, [[nkt * mb, TK], [1, c * mb]]), lt)

    em.nest([Axis(M, mb, "mt"), Axis(nkt, per, "kt")], body, [], [])
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
