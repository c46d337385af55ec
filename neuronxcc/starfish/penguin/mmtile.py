"""One row tile of a row-tile matmul (a lazy dot of penguin/mmfuse.py) computed inside the kernel
that reads it.

``tile_value`` is the TV of a matmul leaf on a TileEval's tile. The row tile's stationary operand
L^T comes by K chunks (``lhsT_chunks``): from SBUF tiles an earlier kernel left (mmlayout), as an
inner inline matmul computed transposed (the GELU between the FFN's two matmuls), or as the row
tile of L built [rows, K] in SBUF and transposed on the PE (a layernorm's per-column scale applied
by the transposes' eviction, ``column_scaled``). The matmul against the resident weight goes into
PSUM and is evicted into SBUF (``compute``); when its N columns fit one PSUM bank of fp32 it is a
``_PsumTile`` instead, evicted only when some consumer needs it in SBUF. ``align`` says where a
leaf read over an index space finds its rows and columns (None when it does not cover whole rows).

mmfuse.py decides which dots stay lazy and owns the kernel-level state (``Context``, the per-tile
``TileScope`` this module's ``scope`` arguments are); this module emits the instructions of one
tile and imports nothing of mmfuse.
"""
from neuronxcc.errors import InternalCompilerError
from neuronxcc.starfish.penguin import mmlayout, rows
from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.mmleaf import is_mm_leaf, materialised_view
from neuronxcc.starfish.penguin.tiles import TV, onchip_dtype
from neuronxcc.starfish.penguin.views import View


# -- evaluation inside a row-tile kernel ------------------------------------------------------
def align(cg, v, f, p, shape):
    """(row offset, per-axis row steps, column offset) when matmul leaf v read over an index
    space of SHAPE with partitions on axis p and the free axis f covers whole rows of the leaf's
    tile: consecutive rows on the partitions, consecutive columns on the free axis; else None."""
    info = cg.mmred[v.base]
    N = info.N
    if not isinstance(v.offset, int) or p is None or f is None or p == f:
        return None
    if v.strides[p] != N or v.strides[f] != 1:
        return None
    steps = {}
    for a, s in enumerate(v.strides):
        if a in (p, f) or shape[a] == 1:
            continue
        if s % N:
            return None
        steps[a] = s // N
    r0, c0 = divmod(v.offset, N)
    if c0 + shape[f] > N:
        return None
    return r0, steps, c0


def tile_value(te, v):
    """The TV of matmul leaf v on TileEval te's tile (computing the row tile's matmul once)."""
    cg = te.cg
    info = cg.mmred[v.base]
    if info.tensor is not None:          # materialised meanwhile: an ordinary load
        return te.load(View(info.tensor, v.dtype, v.shape, v.strides, v.offset))
    scope = getattr(te, "mm", None)
    if scope is None or v.base not in scope.ctx.res:
        return te.load(materialised_view(cg, v))      # not materialised: an internal error
    s = te.s
    al = align(cg, v, s.f, s.p, s.sizes)
    if al is None:
        raise InternalCompilerError("the matmul result %s is read across rows of its tiles" % v.base)
    r0, steps, c0 = al
    row0 = s.starts[s.p] + r0 if r0 else s.starts[s.p]
    for a, k in steps.items():
        row0 = row0 + s.starts[a] * k
    key = (v.base, str(row0), s.pn)
    t = scope.tiles.get(key)
    em = te.em
    if t is None:
        if info.N <= em.tm.psum_bank_bytes // 4 and onchip_dtype(info.dtype) == "float32":
            t = _PsumTile(scope, info, scope.ctx.res[v.base], row0, s.pn)
        else:
            t = compute(scope, info, scope.ctx.res[v.base], row0, s.pn)
        scope.tiles[key] = t
    if isinstance(t, _PsumTile):
        return _LazyTV(t, s.pn, s.fn, c0)
    return TV("tile", t[1], ap=em.chip(t[0], t[1], s.pn, [[1, s.fn]], offset=c0))


class _PsumTile:
    """A row tile's matmul result (one PSUM bank) evicted into SBUF only when a consumer needs it there:
    an op with an SBUF tile (the block's residual adds) reads it in PSUM (``TileEval.binary``: one DVE
    pass of N cycles, not an eviction plus a 2N-cycle SBUF op)."""

    def __init__(self, scope, info, rr, row0, pn):
        self.scope, self.info, self.pn = scope, info, pn
        self.psum = _matmul_psum(scope, info, rr, row0, pn)
        self.sbuf = None

    def evicted(self):
        if self.sbuf is None:
            kern = self.scope.ctx.kern
            em = kern.em
            self.sbuf = em.sbuf("mm", self.pn, self.info.N, "float32")
            kern._evict_copy(em.chip(self.sbuf, "float32", self.pn, [[1, self.info.N]]),
                             em.chip(self.psum, "float32", self.pn, [[1, self.info.N]]))
        return self.sbuf


class _LazyTV(TV):
    """The TV of a ``_PsumTile``: ``psum`` is its PSUM access pattern; reading ``ap`` (its SBUF
    copy) emits the eviction the first time."""
    __slots__ = ("_pt", "_geom", "psum")

    def __init__(self, pt, pn, fn, c0):
        self._pt, self._geom = pt, (pn, fn, c0)
        em = pt.scope.ctx.kern.em
        self.psum = em.chip(pt.psum, "float32", pn, [[1, fn]], offset=c0)
        TV.__init__(self, "tile", "float32")

    @property
    def ap(self):
        pn, fn, c0 = self._geom
        return self._pt.scope.ctx.kern.em.chip(self._pt.evicted(), "float32", pn, [[1, fn]], offset=c0)

    @ap.setter
    def ap(self, _):
        pass


def _matmul_psum(scope, info, rr, row0, pn):
    """Rows row0 .. row0+pn of the matmul (N within one PSUM bank) into a PSUM tile [pn, N]."""
    kern = scope.ctx.kern
    em = kern.em
    K, N, cdt = info.K, info.N, info.cdt
    TK = kern.k_tile(K)
    chunks = lhsT_chunks(scope, info, row0, pn)
    ps = em.psum("ps", pn, N)
    ps_ap = em.chip(ps, "float32", pn, [[1, N]])
    for t in range(-(-K // TK)):
        kn = min(TK, K - t * TK)
        em.inst("matmul", "PE", [ps_ap], [chunks[t], em.chip(rr, cdt, kn, [[1, N]], offset=t * N)],
                psum_zero=(t == 0))
    return ps


def _sub(em, ap, dtype, pn, col0, n):
    from neuronxcc.starfish import birpy
    return birpy.AccessPattern(ap.target, dtype, ap.offset + col0, [[1, n]], 0, pn)


def compute(scope, info, rr, row0, pn):
    """Rows row0 .. row0+pn of the matmul into an SBUF tile [pn, N]: (memloc, dtype)."""
    kern = scope.ctx.kern
    em = kern.em
    from neuronxcc.starfish.penguin.tiles import onchip_dtype
    K, N, cdt = info.K, info.N, info.cdt
    TK = kern.k_tile(K)
    nk = -(-K // TK)
    chunks = lhsT_chunks(scope, info, row0, pn)
    odt = onchip_dtype(info.dtype)
    out = em.sbuf("mm", pn, N, odt)
    bank = em.tm.psum_bank_bytes // 4
    for n0 in range(0, N, bank):
        nc = min(bank, N - n0)
        ps = em.psum("ps", pn, nc)
        ps_ap = em.chip(ps, "float32", pn, [[1, nc]])
        for t in range(nk):
            kn = min(TK, K - t * TK)
            em.inst("matmul", "PE", [ps_ap], [chunks[t], em.chip(rr, cdt, kn, [[1, nc]], offset=t * N + n0)],
                    psum_zero=(t == 0))
        kern._evict_copy(em.chip(out, odt, pn, [[1, nc]], offset=n0), ps_ap)
    return out, odt


def lhsT_chunks(scope, info, row0, pn):
    """The stationary operand of the row tile's matmul: L^T [kn, pn] per K tile (APs), computed once
    per tile. When L is (a function on the activation engine of) another inline matmul's result,
    each chunk is that matmul computed transposed (``_transposed_chunks``); otherwise the row tile of L
    is built [pn, K] and transposed on the PE chunk by chunk."""
    key = ("lhsT", id(info.L), info.cdt, str(row0), pn)     # shared by the matmuls of one L
    hit = scope.tiles.get(key)
    if hit is not None:
        return hit
    chunks = mmlayout.cols_on_chip(scope.ctx.kern, info, row0, pn)
    if chunks is None:
        chunks = _transposed_chunks(scope, info, row0, pn)
    if chunks is None:
        chunks = _pe_transposed(scope, info, row0, pn)
    scope.tiles[key] = chunks
    return chunks


def _pe_transposed(scope, info, row0, pn):
    kern = scope.ctx.kern
    em = kern.em
    K, cdt = info.K, info.cdt
    TK = kern.k_tile(K)
    nk = -(-K // TK)
    src = mmlayout.rows_on_chip(kern, info, row0, pn, TK, nk)
    cols = None
    if src is None:
        sub = scope.space(row0, pn, K)
        L, cols = column_scaled(scope.ctx, info, TK, nk)
        lt = sub.materialise(sub.value(L))
        if lt.dtype != cdt:
            lt = sub.cast(lt, cdt)
        src = [_sub(em, lt.ap, cdt, pn, t * TK, min(TK, K - t * TK)) for t in range(nk)]
    # one buffer for all row tiles (``TileScope.lhsT_all``): chunk t of the tile at row r0 at t*M + r0
    shared = scope.lhsT_all
    if shared is not None and shared[1] == cdt and row0.is_const():
        lhsT, stride, base = shared[0], shared[2], int(row0)
    else:
        lhsT, stride, base = em.sbuf("lhsT", TK, nk * pn, cdt), pn, 0
    per = max(1, (em.tm.psum_bank_bytes // 4) // pn)
    for j0 in range(0, nk, per):
        c = min(per, nk - j0)
        ps = em.psum("psT", TK, c * pn)
        for j in range(c):
            t = j0 + j
            kn = min(TK, K - t * TK)
            em.inst("transpose", "PE", [em.chip(ps, "float32", kn, [[1, pn]], offset=j * pn)], [src[t]])
        last = min(TK, K - (j0 + c - 1) * TK)
        full = c if last == TK else c - 1
        for a, n_, kn in ((0, full, TK), (full, c - full, last)):
            if n_ <= 0:
                continue
            if cols is None and stride == pn:
                kern._evict_copy(em.chip(lhsT, cdt, kn, [[1, n_ * pn]], offset=(j0 + a) * pn),
                                 em.chip(ps, "float32", kn, [[1, n_ * pn]], offset=a * pn))
                continue
            for j in range(a, a + n_):      # each K chunk its own per-partition scale (gamma)
                dst = em.chip(lhsT, cdt, kn, [[1, pn]], offset=(j0 + j) * stride + base)
                if cols is None:
                    kern._evict_copy(dst, em.chip(ps, "float32", kn, [[1, pn]], offset=j * pn))
                    continue
                ps_ap = em.chip(ps, "float32", kn, [[1, pn]], offset=j * pn)
                g = cols[j0 + j]
                load = em.engine_load
                if load["ACT"] <= load["DVE"] * em.ghz("DVE") / em.ghz("ACT"):
                    em.inst("activation", "ACT", [dst], [ps_ap, g], func="identity", scale_ap=True)
                else:
                    em.inst("tensor_scalar", "DVE", [dst], [ps_ap, g], op0="mult", operand0_ap=True)
    return [em.chip(lhsT, cdt, min(TK, K - t * TK), [[1, pn]], offset=t * stride + base) for t in range(nk)]


def column_scaled(ctx, info, TK, nk):
    """(B, per-chunk [kn, 1] SBUF columns of g) when L = B * g with g a float32 vector along K
    broadcast over the rows (a layernorm's scale): after the PE transposes g is per partition, so
    the transposes' PSUM eviction multiplies by it and the [rows, K] multiply goes. Else (L, None).
    The columns are loaded once per kernel, in one DMA when TK divides K (an element per partition)."""
    L = info.L
    if not (isinstance(L, Node) and L.op == "multiply" and len(L.args) == 2 and L.dtype == "float32"):
        return L, None
    em = ctx.kern.em
    for b, g in (L.args, L.args[::-1]):
        if not (isinstance(g, View) and g.dtype == "float32" and len(g.shape) == 2 and g.strides[0] == 0
                and g.base in em.m.tensors and em.m.tensors[g.base].kind in ("input", "const")
                and isinstance(g.offset, int)):
            continue
        key = ("gcols", g.base, g.offset, g.strides[1], TK)
        cols = ctx.loads.get(key)
        if cols is None:
            m = em.sbuf("gcol", TK, nk, "float32")      # column t: g[t*TK : (t+1)*TK]
            cols = [em.chip(m, "float32", min(TK, info.K - t * TK), [[1, 1]], offset=t) for t in range(nk)]
            rows.load_columns(ctx.kern, g, info.K, TK, nk, m)
            ctx.loads[key] = cols
        return b, cols
    return L, None


def _chain_source(scope, info):
    """(ACT function or None, inner matmul leaf) when info's L is an inline matmul's fp32 result, or
    one activation-engine function of it, over all of L's columns; else None."""
    cg = scope.ctx.kern.cg
    L, func = info.L, None
    if not (isinstance(L, View) and is_mm_leaf(L)):
        m = cg.act_matcher.match(L) if isinstance(L, Node) else None
        if m is None or not (isinstance(m[1], View) and is_mm_leaf(m[1])) or L.dtype != "float32":
            return None
        func, L = m
    inner = cg.mmred.get(L.base)
    if inner is None or inner.tensor is not None or L.base not in scope.ctx.res or inner.dtype != "float32":
        return None
    if inner.cdt != "float32" and func is None:
        return None
    al = align(cg, L, 1, 0, (info.M, info.K))
    if al is None or al[1]:
        return None
    return func, L, al


def _transposed_chunks(scope, info, row0, pn):
    """L^T by K chunks when L = f(A @ B) of an inline matmul (a GELU between the FFN's two matmuls):
    chunk t is (A @ B)^T's rows t*TK.. computed directly, B's columns stationary and the row tile's
    A^T moving ([kn, pn] in PSUM: max(64, pn) PE columns instead of the K columns of B per row tile),
    and f applied by the PSUM eviction on ACT. No PE transposes of L and no [pn, K] tile of it."""
    src = _chain_source(scope, info)
    if src is None:
        return None
    func, v, (r0, _, c0) = src
    kern = scope.ctx.kern
    em = kern.em
    inner = kern.cg.mmred[v.base]
    rr = scope.ctx.res[v.base]
    achunks = lhsT_chunks(scope, inner, row0 + r0 if r0 else row0, pn)
    Ki, Ni, icdt = inner.K, inner.N, inner.cdt
    TKi = kern.k_tile(Ki)
    TK = kern.k_tile(info.K)
    out = []
    for t in range(-(-info.K // TK)):
        kn = min(TK, info.K - t * TK)
        ps = em.psum("psTT", kn, pn)
        ps_ap = em.chip(ps, "float32", kn, [[1, pn]])
        for ti, a in enumerate(achunks):
            kni = min(TKi, Ki - ti * TKi)
            em.inst("matmul", "PE", [ps_ap], [em.chip(rr, icdt, kni, [[1, kn]], offset=ti * Ni + c0 + t * TK), a],
                    psum_zero=(ti == 0))
        lt = em.chip(em.sbuf("lhsTT", kn, pn, info.cdt), info.cdt, kn, [[1, pn]])
        if func is None:
            kern._evict_copy(lt, ps_ap)
        else:
            em.inst("activation", "ACT", [lt], [ps_ap], func=func, scale=1.0, bias=0.0)
        out.append(lt)
    return out
