"""Reductions with any reducer: reduce, reduce-window and select-and-scatter as Penguin
slices, pads and the reducer computation applied elementwise (apply.py).

The codegen's reduce / reduce-window kernels run the reducers the engines have an
ALU op for (add, max, min, mul; and/or on booleans; argmax/argmin pairs) with a
constant init. Everything else is lowered here by lowering the reducer itself:

* reduce: the reduced axes are moved last and flattened to one axis of length R,
  padded with the init value to a power of two (XLA's init is an identity of the
  reducer: jax.lax.reduce's contract), then halved log2(R) times, each step one
  application of the reducer to the two halves (variadic reducers take all their
  operands' halves); the init is combined once at the end, as the interpreter does.
  A reducer the ALU has with a non-constant init runs the ALU reduction from the
  reducer's identity and then combines the init once.
* reduce-window: the operand is padded with the init (padding and base dilation
  as interior padding), and the window positions are folded one strided slice at a
  time, in window order. An ALU reduce-window of more positions than the window
  kernel unrolls (MAX_TAPS) is split into ones it does: one axis at a time, and a long
  axis as windows of about sqrt(size) taps, then windows of those (``_split_window``).
* select-and-scatter: each window's selected position is found by folding its
  taps in window order with the select computation (padding never selected, as in
  XLA); each tap's share of the source is placed on the operand by a pad with
  interior stride, and combined into the init-filled output with the scatter
  computation (masked, so positions a tap does not reach stay unchanged).

A boolean reducer is classified by its truth table (evaluated on all four input
pairs), so torch-xla's select(and(x != false, y != false), true, false) runs as the
ALU's and-reduction.
"""
import itertools

import numpy as np

from neuronxcc.starfish.penguin.apply import apply_computation
from neuronxcc.starfish.penguin.hloinst import REDUCER_OP, called as _called, reducer_kind, unsupported

ALU_KINDS = ("add", "max", "min", "mul")
MAX_TAPS = 64           # window positions unrolled (reduce-window, select-and-scatter), as the window kernel
MAX_SELECT_TAPS = 256   # select-and-scatter window positions unrolled here (about ten graph ops each)
BOOL_KINDS = ("and", "or")
ARG_KINDS = ("argmax", "argmin", "argmax_nonan", "argmin_nonan")


def identity(kind, dtype):
    """The identity of ALU reducer ``kind`` in Penguin ``dtype``."""
    if dtype == "bool":
        return {"and": True, "or": False, "add": False, "max": False, "min": True, "mul": True}[kind]
    if dtype.startswith(("int", "uint")):
        info = np.iinfo(np.dtype(dtype))
        return {"add": 0, "mul": 1, "max": int(info.min), "min": int(info.max), "and": -1 if info.min < 0 else
                int(info.max), "or": 0, "xor": 0}[kind]
    return {"add": 0.0, "mul": 1.0, "max": float("-inf"), "min": float("inf")}[kind]


class _B:
    def __init__(self, g, loc, name):
        self.g, self.loc, self.name = g, loc, name

    def op(self, kind, ins, shape, dtype, attrs=None, suffix=""):
        return self.g.add_op(kind, ins, [(self.name + suffix, tuple(shape), dtype)], attrs or {}, self.loc)[0]

    def shape(self, v):
        return self.g.values[v].shape

    def dtype(self, v):
        return self.g.values[v].dtype

    def reshape(self, v, shape):
        shape = tuple(shape)
        return v if self.shape(v) == shape else self.op("reshape", [v], shape, self.dtype(v), suffix=".r")

    def transpose(self, v, perm):
        if list(perm) == list(range(len(perm))):
            return v
        shape = [self.shape(v)[p] for p in perm]
        return self.op("transpose", [v], shape, self.dtype(v), {"permutation": list(perm)}, ".t")

    def slice(self, v, starts, limits, strides=None):
        strides = strides or [1] * len(starts)
        shape = [max(0, -(-(l - s) // t)) for s, l, t in zip(starts, limits, strides)]
        return self.op("slice", [v], shape, self.dtype(v), {"starts": list(starts), "limits": list(limits),
                                                            "strides": list(strides)}, ".s")

    def pad(self, v, pv, cfg, shape):
        return self.op("pad", [v, pv], shape, self.dtype(v), {"padding": [list(c) for c in cfg]}, ".p")

    def bcast(self, v, shape):
        return self.op("broadcast", [v], shape, self.dtype(v), {"dimensions": []}, ".b")

    def const(self, value, shape, dtype):
        return self.op("constant", [], shape, dtype, {"value": value}, ".c")


def _splat(conv, g, v):
    c = conv._const_of(g, v)
    return c[1] if c is not None and c[0] == "splat" else None


# -- reduce --------------------------------------------------------------------------------------

def convert_reduce(conv, g, inst, ins, loc, kind):
    """Penguin values of a reduce, or None when the reduce kernel takes it as it is."""
    n = len(inst.operands) // 2
    xs, inits = ins[:n], ins[n:]
    const_init = all(_splat(conv, g, i) is not None for i in inits)
    if n == 1 and (kind in ALU_KINDS or kind in BOOL_KINDS) or n == 2 and kind in ARG_KINDS:
        if const_init:
            return None
        if n == 1:
            return _alu_with_init(conv, g, inst, xs[0], inits[0], loc, kind)
    return reduce_tree(conv, g, inst, xs, inits, loc)


def _alu_with_init(conv, g, inst, x, init, loc, kind):
    """The ALU reduction from the identity, then the (non-constant) init combined once."""
    b = _B(g, loc, inst.name)
    dt = b.dtype(init)
    out_shape = tuple(inst.shape.dims)
    ident = b.const(identity(kind, dt), (), dt)
    r = b.op("reduce", [x, ident], out_shape, dt, {"dimensions": list(_dims(inst)), "reducer": kind}, ".alu")
    ib = b.bcast(init, out_shape) if out_shape else init
    return apply_computation(conv, g, _called(inst), [ib, r], out_shape, loc, inst.name + ".init")[0]


def _dims(inst):
    from neuronxcc.hlo import interp_attrs as A
    return sorted(A.int_list(inst, "dimensions"))


def reduce_tree(conv, g, inst, xs, inits, loc):
    """Any reducer: a balanced tree of applications of the reducer computation."""
    comp = _called(inst)
    b = _B(g, loc, inst.name)
    dims = _dims(inst)
    in_shape = b.shape(xs[0])
    kept = [d for d in range(len(in_shape)) if d not in dims]
    out_shape = tuple(in_shape[d] for d in kept)
    rn = 1
    for d in dims:
        rn *= in_shape[d]
    init_b = [b.bcast(i, out_shape) if out_shape else i for i in inits]
    if rn == 0:
        return [b.op("copy", [i], out_shape, b.dtype(i), suffix=".empty") for i in init_b]
    flat = [b.reshape(b.transpose(x, kept + dims), out_shape + (rn,)) for x in xs]
    p2 = 1
    while p2 < rn:
        p2 *= 2
    k = len(out_shape)
    if p2 != rn:
        cfg = [(0, 0, 0)] * k + [(0, p2 - rn, 0)]
        flat = [b.pad(x, i, cfg, out_shape + (p2,)) for x, i in zip(flat, inits)]
    m = p2
    while m > 1:
        h = m // 2
        lo = [b.slice(x, [0] * k + [0], list(out_shape) + [h]) for x in flat]
        hi = [b.slice(x, [0] * k + [h], list(out_shape) + [m]) for x in flat]
        flat = apply_computation(conv, g, comp, lo + hi, out_shape + (h,), loc, "%s.lvl%d" % (inst.name, h))
        m = h
    res = [b.reshape(x, out_shape) for x in flat]
    return _one_or_all(inst, apply_computation(conv, g, comp, init_b + res, out_shape, loc, inst.name + ".init"))


def _one_or_all(inst, vals):
    return vals if inst.shape.is_tuple else vals[0]


# -- reduce-window ---------------------------------------------------------------------------------

def convert_reduce_window(conv, g, inst, ins, loc, kind):
    """Penguin values of a reduce-window, or None when the window kernel takes it."""
    from neuronxcc.hlo import interp_attrs as A
    n = len(inst.operands) // 2
    xs, inits = ins[:n], ins[n:]
    rank = len(inst.operands[0].shape.dims)
    w = A.window(inst, rank)
    if n == 1 and kind in ALU_KINDS and _splat(conv, g, inits[0]) is not None and \
            all(v == 1 for v in w["base_dilation"]):
        if window_taps(w) > MAX_TAPS and not _is_prefix(w, g.values[xs[0]].shape, kind):
            return _split_window(conv, g, inst, xs[0], inits[0], w, kind, loc)
        return None
    comp = _called(inst)
    _check_taps(inst, w)
    b = _B(g, loc, inst.name)
    out_shape = tuple((inst.shape.tuple_shapes[0] if inst.shape.is_tuple else inst.shape).dims)
    in_shape = b.shape(xs[0])
    cfg = [(lo, hi, bd - 1) for lo, hi, bd in zip(w["pad_lo"], w["pad_hi"], w["base_dilation"])]
    if any(c != (0, 0, 0) for c in cfg):
        pshape = tuple(lo + hi + (nn - 1) * (it + 1) + 1 if nn else lo + hi
                       for (lo, hi, it), nn in zip(cfg, in_shape))
        xs = [b.pad(x, i, cfg, pshape) for x, i in zip(xs, inits)]
    acc = None
    for pos in itertools.product(*[range(s) for s in w["size"]]):
        starts = [p * d for p, d in zip(pos, w["window_dilation"])]
        limits = [st + (o - 1) * s + 1 for st, o, s in zip(starts, out_shape, w["stride"])]
        vs = [b.slice(x, starts, limits, list(w["stride"])) for x in xs]
        acc = vs if acc is None else apply_computation(conv, g, comp, acc + vs, out_shape, loc,
                                                      inst.name + ".win")
    init_b = [b.bcast(i, out_shape) for i in inits]
    if acc is None:
        return _one_or_all(inst, init_b)
    return _one_or_all(inst, apply_computation(conv, g, comp, init_b + acc, out_shape, loc, inst.name + ".init"))


def window_taps(w):
    """Positions of window ``w`` (the product of its sizes)."""
    taps = 1
    for s in w["size"]:
        taps *= s
    return taps


def prefix_axis(w, shape, red):
    """(axis, reverse) when the window is a prefix (or suffix) along one axis, else None."""
    if red not in ALU_KINDS:
        return None
    axis = None
    for k, n in enumerate(shape):
        if w["size"][k] == 1 and w["pad_lo"][k] == 0 and w["pad_hi"][k] == 0:
            continue
        if axis is not None or w["size"][k] != n or n < 2:
            return None
        axis = k
    if axis is None or any(s != 1 for s in w["stride"]) or any(d != 1 for d in w["window_dilation"]) \
            or any(d != 1 for d in w["base_dilation"]):
        return None
    n = shape[axis]
    if (w["pad_lo"][axis], w["pad_hi"][axis]) == (n - 1, 0):
        return axis, False
    if (w["pad_lo"][axis], w["pad_hi"][axis]) == (0, n - 1):
        return axis, True
    return None


def _is_prefix(w, shape, kind):
    """A prefix (or suffix) window along one axis: the kernel's scan, at any length."""
    return prefix_axis(w, shape, kind) is not None


def _window_op(b, x, kind, size, stride, dilation, axis, out_len, dt, ident):
    """One reduce-window of ``x`` along ``axis`` only (no padding): the window kernel's form."""
    shape = list(b.shape(x))
    r = len(shape)
    win = {"size": [1] * r, "stride": [1] * r, "pad_lo": [0] * r, "pad_hi": [0] * r,
           "base_dilation": [1] * r, "window_dilation": [1] * r}
    win["size"][axis], win["stride"][axis], win["window_dilation"][axis] = size, stride, dilation
    shape[axis] = out_len
    return b.op("reduce-window", [x, ident], shape, dt, {"window": win, "reducer": kind}, ".w%d" % axis)


def _window_1d(b, x, kind, size, stride, dilation, axis, dt, ident, out_len=None):
    """x reduced over windows of ``size`` taps ``dilation`` apart, every ``stride``, along ``axis``,
    in steps of at most MAX_TAPS taps: windows of a ~ sqrt(size) taps first (stride 1), then q of
    those a * dilation apart (the window's first q * a taps), then the r = size - q * a left."""
    n = b.shape(x)[axis]
    span = (size - 1) * dilation + 1
    if out_len is None:
        out_len = (n - span) // stride + 1
    elif (out_len - 1) * stride + span < n:     # only the windows asked for: x cut to what they read
        lim = list(b.shape(x))
        lim[axis] = (out_len - 1) * stride + span
        x = b.slice(x, [0] * len(lim), lim)
        n = lim[axis]
    if size <= MAX_TAPS:
        return _window_op(b, x, kind, size, stride, dilation, axis, out_len, dt, ident)
    a = int(np.ceil(np.sqrt(size)))
    q, rem = size // a, size % a
    # a, q and rem are each at most ~sqrt(size): past MAX_TAPS ** 2 taps they recurse in turn
    ya = _window_1d(b, x, kind, a, 1, dilation, axis, dt, ident)
    res = _window_1d(b, ya, kind, q, stride, a * dilation, axis, dt, ident, out_len)
    if rem:
        yr = _window_1d(b, x, kind, rem, 1, dilation, axis, dt, ident)
        st = [0] * len(b.shape(x))
        st[axis] = q * a * dilation
        lim = list(b.shape(yr))
        lim[axis] = st[axis] + (out_len - 1) * stride + 1
        strides = [1] * len(st)
        strides[axis] = stride
        tail = b.slice(yr, st, lim, strides)
        res = b.op(REDUCER_OP[kind], [res, tail], b.shape(res), dt, suffix=".tail")
    return res


def _split_window(conv, g, inst, x, init, w, kind, loc):
    """An ALU reduce-window of more than MAX_TAPS positions as reduce-windows of at most MAX_TAPS:
    padded once with what cannot change the result (the identity; init itself for max / min), one
    axis at a time (add, max, min and mul are associative and commutative), a long axis in steps
    (``_window_1d``), and the init combined once, as the window kernel does."""
    b = _B(g, loc, inst.name)
    dt = b.dtype(x)
    ident_v = identity(kind, dt)
    init_v = _splat(conv, g, init)
    fill = init_v if kind in ("max", "min") else ident_v
    ident = b.const(ident_v, (), dt)
    if any(w["pad_lo"]) or any(w["pad_hi"]):
        cfg = [(lo, hi, 0) for lo, hi in zip(w["pad_lo"], w["pad_hi"])]
        pshape = tuple(lo + hi + nn for (lo, hi, _), nn in zip(cfg, b.shape(x)))
        x = b.pad(x, b.const(fill, (), dt), cfg, pshape)
    for axis, size in enumerate(w["size"]):
        if size > 1 or w["stride"][axis] > 1:
            x = _window_1d(b, x, kind, size, w["stride"][axis], w["window_dilation"][axis], axis, dt, ident)
    if init_v != ident_v:
        x = b.op(REDUCER_OP[kind], [x, b.bcast(b.const(init_v, (), dt), b.shape(x))], b.shape(x), dt,
                 suffix=".init")
    out = tuple(inst.shape.dims)
    return g.add_op("copy", [x], [(inst.name, out, dt)], {}, loc)[0]


def _check_taps(inst, w, limit=MAX_TAPS):
    taps = window_taps(w)
    if taps > limit:
        raise unsupported(inst, "%s with %d window positions (at most %d are unrolled)"
                          % (inst.opcode, taps, limit))


# -- select-and-scatter ------------------------------------------------------------------------------

def convert_select_and_scatter(conv, g, inst, ins, loc):
    """Penguin value of a select-and-scatter with any window (overlapping, padded), select and scatter."""
    from neuronxcc.hlo import interp_attrs as A
    select = inst.attrs.get("select")
    scatter = inst.attrs.get("scatter")
    x, src, init = ins
    rank = len(inst.operands[0].shape.dims)
    w = A.window(inst, rank)
    if any(v != 1 for v in w["window_dilation"]) or any(v != 1 for v in w["base_dilation"]):
        raise unsupported(inst, "select-and-scatter with dilated windows")
    _check_taps(inst, w, MAX_SELECT_TAPS)
    b = _B(g, loc, inst.name)
    xshape, sshape = b.shape(x), b.shape(src)
    xdt, odt = b.dtype(x), b.dtype(src)
    padded = any(w["pad_lo"]) or any(w["pad_hi"])
    if padded:
        cfg = [(lo, hi, 0) for lo, hi in zip(w["pad_lo"], w["pad_hi"])]
        pshape = tuple(nn + lo + hi for nn, lo, hi in zip(xshape, w["pad_lo"], w["pad_hi"]))
        xp = b.pad(x, b.const(0, (), xdt), cfg, pshape)
        valid = b.pad(b.const(True, xshape, "bool"), b.const(False, (), "bool"), cfg, pshape)
    else:
        xp, valid = x, None
    taps = list(itertools.product(*[range(s) for s in w["size"]]))
    cur = idx = have = None
    for k, pos in enumerate(taps):
        lim = [p + (nn - 1) * s + 1 for p, nn, s in zip(pos, sshape, w["stride"])]
        v = b.slice(xp, list(pos), lim, list(w["stride"]))
        ok = b.slice(valid, list(pos), lim, list(w["stride"])) if valid is not None else None
        kk = b.const(k, sshape, "int32")
        if cur is None:
            cur, idx, have = v, kk, ok
            continue
        keep = apply_computation(conv, g, select, [cur, v], sshape, loc, inst.name + ".sel")[0]
        take = b.op("not", [keep], sshape, "bool", suffix=".take")
        if ok is not None:
            nh = b.op("not", [have], sshape, "bool", suffix=".nh")
            take = b.op("and", [ok, b.op("or", [nh, take], sshape, "bool", suffix=".t")], sshape, "bool",
                        suffix=".take")
            have = b.op("or", [have, ok], sshape, "bool", suffix=".have")
        cur = b.op("select", [take, v, cur], sshape, xdt, suffix=".cur")
        idx = b.op("select", [take, kk, idx], sshape, "int32", suffix=".idx")
    add = reducer_kind(scatter) == "add"
    zero = b.const(0, (), odt)
    out = b.bcast(init, xshape) if xshape else init
    for k, pos in enumerate(taps):
        hit = b.op("compare", [idx, b.const(k, sshape, "int32")], sshape, "bool", {"direction": "EQ"}, ".hit")
        if have is not None:
            hit = b.op("and", [hit, have], sshape, "bool", suffix=".hit")
        # the window at w lands on operand position w*stride + pos - pad_lo
        cfg = []
        for d in range(rank):
            lo = pos[d] - w["pad_lo"][d]
            span = (sshape[d] - 1) * w["stride"][d] + 1 if sshape[d] else 0
            cfg.append((lo, xshape[d] - lo - span, w["stride"][d] - 1))
        if add:
            share = b.op("select", [hit, src, b.bcast(zero, sshape)], sshape, odt, suffix=".share")
            out = b.op("add", [out, b.pad(share, zero, cfg, xshape)], xshape, odt, suffix=".acc")
        else:
            placed = b.pad(src, zero, cfg, xshape)
            mask = b.pad(hit, b.const(False, (), "bool"), cfg, xshape)
            comb = apply_computation(conv, g, scatter, [out, placed], xshape, loc, inst.name + ".scatter")[0]
            out = b.op("select", [mask, comb, out], xshape, odt, suffix=".acc")
    if out in ins:
        out = b.op("copy", [out], xshape, odt, suffix=".out")
    return out


def is_max_pool_grad(inst):
    """select = GE of (param 0, param 1) and scatter = add: the form the window kernel lowers."""
    sel = inst.attrs.get("select")
    if sel is None or reducer_kind(inst.attrs.get("scatter")) != "add":
        return False
    root = sel.root
    ps = sorted(sel.parameters, key=lambda p: p.parameter_number)
    return root.opcode == "compare" and len(ps) == 2 and list(root.operands) == ps and \
        str(root.attrs.get("direction", "")).strip('"').upper() == "GE"


# -- boolean reducers by truth table -----------------------------------------------------------------

def bool_kind(module, comp):
    """'and' / 'or' / 'xor' for a two-parameter pred reducer with that truth table, else None."""
    ps = sorted(comp.parameters, key=lambda p: p.parameter_number)
    if len(ps) != 2 or comp.root.shape.is_tuple or comp.root.shape.element_type != "pred" or \
            any(p.shape.element_type != "pred" or p.shape.dims for p in ps):
        return None
    from neuronxcc.hlo.interpreter import Evaluator
    try:
        ev = Evaluator(module)
        table = tuple(bool(np.asarray(ev.run(comp, [np.bool_(a), np.bool_(c)])).reshape(()))
                      for a in (False, True) for c in (False, True))
    except Exception:  # a reducer the interpreter cannot run here is simply not classified
        return None
    return {(False, False, False, True): "and", (False, True, True, True): "or",
            (False, True, True, False): "xor"}.get(table)
