"""HLO pad as elementwise kernels: the result filled with the pad value, then the operand (sliced
where the padding is negative) copied into the strided sub-view it lands in (interior padding:
a step of it + 1)."""
from neuronxcc.starfish.penguin.expr import apply_view
from neuronxcc.starfish.penguin.views import Splat


def op_pad(kern, op, args, outs):
    x, pv = args
    out = kern.cg.target_for(outs[0].name)
    cfg = op.attrs["padding"]
    if isinstance(pv, Splat):
        fill = Splat(pv.value, outs[0].dtype, out.shape)
    else:  # a computed scalar (a reduction's init value): broadcast over the result
        fill = apply_view(pv, lambda v: v.broadcast(out.shape, []))
        if fill is None:
            fill = kern.cg.materialise(pv, allow_views=False).broadcast(out.shape, [])
    kern.elementwise(fill, out)
    # operand slice (negative padding) and destination sub-view
    s_st, s_li, s_sd = [], [], []
    o_st, o_li, o_sd = [], [], []
    for k, (lo, hi, it) in enumerate(cfg):
        n = x.shape[k]
        # element j of x lands at lo + j*(it+1)
        j0 = 0
        while j0 < n and lo + j0 * (it + 1) < 0:
            j0 += 1
        j1 = n
        while j1 > j0 and lo + (j1 - 1) * (it + 1) >= out.shape[k]:
            j1 -= 1
        s_st.append(j0)
        s_li.append(max(j0, j1))
        s_sd.append(1)
        o_st.append(lo + j0 * (it + 1))
        o_li.append(lo + j0 * (it + 1) + max(0, j1 - j0 - 1) * (it + 1) + (1 if j1 > j0 else 0))
        o_sd.append(it + 1)
    if all(b > a for a, b in zip(s_st, s_li)):
        xs = apply_view(x, lambda v: v.slice(s_st, s_li, s_sd))
        if xs is None:
            xs = kern.cg.materialise(x, allow_views=False).slice(s_st, s_li, s_sd)
        kern.elementwise(xs, out.slice(o_st, o_li, o_sd))
    return [out]
