"""cholesky and triangular-solve (what JAX emits for jnp.linalg.cholesky / solve_triangular on a
platform without LAPACK), expanded into HLO the rest of the lowering already compiles.

Each becomes a while loop over the matrix's rows or columns, in float32 (narrower floats are widened
and the result narrowed back), batch dimensions flattened into one:

* cholesky (lower): column j of L is (a[:, j] - L L[j, :]^T) / sqrt(that at row j), kept on and
  below the diagonal (one batched dot, one dynamic-update-slice per column); lower=false factors the
  transpose (reading a's upper triangle) and transposes the result. The other triangle is 0;
* triangular-solve is brought to one form, a lower-triangular m with m x = b: a right-side solve is
  transposed (x m = b <=> m^T x^T = b^T), transpose_a transposes m, an upper m is reversed along
  both axes (with b's rows). Only the triangle the op names is read (the other is masked to 0) and a
  unit diagonal is taken as 1. Then forward substitution: row i of x is (b[i] - m[i, :] x) / m[i, i]
  with the rows not yet solved still 0.

The expansion is HLO text built here from the shapes and parsed by ``neuronxcc.hlo``; hlo2penguin
converts it as it converts any computation (``lower(conv, g, inst, ins, loc)``).
"""
from neuronxcc.hlo import parse_hlo_text
from neuronxcc.starfish.penguin.hloinst import unsupported

OPS = ("cholesky", "triangular-solve")
WIDEN = ("bf16", "f16", "f32")


# the loop condition both expansions share: the state tuple's counter (element 0) below n
_COND = """cond {
  p = %(S)s parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(%(n)d)
  ROOT c = pred[] compare(i, n), direction=LT
}
"""


def _shape(et, dims):
    return "%s[%s]" % (et, ",".join(str(int(d)) for d in dims))


def _cholesky_text(et, batch, n, lower):
    F, A = "f32[%d,%d,%d]" % (batch, n, n), _shape(et, [batch, n, n])
    col = "f32[%d,%d,1]" % (batch, n)
    state = "(s32[], %s, %s)" % (F, F)
    cvt_in = "  a = %s convert(a0)\n" % F if et != "f32" else "  a = %s copy(a0)\n" % F
    if not lower:
        cvt_in += "  a1 = %s transpose(a), dimensions={0,2,1}\n" % F
    src = "a" if lower else "a1"
    out = "l" if lower else "lt"
    tail = "" if lower else "  lt = %s transpose(l), dimensions={0,2,1}\n" % F
    res = "  ROOT r = %s convert(%s)\n" % (A, out) if et != "f32" else "  ROOT r = %s copy(%s)\n" % (F, out)
    return ("HloModule chol\n" + _COND + """body {
  p = %(S)s parameter(0)
  i = s32[] get-tuple-element(p), index=0
  L = %(F)s get-tuple-element(p), index=1
  A = %(F)s get-tuple-element(p), index=2
  z = s32[] constant(0)
  row = f32[%(b)d,1,%(n)d] dynamic-slice(L, z, i, z), dynamic_slice_sizes={%(b)d,1,%(n)d}
  ca = %(C)s dynamic-slice(A, z, z, i), dynamic_slice_sizes={%(b)d,%(n)d,1}
  pr = %(C)s dot(L, row), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}
  v = %(C)s subtract(ca, pr)
  d = f32[%(b)d,1,1] dynamic-slice(v, z, i, z), dynamic_slice_sizes={%(b)d,1,1}
  sd = f32[%(b)d,1,1] sqrt(d)
  sr = f32[%(b)d] reshape(sd)
  sb = %(C)s broadcast(sr), dimensions={0}
  q = %(C)s divide(v, sb)
  io = s32[%(b)d,%(n)d,1] iota(), iota_dimension=1
  ib = s32[%(b)d,%(n)d,1] broadcast(i), dimensions={}
  keep = pred[%(b)d,%(n)d,1] compare(io, ib), direction=GE
  zf = f32[] constant(0)
  zb = %(C)s broadcast(zf), dimensions={}
  qm = %(C)s select(keep, q, zb)
  L2 = %(F)s dynamic-update-slice(L, qm, z, z, i)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = %(S)s tuple(i1, L2, A)
}
and_f {
  x = pred[] parameter(0)
  y = pred[] parameter(1)
  ROOT r = pred[] and(x, y)
}
ENTRY main {
  a0 = %(A)s parameter(0)
%(cin)s  z = s32[] constant(0)
  zf = f32[] constant(0)
  l0 = %(F)s broadcast(zf), dimensions={}
  t0 = %(S)s tuple(z, l0, %(src)s)
  w = %(S)s while(t0), condition=cond, body=body
  lw = %(F)s get-tuple-element(w), index=1
  fin = pred[%(b)d,%(n)d,%(n)d] is-finite(lw)
  tr = pred[] constant(true)
  ok = pred[%(b)d] reduce(fin, tr), dimensions={1,2}, to_apply=and_f
  okb = pred[%(b)d,%(n)d,%(n)d] broadcast(ok), dimensions={0}
  nan = f32[] constant(nan)
  nanb = %(F)s broadcast(nan), dimensions={}
  l = %(F)s select(okb, lw, nanb)
%(tail)s%(res)s}
""") % {"S": state, "F": F, "A": A, "C": col, "b": batch, "n": n, "cin": cvt_in, "src": src, "tail": tail,
       "res": res}


def _solve_text(et, batch, n, k, m_lower, transpose_m, reverse, unit, right):
    """m x = b for m lower after the transforms; b_in [batch, rows, cols] as given (right: [batch, k, n])."""
    M, X = "f32[%d,%d,%d]" % (batch, n, n), "f32[%d,%d,%d]" % (batch, n, k)
    Bin = _shape(et, [batch, k, n] if right else [batch, n, k])
    Ain = _shape(et, [batch, n, n])
    lines = []

    def add(s):
        lines.append("  " + s)
    add("a0 = %s parameter(0)" % Ain)
    add("b0 = %s parameter(1)" % Bin)
    add("a = %s %s(a0)" % (M, "convert" if et != "f32" else "copy"))
    add("b1 = f32%s %s(b0)" % (Bin[len(et):], "convert" if et != "f32" else "copy"))
    # keep the triangle the op reads (and a unit diagonal)
    add("r = s32[%d,%d,%d] iota(), iota_dimension=1" % (batch, n, n))
    add("c = s32[%d,%d,%d] iota(), iota_dimension=2" % (batch, n, n))
    add("tri = pred[%d,%d,%d] compare(r, c), direction=%s" % (batch, n, n, "GE" if m_lower else "LE"))
    add("zf = f32[] constant(0)")
    add("zm = %s broadcast(zf), dimensions={}" % M)
    add("am = %s select(tri, a, zm)" % M)
    cur = "am"
    if unit:
        add("dg = pred[%d,%d,%d] compare(r, c), direction=EQ" % (batch, n, n))
        add("of = f32[] constant(1)")
        add("om = %s broadcast(of), dimensions={}" % M)
        add("au = %s select(dg, om, am)" % M)
        cur = "au"
    if transpose_m:
        add("at = %s transpose(%s), dimensions={0,2,1}" % (M, cur))
        cur = "at"
    bcur = "b1"
    if right:
        add("bt = %s transpose(b1), dimensions={0,2,1}" % X)
        bcur = "bt"
    if reverse:
        add("ar = %s reverse(%s), dimensions={1,2}" % (M, cur))
        add("br = %s reverse(%s), dimensions={1}" % (X, bcur))
        cur, bcur = "ar", "br"
    add("z = s32[] constant(0)")
    add("x0 = %s broadcast(zf), dimensions={}" % X)
    S = "(s32[], %s, %s, %s)" % (X, M, X)
    add("t0 = %s tuple(z, x0, %s, %s)" % (S, cur, bcur))
    add("w = %s while(t0), condition=cond, body=body" % S)
    add("x = %s get-tuple-element(w), index=1" % X)
    out = "x"
    if reverse:
        add("xr = %s reverse(x), dimensions={1}" % X)
        out = "xr"
    if right:
        add("xt = f32[%d,%d,%d] transpose(%s), dimensions={0,2,1}" % (batch, k, n, out))
        out = "xt"
    add("ROOT res = %s %s(%s)" % (Bin, "convert" if et != "f32" else "copy", out))
    return ("HloModule trsm\n" + _COND + """body {
  p = %(S)s parameter(0)
  i = s32[] get-tuple-element(p), index=0
  X = %(X)s get-tuple-element(p), index=1
  M = %(M)s get-tuple-element(p), index=2
  B = %(X)s get-tuple-element(p), index=3
  z = s32[] constant(0)
  row = f32[%(b)d,1,%(n)d] dynamic-slice(M, z, i, z), dynamic_slice_sizes={%(b)d,1,%(n)d}
  s = f32[%(b)d,1,%(k)d] dot(row, X), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  bi = f32[%(b)d,1,%(k)d] dynamic-slice(B, z, i, z), dynamic_slice_sizes={%(b)d,1,%(k)d}
  d = f32[%(b)d,1,1] dynamic-slice(M, z, i, i), dynamic_slice_sizes={%(b)d,1,1}
  dr = f32[%(b)d] reshape(d)
  db = f32[%(b)d,1,%(k)d] broadcast(dr), dimensions={0}
  num = f32[%(b)d,1,%(k)d] subtract(bi, s)
  xi = f32[%(b)d,1,%(k)d] divide(num, db)
  X2 = %(X)s dynamic-update-slice(X, xi, z, i, z)
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  ROOT t = %(S)s tuple(i1, X2, M, B)
}
ENTRY main {
%(body)s
}
""") % {"S": S, "X": X, "M": M, "n": n, "k": k, "b": batch, "body": "\n".join(lines)}


def _flat(g, x, dims, name, loc, dtype):
    return g.add_op("reshape", [x], [(name, tuple(dims), dtype)], {}, loc)[0]


def lower(conv, g, inst, ins, loc):
    """The expansion of a cholesky / triangular-solve instruction into the graph ``g``."""
    from neuronxcc.hlo import interp_attrs as A
    et = inst.shape.element_type
    if et not in WIDEN:
        raise unsupported(inst, "%s on %s (float32, bf16 and f16 are lowered)" % (inst.opcode, et))
    dims = list(inst.shape.dims)
    batch = 1
    for d in dims[:-2]:
        batch *= int(d)
    dt = g.values[ins[0]].dtype
    lower_ = A.bool_attr(inst, "lower", False)
    if inst.opcode == "cholesky":
        n = int(dims[-1])
        text = _cholesky_text(et, batch, n, lower_)
        args = [_flat(g, ins[0], (batch, n, n), inst.name + ".a3", loc, dt)]
    else:
        n = int(inst.operands[0].shape.dims[-1])
        right = not A.bool_attr(inst, "left_side", False)
        k = int(dims[-2] if right else dims[-1])
        trans = (A.str_attr(inst, "transpose_a") or "NO_TRANSPOSE").upper() in ("TRANSPOSE", "ADJOINT")
        m_lower = lower_ != (trans != right)     # lower-ness of the matrix the forward solve uses
        text = _solve_text(et, batch, n, k, lower_, trans != right, not m_lower,
                           A.bool_attr(inst, "unit_diagonal", False), right)
        bshape = (batch, k, n) if right else (batch, n, k)
        args = [_flat(g, ins[0], (batch, n, n), inst.name + ".a3", loc, dt),
                _flat(g, ins[1], bshape, inst.name + ".b3", loc, g.values[ins[1]].dtype)]
    module = parse_hlo_text(text)
    _prefix(module, inst.name + ".")
    sub = {id(p): args[p.parameter_number] for p in module.entry.parameters}
    conv._convert_body(g, module.entry, sub)
    res = sub[id(module.entry.root)]
    return _flat(g, res, dims, inst.name, loc, g.values[res].dtype)


def _prefix(module, pre):
    """Instruction and computation names unique within the graph the expansion joins."""
    for comp in module.computations.values():
        comp.name = pre + comp.name
        for ins in comp.instructions:
            ins.name = pre + ins.name
