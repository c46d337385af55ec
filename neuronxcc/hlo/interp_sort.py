"""Interpreter handlers for sort (multi-operand, any comparator) and top-k
(the ``topk`` opcode and the TopK / AwsNeuronTopK custom calls).

Sort: a comparator that is a single ``compare`` of one operand's two
parameters sorts by that key with numpy's stable argsort (TOTALORDER via an
integer key). Otherwise the comparator's ``compare(g(lhs_i), g(rhs_i))``
nodes (JAX's NaN/-0 canonicalising and lexicographic multi-key comparators)
give key functions g, evaluated once over whole arrays; the lexicographic
order they suggest is kept only when the comparator itself confirms it on
every adjacent pair (nothing out of order, equivalent neighbours in original
order), which makes it exactly the stable sort. Failing that, a bottom-up
merge sort whose merges locate every element by binary search runs, each
step one lifted comparator call over all rows: O(log^2 n) calls, stable.

Top-k: values in descending order (ascending for largest=false), ties broken
by the lowest index; floats ordered by XLA's total order (NaN above +inf).
"""
import numpy as np

from neuronxcc.errors import HloVerifyError
from neuronxcc.hlo.interp_attrs import attr, bool_attr, computation, int_attr, int_list, str_attr
from neuronxcc.hlo.interp_base import cast, dims_of, dtype_of, handler, is_float, is_tuple_shape
from neuronxcc.hlo.interp_elementwise import total_order_key


def _simple_key(ev, comp, nops):
    """(operand index, descending, total_order) when ``comp`` is one compare of p[2i], p[2i+1]."""
    key = ("sort_key", id(comp))
    if key in ev.cache:
        return ev.cache[key]
    res = None
    root = comp.root
    params = comp.parameters
    if root.opcode == "compare" and len(params) == 2 * nops:
        a, b = root.operands
        pa = [k for k, p in enumerate(params) if p is a]
        pb = [k for k, p in enumerate(params) if p is b]
        direction = str_attr(root, "direction")
        ctype = str_attr(root, "type", None)
        if pa and pb and pa[0] // 2 == pb[0] // 2 and pa[0] != pb[0] and direction in ("LT", "GT"):
            swapped = pa[0] % 2 == 1
            desc = (direction == "GT") != swapped
            res = (pa[0] // 2, desc, ctype == "TOTALORDER")
    ev.cache[key] = res
    return res


def _param_deps(comp):
    """id(instruction) -> frozenset of parameter numbers it depends on."""
    deps = {}
    for inst in comp.instructions:
        if inst.opcode == "parameter":
            deps[id(inst)] = frozenset([inst.parameter_number])
        else:
            d = frozenset()
            for o in inst.operands:
                d |= deps.get(id(o), frozenset())
            deps[id(inst)] = d
    return deps


def _key_compares(ev, comp, nops):
    """The comparator's ``compare(g(p[2i]), g'(p[2i+1]))`` nodes, one per operand i (the
    first LT/GT one), in operand order: [(i, lhs key inst, rhs key inst, descending, total)]."""
    key = ("key_compares", id(comp))
    if key in ev.cache:
        return ev.cache[key]
    deps = _param_deps(comp)
    found = {}
    if len(comp.parameters) == 2 * nops:
        for inst in comp.instructions:
            if inst.opcode != "compare" or len(inst.operands) != 2:
                continue
            direction = str_attr(inst, "direction")
            if direction not in ("LT", "GT"):
                continue
            a, b = inst.operands
            da, db = deps[id(a)], deps[id(b)]
            if len(da) != 1 or len(db) != 1:
                continue
            pa, pb = next(iter(da)), next(iter(db))
            if pa // 2 != pb // 2 or pa == pb or pa // 2 in found:
                continue
            if pa % 2 == 1:                           # compare(g(rhs), g(lhs)): flip
                a, b = b, a
                direction = "GT" if direction == "LT" else "LT"
            found[pa // 2] = (pa // 2, a, b, direction == "GT", str_attr(inst, "type", None) == "TOTALORDER")
    res = [found[k] for k in sorted(found)]
    ev.cache[key] = res
    return res


def _guess_and_verify(ev, comp, rows2d):
    """A stable order of each row guessed from the comparator's key functions
    (lexicographic in operand order), kept only if the comparator itself confirms
    it: no adjacent pair out of order, equivalent neighbours in original order."""
    nodes = _key_compares(ev, comp, len(rows2d))
    if not nodes:
        return None
    args = []
    for r in rows2d:
        args.extend((r, r))
    vals = ev.apply_values(comp, args, [x for nd in nodes for x in nd[1:3]])
    if vals is None:
        return None
    keys = []
    for k, (i, _, _, desc, total) in enumerate(nodes):
        ka, kb = (np.ascontiguousarray(np.broadcast_to(v, rows2d[0].shape)) for v in vals[2 * k:2 * k + 2])
        if ka.dtype != kb.dtype or ka.tobytes() != kb.tobytes():
            continue                                   # the two sides apply different functions
        key = _sort_key(ka, total)
        keys.append(_descending(key) if desc else key)
    if not keys:
        return None
    perm = np.lexsort(keys[::-1], axis=-1) if len(keys) > 1 else np.argsort(keys[0], axis=-1, kind="stable")
    n = rows2d[0].shape[1]
    if n < 2:
        return perm
    srt = [np.take_along_axis(r, perm, axis=-1) for r in rows2d]
    nxt = [x[:, 1:] for x in srt]
    prv = [x[:, :-1] for x in srt]

    def less(a, b):
        ps = []
        for x, y in zip(a, b):
            ps.extend((x, y))
        return np.asarray(ev.apply(comp, ps), bool)
    back = less(nxt, prv)
    if np.any(back):
        return None
    equiv = ~less(prv, nxt)
    if np.any(equiv & (perm[:, 1:] < perm[:, :-1])):
        return None
    return perm


def _sort_key(x, total_order):
    if x.dtype == np.bool_:
        return x.astype(np.int8)
    if is_float(x.dtype):
        if total_order or x.dtype.itemsize < 4:
            return total_order_key(x)
        return x
    return x


def _descending(key):
    if key.dtype.kind in "iu":
        return np.invert(key)
    return -key


def merge_sort(ev, comp, arrays):
    """Stable sort of rows: ``arrays`` are [R, n]; returns the [R, n] permutation."""
    R, n = arrays[0].shape
    if n <= 1:
        return np.zeros((R, n), np.int64)
    P = 1
    while P < n:
        P *= 2
    perm = np.broadcast_to(np.arange(P, dtype=np.int64), (R, P)).copy()
    rows = np.arange(R).reshape(R, 1, 1)

    def less(ia, ib):
        ca, cb = np.minimum(ia, n - 1), np.minimum(ib, n - 1)
        params = []
        for arr in arrays:
            params.append(arr[rows, ca])
            params.append(arr[rows, cb])
        r = np.asarray(ev.apply(comp, params), bool)
        return np.where(ia >= n, False, np.where(ib >= n, True, r))

    w = 1
    while w < P:
        blocks = P // (2 * w)
        p = perm.reshape(R, blocks, 2, w)
        A, B = p[:, :, 0, :], p[:, :, 1, :]
        steps = int(np.ceil(np.log2(w + 1)))
        # for A[i]: how many B[j] are strictly less (B is sorted: a prefix)
        lo = np.zeros(A.shape, np.int64)
        hi = np.full(A.shape, w, np.int64)
        for _ in range(steps):
            active = lo < hi
            mid = np.minimum((lo + hi) // 2, w - 1)
            c = less(np.take_along_axis(B, mid, axis=2), A)
            lo = np.where(active & c, mid + 1, lo)
            hi = np.where(active & ~c, mid, hi)
        cnt_b = lo
        # for B[j]: how many A[i] are not greater (A[i] <= B[j]: a prefix of A)
        lo = np.zeros(B.shape, np.int64)
        hi = np.full(B.shape, w, np.int64)
        for _ in range(steps):
            active = lo < hi
            mid = np.minimum((lo + hi) // 2, w - 1)
            c = ~less(B, np.take_along_axis(A, mid, axis=2))
            lo = np.where(active & c, mid + 1, lo)
            hi = np.where(active & ~c, mid, hi)
        cnt_a = lo
        ar = np.arange(w, dtype=np.int64)
        new = np.empty((R, blocks, 2 * w), np.int64)
        np.put_along_axis(new, ar + cnt_b, A, axis=2)
        np.put_along_axis(new, ar + cnt_a, B, axis=2)
        perm = new.reshape(R, P)
        w *= 2
    return perm[:, :n]


@handler("sort")
def h_sort(ev, inst, args):
    arrays = [np.asarray(a) for a in args]
    dims = int_list(inst, "dimensions")
    d = dims[0] if dims else arrays[0].ndim - 1
    comp = computation(ev, inst, "to_apply")
    moved = [np.moveaxis(a, d, -1) for a in arrays]
    shp = moved[0].shape
    n = shp[-1] if shp else 1
    rows2d = [m.reshape(-1, n) for m in moved]
    simple = _simple_key(ev, comp, len(arrays))
    key = None
    if simple is not None:
        i, desc, total = simple
        key = _sort_key(rows2d[i], total)
        if desc:
            key = _descending(key)
    if key is not None:
        perm = np.argsort(key, axis=-1, kind="stable")
    else:
        perm = _guess_and_verify(ev, comp, rows2d) if rows2d[0].size else None
        if perm is None:
            perm = merge_sort(ev, comp, rows2d)
    outs = []
    for r in rows2d:
        s = np.take_along_axis(r, perm, axis=-1).reshape(shp)
        outs.append(np.moveaxis(s, -1, d))
    if is_tuple_shape(inst.shape):
        return tuple(cast(o, dtype_of(s)) for o, s in zip(outs, inst.shape.tuple_shapes))
    return cast(outs[0], dtype_of(inst.shape))


def topk(x, k, largest=True):
    """(values, int32 indices) of the top ``k`` along the last axis."""
    x = np.asarray(x)
    key = _sort_key(x, True)
    if largest:
        key = _descending(key)
    n = x.shape[-1] if x.ndim else 1
    if key.dtype.kind in "iu" and key.dtype.itemsize <= 4 and 0 < k < n // 4:
        # unique composite keys (key, index): partition, then sort only the k winners
        comp = key.astype(np.int64) * n + np.arange(n, dtype=np.int64)
        part = np.argpartition(comp, k - 1, axis=-1)[..., :k]
        idx = np.take_along_axis(part, np.argsort(np.take_along_axis(comp, part, axis=-1), axis=-1), axis=-1)
    else:
        idx = np.argsort(key, axis=-1, kind="stable")[..., :k]
    return np.take_along_axis(x, idx, axis=-1), idx.astype(np.int32)


def _topk_out(inst, vals, idx):
    if is_tuple_shape(inst.shape):
        ts = inst.shape.tuple_shapes
        return (cast(vals, dtype_of(ts[0])), cast(idx, dtype_of(ts[1])))
    return cast(vals, dtype_of(inst.shape))


@handler("topk")
def h_topk(ev, inst, args):
    k = int_attr(inst, "k")
    if k is None:
        k = dims_of(inst.shape.tuple_shapes[0])[-1]
    vals, idx = topk(args[0], k, bool_attr(inst, "largest", True))
    return _topk_out(inst, vals, idx)


@handler("custom_topk")
def h_custom_topk(ev, inst, args):
    shape = inst.shape.tuple_shapes[0] if is_tuple_shape(inst.shape) else inst.shape
    k = dims_of(shape)[-1] if dims_of(shape) else 1
    x = np.asarray(args[0])
    if k > x.shape[-1]:
        raise HloVerifyError("%s %s: k=%d exceeds the last dimension %d"
                             % (attr(inst, "custom_call_target"), inst.name, k, x.shape[-1]))
    vals, idx = topk(x, k, True)
    return _topk_out(inst, vals, idx)
