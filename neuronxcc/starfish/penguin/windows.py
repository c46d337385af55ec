"""Windowed ops and the custom-op ops: reduce-window, convolution, cumsum, sort, top-k.

* reduce-window (pooling): the (padded) input is read through one strided
  view per window position; the views are combined by a fused elementwise
  chain of the reducer (window sizes are graph attributes, so the code is
  graph-sized).
* cumulative sums (the reduce-window XLA emits for ``cumsum``): a matmul
  with a triangular 0/1 matrix generated on chip from two iotas - O(1) code
  for any length.
* convolution: one PSUM accumulation group per output tile; every kernel
  window position is a matmul term (input window view x kernel slice), the
  input channels are the contraction (partition) axis.
* sort / top-k: the builtin GpSimd custom ops (``sort_f32`` / ``topk_f32``)
  on rows = partitions, the sorted axis on the free dim.
"""
import itertools

from neuronxcc.starfish.penguin import longsort
from neuronxcc.starfish.penguin.emit import Axis, choose_tile
from neuronxcc.starfish.penguin.expr import Node, apply_view
from neuronxcc.starfish.penguin.hloinst import REDUCER_OP
from neuronxcc.starfish.penguin.tiles import IOTA_BASE, cannot_lower, onchip_dtype
from neuronxcc.starfish.penguin.views import Splat, View

MAX_WINDOW_POSITIONS = 64
GROUP_REDUCE_MAX = 8192       # window positions x group inputs reduced per output element by _conv_group_reduce
IDENTITY = {"add": 0.0, "max": float("-inf"), "min": float("inf"), "mul": 1.0}
CUMSUM_DIRECT_MAX = 4096     # longest axis summed with one (n, n) triangle matmul (64 MiB of fp32)
CUMSUM_BLOCK = 1024          # block of a longer axis: one (B, B) triangle, prefix sums of the block totals
SORT_MAX_ROW = 8192           # three [P, n] fp32/int32 buffers stay well inside one SBUF partition


class WindowMixin:
    # -- reduce-window -------------------------------------------------------------------
    def op_reduce_window(self, op, args, outs):
        if len(outs) != 1:
            raise cannot_lower(op, "variadic reduce-window")
        x, init = args
        red = op.attrs.get("reducer")
        w = op.attrs["window"]
        if red not in REDUCER_OP or not isinstance(init, Splat):
            raise cannot_lower(op, "reduce-window with reducer '%s'" % red)
        o = outs[0]
        r = len(x.shape)
        cum = self._cumsum_axis(w, x.shape, red)
        if cum is not None:
            axis, reverse = cum
            if red == "add" and not o.dtype.startswith("int") and not o.dtype.startswith("uint"):
                return [self.cumsum(x, axis, reverse, o, init)]
            return [self.scan(x, axis, reverse, o, init, red)]
        if any(b != 1 for b in w["base_dilation"]):
            raise cannot_lower(op, "reduce-window with base dilation")
        positions = 1
        for s in w["size"]:
            positions *= s
        if positions > MAX_WINDOW_POSITIONS:
            raise cannot_lower(op, "reduce-window with %d window positions" % positions)
        padded = x
        if any(w["pad_lo"]) or any(w["pad_hi"]):
            shape = tuple(n + lo + hi for n, lo, hi in zip(x.shape, w["pad_lo"], w["pad_hi"]))
            t = self.em.tensor("padwin", "scratch", o.dtype, shape)
            pv = View.contiguous(t, o.dtype, shape)
            # XLA leaves padding out of the reduction (init enters once, below): pad with a value
            # that cannot change it (init itself for max / min, the identity for add / mul)
            fill = init.value if red in ("max", "min") else IDENTITY[red]
            self.elementwise(Splat(fill, o.dtype, shape), pv)
            lim = [lo + n for lo, n in zip(w["pad_lo"], x.shape)]
            self.elementwise(x, pv.slice(w["pad_lo"], lim, [1] * r))
            padded = pv
        acc = None
        for pos in itertools.product(*[range(s) for s in w["size"]]):
            starts = [p * d for p, d in zip(pos, w["window_dilation"])]
            limits = [st + (n - 1) * s + 1 for st, n, s in zip(starts, o.shape, w["stride"])]
            v = apply_view(padded, lambda vv: vv.slice(starts, limits, w["stride"]))
            if v is None:
                padded = self.cg.materialise(padded, allow_views=False)
                v = padded.slice(starts, limits, w["stride"])
            acc = v if acc is None else Node(REDUCER_OP[red], [acc, v], {}, o.dtype, o.shape, op.loc)
        if init.value != IDENTITY[red] and not (red == "add" and init.value == 0):
            acc = Node(REDUCER_OP[red], [acc, Splat(init.value, o.dtype, o.shape)], {}, o.dtype, o.shape, op.loc)
        return [acc]

    def _cumsum_axis(self, w, shape, red):
        """(axis, reverse) when the window is a prefix (or suffix) along one axis, else None."""
        from neuronxcc.starfish.penguin.reductions import prefix_axis
        return prefix_axis(w, shape, red)

    def cumsum(self, x, axis, reverse, o, init):
        n = x.shape[axis]
        r = len(x.shape)
        perm = [k for k in range(r) if k != axis] + [axis]
        xt = apply_view(x, lambda v: v.transpose(perm))
        rows = 1
        for k in perm[:-1]:
            rows *= x.shape[k]
        L = apply_view(xt, lambda v: v.reshape((rows, n)))
        if not isinstance(L, View) or L.base.startswith("__"):
            L = self.cg.materialise(L if L is not None else xt, allow_views=False)
            L = L.reshape((rows, n))
        if n > CUMSUM_DIRECT_MAX:
            res = self._blocked_prefix_sums(L, rows, n, reverse, o.dtype)
            return self._cumsum_result(res, x, perm, o, init)
        # U[k, j] = 1 if k <= j (k >= j for reverse)
        ik = View(IOTA_BASE, "int32", (n, n), (1, 0), 0)
        ij = View(IOTA_BASE, "int32", (n, n), (0, 1), 0)
        cmp = Node("compare", [ik, ij], {"direction": "GE" if reverse else "LE"}, "bool", (n, n))
        u = Node("convert", [cmp], {}, "float32", (n, n))
        tu = self.em.tensor("tri", "scratch", "float32", (n, n))
        U = View.contiguous(tu, "float32", (n, n))
        self.elementwise(u, U)
        t = self.em.tensor("cumsum", "scratch", o.dtype, (rows, n))
        O = View.contiguous(t, o.dtype, (rows, n))
        self.matmul(L, U, O, 0, rows, n, n)
        return self._cumsum_result(O, x, perm, o, init)

    def _cumsum_result(self, O, x, perm, o, init):
        tshape = tuple(x.shape[k] for k in perm)
        inv = [perm.index(k) for k in range(len(perm))]
        res = O.reshape(tshape).transpose(inv)
        if init.value != 0:
            res = Node("add", [res, Splat(init.value, o.dtype, o.shape)], {}, o.dtype, o.shape)
        return res

    def _triangle(self, n):
        """The (n, n) float32 0/1 matrix U[k, j] = (k <= j), generated from two iotas."""
        ik = View(IOTA_BASE, "int32", (n, n), (1, 0), 0)
        ij = View(IOTA_BASE, "int32", (n, n), (0, 1), 0)
        u = Node("convert", [Node("compare", [ik, ij], {"direction": "LE"}, "bool", (n, n))], {}, "float32",
                 (n, n))
        U = View.contiguous(self.em.tensor("tri", "scratch", "float32", (n, n)), "float32", (n, n))
        self.elementwise(u, U)
        return U

    def _blocked_prefix_sums(self, L, rows, n, reverse, odt):
        """Prefix sums of the rows of L (rows, n) over an axis too long for one (n, n) triangle (a
        vocabulary's probabilities in top-p sampling): the row cut into blocks of CUMSUM_BLOCK, each
        block's prefix sums one matmul with the block triangle, then every block shifted by the
        (exclusive) prefix sum of the block totals before it, computed the same way. A suffix sum
        (reverse) is the prefix sum of the reversed row, reversed."""
        B = CUMSUM_BLOCK
        nb = -(-n // B)
        N = nb * B
        X = View.contiguous(self.em.tensor("cumsum_in", "scratch", "float32", (rows, N)), "float32", (rows, N))
        if N != n:
            self.elementwise(Splat(0.0, "float32", (rows, N - n)), X.slice([0, n], [rows, N], [1, 1]))
        src = L.reverse([1]) if reverse else L
        self.elementwise(src if src.dtype == "float32" else Node("convert", [src], {}, "float32", src.shape),
                         X.slice([0, 0], [rows, n], [1, 1]))
        O1 = View.contiguous(self.em.tensor("cumsum_blk", "scratch", "float32", (rows * nb, B)), "float32",
                             (rows * nb, B))
        self.matmul(X.reshape((rows * nb, B)), self._triangle(B), O1, 0, rows * nb, B, B)
        O1 = O1.reshape((rows, nb, B))
        tot = O1.slice([0, 0, B - 1], [rows, nb, B], [1, 1, 1]).reshape((rows, nb))
        if nb > CUMSUM_DIRECT_MAX:
            inc = self._blocked_prefix_sums(tot, rows, nb, False, "float32")
        else:
            inc = View.contiguous(self.em.tensor("cumsum_tot", "scratch", "float32", (rows, nb)), "float32",
                                  (rows, nb))
            self.matmul(tot, self._triangle(nb), inc, 0, rows, nb, nb)
        before = self.cg.materialise(Node("subtract", [inc, tot], {}, "float32", (rows, nb)), allow_views=False)
        shift = before.broadcast((rows, nb, B), (0, 1))
        full = (rows, nb, B)
        O = View.contiguous(self.em.tensor("cumsum", "scratch", odt, (rows, N)), odt, (rows, N))
        s = Node("add", [O1, shift], {}, "float32", full)
        self.elementwise(s if odt == "float32" else Node("convert", [s], {}, odt, full), O.reshape(full))
        res = O.slice([0, 0], [rows, n], [1, 1])
        return res.reverse([1]) if reverse else res

    def scan(self, x, axis, reverse, o, init, red):
        """Sequential scan along `axis`: a loop over the columns with a [P,1] running value on chip."""
        from neuronxcc.starfish.penguin.tiles import REDUCE_ALU
        em = self.em
        src, perm, rows, n = self._rows_view(x, axis)
        t = em.tensor("scan", "scratch", o.dtype, (rows, n))
        O = View.contiguous(t, o.dtype, (rows, n))
        odt = onchip_dtype(o.dtype)
        cdt = odt if odt.startswith("int") or odt.startswith("uint") else "float32"
        eng = "POOL" if cdt != "float32" else "DVE"
        alu = REDUCE_ALU[red]
        P = self.P

        def body(starts, sizes):
            r0, pn = starts[0], sizes[0]
            acc = em.chip(em.sbuf("scan_acc", pn, 1, cdt), cdt, pn, [[1, 1]])
            em.inst("memset", eng, [acc], [], value=init.value if cdt == "float32" else int(init.value))
            base = (P.const(src.offset) if isinstance(src.offset, int) else src.offset) + r0 * src.strides[0]
            jv = em.fresh("j")
            with em.b.loop(jv, 0, n, 1) as j:
                col = (j * -1 + (n - 1)) if reverse else j
                tt = em.chip(em.sbuf("scan_in", pn, 1, cdt), cdt, pn, [[1, 1]])
                em.dma(tt, em.hbm(src.base, base + col * src.strides[1], [[src.strides[0], pn], [1, 1]]))
                em.inst("tensor_tensor", eng, [acc], [acc, tt], op=alu)
                em.dma(em.hbm(t, r0 * n + col, [[n, pn], [1, 1]]), acc)

        em.nest([Axis(rows, choose_tile(rows, 128), "row")], body)
        tshape = tuple(x.shape[k] for k in perm)
        inv = [perm.index(k) for k in range(len(perm))]
        return O.reshape(tshape).transpose(inv)

    # -- convolution -----------------------------------------------------------------
    def _conv_input(self, X, d, w):
        """The conv input as (B, spatial..., C), zero-padded and lhs-dilated into a scratch tensor if needed."""
        sp = list(d["in_spatial"])
        ns = len(sp)
        Xp = X.transpose([d["in_batch"]] + sp + [d["in_feature"]])
        if not (any(w["pad_lo"]) or any(w["pad_hi"]) or any(b != 1 for b in w["base_dilation"])):
            return Xp
        sizes = [(Xp.shape[1 + j] - 1) * w["base_dilation"][j] + 1 + w["pad_lo"][j] + w["pad_hi"][j]
                 for j in range(ns)]
        shape = (Xp.shape[0],) + tuple(sizes) + (Xp.shape[-1],)
        t = self.em.tensor("convpad", "scratch", X.dtype, shape)
        pv = View.contiguous(t, X.dtype, shape)
        self.elementwise(Splat(0, X.dtype, shape), pv)
        starts, limits, steps, src_st, src_li = [0], [shape[0]], [1], [0], [Xp.shape[0]]
        for j in range(ns):
            lo, bd, n = w["pad_lo"][j], w["base_dilation"][j], Xp.shape[1 + j]
            first = 0
            while lo + first * bd < 0:
                first += 1
            last = n
            while last > first and lo + (last - 1) * bd >= sizes[j]:
                last -= 1
            src_st.append(first)
            src_li.append(last)
            starts.append(lo + first * bd)
            limits.append(lo + (last - 1) * bd + 1)
            steps.append(bd)
        starts.append(0)
        limits.append(shape[-1])
        steps.append(1)
        src_st.append(0)
        src_li.append(Xp.shape[-1])
        if all(b_ > a_ for a_, b_ in zip(src_st, src_li)):
            self.elementwise(Xp.slice(src_st, src_li, [1] * len(src_st)), pv.slice(starts, limits, steps))
        return pv

    def _window_view(self, Xp, pos, w, osz):
        starts = [0] + [p * wd for p, wd in zip(pos, w["window_dilation"])] + [0]
        limits = [Xp.shape[0]] + [st + (n - 1) * s + 1 for st, n, s in zip(starts[1:-1], osz, w["stride"])] + \
            [Xp.shape[-1]]
        return Xp.slice(starts, limits, [1] + list(w["stride"]) + [1])

    def op_convolution(self, op, args, outs):
        a = op.attrs
        d = a["dims"]
        w = a["window"]
        x, k = args
        o = outs[0]
        fgc, bgc = a.get("feature_group_count", 1), a.get("batch_group_count", 1)
        ns = len(d["in_spatial"])
        if ns == 0:
            raise cannot_lower(op, "convolution without spatial dimensions")
        X = self.cg.materialise(x)
        Kv = self.cg.materialise(k)
        if X.base.startswith("__"):
            X = self.cg.materialise(x, allow_views=False)
        if Kv.base.startswith("__"):
            Kv = self.cg.materialise(k, allow_views=False)
        cin = X.shape[d["in_feature"]]
        cout = Kv.shape[d["k_out"]]
        depthwise = fgc > 1 and fgc == cin == cout and Kv.shape[d["k_in"]] == 1
        if bgc != 1 and fgc != 1:
            raise cannot_lower(op, "grouped convolution (feature_group_count=%d, batch_group_count=%d)" % (fgc, bgc))
        Xp = self._conv_input(X, d, w)
        Kp = Kv.transpose(list(d["k_spatial"]) + [d["k_in"], d["k_out"]])
        out = self.cg.target_for(o.name)
        Op = out.transpose([d["out_batch"]] + list(d["out_spatial"]) + [d["out_feature"]])
        osz = Op.shape[1:1 + ns]
        positions = list(itertools.product(*[range(s) for s in w["size"]]))
        if depthwise:
            # out[b, o.., c] = sum_w xpad[b, o*s + w*dil, c] * K[w, 0, c]: one fused DVE chain
            if len(positions) > MAX_WINDOW_POSITIONS:
                raise cannot_lower(op, "depthwise convolution with %d window positions" % len(positions))
            acc = None
            for pos in positions:
                L = self._window_view(Xp, pos, w, osz)
                kpos = [(s - 1 - p) if rv else p for p, s, rv in zip(pos, w["size"], w["reversal"])]
                kv = Kp.slice(kpos + [0, 0], [p + 1 for p in kpos] + list(Kp.shape[-2:]), [1] * (ns + 2))
                kb = View(kv.base, kv.dtype, Op.shape, (0,) * (ns + 1) + (kv.strides[-1],), kv.offset)
                term = Node("multiply", [L, kb], {}, o.dtype, Op.shape, op.loc)
                acc = term if acc is None else Node("add", [acc, term], {}, o.dtype, Op.shape, op.loc)
            self.elementwise(acc, Op)
            return [View.contiguous(out.base, o.dtype, o.shape)]
        # batch groups G: input batch (G, B/G), output features (G, Cout/G); G = 1 for a plain conv.
        # matmul batch loops over (G, B/G, out spatial[:-1]); M = last out spatial; K = Cin; N = Cout/G
        G = bgc if bgc > 1 else fgc
        B = Xp.shape[0]
        cog = cout // G
        if fgc > 1:
            # feature groups: input channels (G, Cg), group g reads its Cg channels
            cin = cin // G
            XG = Xp.split_axis(ns + 1, cin)                     # (B, sp.., G, Cg)
            XG = XG.transpose([ns + 1, 0] + list(range(1, ns + 1)) + [ns + 2])
        else:
            XG = Xp.split_axis(0, B // G)                       # (G, B/G, sp.., Cin)
        OG = Op.split_axis(ns + 1, cog)                       # (B/G, o.., G, Cog)
        OG = OG.transpose([ns + 1, 0] + list(range(1, ns + 1)) + [ns + 2])
        if cog == 1 and G > 1 and cin * len(positions) <= GROUP_REDUCE_MAX:
            return self._conv_group_reduce(op, XG, Kp, OG, w, cin, out, o)
        terms = []
        for pos in positions:
            starts = [0, 0] + [p * wd for p, wd in zip(pos, w["window_dilation"])] + [0]
            limits = list(XG.shape[:2]) + [st + (n - 1) * s_ + 1 for st, n, s_ in
                                           zip(starts[2:-1], osz, w["stride"])] + [cin]
            L = XG.slice(starts, limits, [1, 1] + list(w["stride"]) + [1])
            kpos = [(s_ - 1 - p) if rv else p for p, s_, rv in zip(pos, w["size"], w["reversal"])]
            R = Kp.slice(kpos + [0, 0], [p + 1 for p in kpos] + list(Kp.shape[-2:]), [1] * (ns + 2))
            R = R.reshape(Kp.shape[-2:]).split_axis(1, cog)   # (Cin, G, Cog)
            nbt = ns + 1
            Rb = View(R.base, R.dtype, tuple(L.shape[:nbt]) + (cin, cog),
                      (R.strides[1],) + (0,) * (nbt - 1) + (R.strides[0], R.strides[2]), R.offset)
            terms.append((L, Rb, cin))
        self.matmul_terms(terms, OG, ns + 1, OG.shape[ns + 1], cog)
        return [View.contiguous(out.base, o.dtype, o.shape)]

    def _conv_group_reduce(self, op, XG, Kp, OG, w, cin, out, o):
        """A grouped convolution with one output feature per group (a depthwise conv's weight
        gradient: batch_group_count = channels) as one reduction: out[g, b, o..] = sum over window
        positions p.. and the group's input features ci of XG[g, b, o*s + p*dil, ci] * K[p.., ci, g],
        groups on the partitions and the G x B x out-spatial matmuls of K = Cg, N = 1 (each with a
        PE transpose and a PSUM eviction) gone."""
        ns = len(w["size"])
        xs = XG.strides
        lshape = XG.shape[:2] + tuple(OG.shape[2:2 + ns]) + tuple(w["size"]) + (cin,)
        lstr = xs[:2] + tuple(xs[2 + j] * w["stride"][j] for j in range(ns)) + \
            tuple(xs[2 + j] * w["window_dilation"][j] for j in range(ns)) + (xs[-1],)
        L = View(XG.base, XG.dtype, lshape, lstr, XG.offset)
        koff, kpos = Kp.offset, []
        for j in range(ns):             # a reversed window dim reads the kernel backwards
            rv = w["reversal"][j]
            kpos.append(-Kp.strides[j] if rv else Kp.strides[j])
            if rv:
                koff += (w["size"][j] - 1) * Kp.strides[j]
        # the kernel copied group-major, (G, p.., ci) contiguous, so each group's window row is one run
        kshape = (XG.shape[0],) + tuple(w["size"]) + (cin,)
        kv = View(Kp.base, Kp.dtype, kshape, (Kp.strides[-1],) + tuple(kpos) + (Kp.strides[-2],), koff)
        kt = View.contiguous(self.em.tensor("convk", "scratch", Kp.dtype, kshape), Kp.dtype, kshape)
        self.elementwise(kv, kt)
        kstr = (kt.strides[0],) + (0,) * (1 + ns) + kt.strides[1:]
        Kb = View(kt.base, kt.dtype, lshape, kstr, 0)
        prod = Node("multiply", [L, Kb], {}, o.dtype, lshape, op.loc)
        target = View(OG.base, OG.dtype, OG.shape[:-1], OG.strides[:-1], OG.offset)   # Cog = 1 dropped
        dims = list(range(2 + ns, 3 + 2 * ns))
        self.reduce_into([prod], [Splat(0.0, o.dtype, ())], dims, "add", [target], op)
        return [View.contiguous(out.base, o.dtype, o.shape)]

    def op_select_and_scatter(self, op, args, outs):
        """Max-pool gradient for non-overlapping windows: each window's source value lands on the
        first position holding the window's maximum."""
        x, src, init = args
        w = op.attrs["window"]
        o = outs[0]
        if not isinstance(init, Splat) or any(w["pad_lo"]) or any(w["pad_hi"]) or \
                list(w["stride"]) != list(w["size"]) or any(v != 1 for v in w["window_dilation"]) or \
                any(v != 1 for v in w["base_dilation"]):
            raise cannot_lower(op, "select-and-scatter other than non-overlapping unpadded windows")
        if len(list(itertools.product(*[range(s) for s in w["size"]]))) > MAX_WINDOW_POSITIONS:
            raise cannot_lower(op, "select-and-scatter window too large")
        out = self.cg.target_for(o.name)
        r = len(x.shape)
        covered = [n * s for n, s in zip(src.shape, w["stride"])]
        if covered != list(x.shape):
            self.elementwise(Splat(init.value, o.dtype, out.shape), out)
        sh = src.shape
        views = []
        for pos in itertools.product(*[range(s) for s in w["size"]]):
            lim = [p + (n - 1) * s + 1 for p, n, s in zip(pos, sh, w["stride"])]
            v = apply_view(x, lambda vv: vv.slice(list(pos), lim, w["stride"]))
            if v is None:
                x = self.cg.materialise(x, allow_views=False)
                v = x.slice(list(pos), lim, w["stride"])
            views.append((pos, lim, v))
        m = None
        for _, _, v in views:
            m = v if m is None else Node("maximum", [m, v], {}, x.dtype, sh, op.loc)
        m = self.cg.materialise(m, allow_views=False)
        taken = None
        for pos, lim, v in views:
            eq = Node("compare", [v, m], {"direction": "EQ"}, "bool", sh, op.loc)
            if taken is None:
                sel = eq
                taken = eq
            else:
                nt = Node("not", [taken], {}, "bool", sh, op.loc)
                sel = Node("and", [eq, nt], {}, "bool", sh, op.loc)
                taken = Node("or", [taken, eq], {}, "bool", sh, op.loc)
            val = Node("select", [sel, src, Splat(0, o.dtype, sh)], {}, o.dtype, sh, op.loc)
            if init.value != 0:
                val = Node("add", [val, Splat(init.value, o.dtype, sh)], {}, o.dtype, sh, op.loc)
            self.elementwise(val, out.slice(list(pos), lim, w["stride"]))
        return [out]

    # -- sort / top-k through the builtin custom ops -----------------------------------------
    def _rows_view(self, x, axis):
        """x with `axis` moved last, as a contiguous-able (rows, n) View (materialising if needed)."""
        r = len(x.shape)
        perm = [k for k in range(r) if k != axis] + [axis]
        xt = apply_view(x, lambda v: v.transpose(perm))
        n = x.shape[axis]
        rows = 1
        for k in perm[:-1]:
            rows *= x.shape[k]
        v = apply_view(xt, lambda vv: vv.reshape((rows, n)))
        if not isinstance(v, View) or v.base.startswith("__"):
            v = self.cg.materialise(xt, allow_views=False).reshape((rows, n))
        return v, perm, rows, n

    def custom_rows(self, src, rows, n, k, function, descending, dtypes, op):
        """Run a custom op over row tiles; returns (values view, indices view) of shape (rows, k)."""
        em = self.em
        if n > SORT_MAX_ROW:
            if function == "sort_f32" and k == n:
                return longsort.sort_long_rows(self, src, rows, n, SORT_MAX_ROW, descending, dtypes[0], op)
            raise cannot_lower(op, "sort/top-k rows of %d elements" % n)
        tv = em.tensor("sorted", "scratch", dtypes[0], (rows, k))
        ti = em.tensor("sortidx", "scratch", "int32", (rows, k))
        V = View.contiguous(tv, dtypes[0], (rows, k))
        I = View.contiguous(ti, "int32", (rows, k))
        axes = [Axis(rows, choose_tile(rows, 128), "row")]

        def body(starts, sizes):
            r0, pn = starts[0], sizes[0]
            a = em.chip(em.sbuf("cin", pn, n, "float32"), "float32", pn, [[1, n]])
            off = (self.P.const(src.offset) if isinstance(src.offset, int) else src.offset) + r0 * src.strides[0]
            em.dma(a, em.hbm(src.base, off, [[src.strides[0], pn], [src.strides[1], n]]))
            vals = em.chip(em.sbuf("cval", pn, k, "float32"), "float32", pn, [[1, k]])
            idx = em.chip(em.sbuf("cidx", pn, k, "int32"), "int32", pn, [[1, k]])
            em.inst("custom_op", "POOL", [vals, idx], [a], function=function, k=int(k),
                    descending=bool(descending), with_indices=True)
            em.dma(em.hbm(tv, r0 * k, [[k, pn], [1, k]]), vals)
            em.dma(em.hbm(ti, r0 * k, [[k, pn], [1, k]]), idx)

        em.nest(axes, body)
        return V, I

    def op_sort(self, op, args, outs):
        """Stable sort along one axis; payload operands follow the key's permutation.

        Several keys (all in one direction) sort lexicographically by stable passes, the least
        significant key first."""
        d = op.attrs["dimension"]
        nk = op.attrs.get("num_keys", 1)
        desc = op.attrs.get("descending", False)
        dirs = list(op.attrs.get("key_descending") or [desc] * nk)
        # a last key that is the position along the sort (iota), ascending, only breaks ties the way a
        # stable sort does (torch-xla's stable descending sort): the passes below are stable
        while nk > 1 and _is_iota_along(args[nk - 1], d) and dirs[nk - 1] in (False, None):
            nk -= 1
        known = set(x for x in dirs[:nk] if x is not None)
        if len(known) > 1 or "mixed" in known:
            raise cannot_lower(op, "sort on %d keys in both directions" % nk)
        desc = known.pop() if known else desc
        keys = args[0]
        src, perm, rows, n = self._rows_view(keys, d)
        inv = [perm.index(k) for k in range(len(perm))]
        tshape = tuple(keys.shape[k] for k in perm)
        if nk == 1 and keys.dtype not in WIDE_INT_KEYS:
            V, I = self.custom_rows(src, rows, n, n, "sort_f32", desc, (outs[0].dtype,), op)
        else:
            # lexicographic keys: one stable pass per float32-exact key part, least significant first
            parts = [p for a in args[:nk] for p in _key_parts(a)]
            I = None
            for part in reversed(parts):
                ps, _, _, _ = self._rows_view(part, d)
                if I is not None:
                    ps = self._permute_rows(ps, 1, I, rows, n, part.dtype)
                _, Ip = self.custom_rows(ps, rows, n, n, "sort_f32", desc, ("float32",), op)
                I = Ip if I is None else self._permute_rows(I, 1, Ip, rows, n, "int32")
            V = None
        res = []
        for k, (a, o) in enumerate(zip(args, outs)):
            if k == 0 and V is not None:
                r = V
            elif _is_iota_along(a, d):
                r = I if o.dtype == "int32" else Node("convert", [I], {}, o.dtype, I.shape)
            else:
                r = self._permute_rows(a, d, I, rows, n, o.dtype)
            res.append(apply_view(r, lambda v: v.reshape(tshape).transpose(inv)))
        return res

    def _permute_rows(self, x, axis, I, rows, n, odt, width=None):
        """out[r, j] = x[r, I[r, j]] (a payload carried through a sort): one indirect DMA (dma_gather)
        per 128 elements of a row, the indices one per partition. ``width``: x's row length when it is
        not n (I picks n of its elements)."""
        em = self.em
        P = self.P
        src, _, _, _ = self._rows_view(x, axis)
        t = em.tensor("sortpay", "scratch", em.m.tensors[src.base].dtype, (rows, n))
        st = src.dtype

        def body(starts, sizes):
            r, j0 = starts
            pn = sizes[1]
            idx = em.chip(em.sbuf("pidx", pn, 1, "int32"), "int32", pn, [[1, 1]])
            ioff = (P.const(I.offset) if isinstance(I.offset, int) else I.offset) + r * I.strides[0] + \
                j0 * I.strides[1]
            em.dma(idx, em.hbm(I.base, ioff, [[I.strides[1], pn], [1, 1]]))
            got = em.chip(em.sbuf("pval", pn, 1, st), st, pn, [[1, 1]])
            off = (P.const(src.offset) if isinstance(src.offset, int) else src.offset) + r * src.strides[0]
            em.inst("dma_gather", "SP", [got], [em.hbm(src.base, off, [[1, 1]]), idx], queue=em.next_queue(),
                    index_stride=int(src.strides[1]), index_min=0, index_max=(width or n) - 1)
            em.dma(em.hbm(t, r * n + j0, [[1, pn], [1, 1]]), got)

        em.nest([Axis(rows, 1, "r"), Axis(n, choose_tile(n, 128), "c")], body)
        r = View.contiguous(t, st, (rows, n))
        return r if st == odt else Node("convert", [r], {}, odt, (rows, n))

    def _topk_long_rows(self, src, rows, n, k, odt, op):
        """Top-k of rows longer than one custom-op call takes (a vocabulary's logits): the top k of each
        chunk of a row, then the top k of those candidates (chunk-major, so a tie still goes to the lower
        index). The last chunk is padded with -inf, which loses every tie to a real element."""
        em = self.em
        nch = -(-n // SORT_MAX_ROW)
        C = -(-n // nch)
        if k > C or nch * k > SORT_MAX_ROW:
            raise cannot_lower(op, "top-%d of rows of %d elements" % (k, n))
        if nch * C != n:
            t = em.tensor("topkpad", "scratch", "float32", (rows, nch * C))
            padded = View.contiguous(t, "float32", (rows, nch * C))
            self.elementwise(Splat(float("-inf"), "float32", (rows, nch * C)), padded)
            self.elementwise(src if src.dtype == "float32" else Node("convert", [src], {}, "float32", src.shape),
                             padded.slice([0, 0], [rows, n], [1, 1]))
            src = padded
        V1, I1 = self.custom_rows(src.reshape((rows * nch, C)), rows * nch, C, k, "topk_f32", True, ("float32",),
                                   op)
        off = View(IOTA_BASE, "int32", (rows, nch, k), [0, C, 0], 0)
        G1 = self.cg.materialise(Node("add", [I1.reshape((rows, nch, k)), off], {}, "int32", (rows, nch, k)),
                                 allow_views=False).reshape((rows, nch * k))
        V, I2 = self.custom_rows(V1.reshape((rows, nch * k)), rows, nch * k, k, "topk_f32", True, (odt,), op)
        return V, self._permute_rows(G1, 1, I2, rows, k, "int32", width=nch * k)

    def op_topk(self, op, args, outs):
        x = args[0]
        k = int(op.attrs["k"])
        if not op.attrs.get("largest", True):
            raise cannot_lower(op, "top-k of the smallest elements")
        d = len(x.shape) - 1
        src, perm, rows, n = self._rows_view(x, d)
        nch = -(-n // SORT_MAX_ROW)
        if n > SORT_MAX_ROW and (k > -(-n // nch) or nch * k > SORT_MAX_ROW):
            # more candidates than the two-round top-k holds: the whole row sorted, its first k
            V, I = longsort.sort_long_rows(self, src, rows, n, SORT_MAX_ROW, True, outs[0].dtype, op)
            V, I = V.slice([0, 0], [rows, k], [1, 1]), I.slice([0, 0], [rows, k], [1, 1])
            V, I = self.cg.materialise(V, allow_views=False), self.cg.materialise(I, allow_views=False)
        elif n > SORT_MAX_ROW:
            V, I = self._topk_long_rows(src, rows, n, k, outs[0].dtype, op)
        else:
            V, I = self.custom_rows(src, rows, n, k, "topk_f32", True, (outs[0].dtype,), op)
        shape = tuple(x.shape[:-1]) + (k,)
        res = [V.reshape(shape), I.reshape(shape)]
        if outs[1].dtype != "int32":
            res[1] = Node("convert", [res[1]], {}, outs[1].dtype, shape)
        return res


WIDE_INT_KEYS = ("int32", "uint32", "int64", "uint64")     # not exact as the custom op's float32 keys


def _key_parts(a):
    """A sort key as float32-exact parts, most significant first: the custom op sorts float32
    keys (24 bits), so a 32-bit integer is its (high 16 bits, low 16 bits) pair."""
    if a.dtype not in WIDE_INT_KEYS:
        return [a]
    sh = a.shape
    hi_op = "shift-right-arithmetic" if a.dtype.startswith("int") else "shift-right-logical"
    hi = Node(hi_op, [a, Splat(16, a.dtype, sh)], {}, a.dtype, sh)
    lo = Node("and", [a, Splat(0xFFFF, a.dtype, sh)], {}, a.dtype, sh)
    return [Node("convert", [hi], {}, "float32", sh), Node("convert", [lo], {}, "float32", sh)]


def _is_iota_along(x, d):
    if not isinstance(x, View) or x.base != IOTA_BASE:
        return False
    return all((s == 1) if k == d else (s == 0) for k, s in enumerate(x.strides)) and x.offset == 0
