"""Matmuls fused into the row tiles of their consumers: values stay in SBUF between kernels.

A dot ``O[M, N] = L[M, K] @ R[K, N]`` whose moving side R is a weight already in HBM (small
enough to stay resident in SBUF whole) and whose rows are independent is not given a kernel of
its own. Its value is a lazy leaf ``View`` over a virtual contiguous tensor ``__mm__<k>`` (like
the row reductions of rows.py), and the elementwise kernel that finally needs it evaluates it
inside its own row tiles: R is loaded once before the row loop; per row tile of <= 128 rows the
tile of L (whole rows of K: a layernorm is computed right there, or the previous matmul's tile
of a chain) is built in SBUF, transposed on the PE, multiplied with the resident R into PSUM and
evicted into an SBUF tile [rows, N] that the consumer's expression reads. So LayerNorm -> matmul
-> GELU -> matmul -> residual add is one loop over row tiles, nothing goes through HBM between
the steps, and the fixed latency of the DMAs that would have stored and reloaded each
intermediate is gone. When L is (an ACT function of) another inline matmul's result (the GELU
between the FFN's two matmuls), L^T is computed directly by K chunks, the inner weight's columns
stationary and the row tile's A^T moving, the function applied by the PSUM eviction: no PE
transposes of L. The resident weights' DMAs are triggered by a quiet compute engine on queues of
their own, so they load while the earlier kernels compute.

A dot is made lazy only when everything downstream of it that stays lazy (elementwise ops,
views, last-axis reductions, further such dots through their L) ends in exactly one value, so
one kernel evaluates it and no matmul is computed twice. Otherwise, when its L is itself lazy
(a layernorm), the dot is materialised at once by the same row-tile evaluation (the LayerNorm
fused into the matmul). Any other consumer (a reduce kernel, attention, an epilogue, a kernel
whose tiles do not span whole rows, or one over the SBUF budget) resolves the leaf: the matmul is
computed into a scratch tensor by the ordinary matmul kernel, once.

Invariants: the resident weights of one kernel and its row-tile working set fit the SBUF budget
from ``neuronxcc.hwm``; every memloc is created inside the loop body that uses it except the
resident weights (created before the row loop, read by every iteration); the row loop stays a
loop (the instruction count does not depend on M).
"""
from neuronxcc.starfish.birpy import dtypes as bdt
from neuronxcc.starfish.penguin import ir, matvec, mmlayout, mmtile, resident, rows
from neuronxcc.starfish.penguin.expr import apply_view, leaves
from neuronxcc.starfish.penguin.mmleaf import (MM_PREFIX, is_mm_leaf, materialise_mm,  # noqa: F401 (re-exported)
                                               materialised_view, mm_leaves, resolve)
from neuronxcc.starfish.penguin.tiles import TV, onchip_dtype
from neuronxcc.starfish.penguin.views import View

MAX_K = 2048                 # whole rows of L held in SBUF per row tile
MAX_N = 2048
RES_FRACTION = 4             # all resident weights of one kernel: at most 1/4 of the usable SBUF
WORK_FRACTION = 2            # resident weights + one row tile's working set: at most 1/2 of it
UNROLL_TILES = 4             # at most this many row tiles are emitted one by one, not as a loop
MAX_FOLLOW = 96              # downstream ops examined when deciding whether a dot stays lazy
LOWP = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "tfloat32")


class RowMatmul:
    """What a lazy matmul needs: L as an [M, K] expression, R as an [K, N] HBM view, dtypes."""

    def __init__(self, L, R, M, K, N, dtype, cdt):
        self.L = L
        self.R = R
        self.M, self.K, self.N = M, K, N
        self.dtype = dtype            # the dot's result type
        self.cdt = cdt                # the PE's operand type
        self.tensor = None            # set once materialised into HBM
        self.inlined = 0              # kernels that evaluated it inside their row tiles

    def resident_bytes(self, kern):
        tk = kern.k_tile(self.K)
        return -(-self.K // tk) * self.N * bdt.itemsize(self.cdt)


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def _float(dt):
    return dt.startswith("float") or dt in ("bfloat16", "tfloat32")


# -- the decision at the dot ----------------------------------------------------------------
def _dims(cg, op):
    """(M, K, N, lf, lc, rc, rf) of a dot without batch dims whose operands are floats, or None."""
    a = op.attrs
    if list(a.get("lhs_batch_dims") or ()) or list(a.get("rhs_batch_dims") or ()):
        return None
    g = cg.g
    lv, rv, ov = g.values[op.inputs[0]], g.values[op.inputs[1]], g.values[op.outputs[0]]
    if not (_float(lv.dtype) and _float(rv.dtype) and _float(ov.dtype)):
        return None
    lc, rc = list(a["lhs_contracting_dims"]), list(a["rhs_contracting_dims"])
    lf = [d for d in range(len(lv.shape)) if d not in lc]
    rf = [d for d in range(len(rv.shape)) if d not in rc]
    M = _prod(lv.shape[d] for d in lf)
    K = _prod(lv.shape[d] for d in lc)
    N = _prod(rv.shape[d] for d in rf)
    if min(M, K, N) < 1 or K > MAX_K or N > MAX_N:
        return None
    return M, K, N, lf, lc, rc, rf


def _weight(cg, op, dims):
    """R as a [K, N] view of an HBM tensor already lowered, or None."""
    M, K, N, lf, lc, rc, rf = dims
    R = cg.env.get(op.inputs[1])
    if not isinstance(R, View) or R.base.startswith("__") or R.base not in cg.em.m.tensors:
        return None
    R2 = R.transpose(rc + rf).reshape((K, N))
    return R2


def _cdt(cg, L, R):
    dts = {L.dtype, R.dtype}
    cdt = dts.pop() if len(dts) == 1 and L.dtype in LOWP else "float32"
    return cdt


def eligible(kern, op):
    """(dims, R [K, N]) when the dot can be evaluated row tile by row tile with R resident."""
    cg = kern.cg
    dims = _dims(cg, op)
    if dims is None:
        return None
    M, K, N = dims[:3]
    R2 = _weight(cg, op, dims)
    if R2 is None:
        return None
    if matvec.wants_stream(M, 0, [(None, R2, K)], N):
        return None                       # the decode matvec streams the weight (penguin/matvec.py)
    tk = kern.k_tile(K)
    isz = 4 if R2.dtype not in LOWP else bdt.itemsize(R2.dtype)
    if -(-K // tk) * N * isz > _res_budget(kern):
        return None
    return dims, R2


def _res_budget(kern):
    return kern.em.tm.sbuf_usable_bytes // RES_FRACTION


def _lazy_user(kern, u, v):
    cg = kern.cg
    if u.kind in ir.ELEMENTWISE and len(u.outputs) == 1:
        return True
    if u.kind in ("broadcast", "reshape"):
        return True                       # (a transpose or slice reads across the row tiles)
    if cg._row_reduce_user(u):
        return True
    if u.kind == "dot" and u.inputs[0] == v and u.inputs[1] != v and len(u.outputs) == 1:
        return eligible(kern, u) is not None
    return False


def reads_transposed(kern, o, rows):
    """True when fused attention result O (ROWS rows) flows into one dot this module evaluates lazily
    in a later kernel's row tiles at constant offsets: it takes O^T on chip as its L^T chunks."""
    dot = mmlayout.transposed_consumer(kern.cg, o)
    return (dot is not None and -(-rows // 128) <= UNROLL_TILES and getattr(kern.cg, "mm_fusion", True)
            and eligible(kern, dot) is not None and single_exit(kern, dot))


def single_exit(kern, op):
    """True when everything downstream of dot OP that stays lazy ends in one value: the one
    kernel that computes that value evaluates the matmul, and nothing else needs it."""
    cg = kern.cg
    outs = set(cg.g.outputs)
    d = op.outputs[0]
    todo, seen, exits, n = [d], {d}, set(), 0
    while todo:
        v = todo.pop()
        if v in outs:
            exits.add(v)
        for u in cg.users.get(v, []):
            n += 1
            if n > MAX_FOLLOW:
                return False
            if _lazy_user(kern, u, v):
                for o in u.outputs:
                    if o not in seen:
                        seen.add(o)
                        todo.append(o)
            else:
                exits.add(v)
        if len(exits) > 1:
            return False
    # the dot's own value as the one exit: nothing downstream to fuse (its consumer's kernel reads
    # it from HBM, and a while updates it in place)
    return len(exits) == 1 and d not in exits


def lower_dot(kern, op, args, outs):
    """The dot as a lazy row-tile matmul (returns the env values), or None for the ordinary kernel."""
    cg = kern.cg
    if not getattr(cg, "mm_fusion", True):
        return None
    el = eligible(kern, op)
    if el is None:
        return None
    (M, K, N, lf, lc, rc, rf), R2 = el
    L = args[0]
    plain = isinstance(L, View) and not L.base.startswith("__")
    if plain and (L.strides[lc[-1]] != 1 if lc else True):
        return None                       # a K-strided L: the ordinary kernel's transposing loads
    lazy = single_exit(kern, op)
    if not lazy and (plain or not rows.row_leaves(L)):
        # nothing to fuse downstream, and L is not a row-normalised value (a layernorm) that must
        # be computed on whole rows anyway: the ordinary kernel (L materialised once)
        return None
    L2 = apply_view(L, lambda v: v.transpose(lf + lc))
    L2 = apply_view(L2, lambda v: v.reshape((M, K))) if L2 is not None else None
    if L2 is None:
        return None
    L2 = _settle(cg, L2, (M, K))
    o = outs[0]
    cdt = _cdt(cg, L2, R2)
    if cdt == "float32" and cg.cast.matmult:
        cdt = cg.cast.dtype               # --auto-cast: the PE operands in the narrow type
        cg.cast.count("matmult")
    info = RowMatmul(L2, R2, M, K, N, o.dtype, cdt)
    base = "%s%d" % (MM_PREFIX, len(cg.mmred))
    cg.mmred[base] = info
    leaf = View(base, o.dtype, (M, N), (N, 1), 0).reshape(o.shape)
    if lazy:
        return [leaf]
    # materialised now (the dot has several consumers), still with its lazy L fused in
    epi = cg.plan_epilogue(op)
    if epi is not None:
        sink, expr, dleaf = epi
        memo = {}
        e2 = apply_view(expr, lambda w: View(base, w.dtype, w.shape, w.strides, w.offset)
                        if w.base == dleaf.base else w, memo)
        if e2 is not None:
            sv = cg.g.values[sink]
            out = cg.target_for(sink)
            cg.commit_epilogue(op, sink)
            kern.elementwise(e2, out)
            cg.env[sink] = View.contiguous(out.base, sv.dtype, sv.shape)
            return [None]
    # its column slices read by matmuls that want them transposed (Q and K of a fused QKV
    # projection): each slice in the layout its consumer reads (penguin/mmlayout.py)
    parts = mmlayout.plan(kern, op, M, N, o.dtype, UNROLL_TILES)
    if parts is not None and materialise_parts(kern, info, parts):
        return [None]
    out = cg.target_for(o.name)
    kern.elementwise(leaf, out)
    return [View.contiguous(out.base, o.dtype, o.shape)]


def _settle(cg, L2, shape):
    """L2 with every virtual leaf that a row tile [rows, all of K] cannot evaluate materialised."""
    rl = rows.row_leaves(L2)
    bad = [v for v in rl if not rows.inline_ok(cg, v, 1, shape)]
    if bad:
        keep = {v.base for v in rl if v not in bad and v.base not in {b.base for b in bad}}
        L2 = rows.resolve(cg, L2, keep=keep, mm=False)
    badm = {v.base for v in mm_leaves(L2) if mmtile.align(cg, v, 1, 0, shape) is None}
    if badm:
        L2 = resolve(cg, L2, only=badm)
    return L2


def reachable(cg, x, out=None, seen=None):
    """Every matmul (base -> info) x evaluates inline, through nested L expressions and the
    inputs of row reductions computed inline."""
    out = {} if out is None else out
    seen = set() if seen is None else seen
    for v in leaves(x):
        if v.base in seen:
            continue
        seen.add(v.base)
        if is_mm_leaf(v) and cg.mmred[v.base].tensor is None:
            out[v.base] = cg.mmred[v.base]
            reachable(cg, cg.mmred[v.base].L, out, seen)
        elif rows.is_row_leaf(v) and cg.rowred[v.base].tensor is None:
            reachable(cg, cg.rowred[v.base].x, out, seen)
    return out


def _all_aligned(cg, x, shape, p, f, depth=0):
    """Every matmul leaf x reads (directly or in the inputs of its inline row reductions) can be
    evaluated on row tiles of SHAPE (partitions on p, whole rows on f)."""
    if depth > 16:
        return False
    for v in leaves(x):
        if is_mm_leaf(v):
            if cg.mmred[v.base].tensor is None and mmtile.align(cg, v, f, p, shape) is None:
                return False
        elif rows.is_row_leaf(v) and cg.rowred[v.base].tensor is None:
            if not rows.inline_ok(cg, v, f, shape):
                return False
            if not _all_aligned(cg, rows.reindexed_input(cg, v, f), shape, p, f, depth + 1):
                return False
    return True


class Context:
    """The matmuls one kernel evaluates inline: their resident weights (loaded before the loop),
    and, when the row tiles are emitted one by one (no loop), the loads of program inputs that
    several tiles read alike (a layernorm's scale broadcast over the rows: loaded once), shared
    with the later such kernels of the program (``cg.input_tiles``)."""

    def __init__(self, kern, infos):
        self.kern = kern
        self.infos = infos
        self.res = {}
        self.share = False
        self.max_pn = 1                  # the widest row tile of the kernel
        self.loads = {}

    def shared_load(self, te, v):
        """te's tile of input leaf v from an earlier tile's identical load, or a new load kept for
        the later tiles; None when it cannot be shared (a loop, a tensor the program writes)."""
        em = te.em
        t = em.m.tensors.get(v.base)
        if not self.share or t is None or t.kind not in ("input", "const") or te.s.p is None:
            return None
        off = te.leaf_offset(v)
        if not off.is_const():
            return None
        pat = te.leaf_pattern(v)
        key = (v.base, v.dtype, int(off), pat[0][0], tuple(pat[1]))
        # an earlier fused kernel's tile of the same rows of a program input is still in SBUF (the
        # block's x: its first layernorm, later the residual add): read there, not loaded again
        across = te.cg.__dict__.setdefault("input_tiles", {}) if mmlayout.shareable(te.cg) else {}
        hit = self.loads.get(key) or across.get(key)
        if hit is not None and hit[1] >= te.s.pn:
            tv = hit[0]
            from neuronxcc.starfish.penguin.tiles import TV
            ap = tv.ap
            return TV(tv.kind, tv.dtype, ap=em.chip(ap.target, ap.dtype, te.s.pn, ap.pattern, offset=ap.offset))
        pn = te.s.pn
        if pat[0][0] == 0 and pn < self.max_pn:
            # the same row on every partition: loaded once for the widest tile of the kernel
            from neuronxcc.starfish.penguin.tiles import Space, TileEval
            sizes = list(te.s.sizes)
            sizes[te.s.p] = self.max_pn
            wide = TileEval(te.cg, Space(te.s.p, te.s.f, te.s.starts, sizes)).load(v)
            self.loads[key] = across[key] = (wide, self.max_pn)
            return self.shared_load(te, v)
        tv = te.load(v)
        if hit is None or hit[1] < pn:
            self.loads[key] = across[key] = (tv, pn)
        return tv

    def load_weights(self):
        """The resident weights, loaded before the row loop. Their DMAs are triggered by the compute
        engine with the least work emitted so far, not SP: SP issues in order, and behind the
        previous kernel's loads (which wait for its compute) a weight that depends on nothing would
        not start until that kernel is nearly done; from a quiet engine's stream it loads while the
        earlier kernels compute."""
        P = self.kern.P
        em = self.kern.em
        prev = em.dma_engine
        em.dma_engine = min(("POOL", "DVE", "ACT"), key=lambda e: em.engine_load[e])
        try:
            for base, info in self.infos.items():
                self.res[base] = resident.load(self.kern, info.R, 0, [], P.const(0), info.N, info.K, info.cdt)
                info.inlined += 1
        finally:
            em.dma_engine = prev


def prepare(kern, x, shape, p, f):
    """A Context for the elementwise kernel of x over SHAPE (partitions on p, whole rows on f), or
    None when some matmul leaf of x cannot be evaluated inline (then the caller resolves them)."""
    cg = kern.cg
    if not _all_aligned(cg, x, shape, p, f):
        return None
    infos = reachable(cg, x)
    if not all(_all_aligned(cg, i.L, (i.M, i.K), 0, 1) for i in infos.values()):
        return None
    res = sum(i.resident_bytes(kern) for i in infos.values())
    work = rows.inline_tiles(cg, x) * shape[f] * 4
    for i in infos.values():
        work += (rows.inline_tiles(cg, i.L) + 2) * i.K * 4 + i.N * 4
    usable = kern.em.tm.sbuf_usable_bytes
    if res > usable // RES_FRACTION or res + work > usable // WORK_FRACTION:
        return None
    ctx = Context(kern, infos)
    ctx.load_weights()
    return ctx


class TileScope:
    """Per row tile of a kernel: the TileEvals of each (rows, width) space (so a value read by
    several consumers of the tile is computed once) and the matmul tiles computed so far."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.evals = {}
        self.tiles = {}
        self.lhsT_all = None     # (memloc, dtype, M): one L^T buffer for every row tile (materialise_parts)

    def register(self, te):
        s = te.s
        if s.p == 0 and s.f == 1 and len(s.sizes) == 2:
            self.evals.setdefault((str(s.starts[0]), s.pn, s.fn), te)
        te.mm = self

    def tile_value(self, te, v):
        """The TV of matmul leaf v on TileEval te's tile (``tile_value``): tiles.py calls this through
        ``te.mm``, so it needs no import of this module."""
        return mmtile.tile_value(te, v)

    def space(self, row0, pn, width):
        from neuronxcc.starfish.penguin.tiles import Space, TileEval
        key = (str(row0), pn, width)
        te = self.evals.get(key)
        if te is None:
            P = self.ctx.kern.P
            te = TileEval(self.ctx.kern.cg, Space(0, 1, [row0, P.const(0)], [pn, width]))
            te.mm = self
            self.evals[key] = te
        return te


# -- a matmul stored in the layouts its consumers read (penguin/mmlayout.py) ---------------------
def materialise_parts(kern, info, parts):
    """Emit the parts (``mmlayout.plan``) of the row-tile matmul INFO (a RowMatmul over all N columns) into HBM
    tensors of their own, bind the slices' values to them and mark the slices emitted. Returns
    False (nothing emitted) when the resident weights would not fit the SBUF budget."""
    from neuronxcc.starfish.penguin.tiles import onchip_dtype
    cg, em, P = kern.cg, kern.em, kern.P
    M, K = info.M, info.K
    PMAX = em.tm.num_partitions
    made = [(RowMatmul(info.L, info.R.slice([0, a], [K, b], [1, 1]), M, K, b - a, info.dtype, info.cdt),
             u, tr) for u, a, b, tr in parts]
    if sum(s.resident_bytes(kern) for s, _, _ in made) > em.tm.sbuf_usable_bytes // RES_FRACTION:
        return False
    subs = {}
    for sub, u, tr in made:
        base = "%s%d" % (MM_PREFIX, len(cg.mmred))
        cg.mmred[base] = sub
        subs[base] = (sub, u, tr)
    ctx = Context(kern, {b: s for b, (s, _, _) in subs.items()})
    tiles = [(r0, min(PMAX, M - r0)) for r0 in range(0, M, PMAX)]
    ctx.share = True                       # the row tiles are emitted one by one: shared input loads
    ctx.max_pn = tiles[0][1]
    first = next(iter(subs.values()))[0]
    TK = kern.k_tile(K)
    nk = -(-K // TK)
    # a layernorm's scale columns (a few hundred 4-byte descriptors) are loaded before the weights:
    # behind them on the DMA engines they would hold up the first tile's L^T evictions
    mmtile.column_scaled(ctx, first, TK, nk)
    ctx.load_weights()
    scope = TileScope(ctx)
    # the transposed parts read L^T of all M rows as one moving operand: max(64, M) PE columns per
    # K chunk and 128 output columns, not max(64, pn) per row tile (a 4-row remainder tile would
    # cost 64 columns for 4 of work); so every tile's L^T goes into one [TK, nk * M] buffer
    bank = em.tm.psum_bank_bytes // 4
    if any(tr for _, _, tr in subs.values()) and len(tiles) > 1 and M <= bank:
        scope.lhsT_all = (em.sbuf("lhsT", TK, nk * M, first.cdt), first.cdt, M)
    odt = onchip_dtype(info.dtype)
    chunks, outs, oc = {}, {}, {}
    # the row tiles: L^T once per tile (shared by every part), the row-major parts right away
    for r0, pn in tiles:
        chunks[r0] = mmtile.lhsT_chunks(scope, first, P.const(r0), pn)
        for base, (sub, u, tr) in subs.items():
            if tr:
                continue
            n = sub.N
            name = u.outputs[0]
            if name not in outs:
                outs[name] = cg.target_for(name)
                oc[name] = mmlayout.OnChip(outs[name].base, odt, n)
            t, tdt = mmtile.compute(scope, sub, ctx.res[base], P.const(r0), pn)
            st = em.dma(em.hbm(outs[name].base, r0 * n, [[n, pn], [1, n]]), em.chip(t, tdt, pn, [[1, n]]))
            oc[name].add(r0, pn, t, st, em.b.body)
            cg.env[name] = View.contiguous(outs[name].base, info.dtype, (M, n))
    # the transposed parts: 128 columns at a time, all of M in one PSUM bank
    for base, (sub, u, tr) in subs.items():
        if not tr:
            continue
        n = sub.N
        name = u.outputs[0]
        tn = em.tensor("scratch_" + name, "scratch", info.dtype, (n, M))
        cg.scratch_owner[tn] = name
        oc[name] = mmlayout.OnChip(tn, odt, M)
        rr = ctx.res[base]
        whole = scope.lhsT_all
        if whole is not None and not all(c.target == whole[0] for r0, _ in tiles for c in chunks[r0]):
            whole = None
        for c0 in range(0, n, PMAX):
            cn = min(PMAX, n - c0)
            ps = em.psum("psmT", cn, M)
            if whole is not None:
                dst = em.chip(ps, "float32", cn, [[1, M]])
                for t in range(nk):
                    kn = min(TK, K - t * TK)
                    em.inst("matmul", "PE", [dst], [em.chip(rr, sub.cdt, kn, [[1, cn]], offset=t * n + c0),
                                                     em.chip(whole[0], sub.cdt, kn, [[1, M]], offset=t * M)],
                            psum_zero=(t == 0))
            for r0, pn in (tiles if whole is None else ()):
                dst = em.chip(ps, "float32", cn, [[1, pn]], offset=r0)
                for t in range(nk):
                    kn = min(TK, K - t * TK)
                    em.inst("matmul", "PE", [dst], [em.chip(rr, sub.cdt, kn, [[1, cn]], offset=t * n + c0),
                                                     chunks[r0][t]], psum_zero=(t == 0))
            sb = em.chip(em.sbuf("mmT", cn, M, odt), odt, cn, [[1, M]])
            kern._evict_copy(sb, em.chip(ps, "float32", cn, [[1, M]]))
            st = em.dma(em.hbm(tn, c0 * M, [[M, cn], [1, M]]), sb)
            oc[name].add(c0, cn, sb.target, st, em.b.body)
        cg.env[name] = View(tn, info.dtype, (M, n), (1, M), 0)
    for v in oc.values():       # the parts stay in SBUF too: a consumer may read them there
        mmlayout.register(cg, v)
    for base, (sub, u, tr) in subs.items():
        sub.inlined += 1
        cg.fused.add(id(u))
    return True
