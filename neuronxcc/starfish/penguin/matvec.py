"""Few-row matmuls against a large weight (the decode step): the weight streams once.

Owns: ``out[m, n] = sum_k x[m, k] W[k, n]`` for M <= ``STREAM_M_MAX`` rows and a
weight that nothing reuses, so the kernel's speed is the weight's bytes at the DMA
engines' rate. Two layouts, chosen by ``stream(...)``:

* ``weights_stationary`` (M = 1, N a multiple of 128, W row-major): the weight is
  the PE's stationary side and the vector the moving side. The contraction is
  K-permuted: K tile j holds rows {p*KT + j : p < 128} (KT = K/128), so partition
  p of one weight DMA is g consecutive rows p*KT + s*g .. p*KT + s*g + g - 1 over
  all N columns: ONE contiguous run of g*N elements per partition (tens of KiB),
  128 runs per DMA. The output is N-permuted: N tile t is columns
  {i*NT + t : i < 128} (NT = N/128), read from the weight tile with step NT, so
  PSUM holds y as [128 partitions, NT] with partition i = y[i*NT : (i+1)*NT]: the
  whole output fits one PSUM bank (NT <= 512), accumulates over the K loop, is
  evicted once and stored as 128 contiguous runs. A weight row wider than one
  buffer (the LM head: N = 128256) is split into column chunks of the widest multiple
  of 128 that divides N and fits (runs of up to WS_BUF_BYTES), N-permuted within the
  chunk, one chunk after the other. The DMA steps of the K loop go
  to ``WS_UNROLL`` different queues (the loop body holds that many DMAs), and walrus
  rotates each step's buffer, so 2 x WS_UNROLL weight tiles are in flight.
* ``moving`` (the fallback: 1 < M <= STREAM_M_MAX, a column-major weight, or column
  chunks narrower than WS_MIN_RUN_BYTES): the vector is stationary and PSUM_CHUNK_COLS columns of the
  weight stream as the moving side (runs of PSUM_CHUNK_COLS elements).

PE time (weights stationary): 64 cycles (the matmul II floor) per 128 x 128 weight
tile, against the tile's 32 KiB at the DMA rate (about 340 PE cycles): the PE is
never the bottleneck.
"""
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.penguin.emit import Axis, choose_tile
from neuronxcc.starfish.penguin.expr import apply_view

PMAX = 128
STREAM_M_MAX = 8        # rows of the "few rows x large weight" (decode) matmul that streams its weight
PSUM_CHUNK_COLS = 2048  # moving layout: output columns per chunk (four PSUM banks of 512 fp32)
WS_BUF_BYTES = 32 * 1024    # weights stationary: bytes per partition of one weight DMA (g rows x N)
WS_UNROLL = 2           # weight DMAs (on different queues) per K-loop body
WS_MIN_WEIGHT_BYTES = 1 << 20   # below this a weight is not worth a streaming kernel of its own
WS_MIN_RUN_BYTES = 8 * 1024     # narrowest column chunk (run per partition) of the stationary layout
LATE_PEELED = False             # zero the accumulator by a memset and run both peeled steps after the K loop


def wants_stream(M, nb, terms, N):
    """True when the matmul is a few rows times a large weight (use ``stream``)."""
    if M > STREAM_M_MAX or nb != 0 or len(terms) != 1:
        return False
    K = terms[0][2]
    if K % PMAX or K < 2 * PMAX:
        return False
    return N >= 2 * PSUM_CHUNK_COLS or (M == 1 and N % PMAX == 0 and
                                        K * N * bdt.itemsize(terms[0][1].dtype) >= WS_MIN_WEIGHT_BYTES)


def stream(kern, term, O, M, N, epilogue, cdt):
    """Emit the streamed-weight matmul (see module doc) through Kernels KERN; False (nothing
    emitted) when neither layout applies and the caller's general kernel should run."""
    plan = _ws_plan(term, O, M, N, epilogue, cdt)
    if plan is not None:
        _weights_stationary(kern, term, O, N, cdt, plan)
        return True
    if N < 2 * PSUM_CHUNK_COLS:
        return False
    _moving(kern, term, O, M, N, epilogue, cdt)
    return True


def _ws_plan(term, O, M, N, epilogue, cdt):
    """(g, nc, views) for the weights-stationary layout, or None when it does not apply: g weight
    rows per DMA, nc output columns per chunk (all of N when one row fits WS_BUF_BYTES, else the
    widest multiple of 128 dividing N that fits), views(n0) = (O2, epilogue2) of the chunk at
    column n0 laid out [128, nc/128] (N-permuted within the chunk)."""
    L, R, K = term
    if M != 1 or N % PMAX or R.strides[1] != 1:
        return None
    isz = bdt.itemsize(cdt)
    NT = N // PMAX
    d = max(t for t in range(1, min(NT, 512) + 1) if NT % t == 0 and t * PMAX * isz <= WS_BUF_BYTES)
    nc = d * PMAX
    if nc < N and nc * isz < WS_MIN_RUN_BYTES:
        return None                 # chunks this narrow would be short runs (whole rows are g*N)
    KT = K // PMAX
    g = max(e for e in range(1, KT + 1) if KT % e == 0 and e * nc * isz <= WS_BUF_BYTES) if nc == N else 1

    def views(n0):
        def fn(w):
            if nc < N:
                w = w.dynamic_slice([0, n0], [1, nc])
            return w.reshape((PMAX, d))
        O2 = fn(O)
        if O2 is None:
            return None
        if epilogue is None:
            return O2, None
        expr, leaf, dt = epilogue
        memo = {}
        e2 = apply_view(expr, fn, memo)
        l2 = memo.get(id(leaf))
        return None if e2 is None or l2 is None else (O2, (e2, l2, dt))
    return (g, nc, views) if views(0) is not None else None


def _weights_stationary(kern, term, O, N, cdt, plan):
    g, nc, views = plan
    em = kern.em
    nchunks = N // nc
    if nchunks == 1:
        _ws_chunk(kern, term, kern.P.const(0), nc, g, cdt, views)
        return
    cv = em.fresh("n")
    with em.b.loop(cv, 0, nchunks, 1) as iv:
        _ws_chunk(kern, term, iv * nc, nc, g, cdt, views)


def _ws_chunk(kern, term, n0, nc, g, cdt, views):
    """Output columns n0 .. n0+nc of the weights-stationary matvec (see module doc)."""
    L, R, K = term
    O2, epi2 = views(n0)
    em = kern.em
    P = kern.P
    KT, NT = K // PMAX, nc // PMAX
    sk_l = L.strides[1]
    sk_r = R.strides[0]
    offs = kern.offsets()
    S = KT // g
    # step 0 and (when S > 1) the last step are peeled and both loaded before the K loop. With a
    # loop (S > 2) the accumulator is zeroed by one memset and both peeled steps' matmuls run after
    # the loop: their buffers are live through it, so the loop's buffers cannot take their bytes,
    # and the loop's first weight DMAs do not wait (through reused bytes) for matmuls that wait for
    # the vector; four weight tiles can then stream before x is there
    held = S - 1 if S > 1 else None
    late = LATE_PEELED and S > 2
    rest = S - 1 - (held is not None)
    U = WS_UNROLL if rest >= WS_UNROLL else 1
    npair, left = divmod(rest, U)
    queues = [em.next_queue() for _ in range(U)]
    # queue of each step, so that every queue carries the same number of steps: the peeled first
    # step and the loop's last body slot share a queue, the held last step the first slot's, the
    # left-over steps take the first ones
    q_first = queues[-1] if U > 1 else em.next_queue()

    def load(s, queue):
        """DMA step s: rows p*KT + s*g + r (r < g) of every partition, columns n0 .. n0+nc: one run of
        g*nc per partition when the chunk is all of N, else g runs of nc."""
        w = em.sbuf("wstream", PMAX, g * nc, cdt)
        dma = em.dma(em.chip(w, cdt, PMAX, [[1, g * nc]]),
                     em.hbm(R.base, offs(R, [s * g, n0]), [[KT * sk_r, PMAX], [sk_r, g], [1, nc]]), queue=queue)
        loads.append(dma)
        if em.b.body is em.m.body:
            last[0] = dma
        return w

    def mms(w, s, first):
        """g x NT matmuls: weight tile (K tile s*g + r, N tile t) against the vector's column."""
        for r in range(g):
            tv = em.fresh("t")
            with em.b.loop(tv, 0, NT, 1) as t:
                em.inst("matmul", "PE", [em.chip(ps, "float32", PMAX, [[1, 1]], offset=t)],
                        [em.chip(w, cdt, PMAX, [[NT, PMAX]], offset=t + r * nc),
                         em.chip(xs, cdt, PMAX, [[1, 1]], offset=s * g + r)],
                        psum_zero=first and r == 0)

    loads, last = [], [None]       # last: the top-level node holding the kernel's last weight DMA
    kloop = [None]                 # the K loop, when it is a top-level node
    # the peeled steps' weight DMAs go out before the vector's (which waits for the producer of x);
    # at the top level penguin/prefetch.py moves them further up, in front of the kernels before this one
    w0 = load(P.const(0), q_first)
    wl = load(P.const(held), queues[0] if U > 1 else em.next_queue()) if held is not None else None
    # the vector, K-permuted: partition p holds x[p*KT : (p+1)*KT] (one contiguous run each). PE
    # triggers it: it waits for x's producer, and on SP, which issues in order, that wait would hold
    # back the weight DMAs of the K loop behind it (the PE has nothing to do before the vector is in)
    xs = em.sbuf("xvec", PMAX, KT, cdt)
    em.dma(em.chip(xs, cdt, PMAX, [[1, KT]]),
           em.hbm(L.base, offs(L, [P.const(0), P.const(0)]), [[KT * sk_l, PMAX], [sk_l, KT]]), engine="PE")
    ps = em.psum("ps", PMAX, NT)
    kern.cg.mm_streamed = getattr(kern.cg, "mm_streamed", 0) + 1
    if late:
        em.inst("memset", "DVE", [em.chip(ps, "float32", PMAX, [[1, NT]])], [], value=0.0)
    else:
        mms(w0, P.const(0), True)
    if npair == 1:
        for u in range(U):
            mms(load(P.const(1 + u), queues[u]), P.const(1 + u), False)
    elif npair > 1:
        sv = em.fresh("k")
        with em.b.loop(sv, 0, npair, 1) as iv:
            for u in range(U):
                s = iv * U + (1 + u)
                mms(load(s, queues[u]), s, False)
        if em.b.body is em.m.body:
            last[0] = kloop[0] = em.b.body[-1]
    for u in range(left):
        s = P.const(1 + npair * U + u)
        mms(load(s, queues[u]), s, False)
    if late:
        mms(w0, P.const(0), False)
    if held is not None:
        i0 = len(em.b.body)
        mms(wl, P.const(held), False)
        if em.b.body is em.m.body and kloop[0] is not None and not late:
            # the held step's matmuls, if this is the program's last stream (penguin/prefetch.py)
            kern.cg.stream_held = (em.b.body[i0:], kloop[0], kern.cg.mm_streamed)
    if em.b.body is em.m.body:
        # the next stream's peeled DMAs may go right behind this kernel's last weight DMA: ahead of
        # its matmuls, so their buffers are live while these run and cannot take these' bytes
        kern.cg.streams.append((loads[:1 + (held is not None)], last[0]))
    kern._mm_evict(O2, 0, [], P.const(0), P.const(0), PMAX, NT, em.chip(ps, "float32", PMAX, [[1, NT]]), epi2)


def _moving(kern, term, O, M, N, epilogue, cdt):
    """The vector stationary, the weight moving (the contraction K-permuted as above, so partition
    p of one weight DMA is row p*KT + j over a chunk of PSUM_CHUNK_COLS columns: one contiguous run
    of 2-4 KiB and more per partition, 128 runs per DMA). The stationary side for tile j is column
    j of L laid out [128 partitions, KT, M]. Each K step feeds up to four PSUM banks (one matmul
    each); the K loop accumulates; the chunk is evicted once."""
    L, R, K = term
    em = kern.em
    P = kern.P
    offs = kern.offsets()
    KT = K // PMAX
    sk_l, sm_l = L.strides[1], L.strides[0]
    sk_r, sn_r = R.strides[0], R.strides[1]
    xs = em.sbuf("lhsT", PMAX, KT * M, cdt)
    em.dma(em.chip(xs, cdt, PMAX, [[1, KT * M]]),
           em.hbm(L.base, offs(L, [P.const(0), P.const(0)]), [[KT * sk_l, PMAX], [sk_l, KT], [sm_l, M]]))
    kern.cg.mm_streamed = getattr(kern.cg, "mm_streamed", 0) + 1

    def chunk(starts, sizes):
        n0, nn = starts[0], sizes[0]
        banks = [(b, min(512, nn - b)) for b in range(0, nn, 512)]
        ps = [em.psum("ps", M, bw) for _, bw in banks]
        first = [True]

        def kstep(j):
            w = em.sbuf("wstream", PMAX, nn, cdt)
            em.dma(em.chip(w, cdt, PMAX, [[1, nn]]),
                   em.hbm(R.base, offs(R, [j, n0]), [[KT * sk_r, PMAX], [sn_r, nn]]))
            for (b0, bw), pb in zip(banks, ps):
                em.inst("matmul", "PE", [em.chip(pb, "float32", M, [[1, bw]])],
                        [em.chip(xs, cdt, PMAX, [[1, M]], offset=j * M),
                         em.chip(w, cdt, PMAX, [[1, bw]], offset=b0)], psum_zero=first[0])
            first[0] = False

        kstep(P.const(0))
        kv = em.fresh("k")
        with em.b.loop(kv, 1, KT, 1) as iv:
            kstep(iv)
        for (b0, bw), pb in zip(banks, ps):
            kern._mm_evict(O, 0, [], P.const(0), n0 + b0, M, bw, em.chip(pb, "float32", M, [[1, bw]]), epilogue)

    em.nest([Axis(N, choose_tile(N, PSUM_CHUNK_COLS), "n")], chunk)

