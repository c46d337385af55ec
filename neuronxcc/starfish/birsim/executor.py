"""birsim's interpreter: walks the BIR body in program order and executes each
instruction against the machine state (``state.MachineState``), feeding the
timeline. This module is the executable definition of BIR semantics.

Numeric rules:
  * ACT, PE and DVE arithmetic compute in fp32; results are cast on output
    (RNE for float targets, truncation + saturation for integer targets).
  * PE matmul accumulates in fp32 (``alu.matmul_f``, ``_pe``): each result is
    the fp32 sum over K in order of the fp32 products, none fused.
  * An instruction runs in the exact integer domain (int64, wrapped on store)
    when it is on POOL and every operand has an integer dtype, or it is a
    bitvec ALU op (any engine that may run it), or it only moves data
    (tensor_copy/transpose/select on DVE/POOL, DMA) between integer dtypes.
  * Same-dtype tensor_copy on DVE/POOL, same-dtype transposes and
    same-dtype DMAs are bit-exact raw copies.
  * Operands pair element by element in the row-major order of their shapes.
  * A register_load clamps the int32 value to [min, max] when given.
  * While loops stop with BirSimError after ``max_trips`` (default 1e6) trips.
"""
import numpy as np

from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birpy import dtypes as _dt
from neuronxcc.starfish.birpy.opcodes import ALU_OPS, OPCODES, full_attrs
from neuronxcc.starfish.birsim import _interp, alu
from neuronxcc.starfish.birsim._apinfo import regions_of
from neuronxcc.starfish.birsim.plans import ROW_VAR, prepare
from neuronxcc.starfish.birsim.timeline import Timeline

__all__ = ["Executor"]

_F = np.float32
DEFAULT_MAX_TRIPS = 1000000


_INT_NAMES = frozenset(d.name for d in _dt.DTYPES.values() if d.is_int)


def _all_int(aps):
    for a in aps:
        if a.dtype not in _INT_NAMES:
            return False
    return True


def _width(ap):
    return 8 * _dt.itemsize(ap.dtype)


class Executor:
    ranks = None      # birsim.collective.RankContext in a multi-rank run (None: one core)

    def __init__(self, module, state, timeline, custom_op_libs=None, plans=True):
        self.m = module
        self.st = state
        self.tl = timeline
        self.env = {}
        self.regs = self.env      # register file; the same dict as env in program order
        self.custom_op_libs = custom_op_libs
        self._plans = {}
        self._bodies = {}         # the typed loop's per-body caches (birsim._interp)
        self.plans = plans        # False: every instruction runs its op_* handler (the reference path)
        self._indirect = {}
        from neuronxcc.starfish.birsim import nki_ops
        self._handlers = {name: getattr(self, "op_" + name, None) or nki_ops.handler(self, name) for name in OPCODES}

    def close(self):
        """Drop the cached plans and handlers (they refer back to this executor), so the
        machine state can be freed, and its buffers reused, as soon as nothing else holds it."""
        self._plans = {}
        self._bodies = {}
        self._handlers = {}
        self._indirect = {}

    # -- control --------------------------------------------------------------
    def run(self):
        with np.errstate(all="ignore"):
            cls = type(self)
            if self.plans and cls.execute is Executor.execute and cls.run_body is Executor.run_body \
                    and type(self.tl).step is Timeline.step:
                # the typed loop (birsim._interp), same semantics as run_body/execute below (a subclass
                # that overrides either, e.g. to record instances, gets the Python loop)
                _interp.run_body(self, self.m.body, self.env, self.regs, self.tl, DEFAULT_MAX_TRIPS)
            else:
                self.run_body(self.m.body)

    def run_body(self, body):
        env = self.env
        for n in body:
            k = n.kind
            if k == "inst":
                self.execute(n)
            elif k == "loop":
                saved = env.get(n.var)
                for v in range(n.start, n.stop, n.step):
                    env[n.var] = v
                    self.run_body(n.body)
                if saved is None:
                    env.pop(n.var, None)
                else:
                    env[n.var] = saved
            elif k == "while":
                limit = n.max_trips if n.max_trips is not None else DEFAULT_MAX_TRIPS
                trips = 0
                while self._reg(n.cond, n) != 0:
                    trips += 1
                    if trips > limit:
                        raise BirSimError("While #%s on %s ran more than %d trips" % (n.id, n.cond, limit))
                    self.run_body(n.body)
            else:
                self.run_body(n.then_body if self._reg(n.cond, n) != 0 else n.else_body)

    def _reg(self, name, node):
        try:
            return self.regs[name]
        except KeyError:
            raise BirSimError("%s #%s reads register %r before any register_load" % (node.kind, node.id, name))

    def execute(self, instr):
        p = self._plans.get(id(instr))
        if p is None or p[0] is not instr:
            p = self._prepare(instr)
        env = self.env
        try:
            p[1](env)
        except BirSimError as e:
            raise BirSimError("instruction #%s %s@%s: %s" % (instr.id, instr.opcode, instr.engine, e.message))
        if p[2] is None:
            regions = self._indirect_regions(instr, p[3])
        else:
            regions = regions_of(p[2], env)
        self.tl.step(instr, env, regions)

    def _prepare(self, instr):
        """(instr, run(env), [(APInfo, is_write)] or None for indirect DMAs, attrs), cached per instruction."""
        h = self._handlers.get(instr.opcode)
        if h is None:
            raise BirSimError("instruction #%s: unknown opcode %r" % (instr.id, instr.opcode))
        attrs = full_attrs(instr)
        infos = None
        run = None
        try:
            if instr.opcode not in ("dma_gather", "dma_scatter"):
                infos = [(self.st._static(ap), 1) for ap in instr.dsts] + \
                    [(self.st._static(ap), 0) for ap in instr.srcs]
            if self.plans:
                run = prepare(self, instr, attrs)
        except BirSimError as e:
            raise BirSimError("instruction #%s %s@%s: %s" % (instr.id, instr.opcode, instr.engine, e.message))
        if run is None:
            def run(env, h=h, instr=instr, attrs=attrs):
                h(instr, attrs)
        p = (instr, run, infos, attrs)
        self._plans[id(instr)] = p
        return p

    def _indirect_regions(self, instr, attrs):
        st, env = self.st, self.env
        ind = instr.srcs[0] if instr.opcode == "dma_gather" else instr.dsts[0]
        row, _ = self.indirect_aps(instr)
        out = []
        for ap, w in [(x, True) for x in instr.dsts] + [(x, False) for x in instr.srcs]:
            if ap is ind:
                stride = int(attrs["index_stride"])
                env[ROW_VAR] = int(attrs["index_min"]) * stride
                a = st.region(row, env)
                env[ROW_VAR] = int(attrs["index_max"]) * stride
                b = st.region(row, env)
                env.pop(ROW_VAR, None)
                out.append((a[0], min(a[1], b[1]), max(a[2], b[2]), min(a[3], b[3]), max(a[4], b[4]), w))
            else:
                out.append(st.region(ap, env) + (w,))
        return out

    # -- helpers ----------------------------------------------------------------
    def rf(self, ap):
        return self.st.read_f(ap, self.env)

    def ri(self, ap):
        return self.st.read_i(ap, self.env)

    def wf(self, ap, v):
        self.st.write_f(ap, self.env, v)

    def wi(self, ap, v):
        self.st.write_i(ap, self.env, v)

    def _pf(self, ap):
        """Read as [P, F] fp32 (HBM: [1, N])."""
        x = self.rf(ap)
        return x.reshape(ap.num_partitions or 1, -1)

    def _pi(self, ap):
        return self.ri(ap).reshape(ap.num_partitions or 1, -1)

    def _scalar(self, attrs, key, flag, srcs, k, intdom):
        """(value, next src index): a float/int attribute or a [P,1] operand."""
        if attrs.get(flag):
            ap = srcs[k]
            return (self._pi(ap) if intdom else self._pf(ap)), k + 1
        v = attrs.get(key)
        if intdom:
            return np.int64(int(v)), k
        return _F(v), k

    def _int_domain(self, instr):
        return instr.engine == "POOL" and _all_int(instr.dsts) and _all_int(instr.srcs)

    # -- PE -----------------------------------------------------------------------
    def op_matmul(self, instr, attrs):
        out, st, mv = instr.dsts[0], instr.srcs[0], instr.srcs[1]
        s = self._pf(st)
        m = self._pf(mv)
        r = alu.matmul_f(s, m)
        if not attrs["psum_zero"]:
            r = np.add(r, self._pf(out), dtype=_F)
        self.wf(out, r)

    def op_transpose(self, instr, attrs):
        out, src = instr.dsts[0], instr.srcs[0]
        p = src.num_partitions
        if _all_int([out, src]) or out.dtype == src.dtype and _dt.get(src.dtype).is_int:
            self.wi(out, self._pi(src).reshape(p, -1).T)
        elif out.dtype == src.dtype:
            raw = self.st.read_raw(src, self.env)
            isz = _dt.itemsize(src.dtype)
            arr = raw.reshape(p, -1, isz).transpose(1, 0, 2)
            self.st.write_raw(out, self.env, np.ascontiguousarray(arr).reshape(-1))
        else:
            self.wf(out, self._pf(src).T)

    # -- ACT ------------------------------------------------------------------------
    def op_activation(self, instr, attrs):
        out, src = instr.dsts[0], instr.srcs[0]
        x = self._pf(src)
        k = 1
        bias, k = self._scalar(attrs, "bias", "bias_ap", instr.srcs, k, False)
        scale, k = self._scalar(attrs, "scale", "scale_ap", instr.srcs, k, False)
        pre = x
        if attrs.get("scale_ap") or scale != 1:
            pre = np.multiply(pre, scale, dtype=_F)
        if attrs.get("bias_ap") or bias != 0:
            pre = np.add(pre, bias, dtype=_F)
        y = alu.act(attrs["func"], pre, attrs.get("alpha", 0.01))
        self.wf(out, y)
        if attrs.get("reduce"):
            self.wf(instr.dsts[1], np.sum(y, axis=1, dtype=_F).reshape(-1, 1))

    # -- elementwise ----------------------------------------------------------------
    def op_tensor_tensor(self, instr, attrs):
        out, a, b = instr.dsts[0], instr.srcs[0], instr.srcs[1]
        op = attrs["op"]
        if self._int_domain(instr) or ALU_OPS[op] == "bitvec":
            self.wi(out, alu.alu_i(op, self._pi(a), self._pi(b), _width(a)))
        else:
            self.wf(out, alu.alu_f(op, self._pf(a), self._pf(b)))

    def op_tensor_scalar(self, instr, attrs):
        out, src = instr.dsts[0], instr.srcs[0]
        ops = [attrs["op0"]] + ([attrs["op1"]] if attrs.get("op1") else [])
        intdom = self._int_domain(instr) or any(ALU_OPS[o] == "bitvec" for o in ops)
        x = self._pi(src) if intdom else self._pf(src)
        k = 1
        s0, k = self._scalar(attrs, "operand0", "operand0_ap", instr.srcs, k, intdom)
        s1, k = self._scalar(attrs, "operand1", "operand1_ap", instr.srcs, k, intdom)
        fn = (lambda o, p, q: alu.alu_i(o, p, q, _width(src))) if intdom else alu.alu_f
        x = fn(ops[0], s0, x) if attrs.get("reverse0") else fn(ops[0], x, s0)
        if len(ops) > 1:
            x = fn(ops[1], s1, x) if attrs.get("reverse1") else fn(ops[1], x, s1)
        (self.wi if intdom else self.wf)(out, x)

    def op_scalar_tensor_tensor(self, instr, attrs):
        out, a, b = instr.dsts[0], instr.srcs[0], instr.srcs[1]
        ops = (attrs["op0"], attrs["op1"])
        intdom = self._int_domain(instr) or any(ALU_OPS[o] == "bitvec" for o in ops)
        s0, _ = self._scalar(attrs, "operand0", "operand0_ap", instr.srcs, 2, intdom)
        if intdom:
            fn = lambda o, p, q: alu.alu_i(o, p, q, _width(a))  # noqa: E731
            x, y = self._pi(a), self._pi(b)
        else:
            fn = alu.alu_f
            x, y = self._pf(a), self._pf(b)
        t = fn(ops[0], s0, x) if attrs.get("reverse0") else fn(ops[0], x, s0)
        (self.wi if intdom else self.wf)(out, fn(ops[1], t, y))

    def op_tensor_tensor_scan(self, instr, attrs):
        from neuronxcc.starfish.birsim import _kernels as K
        out, a, b = instr.dsts[0], instr.srcs[0], instr.srcs[1]
        d0 = np.ascontiguousarray(self._pf(a), dtype=_F)
        d1 = np.ascontiguousarray(self._pf(b), dtype=_F)
        p = d0.shape[0]
        if attrs.get("initial_ap"):
            init = np.ascontiguousarray(self._pf(instr.srcs[2]).reshape(-1), dtype=_F)
        else:
            init = np.full(p, attrs["initial"], _F)
        res = np.empty_like(d0)
        K.scan_f32(d0, d1, init, K.SCAN_OPS[attrs["op0"]], K.SCAN_OPS[attrs["op1"]], res)
        self.wf(out, res)

    def op_tensor_copy(self, instr, attrs):
        out, src = instr.dsts[0], instr.srcs[0]
        if instr.engine != "ACT" and out.dtype == src.dtype:
            self.st.copy_raw(out, src, self.env)
        elif instr.engine != "ACT" and _all_int([out, src]):
            self.wi(out, self.ri(src))
        else:
            self.wf(out, self.rf(src))

    def op_select(self, instr, attrs):
        out, pred, t, f = instr.dsts[0], instr.srcs[0], instr.srcs[1], instr.srcs[2]
        cond = self._pf(pred) != 0
        if _all_int([out, t, f]):
            self.wi(out, np.where(cond, self._pi(t), self._pi(f)))
        else:
            self.wf(out, np.where(cond, self._pf(t), self._pf(f)))

    def op_memset(self, instr, attrs):
        out = instr.dsts[0]
        v = attrs["value"]
        n = out.num_elements
        if _dt.get(out.dtype).is_int and float(v) == int(v):
            self.wi(out, np.full(n, int(v), np.int64))
        else:
            self.wf(out, np.full(n, v, _F))

    def _iota_grid(self, attrs, parts):
        pat = attrs["pattern"]
        v = np.full((parts,) + tuple(int(n) for _, n in pat), int(attrs.get("offset", 0)), np.int64)
        v += (np.arange(parts, dtype=np.int64) * int(attrs.get("channel_multiplier", 0))).reshape((parts,) + (1,) * len(pat))
        for k, (step, n) in enumerate(pat):
            shape = [1] * (len(pat) + 1)
            shape[k + 1] = int(n)
            v += (np.arange(int(n), dtype=np.int64) * int(step)).reshape(shape)
        # int32 arithmetic on GpSimd
        return ((v + (1 << 31)) % (1 << 32) - (1 << 31)).reshape(parts, -1)

    def op_iota(self, instr, attrs):
        out = instr.dsts[0]
        v = self._iota_grid(attrs, out.num_partitions)
        if _dt.get(out.dtype).is_int:
            self.wi(out, v)
        else:
            self.wf(out, v.astype(_F))

    def op_affine_select(self, instr, attrs):
        out, src = instr.dsts[0], instr.srcs[0]
        v = self._iota_grid(attrs, out.num_partitions)
        cond = alu.compare_f(attrs["cmp"], v, 0)
        if _all_int([out, src]) and float(attrs["on_false"]) == int(attrs["on_false"]):
            self.wi(out, np.where(cond, self._pi(src), int(attrs["on_false"])))
        else:
            self.wf(out, np.where(cond, self._pf(src), _F(attrs["on_false"])))

    # -- reductions -------------------------------------------------------------------
    def op_tensor_reduce(self, instr, attrs):
        out, src = instr.dsts[0], instr.srcs[0]
        ax = int(attrs["axes"])
        pat = src.free_shape
        keep = int(np.prod(pat[:len(pat) - ax], dtype=np.int64))
        op = attrs["op"]
        intdom = (self._int_domain(instr) or op in ("bitwise_and", "bitwise_or"))
        x = (self._pi(src) if intdom else self._pf(src)).reshape(src.num_partitions, keep, -1)
        r = (alu.reduce_i if intdom else alu.reduce_f)(op, x, 2)
        if attrs.get("negate"):
            r = -r
        (self.wi if intdom else self.wf)(out, r)

    def op_partition_reduce(self, instr, attrs):
        out, src = instr.dsts[0], instr.srcs[0]
        op = attrs["op"]
        intdom = self._int_domain(instr) or op in ("bitwise_and", "bitwise_or")
        x = self._pi(src) if intdom else self._pf(src)
        (self.wi if intdom else self.wf)(out, (alu.reduce_i if intdom else alu.reduce_f)(op, x, 0))

    # -- data movement and sequencer ----------------------------------------------------
    def op_dma_copy(self, instr, attrs):
        out, src = instr.dsts[0], instr.srcs[0]
        if out.dtype == src.dtype:
            self.st.copy_raw(out, src, self.env)
        elif _all_int([out, src]):
            self.wi(out, self.ri(src))
        else:
            self.wf(out, self.rf(src))

    def _rows(self, instr, attrs):
        """Element deltas of each partition's row for gather/scatter (None: skip that row, oob='skip')."""
        idx = self.ri(instr.srcs[1]).reshape(-1)
        lo, hi, stride = int(attrs["index_min"]), int(attrs["index_max"]), int(attrs["index_stride"])
        oob = attrs.get("oob", "clamp")
        if oob != "clamp":
            bad = (idx < lo) | (idx > hi)
            if bad.any():
                if oob == "error":
                    ind = instr.srcs[0] if instr.opcode == "dma_gather" else instr.dsts[0]
                    t = self.m.tensors.get(ind.target)
                    k = int(idx[np.argmax(bad)])
                    base = int(ind.offset.eval(self.env)) if hasattr(ind.offset, "eval") else 0
                    size = t.num_elements if t is not None else 0
                    raise BirSimError("index %d is out of bounds for axis 0 with size %d" % (base + k * stride, size))
                return [None if b else int(v) * stride for v, b in zip(idx.tolist(), bad.tolist())]
        return np.clip(idx, lo, hi) * stride

    def _move(self, dst, src):
        if dst.dtype == src.dtype:
            self.st.copy_raw(dst, src, self.env)
        elif _all_int([dst, src]):
            self.wi(dst, self.ri(src))
        else:
            self.wf(dst, self.rf(src))

    def indirect_aps(self, instr):
        """(row AP with offset + __row__, [per-partition slices of the on-chip side]) cached per instruction."""
        c = self._indirect.get(id(instr))
        if c is None or c[0] is not instr:
            from neuronxcc.pelican import var
            from neuronxcc.starfish.birpy.ir import to_expr
            ind, onchip = (instr.srcs[0], instr.dsts[0]) if instr.opcode == "dma_gather" else \
                (instr.dsts[0], instr.srcs[0])
            if onchip.num_partitions is None:
                raise BirSimError("%s #%s: the side a row per partition moves to or from must be on chip (SBUF), "
                                  "got %r" % (instr.opcode, instr.id, getattr(onchip, "tensor", onchip)))
            row = ind.copy(offset=to_expr(ind.offset) + var(ROW_VAR))
            parts = [onchip.copy(start_partition=onchip.start_partition + p, num_partitions=1)
                     for p in range(onchip.num_partitions)]
            c = (instr, row, parts)
            self._indirect[id(instr)] = c
        return c[1], c[2]

    def op_dma_gather(self, instr, attrs):
        row, parts = self.indirect_aps(instr)
        env = self.env
        rows = self._rows(instr, attrs)
        for p, d in enumerate(rows if isinstance(rows, list) else rows.tolist()):
            if d is None:
                continue
            env[ROW_VAR] = d
            self._move(parts[p], row)
        env.pop(ROW_VAR, None)

    def op_dma_scatter(self, instr, attrs):
        row, parts = self.indirect_aps(instr)
        acc = attrs.get("accumulate") == "add"
        env = self.env
        rows = self._rows(instr, attrs)
        for p, d in enumerate(rows if isinstance(rows, list) else rows.tolist()):
            if d is None:
                continue
            env[ROW_VAR] = d
            one = parts[p]
            if not acc:
                self._move(row, one)
            elif _all_int([row, one]):
                self.wi(row, self.ri(row).reshape(-1) + self.ri(one).reshape(-1))
            else:
                self.wf(row, np.add(self.rf(row).reshape(-1), self.rf(one).reshape(-1), dtype=_F))
        env.pop(ROW_VAR, None)

    def op_register_load(self, instr, attrs):
        v = int(self.ri(instr.srcs[0]).reshape(-1)[0])
        v = ((v + (1 << 31)) % (1 << 32)) - (1 << 31)
        if attrs.get("min") is not None:
            v = max(v, int(attrs["min"]))
        if attrs.get("max") is not None:
            v = min(v, int(attrs["max"]))
        self.regs[attrs["register"]] = v
        if self.env is not self.regs:
            self.env[attrs["register"]] = v

    def op_collective(self, instr, attrs):
        from neuronxcc.starfish.birsim.collective import execute
        execute(self, instr, attrs)

    def op_nop(self, instr, attrs):
        pass

    def op_custom_op(self, instr, attrs):
        from neuronxcc.starfish.birsim.customop import run_custom_op
        src = instr.srcs[0]
        x = np.ascontiguousarray(self._pf(src))
        vals, idx = run_custom_op(self.custom_op_libs, attrs, x)
        self.wf(instr.dsts[0], vals)
        if attrs.get("with_indices"):
            self.wi(instr.dsts[1], idx.astype(np.int64))
