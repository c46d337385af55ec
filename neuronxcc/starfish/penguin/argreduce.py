"""argmax / argmin in the reduce kernel (``Kernels.reduce_into``, penguin/kernels.py): ``step`` folds
one tile's free axis into the running (value, first index) accumulators of its rows.
"""
from neuronxcc.starfish.birpy import dtypes as bdt


def step(kern, te, red, v, idx, accs, pn):
    """Running (value, first index) of the max/min along the free axis.

    Integers stay integers (POOL, exact at any magnitude).  Floats follow XLA's reducer
    ``pick a if a > b or a != a``: a NaN beats every number, the first NaN wins, and the
    value accumulator becomes NaN.  Ties keep the smallest index.  ``*_nonan`` (a reducer
    without the ``a != a`` clause): NaNs never win."""
    em = kern.em
    v = te.materialise(v)
    idx = te.materialise(idx)
    acc_v, acc_i = accs
    nan_wins = not red.endswith("_nonan")
    red = red[:6]
    ext = "max" if red == "argmax" else "min"
    cmp = "gt" if red == "argmax" else "lt"

    def col(prefix, dt):
        return em.chip(em.sbuf(prefix, pn, 1, dt), dt, pn, [[1, 1]])

    if bdt.is_int(acc_v.dtype) and acc_v.dtype != "bool":
        dt = acc_v.dtype
        vi = te.cast(v, dt)
        ii = te.cast(idx, "int32")
        m = col("am", dt)
        em.inst("tensor_reduce", "POOL", [m], [vi.ap], op=ext, axes=1)
        eq = te.new_tile("int32", "ameq")
        em.inst("tensor_scalar", "POOL", [eq.ap], [vi.ap, m], op0="eq", operand0_ap=True)
        big = 2 ** 30
        tmp = te.new_tile("int32", "amt")
        cand = te.new_tile("int32", "amc")
        em.inst("tensor_scalar", "POOL", [tmp.ap], [ii.ap], op0="subtract", operand0=big)
        em.inst("tensor_tensor", "POOL", [cand.ap], [tmp.ap, eq.ap], op="mult")
        em.inst("tensor_scalar", "POOL", [cand.ap], [cand.ap], op0="add", operand0=big)
        ci = col("ami", "int32")
        em.inst("tensor_reduce", "POOL", [ci], [cand.ap], op="min", axes=1)
        better = col("amb", "int32")
        em.inst("tensor_tensor", "POOL", [better], [m, acc_v.ap], op=cmp)
        ci_i = ci
        if acc_i.dtype != "int32":
            ci_i = col("amii", acc_i.dtype)
            em.inst("tensor_copy", "POOL", [ci_i], [ci])
        em.inst("select", "POOL", [acc_i.ap], [better, ci_i, acc_i.ap])
        em.inst("tensor_tensor", "POOL", [acc_v.ap], [acc_v.ap, m], op=ext)
        return

    vf = te.cast(v, "float32")
    # nan[p, j] = v != v; rn[p] = the row has a NaN
    nan = te.new_tile("float32", "amnan")
    em.inst("tensor_tensor", "DVE", [nan.ap], [vf.ap, vf.ap], op="ne")
    rn = col("amrn", "float32")
    if nan_wins:
        em.inst("tensor_reduce", "DVE", [rn], [nan.ap], op="max", axes=1)
    else:
        # NaNs lose: replace them by the reduction's identity and ignore the mask
        em.inst("memset", "DVE", [rn], [], value=0.0)
        nanb = te.new_tile("bool", "amnb")
        em.inst("tensor_scalar", "DVE", [nanb.ap], [nan.ap], op0="ne", operand0=0.0)
        fill = te.new_tile("float32", "amfill")
        em.inst("memset", "DVE", [fill.ap], [], value=float("-inf") if red == "argmax" else float("inf"))
        clean = te.new_tile("float32", "amcl")
        em.inst("select", "DVE", [clean.ap], [nanb.ap, fill.ap, vf.ap])
        vf = clean
        em.inst("memset", "DVE", [nan.ap], [], value=0.0)
    m = col("am", "float32")
    em.inst("tensor_reduce", "DVE", [m], [vf.ap], op=ext, axes=1)
    eq = te.new_tile("float32", "ameq")
    em.inst("tensor_scalar", "DVE", [eq.ap], [vf.ap, m], op0="eq", operand0_ap=True)
    # key = NaN positions in a row with a NaN, else the positions equal to the extremum:
    # max(eq - rn, nan) (eq, rn, nan are 0/1)
    em.inst("tensor_scalar", "DVE", [eq.ap], [eq.ap, rn], op0="subtract", operand0_ap=True)
    em.inst("tensor_tensor", "DVE", [eq.ap], [eq.ap, nan.ap], op="max")
    # candidate index = idx where key else BIG; first index = min over candidates
    big = float(2 ** 23)          # exact in fp32 together with every index below it
    idf = te.cast(idx, "float32")
    cand = te.new_tile("float32", "amc")
    tmp = te.new_tile("float32", "amt")
    em.inst("tensor_scalar", "DVE", [tmp.ap], [idf.ap], op0="subtract", operand0=big)
    em.inst("tensor_tensor", "DVE", [cand.ap], [tmp.ap, eq.ap], op="mult")
    em.inst("tensor_scalar", "DVE", [cand.ap], [cand.ap], op0="add", operand0=big)
    ci = col("ami", "float32")
    em.inst("tensor_reduce", "DVE", [ci], [cand.ap], op="min", axes=1)
    # better = (m beats acc_v strictly, or the row has a NaN) and acc_v is not NaN yet
    an = col("aman", "float32")
    em.inst("tensor_tensor", "DVE", [an], [acc_v.ap, acc_v.ap], op="ne")
    bp = col("ambp", "float32")
    em.inst("tensor_tensor", "DVE", [bp], [m, acc_v.ap], op=cmp)
    em.inst("tensor_tensor", "DVE", [bp], [bp, rn], op="max")
    better = col("amb", "bool")
    em.inst("tensor_tensor", "DVE", [better], [bp, an], op="gt")
    ci_i = col("amii", acc_i.dtype)
    em.inst("tensor_copy", "DVE", [ci_i], [ci])
    em.inst("select", "DVE", [acc_i.ap], [better, ci_i, acc_i.ap])
    # the value: NaN for a row with a NaN, else the extremum; taken when better
    rnb = col("amrb", "bool")
    em.inst("tensor_scalar", "DVE", [rnb], [rn], op0="ne", operand0=0.0)
    nanc = col("amnc", "float32")          # the row sum: NaN in a row with a NaN
    em.inst("tensor_reduce", "DVE", [nanc], [vf.ap], op="add", axes=1)
    mv = col("amv", "float32")
    em.inst("select", "DVE", [mv], [rnb, nanc, m])
    if acc_v.dtype == "float32":
        em.inst("select", "DVE", [acc_v.ap], [better, mv, acc_v.ap])
    else:
        mvc = col("amvc", acc_v.dtype)
        em.inst("tensor_copy", "DVE", [mvc], [mv])
        em.inst("select", "DVE", [acc_v.ap], [better, mvc, acc_v.ap])
