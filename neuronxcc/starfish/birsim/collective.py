"""birsim's collective engine: the ``collective`` BIR instruction (semantics in
``birpy.opcodes``) executed between the ranks of a multi-rank run.

Each rank's executor carries a ``RankContext`` (its global rank, the run's
``Rendezvous``, the rank count). At a collective a rank contributes its
operand (read through its AP, in row-major pattern order) and the time it
is ready (when its timeline would start the instruction); it gets the group's
operands back, computes its result and writes it through its output AP. The
transfer starts when the last member is ready and takes the interconnect
model's time (``hwm.interconnect``): the instruction's busy time on the
rank's ``CC`` track is the wait for the last member plus that time.

Reductions: members in group order, as XLA does: floats in fp32 rounded to
the element dtype after each member (exact for fp32; bf16/fp16/fp8 round at
every step like XLA:CPU), integers and bools exactly in int64. A run without a rank context
is one core: a collective whose group holds only this rank is a local copy;
one that names other ranks is a BirSimError naming the rank count it needs.
Ranks that cannot meet (a collective some rank never reaches, different
shapes or groups) are CollectiveError [NCC_ECCL001], never a hang.
"""
import numpy as np

from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birpy import dtypes as _dt

__all__ = ["RankContext", "execute"]

_REDUCE_F = {"add": np.add, "max": np.maximum, "min": np.minimum, "mult": np.multiply}
_REDUCE_I = {"add": np.add, "max": np.maximum, "min": np.minimum, "mult": np.multiply,
             "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or,
             "logical_and": np.logical_and, "logical_or": np.logical_or}


class RankContext:
    """What one rank's executor needs to meet the others."""

    __slots__ = ("rank", "rv", "nranks", "wait_s", "transfer_s", "count", "lnc_shared")

    def __init__(self, rank, rv, nranks):
        self.rank, self.rv, self.nranks = rank, rv, nranks
        self.wait_s = 0.0        # time spent waiting for the last member
        self.transfer_s = 0.0    # modelled interconnect time
        self.count = 0
        self.lnc_shared = None    # LNC=2: {"lock", "targets"} the two physical cores share HBM through

    def load(self, state, module):
        """Write this rank's [replica id, partition id] into the program's rank-id tensor
        (``module.attrs["rank_id_tensor"]``), as the runtime does before a run."""
        attrs = getattr(module, "attrs", None) or {}
        core_t = attrs.get("core_id_tensor")
        if core_t and self.lnc_shared is not None:
            t = module.tensors[core_t]
            state.set_input(core_t, np.full(t.shape, self.rank, _dt.np_dtype(t.dtype)))
            with self.lnc_shared["lock"]:      # one HBM for both cores: the second adopts the first's
                shared = self.lnc_shared.get("targets")
                if shared is None:
                    self.lnc_shared["targets"] = {n: state.targets[n] for n in module.tensors if n != core_t}
                else:
                    for n, tgt in shared.items():
                        state.targets[n] = tgt
            return
        name = attrs.get("rank_id_tensor")
        if not name:
            return
        R, P = (module.attrs.get("rank_space") or [self.nranks, 1])[:2]
        P = max(1, int(P))
        t = module.tensors[name]
        vals = np.zeros(t.shape, _dt.np_dtype(t.dtype))
        flat = vals.reshape(-1)
        flat[0] = self.rank // P
        if flat.size > 1:
            flat[1] = self.rank % P
        state.set_input(name, vals)


def _read(st, ap, env):
    raw = st.read_raw(ap, env)
    return raw.view(_dt.np_dtype(ap.dtype))


def _write(st, ap, env, values):
    arr = np.ascontiguousarray(values)
    want = _dt.np_dtype(ap.dtype)
    if arr.dtype != want:
        arr = arr.astype(want)
    st.write_raw(ap, env, arr.reshape(-1).view(np.uint8))


def _is_int(dtype):
    return _dt.get(dtype).is_int or dtype == "bool"


def _reduce(vals, op, dtype, where):
    if _is_int(dtype):
        fn = _REDUCE_I.get(op)
        acc = vals[0].astype(np.int64)
        cast = np.int64
    else:
        fn = _REDUCE_F.get(op)
        acc = vals[0].astype(np.float32)
        cast = np.float32
    if fn is None:
        raise BirSimError("%s: reduce op %r is not defined for %s" % (where, op, dtype))
    narrow = None if _is_int(dtype) or dtype == "float32" else _dt.np_dtype(dtype)
    for v in vals[1:]:
        acc = fn(acc, v.astype(cast))
        if narrow is not None:
            acc = acc.astype(narrow).astype(np.float32)
    return acc


def _group(attrs, me, nranks, where):
    if attrs["op"] == "permute":
        return tuple(range(nranks)), None
    for g in attrs.get("groups") or [[0]]:
        g = tuple(int(x) for x in g)
        if me in g:
            return g, g.index(me)
    raise BirSimError("%s: rank %d is in none of the groups %s" % (where, me, attrs.get("groups")))


def execute(ex, instr, attrs):
    ctx = getattr(ex, "ranks", None)
    me = ctx.rank if ctx is not None else 0
    nranks = ctx.nranks if ctx is not None else 1
    where = "collective #%s %s%s" % (instr.id, attrs["op"], " (%s)" % instr.name if instr.name else "")
    op = attrs["op"]
    st, env = ex.st, ex.env
    src, dst = instr.srcs[0], instr.dsts[0]
    if op == "barrier":
        return _barrier(ex, instr, attrs, ctx, me, where)
    if op == "fence":          # LNC=2: orders accesses on the barrier queue; no data, no meeting
        return
    x = _read(st, src, env)
    group, pos = _group(attrs, me, nranks, where)
    if op == "permute":
        pairs = [(int(s), int(t)) for s, t in attrs.get("pairs") or []]
        bad = [p for p in pairs if max(p) >= nranks]
        if bad:
            raise BirSimError("%s: pair %s names a rank of a program run on %d rank(s); simulate it with "
                              "every rank (birsim --ranks)" % (where, list(bad[0]), nranks))
    if len(group) > 1 and ctx is None:
        raise BirSimError("%s spans ranks %s: simulate the program with all %d ranks (birsim --ranks %d)"
                          % (where, list(group), max(group) + 1, max(group) + 1))
    # timing: when would this rank start it; the transfer starts when the last member is ready
    tl = ex.tl
    rec = tl._rec(instr)
    base = rec.cost.busy_s
    end = tl.end_time(instr, env)
    ready = (end - base - rec.latency_s) if end is not None else 0.0
    if len(group) > 1:
        sig = "collective %s of %s[%d] over ranks %s" % (op, src.dtype, x.size, list(group))
        got = ctx.rv.exchange(me, group, sig, (x, ready), where)
        vals = [g[0] for g in got]
        start = max(g[1] for g in got)
    else:
        vals, start = [x], ready
    wait = max(0.0, start - ready)
    rec.busy_s = base + wait
    if ctx is not None:
        ctx.wait_s += wait
        ctx.transfer_s += base
        ctx.count += 1
    n = len(group)
    if op == "all_reduce":
        out = _reduce(vals, attrs.get("reduce") or "add", src.dtype, where)
    elif op == "all_gather":
        out = np.concatenate([v.reshape(-1) for v in vals])
    elif op == "reduce_scatter":
        if x.size % n:
            raise BirSimError("%s: %d elements do not split into %d blocks" % (where, x.size, n))
        b = x.size // n
        out = _reduce([v[pos * b:(pos + 1) * b] for v in vals], attrs.get("reduce") or "add", src.dtype, where)
    elif op == "all_to_all":
        if x.size % n:
            raise BirSimError("%s: %d elements do not split into %d blocks" % (where, x.size, n))
        b = x.size // n
        out = np.concatenate([v[pos * b:(pos + 1) * b] for v in vals])
    elif op == "permute":
        srcs = [s for s, t in pairs if t == me]
        out = vals[srcs[0]] if srcs else np.zeros_like(x)
    else:
        raise BirSimError("%s: unknown collective op %r" % (where, op))
    if out.size != dst.num_elements:
        raise BirSimError("%s: the result has %d elements, the output pattern takes %d"
                          % (where, out.size, dst.num_elements))
    _write(st, dst, env, out)


def _barrier(ex, instr, attrs, ctx, me, where):
    """op=barrier (LNC=2): the cores of the group wait for each other; no data moves."""
    group = tuple(int(x) for x in (attrs.get("groups") or [[0]])[0])
    tl = ex.tl
    rec = tl._rec(instr)
    base = rec.cost.busy_s
    end = tl.end_time(instr, ex.env)
    ready = (end - base - rec.latency_s) if end is not None else 0.0
    if len(group) > 1:
        if ctx is None:
            raise BirSimError("%s: the program runs on %d physical cores (LNC=2); simulate both" % (where, len(group)))
        got = ctx.rv.exchange(me, group, "core barrier over %s" % list(group), ready, where)
        wait = max(0.0, max(got) - ready)
    else:
        wait = 0.0
    rec.busy_s = base + wait
    if ctx is not None:
        ctx.wait_s += wait
        ctx.transfer_s += base
