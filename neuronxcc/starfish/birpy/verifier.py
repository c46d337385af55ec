"""BIR verifier: the machine rules, checked statically for all loop iterations.

Rules (each failure raises ``BirVerifyError`` naming the instruction):
  names      every AP target is a tensor or memloc; opcode known; engine allowed;
             operand counts match the opcode's roles; attrs are known keys
  memories   each operand's memory is allowed for its role and engine
             (TensorE reads SBUF / writes PSUM; GpSimd never PSUM; DMA HBM/SBUF)
  partitions 1 <= num_partitions <= 128; the AP's partitions lie in the memloc;
             memlocs fit the target's SBUF/PSUM; for compute engines the start
             partition is 0 when P > 64, in {0, 64} when P > 32, else in {0,32,64,96}
  dtypes     on-chip dtypes only in SBUF/PSUM; HBM AP dtype = tensor dtype;
             matmul inputs float (fp32 with fp32 only), PSUM output float32;
             bitvec ALU ops on integer dtypes; register loads from int32
  bounds     every element touched is inside the target for every loop
             iteration and every register value in [min, max] of its loads
             (pelican interval bounds); registers in addresses need min/max
  matmul     K <= 128, M <= 128, N <= 512, out [M, N], out within one 2 KiB PSUM
             bank per partition
  shapes     elementwise operands agree in partitions and free size; [P,1]
             scalar operands; reductions/transposes/custom ops per opcode
  control    loop variables do not shadow; While/If conditions are loaded registers
"""
import numbers

import numpy as np

from neuronxcc.errors import BirVerifyError
from neuronxcc.hwm import get_target
from neuronxcc.starfish.birpy import dtypes as _dt
from neuronxcc.starfish.birpy.opcodes import (ACT_FUNCS, ALU_OPS, COMPUTE_ENGINES, CUSTOM_OP_FUNCTIONS, OPCODES,
                                              REDUCE_OPS, full_attrs, operand_roles)

__all__ = ["verify"]

_FLOAT_MM = ("float32", "tfloat32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn")
_MM_WIDE = ("float32", "tfloat32")      # the ISA: an fp32 or tf32 input needs an fp32 or tf32 partner


class _Ctx:
    def __init__(self, module, tm):
        self.m = module
        self.tm = tm
        self.reg_ranges = {}
        for n in module.walk():
            if n.kind == "inst" and n.opcode == "register_load":
                r = n.attrs.get("register")
                if not isinstance(r, str):
                    _fail(n, "register_load needs a register name, got %r" % (r,))
                lo, hi = n.attrs.get("min"), n.attrs.get("max")
                cur = self.reg_ranges.get(r, "unset")
                if lo is None or hi is None:
                    self.reg_ranges[r] = None
                elif not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)) or lo > hi:
                    _fail(n, "register_load min <= max must be integers, got min=%r max=%r" % (lo, hi))
                elif cur != None:  # noqa: E711  (None marks an unbounded load)
                    if cur == "unset":
                        self.reg_ranges[r] = (int(lo), int(hi))
                    else:
                        self.reg_ranges[r] = (min(cur[0], int(lo)), max(cur[1], int(hi)))


def _fail(instr, msg):
    where = "instruction #%s %s@%s" % (instr.id, instr.opcode, instr.engine) if instr is not None else "module"
    if instr is not None and instr.name:
        where += " (%s)" % instr.name
    raise BirVerifyError("BIR verify: %s: %s" % (where, msg))


def _part_size(tm, memory):
    return tm.sbuf_partition_bytes if memory == "SBUF" else tm.psum_partition_bytes


def _check_memlocs(ctx):
    tm = ctx.tm
    for x in ctx.m.memlocs.values():
        if not 1 <= x.partitions <= tm.num_partitions:
            _fail(None, "memloc %s has %d partitions (1..%d)" % (x.name, x.partitions, tm.num_partitions))
        size = _part_size(tm, x.memory)
        if not 0 < x.bytes_per_partition <= size:
            _fail(None, "memloc %s has %d bytes per partition (%s holds %d)" % (x.name, x.bytes_per_partition, x.memory, size))
        if (x.start_partition is None) != (x.byte_offset is None):
            _fail(None, "memloc %s is half allocated" % x.name)
        if x.allocated:
            if x.start_partition < 0 or x.start_partition + x.partitions > tm.num_partitions:
                _fail(None, "memloc %s partitions %d..%d outside %s" % (x.name, x.start_partition,
                                                                      x.start_partition + x.partitions, x.memory))
            if x.byte_offset < 0 or x.byte_offset + x.bytes_per_partition > size:
                _fail(None, "memloc %s bytes %d..%d outside the %d-byte %s partition" % (
                    x.name, x.byte_offset, x.byte_offset + x.bytes_per_partition, size, x.memory))
    for name in ctx.m.inputs + ctx.m.outputs:
        if name not in ctx.m.tensors:
            _fail(None, "I/O name %s is not a tensor" % name)
    for t in ctx.m.tensors.values():
        if t.dtype not in _dt.DTYPES or any(d < 0 for d in t.shape):
            _fail(None, "tensor %s has dtype %r and shape %s" % (t.name, t.dtype, list(t.shape)))
        if t.kind == "const" and t.data is None:
            _fail(None, "const tensor %s has no data" % t.name)
        if t.arena_offset is not None and (t.kind != "scratch" or t.arena_offset < 0):
            _fail(None, "tensor %s (%s) has arena offset %d: only scratch tensors live in the scratch arena"
                  % (t.name, t.kind, t.arena_offset))


def _offset_bounds(ctx, instr, ap, ranges):
    rng = dict(ranges)
    for v in ap.offset.free_vars():
        if v in rng:
            continue
        r = ctx.reg_ranges.get(v, "unset")
        if r == "unset":
            _fail(instr, "offset of %s uses %r, which is neither a loop variable nor a loaded register" % (ap.target, v))
        if r is None:
            _fail(instr, "offset of %s uses register %r whose loads give no min/max" % (ap.target, v))
        rng[v] = r
    b = ap.offset.bounds(rng)
    if b is None or b[0] is None or b[1] is None:
        _fail(instr, "offset %s of %s is unbounded" % (ap.offset, ap.target))
    return b


def _check_ap(ctx, instr, ap, ranges, allowed, role, compute):
    m, tm = ctx.m, ctx.tm
    try:
        t = m.target_of(ap)
    except KeyError:
        _fail(instr, "operand %s names unknown target %r" % (role, ap.target))
    if ap.dtype not in _dt.DTYPES:
        _fail(instr, "operand %s has unknown dtype %r" % (role, ap.dtype))
    mem = t.memory
    if mem not in allowed:
        _fail(instr, "operand %s is in %s; %s@%s may use %s there" % (role, mem, instr.opcode, instr.engine,
                                                                       "/".join(allowed) or "no memory"))
    for s, n in ap.pattern:
        if n < 1:
            _fail(instr, "operand %s has a dimension of size %d" % (role, n))
    lo_o, hi_o = _offset_bounds(ctx, instr, ap, ranges)
    lo_p, hi_p = ap.element_extent()
    lo, hi = lo_o + lo_p, hi_o + hi_p
    if mem == "HBM":
        if ap.num_partitions is not None or ap.start_partition is not None:
            _fail(instr, "HBM operand %s must not have partitions" % role)
        if ap.dtype != t.dtype:
            _fail(instr, "HBM operand %s dtype %s differs from tensor %s (%s)" % (role, ap.dtype, t.name, t.dtype))
        if lo < 0 or hi >= t.num_elements:
            _fail(instr, "operand %s reaches elements %d..%d of %s which has %d" % (role, lo, hi, t.name, t.num_elements))
        return
    if ap.num_partitions is None or ap.start_partition is None:
        _fail(instr, "on-chip operand %s needs start_partition and num_partitions" % role)
    if not _dt.get(ap.dtype).onchip:
        _fail(instr, "dtype %s cannot live in %s" % (ap.dtype, mem))
    if not 1 <= ap.num_partitions <= tm.num_partitions:
        _fail(instr, "operand %s has %d partitions (1..%d)" % (role, ap.num_partitions, tm.num_partitions))
    if ap.start_partition < 0 or ap.start_partition + ap.num_partitions > t.partitions:
        _fail(instr, "operand %s partitions %d..%d outside memloc %s (%d partitions)" % (
            role, ap.start_partition, ap.start_partition + ap.num_partitions, t.name, t.partitions))
    size = ap.itemsize
    if lo < 0 or (hi + 1) * size > t.bytes_per_partition:
        _fail(instr, "operand %s reaches bytes %d..%d of memloc %s (%d bytes per partition)" % (
            role, lo * size, (hi + 1) * size, t.name, t.bytes_per_partition))
    if compute:
        start = (t.start_partition or 0) + ap.start_partition
        p = ap.num_partitions
        ok = (0,) if p > 64 else (0, 64) if p > 32 else (0, 32, 64, 96)
        if start not in ok:
            _fail(instr, "operand %s starts at partition %d; %d partitions may start at %s" % (role, start, p, ok))
    return lo, hi


def _pelican_var(name):
    from neuronxcc.pelican import var
    return var(name)


def _same_shape(instr, a, b, what):
    if a.num_partitions != b.num_partitions or a.free_size != b.free_size:
        _fail(instr, "%s: shapes [%s,%d] and [%s,%d] differ" % (what, a.num_partitions, a.free_size,
                                                                 b.num_partitions, b.free_size))


def _scalar_ap(instr, a, p, what):
    if a.num_partitions != p or a.free_size != 1:
        _fail(instr, "%s must be [%d,1], got [%s,%d]" % (what, p, a.num_partitions, a.free_size))


def _check_semantics(ctx, instr, attrs, bytes_ranges):
    op = instr.opcode
    d, s = instr.dsts, instr.srcs
    m = ctx.m
    if op == "matmul":
        out, st, mv = d[0], s[0], s[1]
        k, mm, nn = st.num_partitions, st.free_size, mv.free_size
        if mv.num_partitions != k:
            _fail(instr, "stationary K=%d and moving K=%d differ" % (k, mv.num_partitions))
        if k > 128 or mm > ctx.tm.gemm_stationary_fmax or nn > ctx.tm.gemm_moving_fmax:
            _fail(instr, "matmul sizes K=%d M=%d N=%d exceed K<=128, M<=%d, N<=%d" % (
                k, mm, nn, ctx.tm.gemm_stationary_fmax, ctx.tm.gemm_moving_fmax))
        if out.num_partitions != mm or out.free_size != nn:
            _fail(instr, "matmul output must be [M=%d, N=%d], got [%d,%d]" % (mm, nn, out.num_partitions, out.free_size))
        if out.dtype != "float32":
            _fail(instr, "matmul output dtype must be float32 (PSUM accumulates in fp32), got %s" % out.dtype)
        for a in (st, mv):
            if a.dtype not in _FLOAT_MM:
                _fail(instr, "matmul input dtype %s is not a PE input type" % a.dtype)
        if (st.dtype in _MM_WIDE) != (mv.dtype in _MM_WIDE):
            _fail(instr, "matmul inputs: fp32/tf32 must be paired with fp32/tf32 (got %s, %s)" % (st.dtype, mv.dtype))
        lo, hi = bytes_ranges[0]
        loc = m.memlocs[out.target]
        base = loc.byte_offset or 0
        bank = ctx.tm.psum_bank_bytes
        b0, b1 = base + lo * 4, base + (hi + 1) * 4 - 1
        if b0 // bank != b1 // bank:
            _fail(instr, "matmul output bytes %d..%d cross a %d-byte PSUM bank" % (b0, b1 + 1, bank))
    elif op == "transpose":
        out, src = d[0], s[0]
        if out.num_partitions != src.free_size or out.free_size != src.num_partitions:
            _fail(instr, "transpose of [%d,%d] must write [%d,%d], got [%d,%d]" % (
                src.num_partitions, src.free_size, src.free_size, src.num_partitions, out.num_partitions, out.free_size))
        lim = 128 if instr.engine == "PE" else 32
        if src.num_partitions > lim or src.free_size > lim:
            _fail(instr, "%s transpose is limited to %dx%d" % (instr.engine, lim, lim))
        if out.dtype != src.dtype and not (instr.engine == "PE" and out.dtype == "float32"):
            _fail(instr, "transpose output dtype %s must equal input dtype %s" % (out.dtype, src.dtype))
    elif op == "activation":
        if attrs["func"] not in ACT_FUNCS:
            _fail(instr, "unknown activation function %r" % attrs["func"])
        _same_shape(instr, d[0], s[0], "activation in/out")
        i = 1
        if attrs["bias_ap"]:
            _scalar_ap(instr, s[i], s[0].num_partitions, "bias")
            i += 1
        if attrs["scale_ap"]:
            _scalar_ap(instr, s[i], s[0].num_partitions, "scale")
        if attrs["reduce"] not in (None, "add"):
            _fail(instr, "activation reduce must be 'add'")
        if attrs["reduce"]:
            _scalar_ap(instr, d[1], s[0].num_partitions, "accum")
    elif op in ("tensor_tensor", "tensor_scalar", "scalar_tensor_tensor"):
        ops = [attrs["op"]] if op == "tensor_tensor" else [attrs["op0"]] + ([attrs["op1"]] if attrs.get("op1") else [])
        for o in ops:
            if o not in ALU_OPS:
                _fail(instr, "unknown ALU op %r" % o)
            if ALU_OPS[o] == "bitvec" and not all(_dt.is_int(a.dtype) for a in instr.operands):
                _fail(instr, "bitvec op %s needs integer dtypes" % o)
        _same_shape(instr, d[0], s[0], "in/out")
        if op != "tensor_scalar":
            _same_shape(instr, d[0], s[1], "in1/out")
        if op == "tensor_tensor" and instr.engine == "DVE" and all(m.memory_of(a) == "PSUM" for a in s):
            _fail(instr, "tensor_tensor inputs may not both be in PSUM")
        if op == "tensor_scalar" and instr.engine == "ACT" and \
                (attrs["op0"] not in ("mult", "add") or attrs.get("op1") not in (None, "add", "mult")):
            _fail(instr, "ScalarE tensor_scalar supports only mult and add")
        k = 1 if op == "tensor_scalar" else 2
        for flag in ("operand0_ap", "operand1_ap"):
            if attrs.get(flag):
                _scalar_ap(instr, s[k], s[0].num_partitions, flag[:-3])
                k += 1
    elif op == "tensor_tensor_scan":
        from neuronxcc.starfish.birpy.opcodes import SCAN_OPS
        for o in (attrs["op0"], attrs["op1"]):
            if o not in SCAN_OPS:
                _fail(instr, "scan op %r is not one of %s" % (o, ", ".join(SCAN_OPS)))
        _same_shape(instr, d[0], s[0], "in0/out")
        _same_shape(instr, d[0], s[1], "in1/out")
        if attrs["initial_ap"]:
            _scalar_ap(instr, s[2], s[0].num_partitions, "initial")
    elif op == "tensor_reduce":
        if attrs["op"] not in REDUCE_OPS:
            _fail(instr, "unknown reduce op %r" % attrs["op"])
        ax = int(attrs["axes"])
        if not 1 <= ax <= min(4, len(s[0].pattern)):
            _fail(instr, "reduce axes=%d must be in 1..min(4, %d)" % (ax, len(s[0].pattern)))
        keep = 1
        for _, n in s[0].pattern[:len(s[0].pattern) - ax]:
            keep *= n
        if d[0].num_partitions != s[0].num_partitions or d[0].free_size != keep:
            _fail(instr, "reduce output must be [%d,%d], got [%d,%d]" % (s[0].num_partitions, keep,
                                                                         d[0].num_partitions, d[0].free_size))
    elif op == "partition_reduce":
        if attrs["op"] not in REDUCE_OPS:
            _fail(instr, "unknown reduce op %r" % attrs["op"])
        if d[0].num_partitions != 1 or d[0].free_size != s[0].free_size:
            _fail(instr, "partition_reduce output must be [1,%d]" % s[0].free_size)
    elif op in ("tensor_copy", "dma_copy"):
        if d[0].num_elements != s[0].num_elements:
            _fail(instr, "copy of %d elements into %d" % (s[0].num_elements, d[0].num_elements))
        if op == "tensor_copy":
            _same_shape(instr, d[0], s[0], "in/out")
    elif op in ("dma_gather", "dma_scatter"):
        row, ind = (s[0], d[0]) if op == "dma_gather" else (d[0], s[0])
        idx = s[1]
        _scalar_ap(instr, idx, ind.num_partitions, "index")
        if idx.dtype != "int32":
            _fail(instr, "index must be int32")
        if row.free_size != ind.free_size:
            _fail(instr, "one indexed row has %d elements, the on-chip side %d per partition" % (
                row.free_size, ind.free_size))
        if op == "dma_scatter" and attrs.get("accumulate") not in (None, "add"):
            _fail(instr, "dma_scatter accumulate must be None or 'add'")
    elif op == "select":
        for a in s:
            _same_shape(instr, d[0], a, "select operand")
    elif op in ("iota", "affine_select"):
        pat = attrs["pattern"]
        n = 1
        for _, k in pat:
            n *= int(k)
        if len(pat) > 4 or n != d[0].free_size:
            _fail(instr, "%s pattern %s must have <= 4 dims covering %d elements" % (op, pat, d[0].free_size))
        if op == "affine_select":
            _same_shape(instr, d[0], s[0], "in/out")
            if ALU_OPS.get(attrs["cmp"]) != "compare":
                _fail(instr, "affine_select cmp must be a comparison, got %r" % attrs["cmp"])
    elif op == "register_load":
        if not isinstance(attrs.get("register"), str) or not attrs["register"]:
            _fail(instr, "register_load needs attrs['register']")
        if s[0].num_elements != 1 or s[0].dtype != "int32":
            _fail(instr, "register_load reads one int32 element")
    elif op == "custom_op":
        fn = attrs["function"]
        if fn not in CUSTOM_OP_FUNCTIONS:
            _fail(instr, "unknown custom-op function %r (known: %s)" % (fn, ", ".join(CUSTOM_OP_FUNCTIONS)))
        if not 0 <= int(attrs["sub_opcode"]) <= 254:
            _fail(instr, "custom-op sub_opcode (FunctionId) must be 0..254")
        src = s[0]
        if src.dtype != "float32" or d[0].dtype != "float32":
            _fail(instr, "%s works on float32 rows" % fn)
        width = src.free_size if fn == "sort_f32" else int(attrs["k"])
        if fn == "topk_f32" and not 1 <= width <= src.free_size:
            _fail(instr, "top-k k=%d must be in 1..%d" % (width, src.free_size))
        for a in d:
            if a.num_partitions != src.num_partitions or a.free_size != width:
                _fail(instr, "%s outputs must be [%d,%d]" % (fn, src.num_partitions, width))
        if attrs["with_indices"] and d[1].dtype not in ("int32", "uint32"):
            _fail(instr, "custom-op indices must be int32")


# attributes whose table default is None: the type a value must have when set
_NONE_DEFAULT_TYPES = {"register": str, "min": numbers.Integral, "max": numbers.Integral, "reduce": str,
                       "op1": str, "function": str, "accumulate": str}


def _attr_type_ok(key, default, v):
    """v has the type the opcode table's default for ``key`` implies (numbers may be numpy scalars)."""
    if isinstance(default, bool):
        return isinstance(v, (bool, np.bool_))
    if isinstance(v, (bool, np.bool_)):
        return False
    if default is None:
        return v is None or isinstance(v, _NONE_DEFAULT_TYPES.get(key, object))
    if isinstance(default, float):
        return isinstance(v, numbers.Real)
    if isinstance(default, int):
        return isinstance(v, numbers.Integral)
    if isinstance(default, str):
        return isinstance(v, str)
    if isinstance(default, list):          # [[step, num], ...]
        return isinstance(v, (list, tuple)) and all(
            isinstance(p, (list, tuple)) and len(p) == 2 and all(isinstance(x, numbers.Integral) and
                                                                 not isinstance(x, (bool, np.bool_)) for x in p)
            for p in v)
    return True


def _check_instr(ctx, instr, ranges):
    info = OPCODES.get(instr.opcode)
    if info is None:
        _fail(instr, "unknown opcode")
    if instr.engine not in info.engines:
        _fail(instr, "engine %s cannot run %s (allowed: %s)" % (instr.engine, instr.opcode, "/".join(info.engines)))
    for k, v in instr.attrs.items():
        if k not in info.attrs and not k.startswith("x_"):
            _fail(instr, "unknown attribute %r" % k)
        if k in info.attrs and not _attr_type_ok(k, info.attrs[k], v):
            _fail(instr, "attribute %s=%r has the wrong type" % (k, v))
    attrs = full_attrs(instr)
    if len(instr.dsts) != len(info.dst_roles(attrs)) or len(instr.srcs) != len(info.src_roles(attrs)):
        _fail(instr, "expects %d dsts / %d srcs, has %d / %d" % (len(info.dst_roles(attrs)), len(info.src_roles(attrs)),
                                                                  len(instr.dsts), len(instr.srcs)))
    compute = info.kind == "compute" and instr.engine in COMPUTE_ENGINES
    bytes_ranges = []
    indirect = None
    if instr.opcode in ("dma_gather", "dma_scatter"):
        lo, hi, st = attrs.get("index_min"), attrs.get("index_max"), attrs.get("index_stride")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi, st)) or lo > hi:
            _fail(instr, "index_min <= index_max and index_stride must be integers")
        indirect = instr.srcs[0] if instr.opcode == "dma_gather" else instr.dsts[0]
    for ap, role, is_dst, mems in operand_roles(instr):
        if ap is indirect:
            from neuronxcc.starfish.birpy.ir import to_expr
            iv = "__index__"
            r2 = dict(ranges)
            r2[iv] = (attrs["index_min"], attrs["index_max"])
            widened = ap.copy(offset=to_expr(ap.offset) + _pelican_var(iv) * attrs["index_stride"])
            r = _check_ap(ctx, instr, widened, r2, mems, role, compute)
        else:
            r = _check_ap(ctx, instr, ap, ranges, mems, role, compute)
        if is_dst:
            bytes_ranges.append(r)
    for sem, v in instr.waits:
        if isinstance(v, int):
            if v < 0:
                _fail(instr, "wait %s >= %d is negative" % (sem, v))
        else:
            b = v.bounds(ranges)
            if b is None or b[0] is None or b[0] < 0:
                _fail(instr, "wait value %s on %s may be negative or unbounded" % (v, sem))
    for sem, v in instr.signals:
        if v <= 0:
            _fail(instr, "signal increment on %s must be positive" % sem)
    _check_semantics(ctx, instr, attrs, bytes_ranges)


def _check_body(ctx, body, ranges):
    for n in body:
        if n.kind == "inst":
            _check_instr(ctx, n, ranges)
        elif n.kind == "loop":
            if n.var in ranges or n.var in ctx.reg_ranges:
                _fail(None, "loop #%s variable %r shadows an outer loop variable or register" % (n.id, n.var))
            if not all(-(1 << 62) <= v <= (1 << 62) for v in (n.start, n.stop, n.step)):
                _fail(None, "loop #%s bounds %d:%d:%d are outside the 62-bit range addresses use"
                      % (n.id, n.start, n.stop, n.step))
            vr = n.var_range
            if vr is None:
                continue
            inner = dict(ranges)
            inner[n.var] = vr
            _check_body(ctx, n.body, inner)
        else:
            if n.cond not in ctx.reg_ranges:
                _fail(None, "%s #%s condition %r is not a loaded register" % (n.kind, n.id, n.cond))
            for child in n.children():
                _check_body(ctx, child, ranges)


def verify(module, target=None):
    """Raise BirVerifyError on the first broken rule; return the module otherwise."""
    if hasattr(target, "pe_hz"):
        tm = target
    else:
        try:
            tm = get_target(target or module.target or "trn1")
        except KeyError:
            _fail(None, "unknown target %r" % (target or module.target,))
    module.ensure_ids()
    ctx = _Ctx(module, tm)
    _check_memlocs(ctx)
    _check_body(ctx, module.body, {})
    return module
