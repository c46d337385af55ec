"""The matmul kernel's resident moving side double-buffered by hand: the next N tile's R loaded
piece by piece inside this tile's M loop.

The matmul kernel (penguin/kernels.py) keeps R[:, n0:n0+TN] (all of K) resident while the M
loop streams L^T through it. Loaded up front at each N tile, the PE waits for it (8 MiB for a
Llama-3-8B FFN tile: about 30 us of all 16 DMA engines) at every N tile; walrus's rotation
would load the next tile's copy during this tile's M loop, but it rotates no SBUF buffer when
some other buffer of the program cannot rotate, and even then the whole next tile went out as
one burst the moment its buffer was free, delaying the L^T loads this tile's PE needs.

Here the N tiles go in pairs (A, B), each with a resident buffer of its own. Step m of A's M
loop also loads K tiles m*c .. m*c+c-1 (c = K tiles / M steps) of B's R, and step m of B's M
loop those of the next pair's A; both loads are issued from SP right after the step's own L^T
loads, so they share the DMA engines step by step with the streamed side instead of holding
them at once. The first A is loaded before the loop; the last pair's B loop reloads the last
tile (the source is clamped, so nothing outside R is read), which costs one tile of DMA and
keeps the pair loop one body. The K groups stay a loop (the resident tile is one SBUF tile in
the kernel's usual layout), so the instruction count does not grow with the size.

Why two M loops per pair, not one: the pair loop writes each N tile's M loop out twice (the two
bodies differ only in which buffer they read and which they fill). The one-body form was built and
measured: one resident tile of two halves, N tile n reading half n % 2 and filling half (n + 1) % 2
at parity offsets. On the Llama-3-8B prefill layer (1 layer, at 6fa537d) it has 2412 instructions
instead of 3252, but birsim's estimate is 18.64 ms instead of 16.42 ms. walrus cannot tell the two
halves apart: dependences within one iteration are found over the boxes of all iterations (the
whole tile), so step m's chunk load waits for step m's matmuls, and a loop-carried dependence has
one distance per loop, so step m+1's matmuls wait for that load. The chunk loads then run between
the PE's steps instead of beside them. With two buffers the halves are different memlocs and the
only waits are the real ones. One body needs walrus to test a dependence inside one iteration with
the shared loop variables equal and to split ``v % 2`` offsets by residue (pelican already
simplifies ``(2 w + r) % 2`` to ``r``).
"""
from neuronxcc.starfish.penguin.emit import Axis, pel


def plan(kern, terms, pre, nb, M, N, TM, TN, isz):
    """K tiles per M step, or None: one term with its L^T pre-transposed (lhs_pre), no batch dims,
    an even number (>= 2) of whole N tiles, at least two whole M steps, K whole tiles that split
    evenly over the M steps, R lying N-contiguous, two resident tiles within twice the budget."""
    if len(terms) != 1 or nb or pre[0] is None or N % TN or (N // TN) % 2 or M % TM or M // TM < 2:
        return None
    L, R, K = terms[0]
    TK = kern.k_tile(K)
    if K % TK or R.strides[1] != 1 or R.strides[0] == 1 or not isinstance(R.offset, int):
        return None
    nfull, nm = K // TK, M // TM
    if nfull % nm or nfull * TN * isz > kern._res_budget():
        return None
    return nfull // nm


def lower(kern, R, K, N, TN, M, TM, cdt, per_step, body_m):
    """Emit the pair loop; body_m(starts, sizes, res) emits one M step against resident res."""
    em = kern.em
    P = pel()
    TK = kern.k_tile(K)
    nfull = K // TK
    sk, sn = R.strides

    def load(buf, n0, t0, tiles):
        """K tiles t0 .. t0+tiles-1 of R[:, n0:n0+TN] into buf (column block t = tile t)."""
        em.dma(em.chip(buf, cdt, TK, [[1, tiles * TN]], offset=t0 * TN),
               em.hbm(R.base, P.const(R.offset) + t0 * (TK * sk) + n0 * sn, [[sk, TK], [TK * sk, tiles], [sn, TN]]))

    ra = em.sbuf("rhs_res", TK, nfull * TN, cdt)
    rb = em.sbuf("rhs_res", TK, nfull * TN, cdt)
    load(ra, P.const(0), P.const(0), nfull)

    def m_loop(starts, sizes, res, nxt, n_next):
        def step(st, sz):
            body_m(st, sz, [res])
            load(nxt, n_next, (st[-1] // TM) * per_step, per_step)
        em.nest([Axis(M, TM, "m")], step, starts, sizes)

    def pair(starts, sizes):
        n0 = starts[0]
        sz = [TN]
        m_loop([n0], sz, ra, rb, n0 + TN)
        m_loop([n0 + TN], sz, rb, ra, P.min_(n0 + 2 * TN, P.const(N - 2 * TN)))

    em.nest([Axis(N, 2 * TN, "n")], pair)
