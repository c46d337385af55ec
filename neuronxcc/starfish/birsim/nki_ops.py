"""birsim semantics of the opcodes in ``birpy.opcodes_nki`` (the nki.isa instructions without an
older BIR counterpart). The executable definition; math in fp32 like the engines (indices exact).

``handler(executor, opcode)`` returns the executor-bound handler (called with ``(instr, attrs)``),
or a handler that raises for an opcode nobody implements.
"""
import numpy as np

from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birsim import alu

_F = np.float32
__all__ = ["handler"]


def handler(ex, name):
    fn = _OPS.get(name)
    if fn is None:
        def missing(instr, attrs):
            raise BirSimError("opcode %r has no birsim semantics" % name)
        return missing
    return lambda instr, attrs: fn(ex, instr, attrs)


def _max8(ex, instr, attrs):
    x = ex._pf(instr.srcs[0])
    top = -np.sort(-x, axis=1, kind="stable")[:, :8]
    ex.wf(instr.dsts[0], top)


def _first_index(x, vals):
    p, n = x.shape
    out = np.full(vals.shape, 0xFFFFFFFF, np.int64)
    for k in range(vals.shape[1]):
        eq = x == vals[:, k:k + 1]
        has = eq.any(axis=1)
        out[has, k] = np.argmax(eq[has], axis=1)
    return out


def _find_index8(ex, instr, attrs):
    x = ex._pf(instr.srcs[0])
    vals = ex._pf(instr.srcs[1])
    ex.wi(instr.dsts[0], _first_index(x, vals))


def _match_replace8(ex, instr, attrs):
    x = ex._pf(instr.srcs[0]).copy()
    vals = ex._pf(instr.srcs[1])
    idx = np.full(vals.shape, 0xFFFFFFFF, np.int64)
    rows = np.arange(x.shape[0])
    imm = _F(attrs["imm"])
    for k in range(vals.shape[1]):
        eq = x == vals[:, k:k + 1]
        has = eq.any(axis=1)
        first = np.argmax(eq, axis=1)
        idx[has, k] = first[has]
        x[rows[has], first[has]] = imm
    ex.wf(instr.dsts[0], x)
    if attrs.get("with_index"):
        ex.wi(instr.dsts[1], idx)


def _stats(x):
    n = x.shape[1]
    cnt = _F(n)
    if n == 0:
        z = np.zeros((x.shape[0], 1), _F)
        return z, z, z
    mean = np.mean(x, axis=1, dtype=_F, keepdims=True)
    d = np.subtract(x, mean, dtype=_F)
    m2 = np.sum(np.multiply(d, d, dtype=_F), axis=1, dtype=_F, keepdims=True)
    return np.full_like(mean, cnt), mean, m2


def _bn_stats(ex, instr, attrs):
    x = ex._pf(instr.srcs[0])
    parts = []
    for half in (x[:, 0::2], x[:, 1::2]):
        parts.extend(_stats(half))
    ex.wf(instr.dsts[0], np.concatenate(parts, axis=1))


def _bn_aggr(ex, instr, attrs):
    x = ex._pf(instr.srcs[0]).astype(np.float64)
    if x.shape[1] % 3:
        raise BirSimError("bn_aggr input has %d elements per partition, not a multiple of 3" % x.shape[1])
    t = x.reshape(x.shape[0], -1, 3)
    cnt, mean, m2 = t[:, :, 0], t[:, :, 1], t[:, :, 2]
    total = cnt.sum(axis=1)
    safe = np.where(total > 0, total, 1.0)
    mu = (cnt * mean).sum(axis=1) / safe
    m2t = (m2 + cnt * (mean - mu[:, None]) ** 2).sum(axis=1)
    out = np.stack([mu, m2t / safe], axis=1).astype(_F)
    ex.wf(instr.dsts[0], out)


def _shuffle(ex, instr, attrs):
    out, src = instr.dsts[0], instr.srcs[0]
    x = ex.st.read_raw(src, ex.env).reshape(src.num_partitions, -1)
    cur = ex.st.read_raw(out, ex.env).reshape(out.num_partitions, -1).copy()
    mask = [int(m) for m in attrs["mask"]]
    for p in range(out.num_partitions):
        q, i = divmod(p, 32)
        m = mask[i] if i < len(mask) else 255
        if m == 255:
            continue
        s = q * 32 + m
        if s >= x.shape[0]:
            raise BirSimError("shuffle source partition %d outside %d partitions" % (s, x.shape[0]))
        cur[p] = x[s]
    if out.dtype != src.dtype:
        raise BirSimError("shuffle needs equal source and destination dtypes")
    ex.st.write_raw(out, ex.env, cur.reshape(-1))


def _local_gather(ex, instr, attrs):
    out, src, index = instr.dsts[0], instr.srcs[0], instr.srcs[1]
    raw = ex.st.read_raw(src, ex.env)
    P = src.num_partitions
    isz = raw.size // max(1, src.num_elements)
    data = raw.reshape(P, -1, isz)
    idx = ex._pi(index)
    e = int(attrs["num_elem_per_idx"])
    per_core = idx.shape[1] * 16
    nv = attrs.get("num_valid_indices")
    nv = per_core if nv is None else int(nv)
    res = np.zeros((P, nv * e, isz), raw.dtype)
    for c in range(P // 16):
        rows = slice(c * 16, c * 16 + 16)
        flat = idx[rows].flatten(order="F")[:nv]
        cols = (flat[:, None] + np.arange(e)[None, :]).reshape(-1)
        if cols.size and (cols.min() < 0 or cols.max() >= data.shape[1]):
            raise BirSimError("local_gather index out of range")
        res[rows] = data[rows][:, cols]
    ex.st.write_raw(out, ex.env, res.reshape(-1))


def _uniform(seed, count, shape):
    """Counter-based uniform [0, 1): splitmix64 of (seed, execution count, element index)."""
    n = int(np.prod(shape, dtype=np.int64))
    z = np.arange(n, dtype=np.uint64) + np.uint64((int(seed) * 0x9E3779B97F4A7C15 + count * 0xBF58476D1CE4E5B9)
                                                  & 0xFFFFFFFFFFFFFFFF)
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return ((z >> np.uint64(40)).astype(np.float64) / float(1 << 24)).astype(_F).reshape(shape)


def _dropout(ex, instr, attrs):
    x = ex._pf(instr.srcs[0])
    prob = ex._pf(instr.srcs[1]) if attrs.get("prob_ap") else _F(attrs["prob"])
    cnt = ex.__dict__.setdefault("_dropout_count", {})
    k = cnt.get(id(instr), 0)
    cnt[id(instr)] = k + 1
    u = _uniform(attrs.get("seed", 0), k, x.shape)
    ex.wf(instr.dsts[0], np.where(u < prob, _F(0), x))


def _range_select(ex, instr, attrs):
    x = ex._pf(instr.srcs[0])
    b0 = ex._pf(instr.srcs[1]).reshape(-1, 1)
    b1 = ex._pf(instr.srcs[2]).reshape(-1, 1)
    j = (np.arange(x.shape[1], dtype=np.float64) + int(attrs["start"])).astype(_F)[None, :]
    keep = alu.compare_f(attrs["cmp0"], j, b0) & alu.compare_f(attrs["cmp1"], j, b1)
    y = np.where(keep, x, _F(attrs["on_false"]))
    ex.wf(instr.dsts[0], y)
    if attrs.get("reduce"):
        ex.wf(instr.dsts[1], np.max(y, axis=1).reshape(-1, 1))


def sequence_bounds(ids):
    """(lo, hi) int64 of 1-D segment ids: for each position the start and the end (exclusive) of
    the run of equal ids it is in, n and -1 where the id is 0 (padding). Vectorised: a run starts
    where an id differs from the one before (NaN differs from everything), and ends where it
    differs from the one after."""
    n = ids.size
    idx = np.arange(n, dtype=np.int64)
    starts = np.ones(n, bool)
    starts[1:] = ids[1:] != ids[:-1]
    ends = np.ones(n, bool)
    ends[:-1] = starts[1:]
    run_lo = np.maximum.accumulate(np.where(starts, idx, 0)) if n else idx
    run_hi = np.minimum.accumulate(np.where(ends, idx + 1, n)[::-1])[::-1] if n else idx
    pad = ids == 0
    return np.where(pad, n, run_lo).astype(np.int64), np.where(pad, -1, run_hi).astype(np.int64)


def _sequence_bounds(ex, instr, attrs):
    lo, hi = sequence_bounds(ex._pf(instr.srcs[0]).reshape(-1))
    out = instr.dsts[0]
    v = np.stack([lo, hi])
    from neuronxcc.starfish.birpy import dtypes as _dt
    if _dt.get(out.dtype).is_int:
        ex.wi(out, v)
    else:
        ex.wf(out, v.astype(_F))


def _rand(ex, instr, attrs):
    out = instr.dsts[0]
    cnt = ex.__dict__.setdefault("_dropout_count", {})
    k = cnt.get(id(instr), 0)
    cnt[id(instr)] = k + 1
    ex.wf(out, _uniform(int(attrs.get("seed", 0)) + 0x5DEECE66D, k, (out.num_partitions, out.free_size)))


def _gather_flat(ex, instr, attrs):
    out, src, index = instr.dsts[0], instr.srcs[0], instr.srcs[1]
    raw = ex.st.read_raw(src, ex.env)
    P = src.num_partitions
    isz = raw.size // max(1, src.num_elements)
    data = raw.reshape(P, -1, isz)
    idx = ex._pi(index)
    if idx.size and (idx.min() < 0 or idx.max() >= data.shape[1]):
        raise BirSimError("gather index out of range [0, %d)" % data.shape[1])
    res = np.take_along_axis(data, idx[:, :, None].astype(np.int64), axis=1)
    if out.dtype != src.dtype:
        raise BirSimError("gather_flat keeps the source dtype")
    ex.st.write_raw(out, ex.env, np.ascontiguousarray(res).reshape(-1))


def _device_print(ex, instr, attrs):
    src = instr.srcs[0]
    from neuronxcc.starfish.birpy import dtypes as _dt
    v = ex._pi(src) if _dt.get(src.dtype).is_int else ex._pf(src)
    print("%s %s" % (attrs.get("prefix", ""), np.array2string(v.reshape([src.num_partitions] + src.free_shape),
                                                              threshold=1 << 20)), flush=True)


_OPS = {"rand": _rand, "gather_flat": _gather_flat, "device_print": _device_print,"max8": _max8, "find_index8": _find_index8, "match_replace8": _match_replace8, "bn_stats": _bn_stats,
        "bn_aggr": _bn_aggr, "shuffle": _shuffle, "local_gather": _local_gather, "dropout": _dropout,
        "range_select": _range_select, "sequence_bounds": _sequence_bounds}
