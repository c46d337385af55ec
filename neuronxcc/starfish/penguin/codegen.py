"""Penguin -> BIR codegen: walks the graph, decides what is materialised in
HBM, and emits one tiled loop-nest kernel per materialised value.

Lowering strategy (see also expr.py, tiles.py, kernels.py):
  * every graph input/output is an HBM tensor (``input{i}`` / ``output{i}``
    unless the HLO names them); constants with data are ``const`` tensors;
  * elementwise ops build lazy expressions (fusion); shape ops are views
    pushed to the leaves (no data movement);
  * a lazy value is materialised (one elementwise kernel into a ``scratch``
    HBM tensor, or straight into its output tensor) when a structural op
    needs it in HBM, when it has several users one of which is not
    elementwise, when it is a graph output, or when it grows too large;
  * dot -> PE matmul kernel with K-tiled PSUM accumulation; reduce -> DVE
    / POOL reduce kernel (any set of axes, the kept axis on partitions);
    concatenate / pad -> copy kernels into sub-views of the result.

Every instruction carries the HLO instruction name as its debug ``name``.
"""
import heapq
import logging

import numpy as np

from neuronxcc.errors import TensorTooLargeError

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy
from neuronxcc.starfish.birpy import hbm
from neuronxcc.starfish.penguin import ir, purecse
from neuronxcc.starfish.penguin.emit import Emitter, pel
from neuronxcc.starfish.penguin.expr import Node, apply_view, count_ops, leaves
from neuronxcc.starfish.penguin.tiles import IOTA_BASE, cannot_lower, onchip_dtype
from neuronxcc.starfish.penguin.views import Splat, View, row_major_strides

MAX_FUSED_OPS = 32
# a lazy value with several users that reads more HBM tensors than this is computed once: else a
# chain of them (the residual stream x = x + f(x) of an unrolled transformer, read by the next
# layer's norm and by the next add) is recomputed from all earlier layers' results in every layer,
# instructions and bytes growing as layers^2
MAX_SHARED_LEAVES = 4
USER_LEVEL = 35            # the driver's USER log level (between WARNING and ERROR)


class Codegen:
    def __init__(self, graph, target="trn1", options=None):
        self.g = graph
        self.tm = get_target(target)
        self.m = birpy.Module(graph.name or "module", target)
        self.em = Emitter(self.m, self.tm)
        self.P = pel()
        self.options = options or {}
        self.env = {}
        self.out_tensor = {}           # penguin value -> output tensor name
        self.scratch_owner = {}        # scratch tensor -> the penguin value target_for made it for
        self.pure_tables = {}          # purecse key -> the View of a top-level input-independent table
        self.const_hashes = {}         # constant tensor name -> its purecse key part (data hashed once)
        self.iota_extent = 0
        self._arange = None
        self.users = graph.users()
        self.fused = set()              # ids of ops already emitted as a matmul epilogue
        from neuronxcc.starfish.penguin.actmatch import ActMatcher
        from neuronxcc.starfish.penguin.autocast import policy
        self.act_matcher = ActMatcher()  # elementwise chains that are one ACT function
        self.cast = policy(options)      # --auto-cast: fp32 operations computed in a narrower type
        self.cast_seen = {}              # id -> node of elementwise ops already counted as cast
        self.fuse_epilogues = True
        self.row_fusion = True
        self.rowred = {}                # "__row__k" -> rows.RowReduce (lazy last-axis reductions)
        self.mmred = {}                 # "__mm__k" -> mmfuse.RowMatmul (matmuls evaluated in row tiles)
        self.mm_fusion = True
        self.lnc = None                 # penguin/lnc.LncSplitter when the program is split over 2 cores
        self.streams = []               # streamed matvecs' (first weight DMA, last load node): prefetch.py
        self.top = graph

    # -- driver -----------------------------------------------------------------------
    def run(self):
        self.k = make_kernels(self)
        g = self.g
        in_names = _names(g.attrs.get("input_names"), len(g.inputs), "input")
        out_names = _names(g.attrs.get("output_names"), len(g.outputs), "output")
        for n, tn in zip(g.inputs, in_names):
            v = g.values[n]
            self.em.tensor(tn, "input", v.dtype, v.shape, exact_name=True)
            self.env[n] = View.contiguous(tn, v.dtype, v.shape)
        for n, tn in zip(g.outputs, out_names):
            v = g.values[n]
            self.em.tensor(tn, "output", v.dtype, v.shape, exact_name=True)
            self.out_tensor[n] = tn
        if g.attrs.get("rank_space"):
            self.m.attrs["rank_space"] = list(g.attrs["rank_space"])
        self.lnc = _lnc_splitter(self, g)
        self.top = g
        self.lower_ops(g.ops)
        for n in g.outputs:
            self.em.label = n
            self._kernel(lambda: self.finish_output(n))
        if self.lnc is not None:
            self.lnc.finish()
        self.finish_tables()
        from neuronxcc.starfish.penguin.mmlayout import drop_dead
        drop_dead(self)                 # HBM copies of values their readers took from SBUF
        from neuronxcc.starfish.penguin.prefetch import held_first, hoist
        hoist(self.m, self.streams)
        held_first(self.m, getattr(self, "stream_held", None), getattr(self, "mm_streamed", 0))
        if self.lnc is None:
            # scratch tensors share HBM by liveness (two cores of a split program run at once)
            hbm.assign(self.m)
        self.check_hbm()
        if self.cast.mode != "none":
            self.m.attrs["auto_cast"] = self.cast.as_attrs()
            line = self.cast.report()
            if line:
                logging.getLogger("neuronxcc.penguin").log(USER_LEVEL, line)
        return self.m.renumber()

    def lower_ops(self, ops):
        # constants and iotas first: they cost nothing until used, and matmul epilogues may need them
        for op in ops:
            if op.kind in ("constant", "iota") and not any(o in self.out_tensor for o in op.outputs):
                self.em.label = op.loc.get("hlo")
                self.lower(op)
                self.fused.add(id(op))
        for op in ops:
            if id(op) in self.fused:
                continue
            self.em.label = op.loc.get("hlo") or (op.outputs[0] if op.outputs else None)
            self._kernel(lambda: self.lower(op))

    def _kernel(self, fn):
        """Emit one op's kernel; with LNC=2 (penguin/lnc.py) it is placed on one of the two cores."""
        self.em.begin_kernel()
        if self.lnc is not None and self.g is self.top:
            self.lnc.run(fn)
        else:
            fn()

    def lower_subgraph(self, sg, inputs):
        """Lower a nested region (while body/cond, branch) at the current point; returns its output exprs."""
        saved = (self.g, self.env, self.users, self.out_tensor)
        self.g, self.env, self.users, self.out_tensor = sg, dict(zip(sg.inputs, inputs)), sg.users(), {}
        label = self.em.label
        try:
            self.lower_ops(sg.ops)
            return [self.env[o] for o in sg.outputs]
        finally:
            self.g, self.env, self.users, self.out_tensor = saved
            self.em.label = label

    # -- matmul epilogues -------------------------------------------------------------
    def _op_index(self):
        """{id(op): position} of the current graph's ops (built once per graph)."""
        cache = getattr(self, "_op_index_cache", None)
        if cache is None or cache[0] is not self.g or cache[1] != len(self.g.ops):
            cache = (self.g, len(self.g.ops), {id(op): k for k, op in enumerate(self.g.ops)})
            self._op_index_cache = cache
        return cache[2]

    def plan_epilogue(self, dot_op):
        """The elementwise chain a dot's result flows into, to run on the evicted PSUM tile.

        Grows a set S from the dot's output over later elementwise ops whose operands are in S
        or already lowered (same shape as the dot output, no views in between). Fusable when
        exactly one member of S is used outside S (the sink) and it is not the dot itself.
        Returns (sink value, expression of the sink, the leaf standing for the dot) or None."""
        if not self.fuse_epilogues:
            return None
        g = self.g
        d = dot_op.outputs[0]
        shape = g.values[d].shape
        index = self._op_index()
        member = {d: None}
        chain = []
        # the later ops in program order that use a member (only they can join S): a heap of
        # their positions, fed with each new member's users, instead of a scan to the end
        heap = [index[id(u)] for u in self.users.get(d, [])]
        heapq.heapify(heap)
        seen = set(heap)
        ops = g.ops
        while heap:
            op = ops[heapq.heappop(heap)]
            if op.kind not in ir.ELEMENTWISE or len(op.outputs) != 1:
                continue
            o = op.outputs[0]
            if g.values[o].shape != shape:
                continue
            if not all(i in member or self._available(i) for i in op.inputs):
                continue
            member[o] = op
            chain.append(op)
            if len(chain) >= 24:
                break
            for u in self.users.get(o, []):
                j = index[id(u)]
                if j not in seen:
                    seen.add(j)
                    heapq.heappush(heap, j)
        if not chain:
            return None
        outs = set(g.outputs)
        sinks = [v for v in member if v in outs or any(u.outputs[0] not in member if u.outputs else True
                                                       for u in self.users.get(v, []))]
        if len(sinks) != 1 or sinks[0] == d:
            return None
        sink = sinks[0]
        dv = g.values[d]
        leaf = View("__dot__%d" % id(dot_op), dv.dtype, dv.shape, row_major_strides(dv.shape), 0)
        built = {d: leaf}
        for op in chain:
            o = op.outputs[0]
            args = [built[i] if i in built else self.env[i] for i in op.inputs]
            built[o] = Node(op.kind, args, op.attrs, g.values[o].dtype, g.values[o].shape, op.loc)
            if o == sink:
                break
        if sink not in built:
            return None
        return sink, built[sink], leaf

    def _available(self, name, depth=0):
        """True if value NAME is lowered or is a pure view chain of lowered values (lowered now)."""
        if name in self.env:
            return True
        prod = self._producers().get(name)
        if prod is None or prod.kind not in ir.VIEWS or depth > 8:
            return False
        if not all(self._available(i, depth + 1) for i in prod.inputs):
            return False
        label = self.em.label
        self.em.label = prod.loc.get("hlo")
        try:
            self.lower(prod)
        finally:
            self.em.label = label
        self.fused.add(id(prod))
        return True

    def _producers(self):
        if getattr(self, "_prod_graph", None) is not self.g:
            self._prod_graph, self._prod_map = self.g, self.g.producers()
        return self._prod_map

    def commit_epilogue(self, dot_op, sink):
        """Mark the chain's ops as emitted (they are lowered inside the matmul's evict step)."""
        g = self.g
        d = dot_op.outputs[0]
        member = {d}
        k = g.ops.index(dot_op)
        for op in g.ops[k + 1:]:
            if op.kind in ir.ELEMENTWISE and len(op.outputs) == 1 and any(i in member for i in op.inputs) \
                    and all(i in member or i in self.env for i in op.inputs) and \
                    g.values[op.outputs[0]].shape == g.values[d].shape:
                member.add(op.outputs[0])
                self.fused.add(id(op))
                if op.outputs[0] == sink:
                    break

    def check_hbm(self):
        """What the lowered program holds in HBM at once (I/O, constants, and the scratch arena
        where intermediates whose lifetimes do not overlap share bytes) must fit the core."""
        total = hbm.footprint(self.m)
        if total > self.tm.hbm_bytes_per_core:
            big = max(self.m.tensors.values(), key=lambda t: t.nbytes)
            scratch = [t for t in self.m.tensors.values() if t.kind == "scratch"]
            raise TensorTooLargeError("The program needs %d bytes of HBM at once (inputs, outputs, constants and "
                                      "%d bytes of scratch live together out of %d materialised intermediates; "
                                      "the largest tensor %s %s%s), more than the %d bytes of one %s NeuronCore"
                                      % (total, hbm.arena_bytes(self.m) + sum(t.nbytes for t in scratch
                                                                            if t.arena_offset is None),
                                         len(scratch), big.name, big.dtype, list(big.shape),
                                         self.tm.hbm_bytes_per_core, self.tm.name))

    # -- storage of values ------------------------------------------------------------
    def target_for(self, name):
        """A contiguous View to write value NAME into: its output tensor or a fresh scratch."""
        v = self.g.values[name]
        if name in self.out_tensor and not self.out_tensor.get(("done", name)):
            self.out_tensor[("done", name)] = True
            return View.contiguous(self.out_tensor[name], v.dtype, v.shape)
        tn = self.em.tensor("scratch_" + name, "scratch", _hbm_dtype(v.dtype), v.shape)
        self.scratch_owner[tn] = name
        return View.contiguous(tn, v.dtype, v.shape)

    def materialise(self, x, name=None, dtype=None, allow_views=True):
        """A View holding x (computing it into HBM if it is lazy)."""
        if isinstance(x, View) and allow_views and not x.base.startswith("__"):
            return x
        ck = purecse.key(self, x) if isinstance(x, Node) else None     # an input-independent table
        if ck is not None and ck in self.pure_tables and not (name is not None and name in self.out_tensor):
            return self.pure_tables[ck]
        if name is not None:
            out = self.target_for(name)
        else:
            tn = self.em.tensor("scratch", "scratch", _hbm_dtype(x.dtype), x.shape)
            out = View.contiguous(tn, x.dtype, x.shape)
        self.k.elementwise(x, out)
        if ck is not None and purecse.at_top_level(self) and self.m.tensors[out.base].kind == "scratch":
            self.pure_tables[ck] = out
            # a shared table has no single owner: no while may update it in place as its own state
            self.scratch_owner.pop(out.base, None)
        return out

    def arange_table(self, v):
        """Name of the int32 HBM table arange(N) that iota views inside loops read."""
        hi = v.offset + sum((n - 1) * abs(s) for n, s in zip(v.shape, v.strides))
        self.iota_extent = max(self.iota_extent, hi + 1)
        if self._arange is None:
            self._arange = self.em.tensor("iota_table", "const", "int32", (1,))
        return self._arange

    def finish_tables(self):
        if self._arange is not None:
            t = self.m.tensors[self._arange]
            n = max(1, self.iota_extent)
            t.shape = (n,)
            t.data = np.arange(n, dtype=np.int32)

    # -- per op ------------------------------------------------------------------------
    def lower(self, op):
        kind = op.kind
        g = self.g
        outs = [g.values[o] for o in op.outputs]
        args = [self.env[i] for i in op.inputs]
        if kind in ir.ELEMENTWISE:
            o = outs[0]
            node = Node(kind, args, op.attrs, o.dtype, o.shape, op.loc)
            self.env[o.name] = node
            self.maybe_materialise(o.name, node)
            return
        if kind in ir.VIEWS:
            self.env[outs[0].name] = self.view(op, args[0], outs[0])
            self.maybe_materialise(outs[0].name, self.env[outs[0].name])
            return
        if kind == "constant":
            o = outs[0]
            if "value" in op.attrs:
                self.env[o.name] = Splat(op.attrs["value"], o.dtype, o.shape)
            else:
                data = np.asarray(op.attrs["data"]).astype(ir.np_dtype(o.dtype))
                hd = _hbm_dtype(o.dtype)
                tn = self.em.tensor("const_" + o.name, "const", hd, o.shape,
                                    data=data.astype(ir.np_dtype(hd)) if hd != o.dtype else data)
                self.env[o.name] = View.contiguous(tn, o.dtype, o.shape)
            self.maybe_materialise(o.name, self.env[o.name])
            return
        if kind == "iota":
            o = outs[0]
            strides = [0] * len(o.shape)
            strides[op.attrs["dimension"]] = 1
            self.env[o.name] = View(IOTA_BASE, o.dtype, o.shape, strides, 0)
            self.maybe_materialise(o.name, self.env[o.name])
            return
        if kind == "reduce":
            from neuronxcc.starfish.penguin.rows import make_row_reduce
            leaf = make_row_reduce(self, op, args, outs)
            if leaf is not None:
                self.env[outs[0].name] = leaf
                self.maybe_materialise(outs[0].name, leaf)
                return
        handler = getattr(self.k, "op_" + kind.replace("-", "_"), None)
        if handler is None:
            raise cannot_lower(op, "no Penguin kernel for this op")
        res = handler(op, args, outs)
        for o, r in zip(outs, res):
            self.env[o.name] = r

    def maybe_materialise(self, name, x):
        users = self.users.get(name, [])
        if name in self.out_tensor:
            if isinstance(x, View) and x.base == self.out_tensor[name]:
                return
            self.env[name] = self.materialise(x, name, allow_views=False)
            return
        if not isinstance(x, Node) and not (isinstance(x, View) and x.base.startswith(("__row__", "__mm__"))):
            return
        # a value computed only from row reductions is a cheap [P,1] column in its consumers:
        # reshapes/broadcasts of it stay lazy too (softmax/layernorm statistics)
        colish = isinstance(x, Node) and all(v.base.startswith("__row__") for v in leaves(x))
        # a cast of a tensor stays lazy under views too (the rotary embedding's halves of q and k):
        # each consumer tile loads the narrow source and casts on chip instead of reading a
        # materialised wide copy
        castish = isinstance(x, Node) and x.op == "convert" and isinstance(x.args[0], View)
        # a long unary chain stays lazy: once its consumers are built it may be one ACT function
        too_long = count_ops(x) > MAX_FUSED_OPS and not self.act_matcher.is_unary_chain(x)
        shared_wide = len(users) > 1 and not colish and \
            len({v.base for v in leaves(x) if not v.base.startswith("__")}) > MAX_SHARED_LEAVES
        if too_long or shared_wide or (len(users) > 1 and any(
                u.kind not in ir.ELEMENTWISE and not self._row_reduce_user(u) and
                not ((colish or castish) and u.kind in ir.VIEWS) for u in users)):
            self.env[name] = self.materialise(x, name)

    def _row_reduce_user(self, op):
        """A reduce over the last axis that row fusion will keep lazy (recomputing its input is cheap)."""
        from neuronxcc.starfish.penguin.rows import ROW_REDUCERS, lazy_width_ok
        if op.kind != "reduce" or len(op.outputs) != 1 or not self.row_fusion:
            return False
        x = self.g.values[op.inputs[0]]
        rows = 1
        for d in x.shape[:-1]:
            rows *= d
        return (op.attrs.get("reducer") in ROW_REDUCERS and list(op.attrs["dimensions"]) == [len(x.shape) - 1]
                and len(x.shape) >= 2 and lazy_width_ok(x.shape[-1], rows))

    def view(self, op, x, out):
        kind = op.kind
        a = op.attrs
        if kind == "broadcast":
            fn = lambda v: v.broadcast(out.shape, a["dimensions"])  # noqa: E731
        elif kind == "transpose":
            fn = lambda v: v.transpose(a["permutation"])  # noqa: E731
        elif kind == "slice":
            fn = lambda v: v.slice(a["starts"], a["limits"], a["strides"])  # noqa: E731
        elif kind == "reverse":
            fn = lambda v: v.reverse(a["dimensions"])  # noqa: E731
        else:
            fn = lambda v: v.reshape(out.shape)  # noqa: E731
        r = apply_view(x, fn)
        if r is None:
            r = apply_view(self.materialise(x, allow_views=False), fn)
        if r is None:
            raise cannot_lower(op, "cannot express the view")
        if isinstance(r, View) and r.dtype != out.dtype:
            r = r.with_dtype(out.dtype)
        return r

    def finish_output(self, name):
        x = self.env[name]
        tn = self.out_tensor[name]
        if isinstance(x, View) and x.base == tn and x.is_contiguous():
            return
        v = self.g.values[name]
        self.k.elementwise(x, View.contiguous(tn, v.dtype, v.shape))


def _lnc_splitter(cg, g):
    """The LNC=2 splitter when the compile asks for two cores per logical core and the graph can be
    split; otherwise None, with the one warning line that says why."""
    from neuronxcc.starfish.penguin import lnc
    if lnc.requested(cg.options, cg.tm.name) != 2:
        return None
    why = lnc.not_split_reason(g)
    if why:
        lnc.log.warning("--lnc 2: this program runs on one of the two physical NeuronCores of the logical core "
                        "(lnc_size 1): it is not split because %s", why)
        return None
    return lnc.LncSplitter(cg)


def make_kernels(cg):
    from neuronxcc.starfish.penguin.collectives import CollectiveMixin
    from neuronxcc.starfish.penguin.control import ControlMixin
    from neuronxcc.starfish.penguin.indexing import IndexingMixin
    from neuronxcc.starfish.penguin.kernels import Kernels
    from neuronxcc.starfish.penguin.nki_splice import NkiSpliceMixin
    from neuronxcc.starfish.penguin.windows import WindowMixin

    class AllKernels(CollectiveMixin, IndexingMixin, ControlMixin, WindowMixin, NkiSpliceMixin, Kernels):
        pass
    return AllKernels(cg)


def _hbm_dtype(dt):
    return dt


def _names(spec, n, prefix):
    if spec:
        names = spec if isinstance(spec, list) else [s.strip() for s in str(spec).split(",")]
        if len(names) == n and all(names) and len(set(names)) == n:
            return names
    return ["%s%d" % (prefix, i) for i in range(n)]


def lower_graph(graph, target="trn1", options=None):
    """Penguin Graph -> birpy Module (unallocated memlocs)."""
    return Codegen(graph, target, options).run()
