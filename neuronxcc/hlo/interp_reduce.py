"""Interpreter handlers for reductions: reduce (variadic), reduce-window
(padding, base and window dilation; cumulative sums as JAX emits them),
select-and-scatter.

A reducer computation whose root is one associative binary op of its two
parameters (add, multiply, maximum, minimum, and, or, xor) runs as the
matching numpy ufunc reduction; any other reducer (argmax's variadic one,
...) is applied as a balanced tree of lifted calls, which XLA's semantics
allow (the reduction order is unspecified). The init value is combined once
per output element. Float accumulation narrower than f32 is carried out in f32.
"""
import numpy as np

from neuronxcc.hlo.interp_attrs import computation, int_list, window
from neuronxcc.hlo.interp_base import cast, dims_of, dtype_of, handler, is_low_float, is_tuple_shape, upcast
from neuronxcc.hlo.interp_shape import pad

_ASSOC = ("add", "multiply", "maximum", "minimum", "and", "or", "xor")


def reducer_kind(ev, comp):
    """'add', 'maximum', ... for a two-parameter computation that is one such op of its
    parameters; 'replace' when it returns its second parameter; else None."""
    key = ("reducer_kind", id(comp))
    if key in ev.cache:
        return ev.cache[key]
    kind = None
    params = comp.parameters
    root = comp.root
    if len(params) == 2 and not is_tuple_shape(root.shape):
        if root is params[1]:
            kind = "replace"
        elif root.opcode in _ASSOC and len(root.operands) == 2 and \
                {id(o) for o in root.operands} == {id(params[0]), id(params[1])}:
            kind = root.opcode
    ev.cache[key] = kind
    return kind


_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
           "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}
_BOOL_UFUNCS = {"add": np.logical_or, "multiply": np.logical_and, "maximum": np.logical_or,
                "minimum": np.logical_and, "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}


def ufunc_for(kind, dtype):
    if kind is None or kind == "replace":
        return None
    if dtype == np.bool_:
        return _BOOL_UFUNCS.get(kind)
    if kind in ("and", "or", "xor") and dtype.kind not in "iu":
        return None
    return _UFUNCS.get(kind)


def _identity(kind, dtype):
    """The identity element of reducer ``kind`` in ``dtype``, or None."""
    if kind is None or kind == "replace":
        return None
    if dtype == np.bool_:
        return {"add": False, "or": False, "xor": False, "maximum": False,
                "multiply": True, "and": True, "minimum": True}.get(kind)
    if kind in ("add", "or", "xor"):
        return np.zeros((), dtype)
    if kind == "multiply":
        return np.ones((), dtype)
    if kind == "and":
        return np.array(-1).astype(dtype) if dtype.kind in "iu" else None
    if kind in ("maximum", "minimum"):
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            return np.array(info.min if kind == "maximum" else info.max, dtype)
        return np.array(-np.inf if kind == "maximum" else np.inf).astype(dtype)
    return None


def tree_reduce(ev, comp, vals):
    """Reduce the last axis of each array in ``vals`` with ``comp`` (2N parameters)."""
    k = vals[0].shape[-1]
    while k > 1:
        h = k // 2
        a = [v[..., :h] for v in vals]
        b = [v[..., h:2 * h] for v in vals]
        r = ev.apply(comp, a + b)
        r = list(r) if isinstance(r, tuple) else [r]
        if k % 2:
            r = [np.concatenate([x, v[..., 2 * h:]], axis=-1) for x, v in zip(r, vals)]
        vals = r
        k = vals[0].shape[-1]
    return [v[..., 0] for v in vals]


def _reduce_last_axes(ev, comp, xs, inits, naxes, out_shape):
    """Reduce the trailing ``naxes`` axes of arrays ``xs``; returns a list of arrays."""
    kind = reducer_kind(ev, comp) if len(xs) == 1 else None
    if kind is not None and kind != "replace":
        x = upcast(xs[0])
        uf = ufunc_for(kind, x.dtype)
        if uf is not None:
            axes = tuple(range(x.ndim - naxes, x.ndim))
            init = upcast(inits[0])
            r = uf.reduce(x, axis=axes) if x.size else np.broadcast_to(init, out_shape)
            if x.size:
                r = uf(init, r)
            return [cast(np.asarray(r), xs[0].dtype)]
    lead = xs[0].shape[:xs[0].ndim - naxes]
    flat = [x.reshape(lead + (-1,)) for x in xs]
    if flat[0].shape[-1] == 0:
        return [np.array(np.broadcast_to(i, out_shape)) for i in inits]
    red = tree_reduce(ev, comp, flat)
    r = ev.apply(comp, [np.broadcast_to(i, out_shape) for i in inits] + red)
    r = list(r) if isinstance(r, tuple) else [r]
    return [cast(np.asarray(v), x.dtype) for v, x in zip(r, xs)]


@handler("reduce")
def h_reduce(ev, inst, args):
    n = len(args) // 2
    xs, inits = [np.asarray(a) for a in args[:n]], [np.asarray(a) for a in args[n:]]
    dims = int_list(inst, "dimensions")
    comp = computation(ev, inst, "to_apply")
    keep = [d for d in range(xs[0].ndim) if d not in dims]
    perm = keep + sorted(dims)
    xs_t = [np.transpose(x, perm) if perm != list(range(x.ndim)) else x for x in xs]
    out_shape = tuple(xs[0].shape[d] for d in keep)
    res = _reduce_last_axes(ev, comp, xs_t, inits, len(dims), out_shape)
    if is_tuple_shape(inst.shape):
        return tuple(cast(r, dtype_of(s)) for r, s in zip(res, inst.shape.tuple_shapes))
    return cast(res[0], dtype_of(inst.shape))


def windows(x, w, pad_value):
    """View of ``x`` (base-dilated and padded with ``pad_value``) as out_dims + window dims."""
    cfg = [(lo, hi, bd - 1) for lo, hi, bd in zip(w["pad_lo"], w["pad_hi"], w["base_dilation"])]
    xp = pad(x, pad_value, cfg)
    ext = [(s - 1) * wd + 1 for s, wd in zip(w["size"], w["window_dilation"])]
    if any(e > n for e, n in zip(ext, xp.shape)):
        # empty output along some dim
        out = [max((n - e) // st + 1, 0) if n >= e else 0 for n, e, st in zip(xp.shape, ext, w["stride"])]
        return np.empty(tuple(out) + tuple(w["size"]), x.dtype)
    v = np.lib.stride_tricks.sliding_window_view(xp, ext) if xp.ndim else xp
    sl = tuple(slice(None, None, st) for st in w["stride"]) + tuple(slice(None, None, wd) for wd in
                                                                   w["window_dilation"])
    return v[sl]


def _cumulative_axis(w, shape):
    """The axis of a reduce-window that is a running (reverse=False) or reverse scan, else None."""
    axis = None
    for d, n in enumerate(shape):
        plain = (w["stride"][d] == 1 and w["base_dilation"][d] == 1 and w["window_dilation"][d] == 1)
        if w["size"][d] == 1 and w["pad_lo"][d] == 0 and w["pad_hi"][d] == 0 and plain:
            continue
        if axis is not None or not plain or n < 1 or w["size"][d] != n:
            return None
        if (w["pad_lo"][d], w["pad_hi"][d]) == (n - 1, 0):
            axis = (d, False)
        elif (w["pad_lo"][d], w["pad_hi"][d]) == (0, n - 1):
            axis = (d, True)
        else:
            return None
    return axis


@handler("reduce_window")
def h_reduce_window(ev, inst, args):
    n = len(args) // 2
    xs, inits = [np.asarray(a) for a in args[:n]], [np.asarray(a) for a in args[n:]]
    comp = computation(ev, inst, "to_apply")
    w = window(inst, xs[0].ndim)
    out_shape = dims_of(inst.shape.tuple_shapes[0] if is_tuple_shape(inst.shape) else inst.shape)
    if n == 1:
        kind = reducer_kind(ev, comp)
        x = upcast(xs[0])
        uf = ufunc_for(kind, x.dtype)
        scan = _cumulative_axis(w, x.shape) if uf is not None else None
        if scan is not None:
            d, rev = scan
            y = np.flip(x, d) if rev else x
            y = uf(upcast(inits[0]), uf.accumulate(y, axis=d))
            if rev:
                y = np.flip(y, d)
            return cast(y, dtype_of(inst.shape))
    # XLA skips padding and base-dilation holes; a known reducer pads with its identity so
    # they contribute nothing (the init value is then combined once). Other reducers pad
    # with the init value, which is the same whenever the init is an identity.
    pads = list(inits)
    if n == 1:
        ident = _identity(reducer_kind(ev, comp), xs[0].dtype)
        if ident is not None:
            pads = [ident]
    views = [windows(x, w, pv) for x, pv in zip(xs, pads)]
    res = _reduce_last_axes(ev, comp, views, inits, xs[0].ndim, out_shape)
    if is_tuple_shape(inst.shape):
        return tuple(cast(r, dtype_of(s)) for r, s in zip(res, inst.shape.tuple_shapes))
    return cast(res[0], dtype_of(inst.shape))


def scatter_combine(ev, comb, out_flat, targets, values):
    """out_flat[t] = comb(out_flat[t], v) for each (t, v) in order (in place)."""
    kind = reducer_kind(ev, comb)
    if kind == "replace":
        out_flat[targets] = values
        return out_flat
    uf = ufunc_for(kind, out_flat.dtype)
    if uf is not None:
        work = out_flat.astype(np.float32) if is_low_float(out_flat.dtype) else out_flat
        uf.at(work, targets, values.astype(work.dtype))
        if work is not out_flat:
            out_flat[...] = work.astype(out_flat.dtype)
        return out_flat
    scatter_rounds(ev, comb, [out_flat], targets, [values])
    return out_flat


def scatter_rounds(ev, comb, outs, flat, vals):
    """Apply ``comb`` in update order; each round handles one occurrence of every target."""
    if flat.size == 0:
        return
    order = np.argsort(flat, kind="stable")
    sf = flat[order]
    first = np.ones(sf.size, bool)
    first[1:] = sf[1:] != sf[:-1]
    group_start = np.maximum.accumulate(np.where(first, np.arange(sf.size), 0))
    rank = np.empty(sf.size, np.int64)
    rank[order] = np.arange(sf.size) - group_start
    for r in range(int(rank.max()) + 1):
        sel = rank == r
        t = flat[sel]
        cur = [o[t] for o in outs]
        new = ev.apply(comb, cur + [v[sel] for v in vals])
        if not isinstance(new, tuple):
            new = (new,)
        for o, v in zip(outs, new):
            o[t] = v


@handler("select_and_scatter")
def h_select_and_scatter(ev, inst, args):
    operand, source, init = (np.asarray(a) for a in args)
    sel_comp = computation(ev, inst, "select")
    sc_comp = computation(ev, inst, "scatter")
    w = window(inst, operand.ndim)
    zero = np.zeros((), operand.dtype)
    vals = windows(operand, w, zero)
    pos = windows(np.arange(operand.size, dtype=np.int64).reshape(operand.shape), w, np.int64(-1))
    out_dims = vals.shape[:operand.ndim]
    k = int(np.prod(vals.shape[operand.ndim:], dtype=np.int64))
    vals = vals.reshape(out_dims + (k,))
    pos = pos.reshape(out_dims + (k,))
    sel_val = vals[..., 0].copy()
    sel_idx = pos[..., 0].copy()
    for j in range(1, k):
        cv, ci = vals[..., j], pos[..., j]
        have = sel_idx >= 0
        keep = np.asarray(ev.apply(sel_comp, [sel_val, cv]), bool)
        take = (ci >= 0) & (~have | ~keep)
        sel_val = np.where(take, cv, sel_val)
        sel_idx = np.where(take, ci, sel_idx)
    out = np.empty(operand.size, dtype_of(inst.shape))
    out[...] = init
    ok = sel_idx >= 0
    scatter_combine(ev, sc_comp, out, sel_idx[ok], np.asarray(source)[ok].astype(out.dtype))
    return out.reshape(operand.shape)
