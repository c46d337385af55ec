"""Lowering a traced kernel (``TraceContext``) to one self-contained BIR module.

* Tensors: kernel parameters become ``input`` tensors named after the Python parameters;
  returned HBM tensors become ``output`` tensors (return order); a parameter the kernel writes
  (legacy output argument) also gets an output ``<name>__out`` that starts as a copy of the input
  and takes every access; other HBM allocations are ``scratch``. On-chip buffers are unallocated
  memlocs (walrus places them) unless the kernel allocated them directly.
* Loops: ``TLoop`` -> ``birpy.Loop`` (the body was traced once; addresses are pelican Exprs of the
  loop variables). A loop whose variable appears in a mask is split into runs of consecutive
  iterations on which every such mask selects the same elements, so each instruction keeps
  static partition counts and free sizes.
* Masks: each atom must involve one index variable (or none: then it enables/disables the
  instruction); it becomes an interval of that variable, applied to every operand axis linked
  to it (axes at the same position of same-rank operands, or the instruction's explicit links).
* Bounds: every index expression recorded by indexing is checked against its dimension for all
  loop values and masked index ranges (err_tensor_access_out_of_bound at the kernel's line).
"""
import numpy as np

from neuronxcc import pelican as _pel
from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import dtypes as D
from neuronxcc.nki._trace.index import holds, is_index_var
from neuronxcc.starfish import birpy

__all__ = ["lower"]


def _raise(cls, msg, loc):
    raise cls(msg, location=loc)


class Lowerer:
    def __init__(self, ctx, returned, module_name=None):
        self.ctx = ctx
        self.m = birpy.Module(module_name or ctx.func_name, ctx.target)
        self.sizes = ctx.index_vars.sizes
        self.fixed = {}
        self.ranges = {}
        self.names = {}            # buf name -> BIR target name
        self.returned = returned
        self.aliases = {}
        self.pre = []
        self.blocks = {}           # buf name -> (block bytes, [memloc per block]) (see _declare_blocks)

    # -- storage -----------------------------------------------------------------
    def declare(self):
        ctx, m = self.ctx, self.m
        written_params = [b for b in ctx.params if b.written]
        for b in ctx.params:
            m.add_tensor(b.name, "input", D.bir_name(b.dtype), b.shape)
            self.names[b.name] = b.name
        out_names = []
        for b in self.returned:
            if b.param_index is not None:
                continue
            out_names.append(b.name)
        for b in self.returned:
            if b.param_index is not None and b.written:
                pass
        for b in list(self.returned) + [p for p in written_params if p not in self.returned]:
            if b.param_index is not None:
                if not b.written:
                    name = b.name + "__out"
                    m.add_tensor(name, "output", D.bir_name(b.dtype), b.shape)
                    self.pre.append(self._copy_all(name, b))
                    self.aliases[name] = b.name
                    continue
                name = b.name + "__out"
                m.add_tensor(name, "output", D.bir_name(b.dtype), b.shape)
                self.names[b.name] = name
                self.aliases[name] = b.name
                self.pre.append(self._copy_all(name, b))
            else:
                m.add_tensor(b.name, "output", D.bir_name(b.dtype), b.shape)
                self.names[b.name] = b.name
        for b in ctx.bufs.values():
            if b.name in self.names:
                continue
            if b.memory == "HBM":
                if b.data is not None:
                    m.add_tensor(b.name, "const", D.bir_name(b.dtype), b.shape, data=b.data)
                else:
                    m.add_tensor(b.name, "scratch", D.bir_name(b.dtype), b.shape)
            elif type(b.alloc).__name__ == "Blocks":
                self._declare_blocks(b)
            else:
                nbytes = max(4, (b.free_elems * b.dtype.itemsize + 3) // 4 * 4)
                sp = bo = None
                if b.alloc is not None:
                    sp, bo = b.alloc
                m.add_memloc(b.name, b.memory, b.partitions, nbytes, sp, bo)
            self.names[b.name] = b.name

    def _declare_blocks(self, b):
        """A block tensor allocated at non-consecutive addresses: one memloc per distinct placement; block k
        of the tracer's row-major layout (k * block elements) maps to its memloc."""
        block = 1
        for d in b.shape[b.pdim + 1:]:
            block *= d
        nbytes = max(4, (block * b.dtype.itemsize + 3) // 4 * 4)
        by_place, names = {}, []
        for sp, bo in b.alloc.places:
            if (sp, bo) not in by_place:
                by_place[(sp, bo)] = "%s__blk%d" % (b.name, len(by_place))
                self.m.add_memloc(by_place[(sp, bo)], b.memory, b.partitions, nbytes, sp, bo)
            names.append(by_place[(sp, bo)])
        self.blocks[b.name] = (block * b.dtype.itemsize, names)

    def _copy_all(self, out_name, b):
        pat = birpy.row_major_pattern(b.shape)
        dt = D.bir_name(b.dtype)
        return birpy.Instruction("dma_copy", "SP", [birpy.AccessPattern(out_name, dt, 0, pat)],
                                 [birpy.AccessPattern(b.name, dt, 0, pat)], {"queue": "q0"},
                                 name="%s:param-copy" % self.ctx.func_name)

    # -- body ----------------------------------------------------------------------
    def lower(self):
        self.declare()
        self.m.body = self.pre + self.body(self.ctx.body)
        self.m.attrs["nki"] = {"func_name": self.ctx.func_name}
        return self.m.renumber()

    def body(self, nodes):
        out = []
        for n in nodes:
            if n.kind == "loop":
                out.extend(self.loop(n))
            else:
                i = self.inst(n)
                if isinstance(i, list):
                    out.extend(i)
                elif i is not None:
                    out.append(i)
        return out

    def _mask_deps(self, var, nodes, acc):
        for n in nodes:
            if n.kind == "loop":
                self._mask_deps(var, n.body, acc)
            else:
                atoms = list(n.mask.atoms) if n.mask is not None else []
                if n.guard is not None:
                    atoms += n.guard.atoms()
                for e, op in atoms:
                    if var in e.free_vars():
                        acc.append((n, e, op))
                for op in n.operands:
                    if not isinstance(op.p0, int) and var in op.p0.free_vars():
                        acc.append((n, op.p0, None))       # a partition start moved by the iterator: unroll
                    elif op.buf.name in self.blocks and var in op.off.free_vars():
                        acc.append((n, op.off, None))      # the block (memloc) chosen by the iterator: unroll
        return acc

    def loop(self, lp):
        rng = range(lp.start, lp.stop, lp.step)
        deps = self._mask_deps(lp.var, lp.body, []) if len(rng) else []
        if not deps:
            self.ranges[lp.var] = lp.var_range
            node = birpy.Loop(lp.var, lp.start, lp.stop, lp.step, self.body(lp.body))
            self.ranges.pop(lp.var, None)
            return [node]
        runs = []
        for v in rng:
            sig = tuple(self._signature(lp.var, v, n, e, op) for n, e, op in deps)
            if runs and runs[-1][2] == sig:
                runs[-1][1] = v
            else:
                runs.append([v, v, sig])
        out = []
        for v0, v1, _ in runs:
            self.fixed[lp.var] = v0
            self.ranges[lp.var] = (min(v0, v1), max(v0, v1))
            out.append(birpy.Loop(lp.var, v0, v1 + lp.step, lp.step, self.body(lp.body)))
        self.fixed.pop(lp.var, None)
        self.ranges.pop(lp.var, None)
        return out

    def _signature(self, var, v, inst, e, op):
        env = dict(self.fixed)
        env[var] = v
        e = e.subs(env)
        if op is None:
            return ("v", v)
        lv = [x for x in e.free_vars() if not is_index_var(x)]
        if lv:
            return ("v", v)
        return self._atom(e, op, inst)

    def _atom(self, e, op, inst):
        """('all'|'none') or (var, lo, hi) for one atom with fixed loop vars."""
        iv = [x for x in e.free_vars() if is_index_var(x)]
        if not iv:
            return "all" if holds(int(e), op) else "none"
        if len(iv) > 1:
            _raise(E.err_unsupported_expression_in_mask,
                   "a mask comparison may involve one index variable; %s has %d" % (e, len(iv)), inst.loc)
        name = iv[0]
        n = self.sizes[name]
        coeffs, const = e.affine()
        vals = np.arange(n, dtype=np.int64) * coeffs[name] + const
        ok = {"lt": vals < 0, "le": vals <= 0, "gt": vals > 0, "ge": vals >= 0, "eq": vals == 0,
              "ne": vals != 0}[op]
        idx = np.nonzero(ok)[0]
        if not len(idx):
            return (name, 0, 0)
        lo, hi = int(idx[0]), int(idx[-1]) + 1
        if hi - lo != len(idx):
            _raise(E.err_unsupported_expression_in_mask, "mask %s %s 0 selects a non-contiguous range" % (e, op),
                   inst.loc)
        return (name, lo, hi)

    # -- instructions ----------------------------------------------------------------
    def _guard_holds(self, ti):
        def atom(e, op):
            e = e.subs(self.fixed) if self.fixed else e
            if not e.is_const():
                _raise(E.err_dynamic_control_flow_not_supported,
                       "the condition %s %s 0 uses loop variables that are not static here" % (e, op), ti.loc)
            return holds(int(e), op)
        return ti.guard.evaluate(atom)

    def inst(self, ti):
        if ti.guard is not None and not self._guard_holds(ti):
            return None
        ops = ti.operands
        views = [[op.p0, op.off, [[a.size, a.pstep, a.fstep, a.var] for a in op.axes]] for op in ops]
        intervals = {}
        if ti.mask is not None:
            for e, op in ti.mask.atoms:
                e = e.subs(self.fixed) if self.fixed else e
                lv = [x for x in e.free_vars() if not is_index_var(x)]
                if lv:
                    _raise(E.err_unsupported_expression_in_mask,
                           "mask %s uses loop variables that are not static here" % e, ti.loc)
                r = self._atom(e, op, ti)
                if r == "all":
                    continue
                if r == "none":
                    return None
                name, lo, hi = r
                plo, phi = intervals.get(name, (0, self.sizes[name]))
                intervals[name] = (max(plo, lo), min(phi, hi))
            if intervals:
                self._derived = {}
                self._apply(ti, views, intervals)
                for v, iv in self._derived.items():
                    if v not in intervals:
                        intervals[v] = iv
        for v in views:
            for a in v[2]:
                if a[0] <= 0:
                    return None
        self._check_bounds(ti, intervals)
        if ti.opcode == "memset" and ti.dsts[0].buf.name in self.blocks:
            split = self._memset_blocks(ti, views[0])
            if split is not None:
                return split
        if ti.opcode in _ELEMENTWISE and len(ti.dsts) == 1 and any(op.buf.name in self.blocks for op in ops):
            split = self._split_blocks(ti, ops, views)
            if split is not None:
                return split
        aps = [self._ap(op, v, ti) for op, v in zip(ops, views)]
        nd = len(ti.dsts)
        attrs = {k: v for k, v in ti.attrs.items() if k not in ("partition_broadcast", "offset_expr")}
        return birpy.Instruction(ti.opcode, ti.engine, aps[:nd], aps[nd:], attrs,
                                 name="%s:%s" % (self.ctx.func_name, ti.loc.rsplit(":", 1)[-1]))

    def _apply(self, ti, views, intervals):
        groups = ti.links
        if groups is None:
            ranks = {len(v[2]) for v in views}
            groups = [[(k, r) for k in range(len(views))] for r in range(max(ranks))] if len(ranks) == 1 else []
        done = set()
        present = {a[3] for v in views for a in v[2]}
        pos = {}
        pred = ti.mask
        for var in intervals:
            if var not in present and var in pred.axes:
                pos[var] = pred.axes[var] - len(pred.shape)     # axis counted from the right
        # by position only on operands spanning the mask's index space: an operand of lower rank (a
        # reduction's result) has lost axes, and right-aligning would mask its partition axis instead
        mrank = len(pred.shape)
        for g in groups:
            lo, hi = None, None
            for k, r in g:
                var = views[k][2][r][3]
                rank = len(views[k][2])
                cands = [var] + [v for v, off in pos.items() if rank + off == r and rank >= mrank]
                for var in cands:
                    if var in intervals:
                        a, b = intervals[var]
                        lo = a if lo is None else max(lo, a)
                        hi = b if hi is None else min(hi, b)
            if lo is None:
                continue
            for k, r in g:
                self._slice(views[k], r, lo, hi)
                done.add((k, r))
        for k, v in enumerate(views):
            for r, a in enumerate(v[2]):
                if (k, r) in done:
                    continue
                cands = [a[3]] + [var for var, off in pos.items() if len(v[2]) + off == r and len(v[2]) >= mrank]
                for var in cands:
                    if var in intervals:
                        lo, hi = intervals[var]
                        self._slice(v, r, lo, hi)

    def _slice(self, view, r, lo, hi):
        a = view[2][r]
        hi = min(hi, a[0])
        if a[3] is not None and a[3] != "*":
            self._derived[a[3]] = (lo, hi)
        view[0] += a[1] * lo
        if a[2]:
            view[1] = view[1] + a[2] * lo
        a[0] = max(0, hi - lo)

    def _check_bounds(self, ti, intervals):
        ranges = dict(self.ranges)
        for op in ti.operands:
            for e, n, dim in op.checks:
                if any(not is_index_var(v) and v not in ranges for v in e.free_vars()):
                    continue          # a register (run-time value): checked by the register_load clamp
                r = dict(ranges)
                for v in e.free_vars():
                    if is_index_var(v):
                        lo, hi = intervals.get(v, (0, self.sizes.get(v, 1)))
                        if hi <= lo:
                            return
                        r[v] = (lo, hi - 1)
                lo, hi = e.bounds(r)
                if lo is None or hi is None or lo < 0 or hi >= n:
                    _raise(E.err_tensor_access_out_of_bound,
                           "Out-of-bound access for tensor `%s` on dimension %d: index range [%s, %s] exceed "
                           "dimension size of %d" % (op.buf.name, dim, lo, hi, n), ti.loc)

    def _ap(self, op, view, ti):
        p0, off, axes = view
        if not isinstance(p0, int):
            p0 = p0.subs(self.fixed) if self.fixed else p0
            if not p0.is_const():
                _raise(E.err_invalid_argument, "partition start %s is not static here" % p0, ti.loc)
            p0 = int(p0)
        name = self.names.get(op.buf.name, op.buf.name)
        if op.buf.name in self.blocks:
            name, off = self._block_of(op, off, axes, ti)
        if op.buf.memory == "HBM":
            pat = [[a[2], a[0]] for a in axes] or [[1, 1]]
            return birpy.AccessPattern(name, D.bir_name(self.m.tensors[name].dtype), off, pat)
        dt = D.bir_name(op.dtype)
        if not axes:
            return birpy.AccessPattern(name, dt, off, [[1, 1]], p0, 1)
        a0 = axes[0]
        rest = [[a[2], a[0]] for a in axes[1:]]
        if a0[1] == 0 and a0[0] > 1:          # partition broadcast (DMA source only)
            return birpy.AccessPattern(name, dt, off, [[0, a0[0]]] + rest, p0, 1)
        return birpy.AccessPattern(name, dt, off, rest or [[1, 1]], p0, a0[0])


    def _memset_blocks(self, ti, view):
        """A memset over a contiguous run of several blocks of a tensor at non-consecutive addresses (the
        zeroing of a PSUM accumulator where it was created): one memset per block, or None."""
        op = ti.dsts[0]
        p0, off, axes = view
        off = off.subs(self.fixed) if self.fixed and not isinstance(off, int) else off
        if not isinstance(off, int):
            if not off.is_const():
                return None
            off = int(off)
        free = [a for a in axes[1:] if a[0] > 1]
        n, step = 1, 1
        for a in reversed(free):
            if a[2] != step:
                return None
            n *= a[0]
            step *= a[0]
        if not isinstance(p0, int) or not axes:
            return None
        nbytes, names = self.blocks[op.buf.name]
        per = nbytes // op.dtype.itemsize
        out, lo, hi = [], off, off + n
        dt = D.bir_name(op.dtype)
        while lo < hi:
            k = lo // per
            end = min(hi, (k + 1) * per)
            ap = birpy.AccessPattern(names[k], dt, lo - k * per, [[1, end - lo]], p0, axes[0][0])
            out.append(birpy.Instruction("memset", ti.engine, [ap], [], dict(ti.attrs),
                                         name="%s:%s" % (self.ctx.func_name, ti.loc.rsplit(":", 1)[-1])))
            lo = end
        return out

    def _in_one_block(self, op, view):
        p0, off, axes = view
        off = off.subs(self.fixed) if self.fixed and not isinstance(off, int) else off
        if not isinstance(off, int):
            if not off.is_const():
                return False
            off = int(off)
        nbytes, names = self.blocks[op.buf.name]
        per = nbytes // op.dtype.itemsize
        lo = off + sum(min(0, a[2] * (a[0] - 1)) for a in axes[1:])
        hi = off + sum(max(0, a[2] * (a[0] - 1)) for a in axes[1:])
        return lo // per == hi // per

    def _split_blocks(self, ti, ops, views):
        """An element-wise instruction whose access to a block tensor at non-consecutive addresses spans
        several blocks (a whole [B, par_dim(P), F] tensor copied at once): one instruction per index of the
        outermost free axis along which every piece lies in one block, or None."""
        shapes = {tuple(a[0] for a in v[2]) for v in views}
        if len(shapes) != 1:
            return None
        rank = len(views[0][2])
        for r in range(1, rank):
            if views[0][2][r][0] <= 1 or any(v[2][r][1] for v in views):
                continue
            pieces = []
            for k in range(views[0][2][r][0]):
                piece = []
                for v in views:
                    a = v[2][r]
                    off = v[1] + k * a[2]
                    piece.append([v[0], off, v[2][:r] + [[1, 0, 0, None]] + v[2][r + 1:]])
                pieces.append(piece)
            if all(self._in_one_block(op, pv) for piece in pieces for op, pv in zip(ops, piece)
                   if op.buf.name in self.blocks):
                nd = len(ti.dsts)
                attrs = {k: v for k, v in ti.attrs.items() if k not in ("partition_broadcast", "offset_expr")}
                out = []
                for piece in pieces:
                    aps = [self._ap(op, pv, ti) for op, pv in zip(ops, piece)]
                    out.append(birpy.Instruction(ti.opcode, ti.engine, aps[:nd], aps[nd:], dict(attrs),
                                                 name="%s:%s" % (self.ctx.func_name, ti.loc.rsplit(":", 1)[-1])))
                return out
        return None

    def _block_of(self, op, off, axes, ti):
        """(memloc, offset in it) of an access to a block tensor at non-consecutive addresses."""
        off = off.subs(self.fixed) if self.fixed and not isinstance(off, int) else off
        if not isinstance(off, int):
            if not off.is_const():
                _raise(E.err_invalid_argument, "the block of '%s' accessed depends on %s, which is not static here"
                       % (op.buf.name, off), ti.loc)
            off = int(off)
        nbytes, names = self.blocks[op.buf.name]
        per = nbytes // op.dtype.itemsize
        lo = off + sum(min(0, a[2] * (a[0] - 1)) for a in axes[1:])
        hi = off + sum(max(0, a[2] * (a[0] - 1)) for a in axes[1:])
        k = lo // per
        if hi // per != k or not 0 <= k < len(names):
            _raise(E.err_invalid_argument, "an access to '%s' spans several of its blocks, which are directly "
                   "allocated at non-consecutive addresses; access one block at a time" % op.buf.name, ti.loc)
        return names[k], off - k * per


# instructions whose element k of every operand only involves element k of the others (so they can be
# cut along any free axis)
_ELEMENTWISE = {"tensor_copy", "tensor_tensor", "tensor_scalar", "scalar_tensor_tensor", "dma_copy", "activation"}


def lower(ctx, returned, module_name=None):
    """(birpy.Module, aliases {output name: input name})."""
    lw = Lowerer(ctx, returned, module_name)
    m = lw.lower()
    return m, lw.aliases
