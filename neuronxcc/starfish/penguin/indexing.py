"""Data-dependent addressing: dynamic-slice, dynamic-update-slice, gather, scatter.

Start indices are read at run time into sequencer registers with
``register_load`` (which clamps them to [0, dim - size] exactly like XLA
clamps dynamic-slice / gather starts) and used inside pelican offsets of the
access patterns, so no address is ever computed on the host.

* dynamic-slice: a view whose offset is a register expression (lazy; the
  consumer's DMA reads through it).
* dynamic-update-slice: copy the operand into the result, then copy the
  update into the register-offset sub-view of the result.
* gather: a loop over the batch positions of the result; per position the
  start vector is loaded into registers and one HBM->HBM DMA moves the slice.
* scatter: the operands are copied into the results, then a loop over the
  update positions; ``replace`` is one DMA per window, combining scatters
  read-modify-write the windows through SBUF, with an ALU op (add/mul/max/min)
  or the combiner computation itself (any elementwise computation, variadic
  scatters too) evaluated on the window tiles. Out-of-bounds windows are
  written back unchanged (XLA skips them).
"""
import numpy as np

from neuronxcc.starfish.penguin.emit import Axis, choose_tile
from neuronxcc.starfish.penguin.expr import Node, apply_view
from neuronxcc.errors import cannot_lower as _cannot_lower
from neuronxcc.starfish.penguin.tiles import cannot_lower, onchip_dtype
from neuronxcc.starfish.penguin.views import Splat, View
from neuronxcc.starfish.penguin.scattersplit import MAX_WINDOW   # elements of one scatter window

COMBINE = {"add": "add", "mul": "mult", "max": "max", "min": "min"}


class IndexingMixin:
    # -- registers ---------------------------------------------------------------------
    def register_from(self, x, lo, hi, offset=None):
        """A pelican Expr holding clamp(x, lo, hi) for a scalar value x (register or constant)."""
        P = self.P
        if isinstance(x, Splat):
            return P.const(int(min(max(int(x.value), lo), hi)))
        if offset is None:
            v = x if x.dtype == "int32" else Node("convert", [x], {}, "int32", x.shape)
            v = v if isinstance(v, View) and not v.base.startswith("__") else \
                self.cg.materialise(v, allow_views=False)
        else:
            v = x
        t = self.em.m.tensors[v.base]
        if t.dtype != "int32":
            raise _cannot_lower("dynamic index", "", "index operand %s has type %s; only int32 indices are supported"
                               % (v.base, t.dtype))
        off = offset if offset is not None else (v.offset if not isinstance(v.offset, int) else P.const(v.offset))
        name = self.em.fresh("r")
        self.em.inst("register_load", "SP", [], [self.em.hbm(v.base, off, [[1, 1]])], register=name,
                     min=int(lo), max=int(max(lo, hi)))
        return P.var(name)

    # -- dynamic slices --------------------------------------------------------------
    def op_dynamic_slice(self, op, args, outs):
        x, idx = args[0], args[1:]
        sizes = list(op.attrs.get("sizes") or outs[0].shape)
        starts = [self.register_from(i, 0, x.shape[k] - sizes[k]) for k, i in enumerate(idx)]
        fn = lambda v: v.dynamic_slice(starts, sizes)  # noqa: E731
        r = apply_view(x, fn) if not _has_iota(x) else None
        if r is None:
            r = fn(self.cg.materialise(x, allow_views=False))
        return [r]

    def op_dynamic_update_slice(self, op, args, outs):
        x, upd, idx = args[0], args[1], args[2:]
        out = self.cg.target_for(outs[0].name)
        self.elementwise(x, out)
        starts = [self.register_from(i, 0, x.shape[k] - upd.shape[k]) for k, i in enumerate(idx)]
        self.elementwise(upd, out.dynamic_slice(starts, upd.shape))
        return [out]

    # -- gather ------------------------------------------------------------------------------
    def op_gather(self, op, args, outs):
        d = op.attrs["dims"]
        obd = list(d.get("operand_batching_dims") or [])
        sibd = list(d.get("start_indices_batching_dims") or [])
        O = self.cg.materialise(args[0])
        I = self.cg.materialise(args[1] if args[1].dtype == "int32" else
                                Node("convert", [args[1]], {}, "int32", args[1].shape))
        if O.base.startswith("__"):
            O = self.cg.materialise(args[0], allow_views=False)
        if I.base.startswith("__"):
            I = self.cg.materialise(args[1], allow_views=False)
        out = self.cg.target_for(outs[0].name)
        offset_dims = list(d["offset_dims"])
        collapsed = list(d["collapsed_slice_dims"])
        sim = list(d["start_index_map"])
        ivd = d["index_vector_dim"]
        sizes = list(d["slice_sizes"])
        out_batch = [k for k in range(len(out.shape)) if k not in offset_dims]
        idx_batch = [k for k in range(len(I.shape)) if k != ivd]
        window_dims = [k for k in range(len(O.shape)) if k not in collapsed and k not in obd]
        if len(window_dims) != len(offset_dims):
            raise cannot_lower(op, "unexpected gather dimension numbers")
        if any(out.shape[k] == 0 for k in range(len(out.shape))):
            return [out]
        em = self.em
        P = self.P
        W = 1
        for k in window_dims:
            W *= sizes[k]
        if (len(sim) == 1 and not obd and sim[0] in collapsed and out_batch and W <= MAX_WINDOW
                and isinstance(I.offset, int) and isinstance(O.offset, int)):
            self._row_gather(O, I, out, sim[0], sizes, window_dims, offset_dims, out_batch, idx_batch, ivd, W)
            return [out]
        axes = [Axis(out.shape[k], 1, "g") for k in out_batch]

        def body(starts, _sizes):
            regs = []
            for j, od in enumerate(sim):
                ioff = P.const(I.offset) if isinstance(I.offset, int) else I.offset
                for ib, s0 in zip(idx_batch, starts):
                    ioff = ioff + s0 * I.strides[ib]
                if ivd < len(I.shape):
                    ioff = ioff + j * I.strides[ivd]
                regs.append(self.register_from(I, 0, O.shape[od] - sizes[od], offset=ioff))
            src_off = P.const(O.offset) if isinstance(O.offset, int) else O.offset
            for od, r in zip(sim, regs):
                src_off = src_off + r * O.strides[od]
            for ob_, sb_ in zip(obd, sibd):
                src_off = src_off + starts[idx_batch.index(sb_)] * O.strides[ob_]
            dst_off = P.const(out.offset)
            for ob, s0 in zip(out_batch, starts):
                dst_off = dst_off + s0 * out.strides[ob]
            src_pat = [[O.strides[k], sizes[k]] for k in window_dims] or [[1, 1]]
            dst_pat = [[out.strides[k], out.shape[k]] for k in offset_dims] or [[1, 1]]
            em.dma(em.hbm(out.base, dst_off, dst_pat), em.hbm(O.base, src_off, src_pat))

        em.nest(axes, body)
        return [out]

    def _row_gather(self, O, I, out, od, sizes, window_dims, offset_dims, out_batch, idx_batch, ivd, W):
        """Embedding-style gather: up to 128 rows per indirect DMA (dma_gather), one index per partition."""
        em = self.em
        P = self.P
        last = len(out_batch) - 1
        axes = [Axis(out.shape[k], 1, "g") for k in out_batch[:-1]] + \
            [Axis(out.shape[out_batch[-1]], choose_tile(out.shape[out_batch[-1]], 128), "gp")]
        odt = onchip_dtype(em.m.tensors[O.base].dtype)

        def body(starts, sizes_):
            pn = sizes_[last]
            ioff = P.const(I.offset)
            for ib, s0 in zip(idx_batch, starts):
                ioff = ioff + s0 * I.strides[ib]
            idx = em.chip(em.sbuf("gidx", pn, 1, "int32"), "int32", pn, [[1, 1]])
            em.dma(idx, em.hbm(I.base, ioff, [[I.strides[idx_batch[last]], pn], [1, 1]]))
            rows = em.chip(em.sbuf("grow", pn, W, odt), odt, pn, [[1, W]])
            src_pat = [[O.strides[k], sizes[k]] for k in window_dims] or [[1, 1]]
            em.inst("dma_gather", "SP", [rows], [em.hbm(O.base, P.const(O.offset), src_pat), idx],
                    queue=em.next_queue(), index_stride=int(O.strides[od]), index_min=0,
                    index_max=int(O.shape[od] - sizes[od]))
            dst_off = P.const(out.offset)
            for ob, s0 in zip(out_batch, starts):
                dst_off = dst_off + s0 * out.strides[ob]
            dst_pat = [[out.strides[out_batch[-1]], pn]] + [[out.strides[k], out.shape[k]] for k in offset_dims]
            em.dma(em.hbm(out.base, dst_off, dst_pat), rows)

        em.nest(axes, body)

    # -- scatter -----------------------------------------------------------------------------
    def op_scatter(self, op, args, outs):
        """Scatter of N operands (variadic) sharing one index array; the combiner is replace, an ALU
        op (COMBINE) or any computation of elementwise ops (attrs["combiner"], a Penguin region over
        scalars evaluated on the window tiles)."""
        n = len(outs)
        d = op.attrs["dims"]
        ibd = list(d.get("input_batching_dims") or [])
        sibd = list(d.get("scatter_indices_batching_dims") or [])
        kind = op.attrs.get("update_kind")
        region = op.attrs.get("combiner")
        if region is None and (kind != "replace" and kind not in COMBINE or n != 1):
            raise cannot_lower(op, "scatter combiner '%s'" % kind)
        xs, idx, upds = args[:n], args[n], args[n + 1:]
        targets = [self.cg.target_for(o.name) for o in outs]
        for x, t in zip(xs, targets):
            self.elementwise(x, t)
        out = targets[0]
        if idx.dtype != "int32":
            idx = Node("convert", [idx], {}, "int32", idx.shape)
        I = self.cg.materialise(idx)
        if I.base.startswith("__"):
            I = self.cg.materialise(idx, allow_views=False)
        Us = []
        for upd in upds:
            U = self.cg.materialise(upd)
            if U.base.startswith("__"):
                U = self.cg.materialise(upd, allow_views=False)
            Us.append(U)
        U = Us[0]
        uwd = list(d["update_window_dims"])
        iwd = list(d["inserted_window_dims"])
        sdod = list(d["scatter_dims_to_operand_dims"])
        ivd = d["index_vector_dim"]
        upd_scatter = [k for k in range(len(U.shape)) if k not in uwd]
        idx_batch = [k for k in range(len(I.shape)) if k != ivd]
        # operand batching dims (vmapped scatter) take the coordinate of the matching index batch dim
        win_operand_dims = [k for k in range(len(out.shape)) if k not in iwd and k not in ibd]
        wsize = {od: 1 for od in range(len(out.shape))}
        for od, ud in zip(win_operand_dims, uwd):
            wsize[od] = U.shape[ud]
        W = int(np.prod([U.shape[k] for k in uwd])) if uwd else 1
        if W > MAX_WINDOW // max(1, n):
            raise cannot_lower(op, "scatter window of %d elements" % W)
        if any(nn == 0 for nn in U.shape):
            return targets
        em = self.em
        P = self.P
        axes = [Axis(U.shape[k], 1, "s") for k in upd_scatter]
        odts = [onchip_dtype(t.dtype) for t in targets]
        # XLA skips update windows that fall out of bounds: one vectorised in-bounds flag per
        # update position, tested with If inside the loop
        bshape = tuple(I.shape[k] for k in idx_batch)
        ok = None
        for j, od in enumerate(sdod):
            if ivd < len(I.shape):
                st = [0] * len(I.shape)
                li = list(I.shape)
                st[ivd], li[ivd] = j, j + 1
                comp = I.slice(st, li, [1] * len(I.shape)).reshape(bshape)
            else:
                comp = I
            lo = Node("compare", [comp, Splat(0, "int32", bshape)], {"direction": "GE"}, "bool", bshape)
            hi = Node("compare", [comp, Splat(out.shape[od] - wsize[od], "int32", bshape)], {"direction": "LE"},
                      "bool", bshape)
            both = Node("and", [lo, hi], {}, "bool", bshape)
            ok = both if ok is None else Node("and", [ok, both], {}, "bool", bshape)
        flags = None
        if ok is not None:
            flags = self.cg.materialise(Node("convert", [ok], {}, "int32", bshape), allow_views=False)

        def body(starts, _sizes):
            regs = []
            for j, od in enumerate(sdod):
                ioff = P.const(I.offset)
                for ib, s0 in zip(idx_batch, starts):
                    ioff = ioff + s0 * I.strides[ib]
                if ivd < len(I.shape):
                    ioff = ioff + j * I.strides[ivd]
                regs.append(self.register_from(I, 0, out.shape[od] - wsize[od], offset=ioff))
            dst_offs, srcs = [], []
            for t, Uk in zip(targets, Us):
                dst_off = P.const(t.offset)
                for od, r in zip(sdod, regs):
                    dst_off = dst_off + r * t.strides[od]
                for ob, sb in zip(ibd, sibd):
                    dst_off = dst_off + starts[idx_batch.index(sb)] * t.strides[ob]
                src_off = P.const(Uk.offset)
                for us, s0 in zip(upd_scatter, starts):
                    src_off = src_off + s0 * Uk.strides[us]
                dst_offs.append((dst_off, [[t.strides[k], wsize[k]] for k in win_operand_dims] or [[1, 1]]))
                srcs.append((src_off, [[Uk.strides[k], Uk.shape[k]] for k in uwd] or [[1, 1]]))
            if kind == "replace" and flags is None and region is None:
                em.dma(em.hbm(out.base, *dst_offs[0]), em.hbm(U.base, *srcs[0]))
                return
            # read-modify-write of the windows; an out-of-bounds position writes its window back unchanged
            a_aps, b_aps = [], []
            for t, Uk, odt, (doff, dpat), (soff, spat) in zip(targets, Us, odts, dst_offs, srcs):
                a_ap = em.chip(em.sbuf("sca", 1, W, odt), odt, 1, [[1, W]])
                b_ap = em.chip(em.sbuf("scb", 1, W, odt), odt, 1, [[1, W]])
                em.dma(a_ap, em.hbm(t.base, doff, dpat))
                em.dma(b_ap, em.hbm(Uk.base, soff, spat))
                a_aps.append(a_ap)
                b_aps.append(b_ap)
            if region is not None:
                c_aps = self._combine_region(region, a_aps, b_aps, odts, W, op)
            elif kind == "replace":
                c_aps = b_aps
            else:
                eng = "POOL" if odts[0].startswith("int") or odts[0].startswith("uint") else "DVE"
                c_aps = [em.chip(em.sbuf("scc", 1, W, odts[0]), odts[0], 1, [[1, W]])]
                em.inst("tensor_tensor", eng, c_aps, [a_aps[0], b_aps[0]], op=COMBINE[kind])
            f_ap = None
            if flags is not None:
                foff = P.const(flags.offset)
                for k, s0 in enumerate(starts):
                    foff = foff + s0 * flags.strides[k]
                f_ap = em.chip(em.sbuf("scf", 1, W, "int32"), "int32", 1, [[1, W]])
                em.dma(f_ap, em.hbm(flags.base, foff, [[0, W]]))
            for t, odt, a_ap, c_ap, (doff, dpat) in zip(targets, odts, a_aps, c_aps, dst_offs):
                if f_ap is not None:
                    eng = "POOL" if odt.startswith("int") or odt.startswith("uint") else "DVE"
                    em.inst("select", eng, [a_ap], [f_ap, c_ap, a_ap])
                    c_ap = a_ap
                em.dma(em.hbm(t.base, doff, dpat), c_ap)

        em.nest(axes, body)
        return targets

    def _combine_region(self, region, a_aps, b_aps, odts, W, op):
        """The scatter combiner (a Penguin region over scalars: old values, then updates) evaluated
        on [1, W] window tiles; returns one access pattern per result."""
        from neuronxcc.starfish.penguin import ir
        from neuronxcc.starfish.penguin.tiles import TV, Space, TileEval
        P = self.P
        te = TileEval(self.cg, Space(0, 1, [P.const(0), P.const(0)], [1, W]))
        shape = (1, W)
        env = {}
        for k, (name, ap, dt) in enumerate(zip(region.inputs, a_aps + b_aps, odts + odts)):
            leaf = View("__scatter%d" % k, region.values[name].dtype, shape, [0, 0], 0)
            te.memo[te.key(leaf)] = TV("tile", dt, ap=ap)
            env[name] = leaf
        for rop in region.ops:
            o = region.values[rop.outputs[0]]
            if rop.kind == "constant" and "value" in rop.attrs:
                env[o.name] = Splat(rop.attrs["value"], o.dtype, shape)
            elif rop.kind in ir.ELEMENTWISE:
                env[o.name] = Node(rop.kind, [env[i] for i in rop.inputs], rop.attrs, o.dtype, shape, rop.loc)
            elif rop.kind in ir.VIEWS:
                env[o.name] = env[rop.inputs[0]]
            else:
                raise cannot_lower(op, "scatter combiner using %s" % rop.kind)
        res = []
        for name, dt in zip(region.outputs, odts):
            tv = te.value(env[name])
            if tv.dtype != dt:
                tv = te.cast(tv, dt)
            res.append(te.materialise(tv).ap)
        return res


def _has_iota(x):
    from neuronxcc.starfish.penguin.expr import leaves
    return any(v.base.startswith("__") for v in leaves(x))
