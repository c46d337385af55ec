"""Cached execution plans of birsim: each instruction is prepared once into a
closure ``run(env)`` that does only what depends on the loop variables and
registers (the base addresses of its operands) and the element work.

What is resolved at preparation: the operands' ``APInfo`` (storage, strides,
counts, affine offset coefficients), the numeric domain, the ALU ops,
immediate scalars, memset values. The closures implement exactly the rules of
the matching ``Executor.op_*`` handler (the executable definition); opcodes or
operand forms without a plan here run that handler. tests/birsim compare the
two paths on random programs.
"""
import sys

import numpy as np

from neuronxcc.starfish.birpy import dtypes as _dt
from neuronxcc.starfish.birpy.opcodes import ALU_OPS
from neuronxcc.starfish.birsim import alu
from neuronxcc.starfish.birsim._ctlplans import RegisterLoad, Scatter
from neuronxcc.starfish.birsim._elementwise import EW_CMP, EW_FUNCS, EW_MAXMIN, EW_OPS, ElementWise
from neuronxcc.starfish.birsim._peplans import Matmul, Transpose32
from neuronxcc.starfish.birsim._plans import (INT_DIVMOD, INT_OPS, AffineSelect, Fill, Gather, IntElementWise, IntSelect,
                                              RawCopy, Select)

ROW_VAR = "__row__"        # env entry holding the indexed row offset of dma_gather/dma_scatter

__all__ = ["prepare"]

_F = np.float32
_INT = frozenset(d.name for d in _dt.DTYPES.values() if d.is_int)
_WHOLE_INTS = frozenset(("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"))


# Tiles up to this many elements take the typed ElementWise plan (no numpy call overhead);
# larger ones take it when it runs a row at a time (``ElementWise.rowwise``: each row read,
# computed and written while in cache), else the numpy path, whose SIMD loops are faster than
# the plan's whole-tile copies there.
EW_MAX = 16384
EW_ROWS = True          # False: large tiles always take the numpy path (tests compare the two)


def _typed(plan, n):
    """Does the ElementWise PLAN run N elements (else the numpy path does)?"""
    return n <= EW_MAX or (EW_ROWS and plan.rowwise)


def _ew(plan, n, other):
    """PLAN (an ElementWise) when it is the typed plan for N elements, else OTHER()."""
    return plan if _typed(plan, n) else other()


_UFUNCS = {"add": np.add, "subtract": np.subtract, "mult": np.multiply, "divide": np.divide}

# every fp32 ALU op the typed ElementWise computes (max / min with the handler as fallback)
EW_ALL = dict(EW_OPS, **EW_CMP, **EW_MAXMIN)


def _handler_run(ex, instr, attrs):
    """run(env) of INSTR's handler: a typed plan's fallback for an execution it cannot give exactly."""
    h = ex._handlers[instr.opcode]

    def handler(env):
        h(instr, attrs)
    return handler


def _is_int(ap):
    return ap.dtype in _INT


def _rows(ap):
    return ap.num_partitions or 1


def prepare(ex, instr, attrs):
    """A run(env) closure for INSTR, or None when the executor's handler must run it."""
    fn = _PREP.get(instr.opcode)
    if fn is None:
        return None
    return fn(ex, instr, attrs)


def _copy(ex, instr, attrs, out, src):
    st = ex.st
    d = st._static(out)
    s = st._static(src)
    if out.dtype != src.dtype or s.n != d.n or s.itemsize != d.itemsize:
        return None
    return RawCopy(s, d)


def _transpose(ex, instr, attrs):
    """op_transpose's same-dtype forms (a raw copy; whole-byte integers round-trip exactly
    through int64 too): the source read with its partition dim innermost, written in the
    output's order."""
    out, src = instr.dsts[0], instr.srcs[0]
    if out.dtype != src.dtype or src.num_partitions is None or (_is_int(src) and src.dtype not in _WHOLE_INTS):
        return None
    st = ex.st
    d = st._static(out)
    s = st._static(src)
    if s.n != d.n or s.itemsize != d.itemsize:
        return None
    k = len(s.strides) - 1 - len(src.pattern)       # the partition dim among the six
    order = [j for j in range(len(s.strides)) if j != k] + [k]
    copy = RawCopy(s, d, ([int(s.strides[j]) for j in order], [int(s.nums[j]) for j in order]))
    if s.itemsize == 4 and len(src.pattern) == 1 and out.num_partitions is not None and len(out.pattern) == 1 \
            and int(s.strides[5]) == 4 and int(d.strides[5]) == 4 and int(d.nums[4]) == int(s.nums[5]) \
            and int(d.nums[5]) == int(s.nums[4]):
        # [P, F] rows into [F, P] rows: the blocked transpose (the same bits as the copy)
        return Transpose32(s, d, int(s.nums[4]), int(s.nums[5]), copy)
    return copy


def _dma_copy(ex, instr, attrs):
    out, src = instr.dsts[0], instr.srcs[0]
    if out.dtype == src.dtype:
        return _copy(ex, instr, attrs, out, src)
    if _is_int(out) and _is_int(src):
        return _int_convert(ex, out, src)
    return _convert(ex, out, src)


def _int_width(ap):
    """alu_i's shift width (the first operand's bits), or None when the typed plan cannot take it."""
    w = 8 * _dt.itemsize(ap.dtype)
    return w if w < 64 else None


def _int_convert(ex, out, src):
    """wi(out, ri(src)): exact int64, wrapped on write (a typed pass), or None."""
    so, ss = ex.st._static(out), ex.st._static(src)
    if so.n != ss.n:
        return None
    return IntElementWise(so, ss, None, 0, 0, False, 0, 0, False, 32)


def _convert(ex, out, src):
    """wf(out, rf(src)): decode to fp32, cast on write (a typed pass), or None."""
    so, ss = ex.st._static(out), ex.st._static(src)
    if so.n != ss.n:
        return None
    return _ew(ElementWise(so, ss, None, 0, 0.0, False, 0, 0.0, False), so.n, lambda: None)


def _tensor_copy(ex, instr, attrs):
    out, src = instr.dsts[0], instr.srcs[0]
    if instr.engine == "ACT":
        if out.dtype == src.dtype == "float32":
            # fp32 through fp32: the handler's copyto moves the bits (any size)
            p = _copy(ex, instr, attrs, out, src)
            if p is not None:
                return p
        return _convert(ex, out, src)
    if out.dtype == src.dtype:
        return _copy(ex, instr, attrs, out, src)
    if _is_int(out) and _is_int(src):
        return _int_convert(ex, out, src)
    return _convert(ex, out, src)


def _reader_f(st, ap):
    s = st._static(ap)
    rows = _rows(ap)
    base, read = s.base, st.read_f_at

    def rd(env):
        return read(s, base(env)).reshape(rows, -1)
    return rd


def _writer_f(st, ap):
    s = st._static(ap)
    base, write = s.base, st.write_f_at

    def wr(env, v):
        write(s, base(env), v)
    return wr


def _tensor_scalar(ex, instr, attrs):
    out, src = instr.dsts[0], instr.srcs[0]
    ops = [attrs["op0"]] + ([attrs["op1"]] if attrs.get("op1") else [])
    intdom = (instr.engine == "POOL" and all(_is_int(a) for a in instr.dsts) and all(_is_int(a) for a in instr.srcs)) \
        or any(ALU_OPS[o] == "bitvec" for o in ops)
    ap0, ap1 = bool(attrs.get("operand0_ap")), bool(attrs.get("operand1_ap"))
    if intdom:
        return _int_tensor_scalar(ex, instr, attrs, ops, ap0, ap1)
    st = ex.st
    op0 = ops[0]
    op1 = ops[1] if len(ops) > 1 else None
    r0, r1 = bool(attrs.get("reverse0")), bool(attrs.get("reverse1"))
    so, ss = st._static(out), st._static(src)
    if ap0 or ap1:
        # per-partition scalars ([P, 1] operands, broadcast along each row by the handler): the
        # typed plan when every op is one IEEE operation and each operand has one value per row
        rows = _rows(src)
        k = 1
        sa = []
        ok = all(o in EW_OPS or o in EW_CMP for o in ops) and so.n == ss.n and ss.n % rows == 0 and \
            (not ap1 or op1 is not None)
        for flag in (ap0, ap1):
            if not flag:
                sa.append(None)
                continue
            if k >= len(instr.srcs):
                return None         # the handler's error
            info = st._static(instr.srcs[k])
            ok = ok and info.n == rows and _rows(instr.srcs[k]) == rows
            sa.append(info)
            k += 1
        if not ok:
            return _tensor_scalar_np(st, instr, attrs, ops, r0, r1)
        return _ew(ElementWise(so, ss, None, EW_ALL[op0], 0.0 if ap0 else float(_F(attrs.get("operand0"))), r0,
                               EW_ALL[op1] if op1 else 0, 0.0 if ap1 else float(_F(attrs.get("operand1"))), r1,
                               sa[0], sa[1], rows, _handler_run(ex, instr, attrs)), so.n,
                   lambda: _tensor_scalar_np(st, instr, attrs, ops, r0, r1))
    rd, wr = _reader_f(st, src), _writer_f(st, out)
    s0, s1 = _F(attrs.get("operand0")), _F(attrs.get("operand1"))
    if all(o in EW_ALL for o in ops) and so.n == ss.n:
        p = ElementWise(so, ss, None, EW_ALL[op0], float(s0), r0, EW_ALL[op1] if op1 else 0, float(s1), r1,
                        fallback=_handler_run(ex, instr, attrs))
        if _typed(p, so.n):
            return p
    f = alu.alu_f
    uf1 = _UFUNCS.get(op1)

    def run(env):
        x = rd(env)
        x = f(op0, s0, x) if r0 else f(op0, x, s0)       # a fresh float32 array
        if uf1 is not None:
            # same float32 operation as alu_f, in place on that array (no second large temporary)
            if r1:
                uf1(s1, x, out=x, dtype=_F)
            else:
                uf1(x, s1, out=x, dtype=_F)
        elif op1 is not None:
            x = f(op1, s1, x) if r1 else f(op1, x, s1)
        wr(env, x)
    return run


def _int_tensor_scalar(ex, instr, attrs, ops, ap0, ap1):
    """op_tensor_scalar in the integer domain: the exact int64 plan (any size), scalars immediate or
    [P, 1] operands (one value per row of the source, read as int64 after the source), or None."""
    out, src = instr.dsts[0], instr.srcs[0]
    st = ex.st
    so, ss, w = st._static(out), st._static(src), _int_width(src)
    if w is None or not all(o in INT_OPS for o in ops) or so.n != ss.n:
        return None
    divmod_ = any(INT_OPS[o] in INT_DIVMOD for o in ops)
    rows = _rows(src)
    k = 1
    infos, vals = [], []
    for key, flag in (("operand0", ap0), ("operand1", ap1)):
        if not flag:
            infos.append(None)
            v = attrs.get(key)
            vals.append(int(v) if v is not None else 0)
            if divmod_ and abs(vals[-1]) >= 2 ** 62:
                return None
            continue
        if k >= len(instr.srcs):
            return None             # the handler's error
        sap = instr.srcs[k]
        info = st._static(sap)
        if info.n != rows or _rows(sap) != rows or ss.n % rows or (divmod_ and _int_width(sap) is None):
            return None             # numpy broadcasting (or its error) in the handler
        infos.append(info)
        vals.append(0)
        k += 1
    if ap1 and len(ops) < 2:
        return None
    return IntElementWise(so, ss, None, INT_OPS[ops[0]], vals[0], bool(attrs.get("reverse0")),
                          INT_OPS[ops[1]] if len(ops) > 1 else 0, vals[1] if len(ops) > 1 else 0,
                          bool(attrs.get("reverse1")), w, infos[0], infos[1] if len(ops) > 1 else None, rows)


def _tensor_scalar_np(st, instr, attrs, ops, r0, r1):
    """op_tensor_scalar's fp32 numpy calls (immediates or [P, 1] operands, read in the handler's
    order: the source, then operand0's and operand1's APs) with the readers and writer bound once."""
    out, src = instr.dsts[0], instr.srcs[0]
    rd, wr = _reader_f(st, src), _writer_f(st, out)
    k = 1
    readers = []
    for key, flag in (("operand0", "operand0_ap"), ("operand1", "operand1_ap")):
        if attrs.get(flag):
            if k >= len(instr.srcs):
                return None         # the handler's error
            readers.append((_reader_f(st, instr.srcs[k]), None))
            k += 1
        else:
            readers.append((None, _F(attrs.get(key))))
    (ra0, v0), (ra1, v1) = readers
    op0 = ops[0]
    op1 = ops[1] if len(ops) > 1 else None
    f = alu.alu_f

    def run(env):
        x = rd(env)
        s0 = ra0(env) if ra0 is not None else v0
        s1 = ra1(env) if ra1 is not None else v1
        x = f(op0, s0, x) if r0 else f(op0, x, s0)
        if op1 is not None:
            x = f(op1, s1, x) if r1 else f(op1, x, s1)
        wr(env, x)
    return run


def _tensor_tensor(ex, instr, attrs):
    out, a, b = instr.dsts[0], instr.srcs[0], instr.srcs[1]
    op = attrs["op"]
    intdom = (instr.engine == "POOL" and all(_is_int(x) for x in instr.dsts) and all(_is_int(x) for x in instr.srcs)) \
        or ALU_OPS[op] == "bitvec"
    if intdom:
        so, sa, sb = ex.st._static(out), ex.st._static(a), ex.st._static(b)
        w = _int_width(a)
        if op in INT_OPS and INT_OPS[op] in INT_DIVMOD and _int_width(b) is None:
            w = None
        if w is not None and op in INT_OPS and so.n == sa.n == sb.n and _rows(a) == _rows(b):
            return IntElementWise(so, sa, sb, INT_OPS[op], 0, False, 0, 0, False, w)
        return None
    st = ex.st
    so, sa, sb = st._static(out), st._static(a), st._static(b)
    if op in EW_ALL and so.n == sa.n == sb.n and _rows(a) == _rows(b):
        p = ElementWise(so, sa, sb, EW_ALL[op], 0.0, False, 0, 0.0, False, fallback=_handler_run(ex, instr, attrs))
        if _typed(p, so.n):
            return p
    ra, rb, wr = _reader_f(st, a), _reader_f(st, b), _writer_f(st, out)
    f = alu.alu_f

    def run(env):
        wr(env, f(op, ra(env), rb(env)))
    return run


def _activation(ex, instr, attrs):
    out, src = instr.dsts[0], instr.srcs[0]
    st = ex.st
    bias_ap, scale_ap = bool(attrs.get("bias_ap")), bool(attrs.get("scale_ap"))
    rd, wr = _reader_f(st, src), _writer_f(st, out)
    # the scalars as op_activation takes them: bias then scale, each an immediate or a [P, 1] operand
    k = 1
    rbias = rscale = None
    if bias_ap:
        if k >= len(instr.srcs):
            return None         # the handler's error
        rbias = _reader_f(st, instr.srcs[k])
        k += 1
    if scale_ap:
        if k >= len(instr.srcs):
            return None
        rscale = _reader_f(st, instr.srcs[k])
        k += 1
    bias, scale = _F(attrs.get("bias")), _F(attrs.get("scale"))
    func, alpha = attrs["func"], attrs.get("alpha", 0.01)
    so, ss = st._static(out), st._static(src)
    if not (bias_ap or scale_ap) and func in ("identity", "copy") and not attrs.get("reduce") and scale == 1 \
            and bias == 0 and out.dtype == src.dtype == "float32":
        # fp32 in, fp32 out, no arithmetic: the handler's copyto moves the bits (any size)
        p = _copy(ex, instr, attrs, out, src)
        if p is not None:
            return p
    if not (bias_ap or scale_ap) and (func in ("identity", "copy") or func in EW_FUNCS) and not attrs.get("reduce") \
            and so.n == ss.n:
        # f((x * scale) + bias), each step only when the handler does it
        p = ElementWise(so, ss, None, EW_OPS["mult"] if scale != 1 else 0, float(scale), False,
                        EW_OPS["add"] if bias != 0 else 0, float(bias), False, ufn=EW_FUNCS.get(func, 0))
        if _typed(p, so.n):
            return p
    if (bias_ap or scale_ap) and (func in ("identity", "copy") or func in EW_FUNCS) and not attrs.get("reduce") \
            and so.n == ss.n:
        # f((x * scale) + bias) with [P, 1] scale / bias operands: one value per row, as numpy broadcasts
        # them in the handler (which runs an execution meeting a NaN scalar)
        rows = _rows(src)
        infos = []
        for flag, k_ in ((scale_ap, 1 + bias_ap), (bias_ap, 1)):
            info = st._static(instr.srcs[k_]) if flag else None
            if info is not None and (info.n != rows or _rows(instr.srcs[k_]) != rows):
                info = False
            infos.append(info)
        if False not in infos and ss.n % rows == 0:
            p = ElementWise(so, ss, None, EW_OPS["mult"] if scale_ap or scale != 1 else 0, float(scale), False,
                            EW_OPS["add"] if bias_ap or bias != 0 else 0, float(bias), False, infos[0], infos[1], rows,
                            _handler_run(ex, instr, attrs), ufn=EW_FUNCS.get(func, 0))
            if _typed(p, so.n):
                return p
    wred = _writer_f(st, instr.dsts[1]) if attrs.get("reduce") else None
    act = alu.act
    do_scale, do_bias = scale_ap or scale != 1, bias_ap or bias != 0
    mul, add, total = np.multiply, np.add, np.sum

    def run(env):
        # op_activation's numpy calls in its order (operands read, then the output, then the sum)
        pre = rd(env)
        b = rbias(env) if rbias is not None else bias
        s_ = rscale(env) if rscale is not None else scale
        if do_scale:
            pre = mul(pre, s_, dtype=_F)
        if do_bias:
            pre = add(pre, b, dtype=_F)
        y = act(func, pre, alpha)
        wr(env, y)
        if wred is not None:
            wred(env, total(y, axis=1, dtype=_F).reshape(-1, 1))
    return run


def _tensor_reduce(ex, instr, attrs):
    """op_tensor_reduce's numpy calls with the operands' readers and writer bound once."""
    out, src = instr.dsts[0], instr.srcs[0]
    if src.num_partitions is None:
        return None
    st = ex.st
    ax = int(attrs["axes"])
    pat = src.free_shape
    keep = int(np.prod(pat[:len(pat) - ax], dtype=np.int64))
    op = attrs["op"]
    intdom = (instr.engine == "POOL" and all(_is_int(a) for a in instr.dsts) and all(_is_int(a) for a in instr.srcs)) \
        or op in ("bitwise_and", "bitwise_or")
    s, o = st._static(src), st._static(out)
    parts = src.num_partitions
    if intdom:
        read, write, red = st.read_i_at, st.write_i_at, alu.reduce_i
    else:
        read, write, red = st.read_f_at, st.write_f_at, alu.reduce_f
    negate = bool(attrs.get("negate"))

    def run(env):
        x = read(s, s.base(env)).reshape(parts, -1).reshape(parts, keep, -1)
        r = red(op, x, 2)
        if negate:
            r = -r
        write(o, o.base(env), r)
    return run


def _matmul(ex, instr, attrs):
    out, stat, mv = instr.dsts[0], instr.srcs[0], instr.srcs[1]
    st = ex.st
    return Matmul(st, st._static(stat), st._static(mv), st._static(out), _rows(stat), _rows(mv), _rows(out),
                  not attrs["psum_zero"], _handler_run(ex, instr, attrs))


def _memset(ex, instr, attrs):
    out = instr.dsts[0]
    v = attrs["value"]
    n = out.num_elements
    st = ex.st
    s = st._static(out)
    base = s.base
    if _dt.get(out.dtype).is_int and float(v) == int(v):
        vals = np.full(n, int(v), np.int64)
        write = st.write_i_at
    else:
        vals = np.full(n, v, _F)
        write = st.write_f_at
    vals.flags.writeable = False
    if vals.shape[0] == s.n and 0 < s.n:
        return Fill(s, vals)

    def run(env):
        write(s, base(env), vals)
    return run


def _iota(ex, instr, attrs):
    """The grid depends only on the attributes: computed once, written each time."""
    out = instr.dsts[0]
    st = ex.st
    s = st._static(out)
    base = s.base
    v = ex._iota_grid(attrs, out.num_partitions)
    if _dt.get(out.dtype).is_int:
        vals, write = v, st.write_i_at
    else:
        vals, write = v.astype(_F), st.write_f_at
    vals.flags.writeable = False
    if vals.size == s.n and 0 < s.n:
        return Fill(s, np.ascontiguousarray(vals).reshape(-1))

    def run(env):
        write(s, base(env), vals)
    return run


def _affine_select(ex, instr, attrs):
    """The condition grid depends only on the attributes: computed once."""
    out, src = instr.dsts[0], instr.srcs[0]
    st = ex.st
    cond = alu.compare_f(attrs["cmp"], ex._iota_grid(attrs, out.num_partitions), 0)
    on_false = attrs["on_false"]
    so, ss = st._static(out), st._static(src)
    rows = _rows(src)
    where = np.where
    ints = _is_int(out) and _is_int(src) and float(on_false) == int(on_false)
    if ints:
        fill, read, write = int(on_false), st.read_i_at, st.write_i_at
    else:
        fill, read, write = _F(on_false), st.read_f_at, st.write_f_at
    if so.n == ss.n > 0 and cond.shape == (rows, ss.n // rows) and (not ints or -2 ** 63 <= fill < 2 ** 63):
        # the typed pass: x where cond else fill, the flags in row-major order
        flags = np.ascontiguousarray(cond, dtype=np.uint8).reshape(-1)
        return AffineSelect(so, ss, flags, fill if ints else float(fill), ints)

    def run(env):
        x = read(ss, ss.base(env)).reshape(rows, -1)
        write(so, so.base(env), where(cond, x, fill))
    return run


def _register_load(ex, instr, attrs):
    st = ex.st
    s = st._static(instr.srcs[0])
    base, read = s.base, st.read_i_at
    lo = None if attrs.get("min") is None else int(attrs["min"])
    hi = None if attrs.get("max") is None else int(attrs["max"])
    reg = sys.intern(attrs["register"])      # env keys and lookups are interned (``_apinfo``)
    if s.n >= 1 and all(v is None or -2 ** 63 <= v < 2 ** 63 for v in (lo, hi)):
        return RegisterLoad(ex, s, reg, lo, hi)          # typed: no Python call per execution

    def run(env):
        v = int(read(s, base(env)).reshape(-1)[0])
        v = ((v + (1 << 31)) % (1 << 32)) - (1 << 31)
        if lo is not None:
            v = max(v, lo)
        if hi is not None:
            v = min(v, hi)
        ex.regs[reg] = v            # the executor's register file and env of this moment (streams swap them)
        if ex.env is not ex.regs:
            ex.env[reg] = v
    return run


def _select(ex, instr, attrs):
    out, pred, t, f = instr.dsts[0], instr.srcs[0], instr.srcs[1], instr.srcs[2]
    st = ex.st
    so, sp, st_, sf = st._static(out), st._static(pred), st._static(t), st._static(f)
    ints = _is_int(out) and _is_int(t) and _is_int(f)
    if not (so.n == sp.n == st_.n == sf.n and _rows(pred) == _rows(t) == _rows(f)):
        return None             # numpy broadcasting (or its error) in the handler
    if ints:
        return IntSelect(so, sp, st_, sf)       # the exact int64 path
    return Select(so, sp, st_, sf)


def _dma_gather(ex, instr, attrs):
    """Same-dtype gathers: one RawCopy per partition (the row's offset has __row__ in it)."""
    row, parts = ex.indirect_aps(instr)
    if not parts or any(p.dtype != row.dtype for p in parts) or attrs.get("oob", "clamp") != "clamp":
        return None
    st = ex.st
    rs = st._static(row)
    pss = [st._static(p) for p in parts]
    if any(ps.n != rs.n or ps.itemsize != rs.itemsize for ps in pss):
        return None             # the handler's size error
    copies = [RawCopy(rs, ps) for ps in pss]
    si = st._static(instr.srcs[1])
    lo, hi, stride = int(attrs["index_min"]), int(attrs["index_max"]), int(attrs["index_stride"])
    if si.n == len(copies) and all(-2 ** 62 < v < 2 ** 62 for v in (lo, hi, stride)):
        aff = row.offset.affine()
        direct = aff is not None and aff[0].get(ROW_VAR) == 1
        return Gather(copies, si, lo, hi, stride, ROW_VAR, direct)      # typed: no Python per row
    read_i = st.read_i_at
    lo, hi, stride = int(attrs["index_min"]), int(attrs["index_max"]), int(attrs["index_stride"])
    clip = np.clip

    def run(env):
        idx = clip(read_i(si, si.base(env)).reshape(-1), lo, hi) * stride
        for p, d in enumerate(idx.tolist()):
            env[ROW_VAR] = d
            copies[p](env)
        env.pop(ROW_VAR, None)
    return run


def _dma_scatter(ex, instr, attrs):
    """Same-dtype scatters without accumulation, indices clamped: the typed Scatter plan (one RawCopy
    per partition into the row at __row__), or None (the handler)."""
    if attrs.get("accumulate") == "add" or attrs.get("oob", "clamp") != "clamp":
        return None
    row, parts = ex.indirect_aps(instr)
    if not parts or any(p.dtype != row.dtype for p in parts):
        return None
    st = ex.st
    rs = st._static(row)
    pss = [st._static(p) for p in parts]
    if any(ps.n != rs.n or ps.itemsize != rs.itemsize for ps in pss):
        return None             # the handler's size error
    si = st._static(instr.srcs[1])
    lo, hi, stride = int(attrs["index_min"]), int(attrs["index_max"]), int(attrs["index_stride"])
    if si.n != len(parts) or not all(-2 ** 62 < v < 2 ** 62 for v in (lo, hi, stride)):
        return None
    return Scatter([RawCopy(ps, rs) for ps in pss], si, lo, hi, stride, ROW_VAR)


_PREP = {
    "dma_gather": _dma_gather,
    "dma_scatter": _dma_scatter,
    "select": _select,
    "register_load": _register_load,
    "iota": _iota,
    "affine_select": _affine_select,
    "dma_copy": _dma_copy,
    "tensor_copy": _tensor_copy,
    "transpose": _transpose,
    "tensor_scalar": _tensor_scalar,
    "tensor_tensor": _tensor_tensor,
    "activation": _activation,
    "tensor_reduce": _tensor_reduce,
    "matmul": _matmul,
    "memset": _memset,
}
