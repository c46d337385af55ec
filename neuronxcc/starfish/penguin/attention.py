"""Fused attention, flash style: dot -> (scale / mask) -> softmax -> dot in one kernel.

``match(cg, dot)`` recognises, in the Penguin graph as jax and torch-xla emit it,

    S = dot(Q, K)                       scores, f32 (operands in any order, batch dims first)
    X = f(S [transposed], side inputs)  elementwise: scale, mask select, bias (same shape)
    m = reduce-max(X, last axis)        (then views, and jax's maximum(m, -inf))
    E = exp(X - broadcast(m))
    s = reduce-add(E, last axis)        (then views)
    P = E / broadcast(s)                (then converts, e.g. to bf16)
    O = dot(P, V) or dot(V, P)          contracting P's last axis

where nothing between the two dots is used anywhere else. ``lower`` emits one loop nest over the
batch and query dims (128 queries on the partitions) with an inner loop over key blocks of up to
512: per block the scores land in one PSUM bank (Q^T stationary, K^T resident in SBUF for the
batch), ``f`` runs on the tile, the running row max and sum are updated (online softmax), P is
ACT's ``exp(x - m)`` with the row sum accumulated by the same instruction, P^T comes from PE
transposes, and P@V accumulates in PSUM over the block's 128-key chunks (V resident in SBUF),
rescaled into an SBUF accumulator. After the last block the accumulator is divided by the row sum
and stored. With one key block in all the softmax is exact at once (no running state), and P @ V
is scaled straight out of PSUM. Scores never leave SBUF/PSUM. The lowering is the compiler's own
(penguin codegen), not a spliced NKI kernel.

Numerics: P is unnormalised in the P@V matmul (exp(x - running max) <= 1, cast to V's dtype
when that is narrower), normalised in fp32 at the end, so a row's result equals softmax(x) @ V
up to rounding. The running max starts at -FLT_MAX, so rows masked with -inf in a whole block
stay finite; a row masked everywhere gives 0/0 = NaN as XLA does.
"""
import numpy as np

from neuronxcc.starfish.penguin import causal, ir, mmlayout
from neuronxcc.starfish.penguin.emit import Axis, choose_tile
from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.tiles import Space, TV, TileEval, onchip_dtype
from neuronxcc.starfish.penguin.views import Splat, View, row_major_strides
from neuronxcc.starfish.birpy import dtypes as bdt

PMAX = 128
KEY_BLOCK = 512            # keys per block: one PSUM bank of fp32 scores
MAX_DV = 512               # value columns: one PSUM bank of fp32 output
RESIDENT_BYTES = 64 * 1024  # bytes per partition K^T and V of one batch element may take in SBUF
NEG_BIG = -3.4028234663852886e38
NARROW = ("bfloat16", "float16")
QUERY_TILES = 4            # query tiles of 128 interleaved per key-block step (PSUM: 2.5 KiB each)
WAVE_TILES = 8             # query tiles of all heads in one wavefront (a few short heads, one key block)


class Plan:
    """What the fused kernel needs; built by ``match``."""

    def __init__(self, **kw):
        self.__dict__.update(kw)


def _dot_dims(op, g):
    """Per output dim of a dot: ('b', lhs dim, rhs dim) | ('l', lhs dim) | ('r', rhs dim)."""
    a = op.attrs
    lb, lc = list(a["lhs_batch_dims"]), list(a["lhs_contracting_dims"])
    rb, rc = list(a["rhs_batch_dims"]), list(a["rhs_contracting_dims"])
    ln = len(g.values[op.inputs[0]].shape)
    rn = len(g.values[op.inputs[1]].shape)
    dims = [("b", x, y) for x, y in zip(lb, rb)]
    dims += [("l", d) for d in range(ln) if d not in lb + lc]
    dims += [("r", d) for d in range(rn) if d not in rb + rc]
    return dims, lc, rc


def _splat_value(cg, name):
    x = cg.env.get(name)
    return x.value if isinstance(x, Splat) else None


def _row_reduce(cg, op, red, x, n, init):
    a = op.attrs
    if op.kind != "reduce" or len(op.inputs) != 2 or len(op.outputs) != 1 or op.inputs[0] != x:
        return False
    if a.get("reducer") != red or list(a.get("dimensions", ())) != [n - 1]:
        return False
    v = _splat_value(cg, op.inputs[1])
    try:
        return v is not None and float(v) == init
    except (TypeError, ValueError):
        return False


def _replay(op, v, out_shape):
    """View op ``op`` applied to View v (None when it cannot be expressed)."""
    a = op.attrs
    k = op.kind
    if k == "broadcast":
        return v.broadcast(out_shape, a["dimensions"])
    if k == "transpose":
        return v.transpose(a["permutation"])
    if k == "reshape":
        return v.reshape(out_shape)
    return None


def _stat_chain(cg, v, shape, users, outs, max_neutral):
    """Follow the single-user chain from a row statistic (shape[:-1]) through views (and
    maximum(., -inf) when max_neutral) to the op that consumes it broadcast along the last axis.
    Returns (consumer op, the value it reads, ops on the way) or None."""
    g = cg.g
    stat_shape = tuple(shape[:-1])
    probe = View("__probe__", "float32", stat_shape, row_major_strides(stat_shape), 0)
    cur, ops = v, []
    while True:
        us = ir.distinct_ops(users.get(cur, []))
        if len(us) != 1 or cur in outs or len(ops) > 12:
            return None
        u = us[0]
        if u.kind in ir.VIEWS:
            probe = _replay(u, probe, g.values[u.outputs[0]].shape)
            if probe is None:
                return None
            ops.append(u)
            cur = u.outputs[0]
            continue
        if max_neutral and u.kind == "maximum" and len(u.inputs) == 2 and \
                g.values[u.outputs[0]].shape == g.values[cur].shape:
            other = u.inputs[1] if u.inputs[0] == cur else u.inputs[0]
            if _splat_value(cg, other) == float("-inf"):
                ops.append(u)
                cur = u.outputs[0]
                continue
            return None
        want = tuple(row_major_strides(stat_shape)) + (0,)
        if tuple(probe.shape) != tuple(shape) or probe.offset != 0 or \
                any(a != b for a, b, e in zip(probe.strides, want, shape) if e > 1):
            return None
        return u, cur, ops


def match(cg, dot1):
    """The Plan of the attention that starts at dot op ``dot1``, or None."""
    if not getattr(cg, "flash_attention", True):
        return None
    g = cg.g
    users = cg.users
    outs = set(g.outputs)
    dims1, lc1, rc1 = _dot_dims(dot1, g)
    if len(lc1) != 1 or len(rc1) != 1:
        return None
    S = dot1.outputs[0]
    sv = g.values[S]
    if sv.dtype != "float32" or len(sv.shape) < 3:
        return None
    # the score chain: an optional transpose of S, then same-shape elementwise ops
    perm = list(range(len(sv.shape)))
    chain, cur, fused = [], S, []
    while True:
        if cur in outs:
            return None
        us = ir.distinct_ops(users.get(cur, []))
        kinds = sorted(u.kind for u in us)
        if kinds == ["reduce", "subtract"]:
            break
        if len(us) != 1 or len(chain) + len(fused) > 10:
            return None
        u = us[0]
        if u.kind == "transpose" and cur == S:
            perm = list(u.attrs["permutation"])
            fused.append(u)
            cur = u.outputs[0]
            continue
        shape = g.values[cur].shape
        if u.kind not in ir.ELEMENTWISE or len(u.outputs) != 1 or g.values[u.outputs[0]].shape != shape:
            return None
        if not all(i == cur or i in cg.env or cg._available(i) for i in u.inputs):
            return None
        chain.append(u)
        cur = u.outputs[0]
    X = cur
    xshape = tuple(g.values[X].shape)
    n = len(xshape)
    r1 = next(u for u in us if u.kind == "reduce")
    sub = next(u for u in us if u.kind == "subtract")
    if g.values[X].dtype != "float32" or not _row_reduce(cg, r1, "max", X, n, float("-inf")):
        return None
    st = _stat_chain(cg, r1.outputs[0], xshape, users, outs, True)
    if st is None or st[0] is not sub or sub.inputs != [X, st[1]]:
        return None
    stat_ops = list(st[2])
    eu = ir.distinct_ops(users.get(sub.outputs[0], []))
    if len(eu) != 1 or eu[0].kind != "exponential" or sub.outputs[0] in outs:
        return None
    ex = eu[0]
    E = ex.outputs[0]
    us = ir.distinct_ops(users.get(E, []))
    if E in outs or sorted(u.kind for u in us) != ["divide", "reduce"]:
        return None
    r2 = next(u for u in us if u.kind == "reduce")
    div = next(u for u in us if u.kind == "divide")
    if not _row_reduce(cg, r2, "add", E, n, 0.0):
        return None
    st = _stat_chain(cg, r2.outputs[0], xshape, users, outs, False)
    if st is None or st[0] is not div or div.inputs != [E, st[1]]:
        return None
    stat_ops += st[2]
    cur, post = div.outputs[0], []
    while True:
        us = ir.distinct_ops(users.get(cur, []))
        if len(us) != 1 or cur in outs:
            return None
        u = us[0]
        if u.kind == "dot":
            break
        if u.kind != "convert" or len(post) >= 2 or not ir.is_float(g.values[u.outputs[0]].dtype):
            return None
        post.append(u)
        cur = u.outputs[0]
    dot2 = u
    plan = _dims(cg, dot1, dims1, lc1, rc1, perm, xshape, dot2, cur)
    if plan is None:
        return None
    plan.chain = chain
    plan.X = X
    plan.src = fused[0].outputs[0] if fused else S
    plan.ops = [dot1] + fused + chain + [r1, sub, ex, r2, div] + stat_ops + post + [dot2]
    plan.p_dtype = g.values[cur].dtype
    return plan


def _dims(cg, dot1, dims1, lc1, rc1, perm, xshape, dot2, P):
    """Map the X-space (scores after the transpose) onto the operands; None if not the shape."""
    g = cg.g
    n = len(xshape)
    xd = [dims1[perm[i]] for i in range(n)]          # X dim i -> dot1 output dim info
    key = xd[-1]
    if key[0] == "b":
        return None
    kop = 0 if key[0] == "l" else 1                  # operand holding the keys
    qop = 1 - kop
    nb = 0
    while nb < n and xd[nb][0] == "b":
        nb += 1
    mdims = xd[nb:n - 1]
    if not mdims or any(d[0] == "b" for d in mdims) or any(d[0] != ("l" if qop == 0 else "r") for d in mdims):
        return None
    if any(d[0] == ("l" if kop == 0 else "r") for d in xd[:-1]):
        return None                                   # the key operand has one free dim (N)
    # dot2: P is one operand, contracting its last axis; its batch dims are X's batch dims
    a2 = dot2.attrs
    pop = 0 if dot2.inputs[0] == P else 1
    if dot2.inputs[1 - pop] == P:
        return None
    pb, pc = (a2["lhs_batch_dims"], a2["lhs_contracting_dims"]) if pop == 0 else \
        (a2["rhs_batch_dims"], a2["rhs_contracting_dims"])
    vb, vc = (a2["rhs_batch_dims"], a2["rhs_contracting_dims"]) if pop == 0 else \
        (a2["lhs_batch_dims"], a2["lhs_contracting_dims"])
    if list(pc) != [n - 1] or sorted(pb) != list(range(nb)) or len(vc) != 1:
        return None
    V = dot2.inputs[1 - pop]
    vshape = g.values[V].shape
    vf = [d for d in range(len(vshape)) if d not in list(vb) + list(vc)]
    if len(vf) != 1 or vshape[vc[0]] != xshape[-1] or vshape[vf[0]] > MAX_DV:
        return None
    if not (V in cg.env or cg._available(V)):
        return None
    # dot2 output dims: batch (in pb order), then lhs free, then rhs free
    pfree = [d for d in range(n) if d not in list(pb) + [n - 1]]
    out_pos = {}
    for j, d in enumerate(pb):
        out_pos[("p", d)] = j
    k = len(pb)
    for side in (0, 1):
        if side == pop:
            for d in pfree:
                out_pos[("p", d)] = k
                k += 1
        else:
            out_pos[("v", vf[0])] = k
            k += 1
    _k_tile = cg.k.k_tile
    K = g.values[dot1.inputs[0]].shape[lc1[0]]
    N, Dv = xshape[-1], vshape[vf[0]]
    if K % _k_tile(K) or (K // _k_tile(K)) * N * 4 + -(-N // PMAX) * -(-Dv // PMAX) * PMAX * 4 > RESIDENT_BYTES:
        return None
    return Plan(dot1=dot1, dot2=dot2, nb=nb, xd=xd, kop=kop, qop=qop, lc1=lc1[0], rc1=rc1[0], V=V,
                vb=list(vb), pb=list(pb), vc=vc[0], vf=vf[0], out_pos=out_pos, xshape=xshape,
                N=N, Dv=Dv, K=K)


# -- lowering ---------------------------------------------------------------------------------
def _narrow(x):
    """(view, dtype) of a matmul operand: a convert of bf16/fp16 data to f32 feeds the narrow data
    itself (products of narrow values are exact in the PE's fp32 accumulation)."""
    if isinstance(x, Node) and x.op == "convert" and x.dtype == "float32" and isinstance(x.args[0], View) \
            and x.args[0].dtype in NARROW and not x.args[0].base.startswith("__"):
        return x.args[0]
    return x


def _onchip_view(cg, x):
    if isinstance(x, View) and not x.base.startswith("__"):
        return x
    return cg.materialise(x)


def operand_views(cg, plan):
    """QX [X dims but the last] + [K], KX [batch] + [K, N], VX [batch] + [N, Dv], matmul dtypes."""
    d1 = plan.dot1
    raw = [cg.env[i] for i in d1.inputs]
    nar = [_narrow(x) for x in raw]
    if all(a is not b for a, b in zip(nar, raw)) and nar[0].dtype == nar[1].dtype:
        raw = nar                       # both operands are widened narrow data: multiply the data
    ops = [_onchip_view(cg, x) for x in raw]
    Q, Kt = ops[plan.qop], ops[plan.kop]
    qc = plan.lc1 if plan.qop == 0 else plan.rc1
    kc = plan.lc1 if plan.kop == 0 else plan.rc1
    n = len(plan.xshape)
    qs, ks = [], []
    for i in range(n - 1):
        d = plan.xd[i]
        if d[0] == "b":
            qs.append(Q.strides[d[1 + plan.qop]])
            ks.append(Kt.strides[d[1 + plan.kop]])
        else:
            qs.append(Q.strides[d[1]])
    qs.append(Q.strides[qc])
    ks += [Kt.strides[kc], Kt.strides[plan.xd[-1][1]]]
    nb = plan.nb
    QX = View(Q.base, Q.dtype, tuple(plan.xshape[:-1]) + (plan.K,), qs, Q.offset)
    KX = View(Kt.base, Kt.dtype, tuple(plan.xshape[:nb]) + (plan.K, plan.N), ks, Kt.offset)
    pdt = onchip_dtype(plan.p_dtype)
    V = cg.env[plan.V]
    if _narrow(V) is not V and _narrow(V).dtype == pdt:
        V = _narrow(V)
    V = _onchip_view(cg, V)
    # V's batch dim paired with P's batch dim pb[j] (= X dim pb[j])
    vs = [0] * nb
    for pdim, vdim in zip(plan.pb, plan.vb):
        vs[pdim] = V.strides[vdim]
    VX = View(V.base, V.dtype, tuple(plan.xshape[:nb]) + (plan.N, plan.Dv),
              vs + [V.strides[plan.vc], V.strides[plan.vf]], V.offset)
    cdt1 = Q.dtype if Q.dtype == Kt.dtype and Q.dtype in NARROW else "float32"
    cdt2 = V.dtype if V.dtype == pdt and V.dtype in NARROW else "float32"
    return QX, KX, VX, cdt1, cdt2


def out_view(cg, plan):
    """The dot2 result's target, as a View over X dims but the last, then Dv."""
    o = plan.dot2.outputs[0]
    out = mmlayout.consumer_layout(cg, o) or cg.target_for(o)
    n = len(plan.xshape)
    st = []
    for i in range(n - 1):
        st.append(out.strides[plan.out_pos[("p", i)]])
    st.append(out.strides[plan.out_pos[("v", plan.vf)]])
    return out, View(out.base, out.dtype, tuple(plan.xshape[:-1]) + (plan.Dv,), st, 0)


def score_expr(cg, plan):
    """(X as an expression of the score tile (a leaf in X-space) and the side inputs, the leaf,
    the scale the PSUM eviction applies): a leading x / c or x * c folds into the eviction."""
    from neuronxcc.starfish.penguin import rows
    g = cg.g
    leaf = View("__dot__%d" % id(plan.dot1), "float32", plan.xshape, row_major_strides(plan.xshape), 0)
    built = {plan.src: leaf}
    chain = list(plan.chain)
    scale = 1.0
    if chain and chain[0].kind in ("divide", "multiply") and len(chain[0].inputs) == 2:
        a, b = chain[0].inputs
        c = _splat_value(cg, b if a == plan.src else a)
        try:
            c = float(c)
        except (TypeError, ValueError):
            c = None
        if c is not None and c != 0.0 and c == c and abs(c) != float("inf") and \
                (a == plan.src or chain[0].kind == "multiply") and a != b:
            scale = 1.0 / c if chain[0].kind == "divide" else c
            built[chain[0].outputs[0]] = leaf
            chain = chain[1:]
    for op in chain:
        args = [built[i] if i in built else cg.env[i] for i in op.inputs]
        o = op.outputs[0]
        built[o] = Node(op.kind, args, op.attrs, g.values[o].dtype, g.values[o].shape, op.loc)
    expr = built[plan.X]
    return rows.resolve(cg, expr), leaf, scale


def lower(kern, plan):
    """Emit the fused kernel (``kern``: the codegen's Kernels) and bind the second dot's result.

    Causal masks (``causal_bands``): the query tiles are split into at most MAX_BANDS bands, each
    its own copy of the query loop (static loop bounds; the copies do not grow with the sequence).
    Band b of G key blocks' worth of queries runs the key blocks every query of it sees in full
    (keys < b*G*512), then its G diagonal blocks. With G == 1 (sequences up to MAX_BANDS*512,
    every band one block) the b + 1 blocks are one loop and the mask is one PE matmul per block
    that adds MASK_BIAS to the hidden scores in PSUM (identity stationary, a slice of the bias
    table moving: zeros below the diagonal); otherwise the visible blocks take no mask and the
    mask expression is evaluated on the diagonal ones as in the general path. Key blocks after
    the diagonal are skipped: their exp(x - m) would be exactly 0. (One loop per band, not a
    separate diagonal body after the visible loop: walrus keeps the values of a body that is not
    its own loop live over the whole query iteration, which would double the PSUM tiles.)

    A few batch elements (heads) of one query step and one key block each (at most WAVE_TILES query
    tiles in all) are unrolled: every head's K^T, V and Q^T first, then all their query tiles as one
    wavefront. Operands that the kernel computing them left in SBUF (penguin/mmlayout.py: the
    fused QKV projection of a transformer block) are read there, and their HBM copies dropped;
    the result tiles stay there too, for a row-tile matmul that reads them (penguin/mmfuse.py)."""
    cg, em, P = kern.cg, kern.em, kern.P
    offs = kern.offsets()
    _k_tile = kern.k_tile
    QX, KX, VX, cdt1, cdt2 = operand_views(cg, plan)
    hand = mmlayout.Handoff(cg)
    expr, leaf, scale = score_expr(cg, plan)
    out, OX = out_view(cg, plan)
    n, nb = len(plan.xshape), plan.nb
    N, K, Dv = plan.N, plan.K, plan.Dv
    TK = _k_tile(K)
    ntk = K // TK
    NB = min(N, KEY_BLOCK)
    W = -(-Dv // PMAX) * PMAX               # columns per 128-key tile of the resident V
    ntn = -(-N // PMAX)
    Mi = plan.xshape[n - 2]
    TM = choose_tile(Mi, PMAX)
    odt = onchip_dtype(OX.dtype)
    f32 = "float32"
    nband = causal.causal_bands(cg, plan, expr, leaf, scale, Mi, TM, NB)
    tables = causal.mask_tables(em, TM, N) if nband is not None else None

    def col(prefix, mn):
        return em.chip(em.sbuf(prefix, mn, 1, f32), f32, mn, [[1, 1]])

    # PSUM tiles of the key-block bodies: one memloc per role, query tile of the pair and shape,
    # shared by every body (the bands, peeled blocks): bodies run one after the other, and fresh
    # tiles per body would all be live at once where walrus cannot prove a tile private to its loop
    psum_pool = {}

    def psum(prefix, h, parts, free):
        key = (prefix, h, parts, free)
        if key not in psum_pool:
            psum_pool[key] = em.psum(prefix, parts, free)
        return psum_pool[key]

    # up to QUERY_TILES query tiles per step when they split evenly: their chains are independent,
    # and emitted phase by phase they fill each other's waits on the in-order engines
    nq = next((q for q in (QUERY_TILES, 2) if TM == PMAX and Mi % (q * TM) == 0), 1)
    if nq == 1 and TM == PMAX and PMAX < Mi <= QUERY_TILES * TM:
        nq = -(-Mi // TM)                   # all the query tiles in one step (260: 128, 128 and 4)
    TQ = nq * TM

    def load_b(bs):             # K^T and V of one batch element, resident for its query loop
        # (or still in SBUF from the kernel that computed them: penguin/mmlayout.py)
        kres, vr = mmlayout.resident_kv(hand, offs, P, KX, VX, nb, bs, (K, N, Dv), N <= NB, cdt1, cdt2)
        kres = kres or kern.load_resident(KX, nb, bs, P.const(0), N, K, cdt1)    # [TK, ntk * N]
        if vr is not None:
            return kres, vr
        vres = em.sbuf("v_res", PMAX, ntn * W, cdt2)                        # [128 keys, ntn * W]
        nfull, rem = divmod(N, PMAX)
        sn, sd = VX.strides[nb], VX.strides[nb + 1]
        if nfull:
            em.dma(em.chip(vres, cdt2, PMAX, [[W, nfull], [1, Dv]]),
                   em.hbm(VX.base, offs(VX, bs + [P.const(0), P.const(0)]), [[sn, PMAX], [PMAX * sn, nfull], [sd, Dv]]))
        if rem:
            em.dma(em.chip(vres, cdt2, rem, [[1, Dv]], offset=nfull * W),
                   em.hbm(VX.base, offs(VX, bs + [P.const(nfull * PMAX), P.const(0)]), [[sn, rem], [sd, Dv]]))
        return kres, vres

    def body_b(starts, sizes):
        bs = list(starts)
        kres, vres = load_b(bs)
        gaxes = [Axis(plan.xshape[i], 1, "g") for i in range(nb, n - 2)]
        if nband is None:
            em.nest(gaxes + [Axis(Mi, TQ, "m")], lambda st, sz: body_m(st, sz, kres, vres, None), bs, list(sizes))
            return
        G = N // NB // nband
        for b in range(nband):
            q0 = b * G * NB
            em.nest(gaxes + [Axis(G * NB, TQ, "m")],
                    lambda st, sz, q0=q0: body_m(st[:-1] + [st[-1] + q0], sz, kres, vres, (q0, G)), bs, list(sizes))

    def body_m(starts, sizes, kres, vres, band):
        hs = prologue(starts, sizes, kres, vres, band)
        keys(starts, sizes, hs, band)
        epilogue(hs)

    def prologue(starts, sizes, kres, vres, band):  # per query tile: Q^T, softmax state
        m0, mq = starts[-1], sizes[-1]
        tiles = [(m0 + a, min(TM, mq - a)) for a in range(0, mq, TM)]
        # one key block in all (260 keys; or the first causal band of one block): the softmax is
        # exact at once, no running max, correction or accumulator (P @ V is scaled out of PSUM)
        single = N <= NB and (band is None or band == (0, 1))
        hs = []
        for mt, mn in tiles:
            st = list(starts[:-1]) + [mt]
            h = dict(starts=st, mn=mn, m0=mt, kres=kres, vres=vres, single=single)
            q = hand.get(QX.base, cdt1, offs(QX, st + [P.const(0)]), QX.strides[n - 1], TK, QX.strides[n - 2], mn) \
                if ntk == 1 else None
            h["qT"], h["qoff"] = q or (kern._lhsT(QX, n - 2, offs(QX, st + [P.const(0)]), TK, ntk, mn, cdt1), 0)
            h["l"] = col("fa_sum", mn)
            if not single:
                h["nm"] = col("fa_negmax", mn)
                h["acc"] = em.chip(em.sbuf("fa_acc", mn, Dv, f32), f32, mn, [[1, Dv]])
                em.inst("memset", "DVE", [h["nm"]], [], value=-NEG_BIG)
                em.inst("memset", "POOL", [h["l"]], [], value=0.0)
                em.inst("memset", "POOL", [h["acc"]], [], value=0.0)
            h["hoisted"] = None
            if band is None or band[1] > 1:
                # loop-invariant tiles of the score expression (mask constants, iota grids): once per query tile
                h["hoisted"] = TileEval(cg, Space(n - 2, n - 1, st + [P.const(0)],
                                                  [1] * (n - 2) + [mn, NB])).hoist(expr)
            hs.append(h)
        return hs

    def keys(starts, sizes, hs, band):
        if band is None:
            em.nest([Axis(N, NB, "kb")], lambda st, sz: body_k(st, sz, hs, "expr"), list(starts), list(sizes))
        else:
            q0, G = band
            if G == 1:  # blocks 0..b, each adding the bias table from column d0 + k0 - m0
                em.nest([Axis(q0 + NB, NB, "kb")], lambda st, sz: body_k(st, sz, hs, "table"), list(starts),
                        list(sizes))
            else:
                if q0:      # keys every query of the band sees
                    em.nest([Axis(q0, NB, "kb")], lambda st, sz: body_k(st, sz, hs, None), list(starts),
                            list(sizes))
                em.nest([Axis(G * NB, NB, "kd")],
                        lambda st, sz: body_k(st[:-1] + [st[-1] + q0], sz, hs, "expr"), list(starts), list(sizes))

    def epilogue(hs):
        for h in hs:
            mn = h["mn"]
            if ot:              # O^T [Dv, mn], normalised already (P^T came scaled by 1/l)
                o = em.chip(em.sbuf("fa_outT", Dv, mn, odt), odt, Dv, [[1, mn]])
                kern._evict_copy(o, h["acc"])
                base = offs(OX, list(h["starts"]) + [P.const(0)])
                ins = em.dma(em.hbm(OX.base, base, [[OX.strides[n - 1], Dv], [OX.strides[n - 2], mn]]), o)
                mmlayout.keep_transposed(cg, OX.base, odt, base, OX.strides[n - 2], mn, Dv, o.target, ins)
                continue
            rl = col("fa_rsum", mn)
            em.inst("tensor_scalar", "DVE", [rl], [h["l"]], op0="divide", operand0=1.0, reverse0=True)
            o = em.chip(em.sbuf("fa_out", mn, Dv, odt), odt, mn, [[1, Dv]])
            em.inst("activation", "ACT", [o], [h["acc"], rl], func="identity", scale_ap=True)
            store(h["starts"], mn, o)

    def store(starts, mn, o):
        so_m, so_d = OX.strides[n - 2], OX.strides[n - 1]
        base = offs(OX, list(starts) + [P.const(0)])
        if not (so_m == 1 and so_d != 1 and Dv > 1 and mn > 1):
            # triggered by ACT, which made o: on SP the store would hold back the next query step's
            # loads queued behind it until this step's last activation
            ins = em.dma(em.hbm(OX.base, base, [[so_m, mn], [so_d, Dv]]), o, engine="ACT")
            mmlayout.keep(cg, OX.base, odt, base, so_m, so_d, mn, Dv, o.target, ins)    # for the next kernel
            return
        # the result lies d-major (queries contiguous): transpose on the PE so each partition
        # stores one contiguous run of queries instead of one element per descriptor
        for d0 in range(0, Dv, PMAX):
            dn = min(PMAX, Dv - d0)
            ps = em.psum("fa_oT", dn, mn)
            em.inst("transpose", "PE", [em.chip(ps, f32, dn, [[1, mn]])],
                    [em.chip(o.target, odt, mn, [[1, dn]], offset=d0)])
            oT = em.chip(em.sbuf("fa_outT", dn, mn, odt), odt, dn, [[1, mn]])
            kern._evict_copy(oT, em.chip(ps, f32, dn, [[1, mn]]))
            em.dma(em.hbm(OX.base, base + d0 * so_d, [[so_d, dn], [so_m, mn]]), oT)

    def body_k(starts, sizes, hs, mask):
        """One key block for each query tile of hs. mask: "expr" (evaluate the score expression on
        the tile), None (every score visible: the expression is the scores themselves) or "table"
        (the causal bias table, from column d0 + k0 - m0). Emission order (each engine runs its
        stream in order): every tile's scores first, then the later phases as a wavefront, tile i's
        phase p with tile i+1's phase p-1, the most upstream phase first, so one tile's P^T and
        P @ V run while the next one's softmax does."""
        n0, nk = starts[-1], sizes[-1]
        nch = -(-nk // PMAX)

        def visible(h):         # unrolled heads, causal: the 128-key chunks a query tile sees (P is 0 after)
            seen = int(h["m0"]) + h["mn"] - int(n0) if mask == "table" and wave else nk
            return min(nch, max(1, -(-seen // PMAX)))

        def scores(i, h):       # scores into PSUM, the mask added there, evicted scaled
            mn = h["mn"]
            h["ps"] = psum("fa_s", i, mn, nk)
            # unrolled causal heads of one block: only the key chunks the query tile sees (its softmax
            # over the later keys would add exp(MASK_BIAS) = 0 and never take their max), so a query
            # tile below the last key chunk costs fewer PE columns and a narrower softmax
            w = min(nk, visible(h) * PMAX) if (h["single"] and mask == "table" and wave) else nk
            h["w"] = w
            ps_ap = em.chip(h["ps"], f32, mn, [[1, w]])
            for j in range(ntk):
                em.inst("matmul", "PE", [ps_ap], [em.chip(h["qT"], cdt1, TK, [[1, mn]], offset=h["qoff"] + j * mn),
                                                  em.chip(h["kres"], cdt1, TK, [[1, w]], offset=n0 + j * N)],
                        psum_zero=(j == 0))
            if mask == "table":
                ident, table, d0 = tables
                em.inst("matmul", "PE", [ps_ap],
                        [em.chip(ident.target, "bfloat16", PMAX, [[1, mn]]), em.chip(table.target, "bfloat16", PMAX, [[1, w]], offset=n0 + d0 - h["m0"])],
                        psum_zero=False)
            s_ap = em.chip(em.sbuf("fa_scores", mn, w, f32), f32, mn, [[1, w]])
            em.inst("activation", "ACT", [s_ap], [ps_ap], func="identity", scale=scale)
            if mask == "expr":
                te = TileEval(cg, Space(n - 2, n - 1, list(h["starts"]) + [n0], [1] * (n - 2) + [mn, nk]))
                te.hoisted = h["hoisted"]
                te.memo[id(leaf)] = TV("tile", f32, ap=s_ap)
                xv = te.materialise(te.value(expr))
                if xv.dtype != f32:
                    xv = te.cast(xv, f32)
                h["x"] = xv.ap
            else:
                h["x"] = s_ap

        def softmax(i, h):      # running state: -max (nm), sum (l); negm = min(-block max, nm) = -new max
            mn = h["mn"]
            if h["single"]:     # -max, then P = exp(x - max) with its row sum: the whole softmax state
                negm = col("fa_negm", mn)
                em.inst("tensor_reduce", "DVE", [negm], [h["x"]], op="max", axes=1, negate=True)
                p_ap = em.chip(em.sbuf("fa_p", mn, h["w"], cdt2), cdt2, mn, [[1, h["w"]]])
                em.inst("activation", "ACT", [p_ap, h["l"]], [h["x"], negm], func="exp", bias_ap=True, reduce="add")
                h["p"] = p_ap
                if ot:          # diag(1/l): P^T's transposes multiply by it, so P @ V comes normalised
                    rl = col("fa_rsum", mn)
                    em.inst("tensor_scalar", "DVE", [rl], [h["l"]], op0="divide", operand0=1.0, reverse0=True)
                    dg = em.chip(em.sbuf("fa_diag", mn, mn, f32), f32, mn, [[1, mn]])
                    em.inst("tensor_scalar", "POOL", [dg], [em.chip(tables[0].target, "bfloat16", mn, [[1, mn]]), rl],
                            op0="mult", operand0_ap=True)
                    h["diag"] = dg
                return
            nbm, negm, rs, corr = (col(p, mn) for p in ("fa_nbmax", "fa_negm", "fa_bsum", "fa_corr"))
            em.inst("tensor_reduce", "DVE", [nbm], [h["x"]], op="max", axes=1, negate=True)
            em.inst("tensor_tensor", "DVE", [negm], [nbm, h["nm"]], op="min")
            p_ap = em.chip(em.sbuf("fa_p", mn, nk, cdt2), cdt2, mn, [[1, nk]])
            em.inst("activation", "ACT", [p_ap, rs], [h["x"], negm], func="exp", bias_ap=True, reduce="add")
            # corr = exp(old max - new max) = exp(-nm + negm)
            em.inst("activation", "ACT", [corr], [h["nm"], negm], func="exp", bias_ap=True, scale=-1.0)
            # l = l * corr + rs and nm = negm on ACT, in its stream after corr: on POOL they would
            # hold the SBUF port DVE needs while they wait for corr
            em.inst("activation", "ACT", [h["l"]], [h["l"], rs, corr], func="identity", bias_ap=True, scale_ap=True)
            em.inst("activation", "ACT", [h["nm"]], [negm], func="identity")
            h["p"], h["corr"] = p_ap, corr

        def transpose(i, h):    # P^T by 128-key chunks (PE transposes into one PSUM bank at a time)
            mn = h["mn"]
            per = max(1, (em.tm.psum_bank_bytes // 4) // mn)
            pT = em.sbuf("fa_pT", PMAX, nch * mn, cdt2)
            nv = visible(h)
            for c0 in range(0, nv, per):
                c = min(per, nv - c0)
                # the P^T chunks reuse the score bank when they fit (its eviction has long run:
                # P came from it), so a query tile holds one bank besides its P @ V tile
                psT = h["ps"] if (c0 == 0 and mn == PMAX and c * mn <= nk) else psum("fa_psT", (i, c0), PMAX, c * mn)
                for j in range(c):
                    cn = min(PMAX, nk - (c0 + j) * PMAX)
                    pc = em.chip(h["p"].target, cdt2, mn, [[1, cn]], offset=(c0 + j) * PMAX)
                    if ot:      # P^T diag(1/l): a matmul with P's chunk stationary, as costly as the transpose
                        em.inst("matmul", "PE", [em.chip(psT, f32, cn, [[1, mn]], offset=j * mn)], [pc, h["diag"]],
                                psum_zero=True)
                    else:
                        em.inst("transpose", "PE", [em.chip(psT, f32, cn, [[1, mn]], offset=j * mn)], [pc])
                last = min(PMAX, nk - (c0 + c - 1) * PMAX)
                full = c if last == PMAX else c - 1
                for a, k_, rows in ((0, full, PMAX), (full, c - full, last)):
                    if k_ > 0:      # alternate ACT / DVE by query tile: the two carry the same load
                        dst = em.chip(pT, cdt2, rows, [[1, k_ * mn]], offset=(c0 + a) * mn)
                        src = em.chip(psT, f32, rows, [[1, k_ * mn]], offset=a * mn)
                        if len(hs) == 1:
                            kern._evict_copy(dst, src)
                        elif i % 2 == 0:
                            em.inst("activation", "ACT", [dst], [src], func="identity")
                        else:
                            em.inst("tensor_copy", "DVE", [dst], [src])
            h["pT"] = pT

        def pv(i, h):           # P @ V in PSUM, then acc = acc * corr + P @ V
            mn = h["mn"]
            if ot:              # O^T = V^T P^T: V's chunk stationary, P^T moving (max(64, mn) columns)
                pv_ap = em.chip(psum("fa_pvT", i, Dv, mn), f32, Dv, [[1, mn]])
                for j in range(visible(h)):
                    cn = min(PMAX, nk - j * PMAX)
                    vm, voff = h["vres"][j] if isinstance(h["vres"], list) else (h["vres"], n0 * (W // PMAX) + j * W)
                    em.inst("matmul", "PE", [pv_ap], [em.chip(vm, cdt2, cn, [[1, Dv]], offset=voff),
                                                      em.chip(h["pT"], cdt2, cn, [[1, mn]], offset=j * mn)],
                            psum_zero=(j == 0))
                h["acc"] = pv_ap
                return
            pv_ap = em.chip(psum("fa_pv", i, mn, Dv), f32, mn, [[1, Dv]])
            for j in range(visible(h)):
                cn = min(PMAX, nk - j * PMAX)
                vm, voff = h["vres"][j] if isinstance(h["vres"], list) else (h["vres"], n0 * (W // PMAX) + j * W)
                em.inst("matmul", "PE", [pv_ap], [em.chip(h["pT"], cdt2, cn, [[1, mn]], offset=j * mn),
                                                  em.chip(vm, cdt2, cn, [[1, Dv]], offset=voff)],
                        psum_zero=(j == 0))
            if h["single"]:
                h["acc"] = pv_ap        # normalised straight out of PSUM after the (only) block
                return
            em.inst("scalar_tensor_tensor", "DVE", [h["acc"]], [h["acc"], pv_ap, h["corr"]], op0="mult", op1="add",
                    operand0_ap=True)

        for i, h in enumerate(hs):
            scores(i, h)
        phases = (softmax, transpose, pv)
        for step in range(len(hs) + len(phases) - 1):
            for p, fn in enumerate(phases):
                i = step - p
                if 0 <= i < len(hs):
                    fn(i, hs[i])

    from neuronxcc.starfish.penguin import decode_attn, mmfuse
    layout = decode_attn.fit(plan, QX, KX, VX, OX, expr, leaf)
    nbatch = int(np.prod(plan.xshape[:nb]))
    wave = (nb >= 1 and n - 2 == nb and 1 < nbatch and nbatch * -(-Mi // TM) <= WAVE_TILES and Mi <= TQ
            and N <= NB and (nband is None or nband == 1)   # one query step, one key block per head
            and nbatch * (ntk * N * bdt.itemsize(cdt1) + ntn * W * bdt.itemsize(cdt2)) <= RESIDENT_BYTES
            and nbatch * -(-Mi // TM) * (N + Dv) * 4 <= em.tm.psum_partition_bytes * 3 // 4)
    # O^T straight from P @ V when the one consumer is a row-tile matmul over the heads' features
    # (the block's output projection): it reads the O^T tiles on chip as its L^T chunks, so neither
    # O's PE transposes nor their evictions are needed; 1/l goes into P^T (diag(1/l) in place of the
    # transposes' identity), fp32 only
    ot = (wave and tables is not None and Dv <= PMAX and cdt2 == f32 and odt == f32 and OX.strides[n - 1] == 1
          and mmfuse.reads_transposed(kern, plan.dot2.outputs[0], Mi))
    if layout is not None:      # few query rows per batch element (GQA decode): all rows in one tile
        decode_attn.lower(kern, plan, layout, scale, cdt1, cdt2)
    elif wave:
        # in a loop over the heads, each head's buffers took the bytes the previous head freed (walrus
        # allocates in program order), so its loads waited for that head's compute; unrolled, the
        # offsets are constants, so operands still in SBUF are found there (``hand``)
        band = None if nband is None else (0, 1)
        heads = []
        for idx in np.ndindex(*plan.xshape[:nb]):
            bs = [P.const(int(v)) for v in idx]
            kres, vres = load_b(bs)
            heads.append((bs, prologue(bs + [P.const(0)], [1] * nb + [Mi], kres, vres, band)))
        allh = [h for _, hs in heads for h in hs]
        keys(heads[0][0] + [P.const(0)], [1] * nb + [Mi], allh, band)
        epilogue(allh)
    else:
        em.nest([Axis(plan.xshape[i], 1, "b") for i in range(nb)], body_b)
    for op in plan.ops[1:]:
        cg.fused.add(id(op))
    cg.env[plan.dot2.outputs[0]] = out
    cg.flash_fused = getattr(cg, "flash_fused", 0) + 1
    cg.flash_causal = getattr(cg, "flash_causal", 0) + (nband is not None)
