"""The tiled kernels Penguin codegen emits (one loop nest per materialised value).

* ``elementwise(x, out)``: evaluates an expression over its index space, tile
  by tile: [<=128 partitions, <= EW_FREE elements]; dims that every access
  allows are collapsed first, the remaining ones become loops.
* ``op_reduce``: any set of reduced axes; a kept axis on the partitions, a
  reduced axis on the free dim (``tensor_reduce``), further reduced axes and
  free tiles accumulate into a [P,1] accumulator; argmax/argmin keep the
  first index of the extreme value like XLA.
* ``op_dot``: out[b, m, n] = sum_k L[b, m, k] R[b, k, n]; N tiles of <= 1024
  fp32 (up to two 2 KiB PSUM banks, one matmul per bank for each stationary
  tile) whose R[:, n tile] (all of K) stays resident in
  SBUF across the M loop (sized by the SBUF budget from ``neuronxcc.hwm``),
  M tiles of 128 on PSUM partitions (two per M step), K tiles of 128
  accumulated in PSUM (the first K tile zeroes the bank, the rest of the K
  loop accumulates), then evicted by ACT with the cast to the result type.
* ``op_concatenate`` / ``op_pad``: copies into sub-views of the result.

Invariant: every memloc is created inside the loop body that uses it, so its
live range is one tile step (the resident matmul operand: one N step, whose
body holds the M loop); each is written whole by its first access, so walrus
can double-buffer it; sizes stay within the SBUF budget.
"""
from neuronxcc.starfish.penguin import (argreduce, concat, flatrun, gemm, hbmcopy, lhs_pre, matvec, mmfuse, pad,
                                        reschunk, resident, respipe, splitk)
from neuronxcc.starfish.penguin.emit import Axis, choose_tile
from neuronxcc.starfish.penguin.expr import apply_view, count_ops, leaves
from neuronxcc.starfish.penguin.tiles import REDUCE_ALU, Space, TV, TileEval, cannot_lower, onchip_dtype
from neuronxcc.starfish.penguin.views import Splat, View, collapse
from neuronxcc.starfish.birpy import dtypes as bdt

EW_FREE = 1024          # elements per partition per elementwise tile
K_GROUP = 4             # K tiles moved by one matmul operand DMA
MM_STREAM_RESERVE = 48 * 1024   # SBUF bytes per partition kept for streamed tiles next to resident ones
LT_GROUPS = (16, 8, 4, 2, 1)    # K tiles per streamed L^T DMA, largest first (fewer, larger transfers)
LT_GROUP_CYCLES = 8192          # PE cycles one streamed L^T DMA should feed (amortises its fixed latency)
MM_MIN_N = 64           # narrowest resident N tile worth it (the PE's moving side below 64 wastes cycles)
MM_WIDE_BANKS = 2       # PSUM banks (of 512 fp32 columns) one resident N tile may span
RED_FREE = 1024
PMAX = 128

IDENTITY = {"add": 0.0, "max": float("-inf"), "min": float("inf"), "mul": 1.0, "and": 1, "or": 0}


class Kernels:
    def __init__(self, cg):
        self.cg = cg
        self.em = cg.em
        self.P = cg.P

    # -- helpers ------------------------------------------------------------------------
    def _prepare(self, exprs, outs, shape):
        """Collapse the common index space of exprs and out views; returns new (exprs, outs, shape)."""
        lv = []
        for x in exprs:
            lv.extend(leaves(x))
        strides = [v.strides for v in lv] + [o.strides for o in outs]
        # a lazy matmul is evaluated on row tiles: its row axes never merge with its column axes
        N = {v.base: self.cg.mmred[v.base].N for v in lv if mmfuse.is_mm_leaf(v)}
        strides += [tuple(0 if s and s % N[v.base] == 0 else s for s in v.strides) for v in lv if v.base in N]
        cshape, _ = collapse(shape, strides)
        if not cshape:
            cshape = (1,)
        exprs = [apply_view(x, lambda v: v.reshape(cshape)) for x in exprs]
        outs = [o.reshape(cshape) for o in outs]
        assert all(e is not None for e in exprs) and all(o is not None for o in outs)
        return exprs, outs, cshape

    def _store(self, te, tv, out, engine=None):
        """DMA tile value tv into the HBM view out at te's tile position (triggered by ENGINE)."""
        tv = te.materialise(tv, out.dtype)
        t = self.em.m.tensors[out.base]
        want = onchip_dtype(t.dtype)
        if tv.dtype != want and not (bdt.is_int(tv.dtype) and bdt.is_int(want)) and \
                not (tv.dtype == "bool" or want == "bool"):
            tv = te.cast(tv, want)
        if tv.dtype == "bool" and want != "bool":
            tv = te.cast(tv, want)
        dst = self.em.hbm(out.base, te.leaf_offset(out), te.leaf_pattern(out))
        self.em.dma(dst, tv.ap, engine=engine)

    # -- elementwise / copy ----------------------------------------------------------
    def elementwise(self, x, out):
        if any(n == 0 for n in out.shape):
            return
        from neuronxcc.starfish.penguin import rows
        x0, out0 = x, out
        (x,), (out,), shape = self._prepare([x], [out], out.shape)
        if hbmcopy.copy(self.cg, x, out, shape):
            return                          # a plain copy with long runs: HBM -> HBM, no SBUF trip
        if len(shape) == 1:
            n = shape[0]
            split = flatrun.head_tail(x, out, n, EW_FREE) \
                if not rows.row_leaves(x) and not mmfuse.reachable(self.cg, x) else None
            if split:
                for xs, os_ in split:
                    self.elementwise(xs, os_)
                return
            x, out, shape = flatrun.spread(x, out, n)
        r = len(shape)
        f = r - 1
        cands = list(range(r - 1))
        p = max(cands, key=lambda a: (min(shape[a], PMAX), a))
        loops = [a for a in range(r) if a not in (p, f)]
        order = loops + [p, f]
        # big fused expressions keep more tiles live at once: narrower tiles keep them inside SBUF
        nops = count_ops(x)
        free = EW_FREE if nops <= 12 else (EW_FREE // 2 if nops <= 24 else EW_FREE // 4)
        rl = rows.row_leaves(x)
        if rl:
            bad = [v for v in rl if not rows.inline_ok(self.cg, v, f, shape)]
            if not bad and (not rows.wide_rows_fit(self.cg, x) if shape[f] > rows.ROW_MAX else
                            rows.inline_tiles(self.cg, x) * shape[f] * 4 > rows.ROW_SBUF_BUDGET):
                bad = list(rl)                   # whole rows of this many tiles would not fit SBUF
            if bad:
                # some row reductions cannot be computed inside this kernel's tiles: materialise them
                keep = {v.base for v in rl if v not in bad and v.base not in {b.base for b in bad}}
                return self.elementwise(rows.resolve(self.cg, x0, keep=keep, mm=False), out0)
            free = shape[f]                  # whole rows per tile: the reductions run inline
        mmctx = None
        if mmfuse.reachable(self.cg, x):
            # matmuls evaluated inside this kernel's row tiles (penguin/mmfuse.py), or resolved first
            mmctx = mmfuse.prepare(self, x, shape, p, f)
            if mmctx is None:
                return self.elementwise(mmfuse.resolve(self.cg, x0), out0)
            free = shape[f]
        axes = [Axis(shape[a], 1, "l") for a in loops] + [Axis(shape[p], choose_tile(shape[p], PMAX), "p"),
                                                           Axis(shape[f], choose_tile(shape[f], free), "f")]

        # rows longer than ROW_MAX reduced inline (an RMSNorm): bf16 rows read as loaded, the store
        # triggered by ACT (it starts the next tile anyway) so SP runs ahead with the next loads
        wide = bool(rl) and mmctx is None and shape[f] > rows.ROW_MAX

        def body(starts, sizes):
            st = [None] * r
            sz = [None] * r
            for a, s0, n in zip(order, starts, sizes):
                st[a], sz[a] = s0, n
            te = TileEval(self.cg, Space(p, f, st, sz))
            if mmctx is not None:
                mmfuse.TileScope(mmctx).register(te)
            elif wide:
                te.widen_in_place = True
            v = te.value(x)
            if v.kind == "tile" and v.ap.dtype != v.dtype:     # the result itself widened: a real copy
                w = te.new_tile(v.dtype, "wide")
                self.em.inst("tensor_copy", "DVE", [w.ap], [v.ap])
                v = w
            self._store(te, v, out, engine="ACT" if wide else None)

        # row tiles that evaluate matmuls inline: a few are emitted one by one (mmfuse.UNROLL_TILES)
        unroll = 1
        if mmctx is not None and len(axes) == 2:
            unroll = mmfuse.UNROLL_TILES
            mmctx.share = axes[1].extent <= axes[1].tile and -(-axes[0].extent // axes[0].tile) <= unroll
            mmctx.max_pn = min(axes[0].extent, axes[0].tile)
        self.em.nest(axes, body, unroll=unroll)

    # -- reduce ----------------------------------------------------------------------------
    def op_reduce(self, op, args, outs):
        n = len(outs)
        vals, inits = args[:n], args[n:]
        red = op.attrs.get("reducer")
        dims = sorted(op.attrs["dimensions"])
        if n == 1 and red in REDUCE_ALU or (n == 1 and red in ("and", "or")):
            pass
        elif n == 2 and red in ("argmax", "argmin", "argmax_nonan", "argmin_nonan"):
            pass
        else:
            raise cannot_lower(op, "reduction with reducer '%s' over %d operands" % (red, n))
        for init in inits:
            if not isinstance(init, Splat):
                raise cannot_lower(op, "reduction with a non-constant initial value")
        targets = [self.cg.target_for(o.name) for o in outs]
        self.reduce_into(vals, inits, dims, red, targets, op)
        return [View.contiguous(t.base, o.dtype, o.shape) for t, o in zip(targets, outs)]

    def reduce_into(self, vals, inits, dims, red, targets, op):
        """Reduce expressions vals over dims into the HBM views targets (see module doc)."""
        from neuronxcc.starfish.penguin import rows
        vals = [rows.resolve(self.cg, v) for v in vals]
        n = len(vals)
        src_shape = vals[0].shape
        kept = [d for d in range(len(src_shape)) if d not in dims]
        if not dims or all(src_shape[d] == 1 for d in dims):
            for v, t, init in zip(vals, targets, inits):
                x = apply_view(v, lambda w: w.reshape(t.shape))
                if x is None:
                    x = apply_view(self.cg.materialise(v, allow_views=False), lambda w: w.reshape(t.shape))
                self.elementwise(x, t)
            return
        perm = kept + dims
        vals = [apply_view(v, lambda w: w.transpose(perm)) for v in vals]
        # collapse kept and reduced groups separately
        lv = []
        for v in vals:
            lv.extend(leaves(v))
        nk = len(kept)
        pshape = [src_shape[d] for d in perm]
        kshape, _ = collapse(pshape[:nk], [s.strides[:nk] for s in lv] + [t.strides for t in targets])
        rshape, _ = collapse(pshape[nk:], [s.strides[nk:] for s in lv])
        kshape = tuple(kshape) or (1,)
        rshape = tuple(rshape) or (1,)
        full = kshape + rshape
        vals = [apply_view(v, lambda w: w.reshape(full)) for v in vals]
        targets = [t.reshape(kshape) for t in targets]
        if any(v is None for v in vals) or any(t is None for t in targets):
            raise cannot_lower(op, "internal: reduce view collapse failed")
        if self._two_stage(vals, inits, red, targets, kshape, rshape, op):
            return
        K = len(kshape)
        p = max(range(K), key=lambda a: (min(kshape[a], PMAX), a))
        f = len(full) - 1
        outer_loops = [a for a in range(K) if a != p]
        inner_loops = [a for a in range(K, len(full) - 1)]
        outer_axes = [Axis(full[a], 1, "l") for a in outer_loops] + [Axis(full[p], choose_tile(full[p], PMAX), "p")]
        inner_axes = [Axis(full[a], 1, "r") for a in inner_loops] + [Axis(full[f], choose_tile(full[f], RED_FREE), "f")]
        outer_order = outer_loops + [p]
        inner_order = inner_loops + [f]
        acc_dt = [self._acc_dtype(v.dtype, red) for v in vals]
        em = self.em

        def outer(starts, sizes):
            st = [self.P.const(0)] * len(full)
            sz = [1] * len(full)
            for a, s0, nn in zip(outer_order, starts, sizes):
                st[a], sz[a] = s0, nn
            pn = sz[p]
            accs = []
            for k, dt in enumerate(acc_dt):
                mname = em.sbuf("acc", pn, 1, dt)
                accs.append(TV("tile", dt, ap=em.chip(mname, dt, pn, [[1, 1]])))
            eng = "POOL" if bdt.is_int(acc_dt[0]) else "DVE"
            init_vals = [inits[k].value for k in range(n)]
            for a, iv in zip(accs, init_vals):
                em.inst("memset", "POOL" if bdt.is_int(a.dtype) else "DVE", [a.ap], [], value=_imm(iv, a.dtype))

            def inner(istarts, isizes):
                st2, sz2 = list(st), list(sz)
                for a, s0, nn in zip(inner_order, istarts, isizes):
                    st2[a], sz2[a] = s0, nn
                te = TileEval(self.cg, Space(p, f, st2, sz2))
                if n == 1:
                    self._reduce_step(te, red, te.value(vals[0]), accs[0], pn)
                else:
                    argreduce.step(self, te, red, te.value(vals[0]), te.value(vals[1]), accs, pn)

            em.nest(inner_axes, inner)
            te = TileEval(self.cg, Space(p, None, st, [sz[a] if a != f else 1 for a in range(len(full))]))
            for a, t in zip(accs, targets):
                self._store(te, a, t)

        em.nest(outer_axes, outer)

    def _two_stage(self, vals, inits, red, targets, kshape, rshape, op):
        """Few kept elements, many reduced: put 128 slices of the reduced axis on the partitions
        (partial results), then reduce the partials."""
        if len(vals) != 1 or red not in IDENTITY:
            return False
        ksize, rsize = _prod(kshape), _prod(rshape)
        if ksize >= 32 or rsize < 2048:
            return False
        nk = len(kshape)
        r0 = rshape[0]
        pr = next((d for d in range(PMAX, 15, -1) if r0 % d == 0), None)
        if pr is None:
            return False
        x = apply_view(vals[0], lambda w: w.split_axis(nk, r0 // pr))
        if x is None:
            return False
        acc_dt = self._acc_dtype(vals[0].dtype, red)
        pshape = tuple(kshape) + (pr,)
        t = self.em.tensor("partial", "scratch", acc_dt, pshape)
        part = View.contiguous(t, acc_dt, pshape)
        ident = Splat(IDENTITY[red] if acc_dt == "float32" else int(IDENTITY[red] if abs(IDENTITY[red]) < 1e30 else
                                                                    (2 ** 31 - 1 if IDENTITY[red] > 0 else -2 ** 31)),
                      acc_dt, ())
        self.reduce_into([x], [ident], list(range(nk + 1, len(x.shape))), red, [part], op)
        self.reduce_into([part], inits, [nk], red, targets, op)
        return True

    def _acc_dtype(self, dt, red):
        dt = onchip_dtype(dt)
        if dt == "bool":
            return "bool"
        if bdt.is_int(dt):
            return "int32" if dt in ("int8", "int16", "int32") else dt
        return "float32"

    def _reduce_step(self, te, red, t, acc, pn):
        em = self.em
        t = te.materialise(t)
        is_int = bdt.is_int(acc.dtype)
        if red in ("and", "or"):
            alu = ("logical_" if acc.dtype == "bool" else "bitwise_") + red
            ralu = alu
        else:
            alu = REDUCE_ALU[red]
            ralu = alu
        eng = "POOL" if is_int else "DVE"
        mname = em.sbuf("red", pn, 1, acc.dtype)
        r = em.chip(mname, acc.dtype, pn, [[1, 1]])
        em.inst("tensor_reduce", eng, [r], [t.ap], op=ralu, axes=1)
        em.inst("tensor_tensor", eng, [acc.ap], [acc.ap, r], op=alu)

    # -- dot -----------------------------------------------------------------------------
    def op_dot(self, op, args, outs):
        from neuronxcc.starfish.penguin import attention
        plan = attention.match(self.cg, op)
        if plan is not None:
            attention.lower(self, plan)
            return [None]
        res = mmfuse.lower_dot(self, op, args, outs)
        if res is not None:
            return res
        a = op.attrs
        lb, lc = list(a["lhs_batch_dims"]), list(a["lhs_contracting_dims"])
        rb, rc = list(a["rhs_batch_dims"]), list(a["rhs_contracting_dims"])
        L = self.cg.materialise(args[0])
        R = self.cg.materialise(args[1])
        lf = [d for d in range(len(L.shape)) if d not in lb + lc]
        rf = [d for d in range(len(R.shape)) if d not in rb + rc]
        Lp = L.transpose(lb + lf + lc)
        Rp = R.transpose(rb + rc + rf)
        B = [L.shape[d] for d in lb]
        M = _prod(L.shape[d] for d in lf)
        K = _prod(L.shape[d] for d in lc)
        N = _prod(R.shape[d] for d in rf)
        L3 = Lp.reshape(tuple(B) + (M, K))
        if L3 is None:
            L3 = self.cg.materialise(Lp, allow_views=False).reshape(tuple(B) + (M, K))
        R3 = Rp.reshape(tuple(B) + (K, N))
        if R3 is None:
            R3 = self.cg.materialise(Rp, allow_views=False).reshape(tuple(B) + (K, N))
        epi = self.cg.plan_epilogue(op)
        if epi is not None:
            sink, expr, leaf = epi
            from neuronxcc.starfish.penguin import rows
            expr = rows.resolve(self.cg, expr)
            memo = {}
            e3 = apply_view(expr, lambda w: w.reshape(tuple(B) + (M, N)), memo)
            l3 = memo.get(id(leaf))
            if e3 is not None and l3 is not None:
                sv = self.cg.g.values[sink]
                out = self.cg.target_for(sink)
                O3 = out.reshape(tuple(B) + (M, N))
                self.cg.commit_epilogue(op, sink)
                self.matmul_terms([(L3, R3, K)], O3, len(B), M, N, epilogue=(e3, l3, outs[0].dtype))
                self.cg.env[sink] = View.contiguous(out.base, sv.dtype, sv.shape)
                return [None]
        out = self.cg.target_for(outs[0].name)
        O3 = out.reshape(tuple(B) + (M, N))
        self.matmul(L3, R3, O3, len(B), M, K, N)
        return [View.contiguous(out.base, outs[0].dtype, outs[0].shape)]

    def matmul(self, L, R, O, nb, M, K, N):
        self.matmul_terms([(L, R, K)], O, nb, M, N)

    def matmul_terms(self, terms, O, nb, M, N, epilogue=None):
        """O[b, m, n] = sum over terms (L, R, K) of sum_k L[b, m, k] R[b, k, n] (one PSUM group).

        epilogue = (expr, leaf, dot dtype): O gets expr evaluated on the tile instead, with the
        evicted product tile standing for ``leaf`` (fused bias/activation chains).

        Reuse: the moving side R of one N tile (all of K, every term) is loaded into SBUF once per
        N tile in one large DMA and stays resident while the M loop streams the stationary side L^T
        through it in K groups (LT_GROUPS tiles per DMA); so R crosses HBM once and L once per N
        tile. Each M step holds two half-blocks with their own PSUM tile and DMAs (on different
        queues), so one half's eviction and loads overlap the other half's matmuls. The N tile is the largest that fits the SBUF budget (``_res_budget``); when
        even a narrow one does not fit (huge K), both sides stream per output tile instead."""
        cdt = self._mm_dtype(terms)
        if cdt == "float32" and self.cg.cast.matmult:
            cdt = self.cg.cast.dtype       # --auto-cast: the operand DMAs write the narrow type
            self.cg.cast.count("matmult")
        isz = bdt.itemsize(cdt)
        if matvec.wants_stream(M, nb, terms, N) and matvec.stream(self, terms[0], O, M, N, epilogue, cdt):
            return
        layout = gemm.plan(self, terms[0], M, N, nb, cdt) if len(terms) == 1 else None
        if layout is not None:       # R fits whole per N super-tile: each operand crosses HBM once
            gemm.lower(self, terms[0], O, M, N, epilogue, cdt, layout)
            return
        kcols = sum(-(-K // _k_tile(K)) for L, R, K in terms)
        ncmax = self._res_budget() // max(1, kcols * isz)
        if ncmax < min(N, MM_MIN_N):
            return self._matmul_streamed(terms, O, nb, M, N, epilogue, cdt)
        em = self.em
        P = self.P
        # two M half-blocks per M step, each with its own PSUM tile, L^T buffers and DMA queues: one
        # half's eviction and loads overlap the other half's matmuls
        split = M > PMAX
        TM = choose_tile(M, 2 * PMAX) if split else M
        # an N tile of up to MM_WIDE_BANKS PSUM banks: each stationary L^T tile feeds one matmul per
        # bank, so L crosses HBM once per (wider) N tile (the Llama FFN's x^T: 28 -> 14 times)
        bank_n = self.em.tm.psum_bank_bytes // 4
        TN = choose_tile(N, min(bank_n * (MM_WIDE_BANKS if N > bank_n else 1), ncmax))
        if splitk.wants(self, terms, nb, M, N, TN, isz):     # long K: two halves of 512-wide tiles
            return splitk.lower(self, terms, O, M, N, epilogue)
        offs = _offs(P)
        # L^T transposed once into HBM when the N tiles would each transpose it again (lhs_pre.py)
        mb = TM // 2 if split and TM % 2 == 0 and M % TM == 0 else (M if not split else None)
        pre = [lhs_pre.prepare(self, L, M, K, cdt, mb) if lhs_pre.wants(self, L, nb, M, K, N, TN, mb) else None
               for L, R, K in terms]

        def body_n(starts, sizes):
            bs = starts[:nb]
            n0, nn = starts[nb], sizes[nb]
            res = []
            for (L, R, K), lt in zip(terms, pre):
                TK = _k_tile(K)
                G = _k_group(K // TK, cdt, em.tm)
                rc = reschunk.plan(K, TK, G, nn, isz, len(terms)) if lt else None
                res.append(reschunk.load(self, R, nb, bs, n0, nn, K, TK, G, rc, cdt) if rc else
                           self.load_resident(R, nb, bs, n0, nn, K, cdt))
            em.nest([Axis(M, TM, "m")], lambda st, sz: body_m(st, sz, res), starts, sizes)

        def body_m(starts, sizes, res):
            m0, ms = starts[nb + 1], sizes[nb + 1]
            if split and ms >= 2:
                h = ms // 2
                half(starts, sizes, res, m0, h)
                half(starts, sizes, res, m0 + h, ms - h)
            else:
                half(starts, sizes, res, m0, ms)

        def half(starts, sizes, res, m0, mn):
            bs = starts[:nb]
            n0, nn = starts[nb], sizes[nb]
            # one PSUM tile per bank of the N tile: (AP, first column, columns)
            banks = []
            for c0 in range(0, nn, bank_n):
                cn = min(bank_n, nn - c0)
                banks.append((em.chip(em.psum("ps", mn, cn), "float32", mn, [[1, cn]]), c0, cn))
            first = [True]

            def kstep(L, rr, k0, t0, kn, g=1, lt=None, buf=None):
                """g consecutive K tiles of kn rows from tile t0: L^T in one DMA, g matmuls."""
                if lt is not None:
                    st = lhs_pre.load(self, lt, m0, t0, kn, g, mn, cdt, buf)
                else:
                    st = self._lhsT(L, nb, offs(L, bs + [m0, k0]), kn, g, mn, cdt)
                for j in range(g):
                    mv = (reschunk.operand(em, rr, t0 + j, kn, nn, cdt) if isinstance(rr, tuple)
                          else em.chip(rr, cdt, kn, [[1, nn]], offset=(t0 + j) * nn))
                    stj = em.chip(st, cdt, kn, [[1, mn]], offset=j * mn)
                    for ps_ap, c0, cn in banks:      # the same stationary tile for every bank
                        mvb = mv if cn == nn else em.chip(mv.target, cdt, kn, [[1, cn]], offset=mv.offset + c0)
                        em.inst("matmul", "PE", [ps_ap], [stj, mvb], psum_zero=first[0])
                    first[0] = False

            for (L, R, K), rr, lt in zip(terms, res, pre):
                TK = _k_tile(K)
                nfull, rem = divmod(K, TK)
                G = _k_group(nfull, cdt, em.tm)
                ngroups, left = divmod(nfull, G) if nfull else (0, 0)
                if isinstance(rr, tuple) and not reschunk.looped(nfull, G, cdt):   # a buffer per chunk (reschunk.py)
                    bufs = [em.sbuf("lhsT", TK, G * mn, cdt) for _ in range(min(2, ngroups))]
                    for q in range(ngroups):     # L^T groups alternate between two buffers
                        kstep(L, rr, P.const(q * G * TK), P.const(q * G), TK, G, lt, bufs[q % 2])
                    continue
                if lt is not None and ngroups >= 2:      # L^T groups over rotating buffers (lhs_pre.py)
                    lhs_pre.stream(self, lambda k0, t0, buf: kstep(L, rr, k0, t0, TK, G, lt, buf), TK, G, ngroups,
                                   mn, cdt)
                else:
                    if ngroups >= 1:
                        kstep(L, rr, P.const(0), P.const(0), TK, G, lt)
                    if ngroups >= 2:
                        kv = em.fresh("k")
                        with em.b.loop(kv, 1, ngroups, 1) as iv:
                            kstep(L, rr, iv * (G * TK), iv * G, TK, G, lt)
                for j in range(left):
                    t = ngroups * G + j
                    kstep(L, rr, P.const(t * TK), P.const(t), TK, 1, lt)
                if rem:
                    kstep(L, rr, P.const(nfull * TK), P.const(nfull), rem)
            self._mm_evict(O, nb, bs, m0, n0, mn, nn, banks[0][0] if len(banks) == 1 else banks, epilogue)

        per_step = respipe.plan(self, terms, pre, nb, M, N, TM, TN, isz)
        if per_step is not None:     # N tiles in pairs, the next R loaded inside the M loop (respipe.py)
            respipe.lower(self, terms[0][1], terms[0][2], N, TN, M, TM, cdt, per_step, body_m)
            return
        axes = [Axis(O.shape[k], 1, "b") for k in range(nb)] + [Axis(N, TN, "n")]
        em.nest(axes, body_n)

    def _lhsT(self, L, nb, off, kn, g, mn, cdt):
        """The stationary side of g consecutive K tiles: an SBUF tile [kn, g*mn] whose column block j
        is L[m0:m0+mn, k0+j*kn : k0+(j+1)*kn]^T. When L is contiguous along K (a row-major L), the
        transposing DMA would move one element per descriptor; instead L is loaded as it lies
        ([mn rows, g*kn contiguous], one descriptor per row) and transposed on the PE into PSUM
        (one 2 KiB bank, reused group after group of transposes), then evicted to SBUF by ACT or
        DVE, whichever has less queued."""
        em = self.em
        sk_l, sm_l = L.strides[nb + 1], L.strides[nb]
        st = em.sbuf("lhsT", kn, g * mn, cdt)
        if not (sk_l == 1 and sm_l != 1 and mn > 1):
            pat = [[sk_l, kn], [kn * sk_l, g], [sm_l, mn]] if g > 1 else [[sk_l, kn], [sm_l, mn]]
            em.dma(em.chip(st, cdt, kn, [[1, g * mn]]), em.hbm(L.base, off, pat))
            return st
        nat = em.sbuf("lhs", mn, g * kn, cdt)
        em.dma(em.chip(nat, cdt, mn, [[1, g * kn]]), em.hbm(L.base, off, [[sm_l, mn], [1, g * kn]]))
        per = max(1, (self.em.tm.psum_bank_bytes // 4) // mn)
        ps = em.psum("psT", kn, min(per, g) * mn)       # one bank, reused by each group in turn
        for j0 in range(0, g, per):
            c = min(per, g - j0)
            for j in range(c):
                em.inst("transpose", "PE", [em.chip(ps, "float32", kn, [[1, mn]], offset=j * mn)],
                        [em.chip(nat, cdt, mn, [[1, kn]], offset=(j0 + j) * kn)])
            dst = em.chip(st, cdt, kn, [[1, c * mn]], offset=j0 * mn)
            src = em.chip(ps, "float32", kn, [[1, c * mn]])
            load = em.engine_load
            if load["ACT"] <= load["DVE"] * em.ghz("DVE") / em.ghz("ACT"):
                em.inst("activation", "ACT", [dst], [src], func="identity")
            else:
                em.inst("tensor_copy", "DVE", [dst], [src])
        return st

    def load_resident(self, R, nb, bs, n0, nn, K, cdt):
        """The moving side R[b, :, n0:n0+nn] (all of K) in one SBUF tile (penguin/resident.py)."""
        return resident.load(self, R, nb, bs, n0, nn, K, cdt)

    def _evict_copy(self, dst, src):
        """PSUM -> SBUF copy on ACT or DVE, whichever has less queued."""
        em = self.em
        load = em.engine_load
        if load["ACT"] <= load["DVE"] * em.ghz("DVE") / em.ghz("ACT"):
            em.inst("activation", "ACT", [dst], [src], func="identity")
        else:
            em.inst("tensor_copy", "DVE", [dst], [src])

    @staticmethod
    def k_tile(K):
        """The K tile of matmuls (penguin/attention.py uses the same tiling)."""
        return _k_tile(K)

    def offsets(self):
        """offs(view, idx) -> the HBM element offset of view[idx] (pelican Expr)."""
        return _offs(self.P)

    def _res_budget(self):
        """SBUF bytes per partition for resident matmul operands: what is left of the usable SBUF
        after the streamed tiles, halved so that walrus can still double-buffer (rotate) them."""
        return (self.em.tm.sbuf_usable_bytes - MM_STREAM_RESERVE) // 2

    @staticmethod
    def _mm_dtype(terms):
        lowp = ("bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "tfloat32")
        dts = set([L.dtype for L, R, K in terms] + [R.dtype for L, R, K in terms])
        return dts.pop() if len(dts) == 1 and terms[0][0].dtype in lowp else "float32"

    def _mm_evict(self, O, nb, bs, m0, n0, mn, nn, ps_ap, epilogue):
        """PSUM tile -> SBUF (cast to the result type) -> O, or through the fused epilogue. PS_AP: the
        PSUM tile's AP, or [(AP, first column, columns)] of a tile spread over several banks."""
        em = self.em
        odt = onchip_dtype(epilogue[2] if epilogue else em.m.tensors[O.base].dtype)
        ev = em.sbuf("evict", mn, nn, odt)
        ev_ap = em.chip(ev, odt, mn, [[1, nn]])
        eng = "DVE" if bdt.is_int(odt) else "ACT"
        for src, c0, cn in (ps_ap if isinstance(ps_ap, list) else [(ps_ap, 0, nn)]):
            dst = ev_ap if cn == nn else em.chip(ev, odt, mn, [[1, cn]], offset=c0)
            if eng == "DVE":
                em.inst("tensor_copy", "DVE", [dst], [src])
            else:
                em.inst("activation", "ACT", [dst], [src], func="identity")
        # the epilogue's loads and the store are triggered by the evicting engine: in SP's in-order
        # stream a store waiting for this tile would hold back the next tile's L^T loads
        prev, em.dma_engine = em.dma_engine, eng
        try:
            if epilogue:
                expr, leaf, _ = epilogue
                te = TileEval(self.cg, Space(nb, nb + 1, list(bs) + [m0, n0], [1] * nb + [mn, nn]))
                te.memo[id(leaf)] = TV("tile", odt, ap=ev_ap)
                self._store(te, te.value(expr), O)
                return
            em.dma(em.hbm(O.base, _offs(self.P)(O, bs + [m0, n0]), [[O.strides[nb], mn], [O.strides[nb + 1], nn]]),
                   ev_ap)
        finally:
            em.dma_engine = prev

    def _matmul_streamed(self, terms, O, nb, M, N, epilogue, cdt):
        """Fallback without reuse (K too large for a resident R tile): per output tile, both sides
        stream through SBUF in K groups."""
        em = self.em
        P = self.P
        TM = choose_tile(M, PMAX)
        TN = choose_tile(N, 512)
        axes = [Axis(O.shape[k], 1, "b") for k in range(nb)] + [Axis(M, TM, "m"), Axis(N, TN, "n")]
        offs = _offs(P)

        def body(starts, sizes):
            bs = starts[:nb]
            m0, n0 = starts[nb], starts[nb + 1]
            mn, nn = sizes[nb], sizes[nb + 1]
            ps = em.psum("ps", mn, nn)
            ps_ap = em.chip(ps, "float32", mn, [[1, nn]])
            first = [True]

            def kstep(L, R, k0, kn, g=1):
                """g consecutive K tiles of kn rows: one DMA per operand, g matmuls."""
                st = self._lhsT(L, nb, offs(L, bs + [m0, k0]), kn, g, mn, cdt)
                mv = em.sbuf("rhs", kn, g * nn, cdt)
                sk_r = R.strides[nb]
                em.dma(em.chip(mv, cdt, kn, [[1, g * nn]]),
                       em.hbm(R.base, offs(R, bs + [k0, n0]), [[sk_r, kn], [kn * sk_r, g], [R.strides[nb + 1], nn]]
                              if g > 1 else [[sk_r, kn], [R.strides[nb + 1], nn]]))
                for j in range(g):
                    em.inst("matmul", "PE", [ps_ap], [em.chip(st, cdt, kn, [[1, mn]], offset=j * mn),
                                                      em.chip(mv, cdt, kn, [[1, nn]], offset=j * nn)],
                            psum_zero=first[0])
                    first[0] = False

            for L, R, K in terms:
                TK = _k_tile(K)
                nfull, rem = divmod(K, TK)
                G = next(g for g in (K_GROUP, 2, 1) if nfull % g == 0) if nfull else 1
                ngroups, left = divmod(nfull, G) if nfull else (0, 0)
                if ngroups >= 1:
                    kstep(L, R, P.const(0), TK, G)
                if ngroups >= 2:
                    kv = em.fresh("k")
                    with em.b.loop(kv, 1, ngroups, 1) as iv:
                        kstep(L, R, iv * (G * TK), TK, G)
                for j in range(left):
                    kstep(L, R, P.const((ngroups * G + j) * TK), TK)
                if rem:
                    kstep(L, R, P.const(nfull * TK), rem)
            self._mm_evict(O, nb, bs, m0, n0, mn, nn, ps_ap, epilogue)

        em.nest(axes, body)

    # -- shape ops with data movement -------------------------------------------------
    def op_concatenate(self, op, args, outs):
        out = self.cg.target_for(outs[0].name)
        if concat.lower(self, op, args, out):      # along a short last axis, built on chip
            return [out]
        d = op.attrs["dimension"]
        pos = 0
        for x in args:
            n = x.shape[d]
            starts = [0] * len(out.shape)
            limits = list(out.shape)
            starts[d], limits[d] = pos, pos + n
            self.elementwise(x, out.slice(starts, limits, [1] * len(out.shape)))
            pos += n
        return [out]

    def op_pad(self, op, args, outs):
        return pad.op_pad(self, op, args, outs)


def _offs(P):
    """offs(view, idx) -> the HBM element offset (pelican Expr) of view[idx]."""
    def offs(view, idx_exprs):
        e = P.const(view.offset) if isinstance(view.offset, int) else view.offset
        for ex, st in zip(idx_exprs, view.strides):
            if st:
                e = e + ex * st
        return e
    return offs


def _k_group(nfull, cdt, tm):
    """K tiles per L^T DMA: the largest of LT_GROUPS that divides nfull, leaves at least two groups
    (so the K loop stays a loop) and whose matmuls (128 x 512 each) take at most LT_GROUP_CYCLES on
    the PE: 16 tiles for bf16/fp8, 4 for fp32 (the PE's fp32 slowdown), the same at every size."""
    per_tile = 512 * (tm.fp32_matmul_slowdown if cdt == "float32" else 1)
    fits = [g for g in LT_GROUPS if g * per_tile <= LT_GROUP_CYCLES and nfull % g == 0]
    two = [g for g in fits if nfull // g >= 2]
    return (two or fits or [1])[0]


def _k_tile(K):
    """K tile: prefer a divisor of K in [64, 128] that leaves a multiple of K_GROUP tiles, so the
    K loop moves K_GROUP tiles per DMA without a peeled remainder."""
    if K <= PMAX:
        return K
    if K % PMAX == 0 and K // PMAX < K_GROUP:
        return PMAX              # a few full-height tiles: half-height ones double the PE's passes
    for d in range(PMAX, PMAX // 2 - 1, -1):
        if K % d == 0 and (K // d) % K_GROUP == 0:
            return d
    return choose_tile(K, PMAX)


def _prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def _imm(v, dtype):
    if dtype == "bool" or bdt.is_int(dtype):
        return int(v)
    return float(v)
