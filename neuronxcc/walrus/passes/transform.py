"""unroll, full unrolling, and dma_optimization.

unroll: a ``Loop`` whose trip count is at most ``unroll_max_trip`` and whose
unrolled size (instructions) is at most ``unroll_max_instructions`` is
replaced by copies of its body with the loop variable substituted by each
value (offsets, wait values). Innermost loops first. ``full_unroll`` (the
tool) unrolls every ``Loop``. ``While``/``If`` are never unrolled. The default
threshold (1 trip) removes only degenerate loops, so that the instruction
count of a program does not depend on its tensor sizes (``--unroll-max-trip``
raises it).

dma_optimization: two DMA instructions adjacent in a block, on the same
engine and queue, with the same source/destination targets and dtypes, are
merged into one when the second continues the first along the outermost
dimension of both operands (on chip: the next partitions; HBM: the next step
of the outermost pattern dim), or along the innermost contiguous dim when
both operands have the same leading shape. Either way the flattened element
order of both sides is the concatenation (or row-wise interleaving) of the
two transfers', so element pairing is unchanged. Hardware limits: <= the
target's partitions, dims of at most 65535 elements.
"""
import logging

from neuronxcc.starfish import birpy as B
from neuronxcc.walrus.program import block_kind
from neuronxcc.walrus.contract import WalrusPass

log = logging.getLogger("neuronxcc.walrus")

MAX_DIM = 65535


# -- unroll ---------------------------------------------------------------------

def _copy_node(n):
    from neuronxcc.starfish.birpy.serde import node_from_json, node_to_json
    return node_from_json(node_to_json(n))


def subst(nodes, var, value):
    for n in nodes:
        if n.kind == "inst":
            for ap in n.dsts + n.srcs:
                if var in ap.offset.free_vars():
                    ap.offset = ap.offset.subs({var: value})
            waits = []
            for s, v in n.waits:
                if not isinstance(v, int) and var in v.free_vars():
                    v = v.subs({var: value})
                    v = int(v) if v.is_const() else v
                waits.append((s, v))
            n.waits = waits
        else:
            for sub in block_kind(n)[1]:
                subst(sub, var, value)


def _size(nodes):
    total = 0
    for n in nodes:
        if n.kind == "inst":
            total += 1
        elif n.kind == "loop":
            total += _size(n.body) * n.trip_count
        else:
            total += sum(_size(b) for b in block_kind(n)[1])
    return total


def unroll_body(body, should):
    """Unroll (in place, innermost first) every Loop for which should(loop) holds. Returns count."""
    count = 0
    i = 0
    while i < len(body):
        n = body[i]
        if n.kind == "inst":
            i += 1
            continue
        for sub in block_kind(n)[1]:
            count += unroll_body(sub, should)
        if n.kind == "loop" and should(n):
            new = []
            for v in range(n.start, n.stop, n.step):
                copies = [_copy_node(c) for c in n.body]
                subst(copies, n.var, v)
                new.extend(copies)
            body[i:i + 1] = new
            count += 1
            i += len(new)
        else:
            i += 1
    return count


class Unroll(WalrusPass):
    name = "unroll"

    def run(self, module, ctx):
        max_trip = int(ctx.options["unroll_max_trip"])
        max_ins = int(ctx.options["unroll_max_instructions"])
        n = unroll_body(module.body, lambda lp: lp.trip_count <= max_trip and _size(lp.body) * lp.trip_count <= max_ins)
        if n:
            module.renumber()
        log.info("unroll: %d loops unrolled (trip <= %d, <= %d instructions)", n, max_trip, max_ins)
        return n > 0


def full_unroll(module):
    n = unroll_body(module.body, lambda lp: True)
    module.renumber()
    return n


# -- dma_optimization -------------------------------------------------------------

def _shift(ap1, ap2, module):
    """How ap2 continues ap1: 'outer' / 'inner' / None, with the merged AP."""
    if ap1.target != ap2.target or ap1.dtype != ap2.dtype:
        return None
    d = ap2.offset - ap1.offset
    if not d.is_const():
        return None
    d = int(d)
    onchip = ap1.num_partitions is not None
    out = {}
    if onchip:
        if ap1.pattern == ap2.pattern and d == 0 and ap2.start_partition == ap1.start_partition + ap1.num_partitions:
            out["outer"] = ap1.copy(num_partitions=ap1.num_partitions + ap2.num_partitions)
    else:
        (s1, n1), (s2, n2) = ap1.pattern[0], ap2.pattern[0]
        if s1 == s2 and ap1.pattern[1:] == ap2.pattern[1:] and d == s1 * n1 and n1 + n2 <= MAX_DIM:
            out["outer"] = ap1.copy(pattern=[[s1, n1 + n2]] + [list(p) for p in ap1.pattern[1:]])
    (ls1, ln1), (ls2, ln2) = ap1.pattern[-1], ap2.pattern[-1]
    same_lead = ap1.pattern[:-1] == ap2.pattern[:-1] and ap1.num_partitions == ap2.num_partitions and \
        ap1.start_partition == ap2.start_partition
    if same_lead and ls1 == 1 and ls2 == 1 and ln1 == ln2 and d == ln1 and ln1 + ln2 <= MAX_DIM:
        # rows must not overlap once widened
        if all(abs(s) >= ln1 + ln2 for s, n in ap1.pattern[:-1] if n > 1):
            out["inner"] = ap1.copy(pattern=[list(p) for p in ap1.pattern[:-1]] + [[1, ln1 + ln2]])
    return out


def _same_lead_shape(a, b):
    sa = ([a.num_partitions] if a.num_partitions is not None else []) + [n for _, n in a.pattern[:-1]]
    sb = ([b.num_partitions] if b.num_partitions is not None else []) + [n for _, n in b.pattern[:-1]]
    return sa == sb


def try_merge(i1, i2, module, target):
    if i1.opcode != "dma_copy" or i2.opcode != "dma_copy" or i1.engine != i2.engine:
        return None
    if i1.attrs.get("queue", "q0") != i2.attrs.get("queue", "q0") or set(i1.attrs) != set(i2.attrs):
        return None
    if any(i1.attrs[k] != i2.attrs[k] for k in i1.attrs):
        return None
    if len(i1.dsts) != 1 or len(i1.srcs) != 1:
        return None
    d = _shift(i1.dsts[0], i2.dsts[0], module)
    s = _shift(i1.srcs[0], i2.srcs[0], module)
    if not d or not s:
        return None
    for kind in ("outer", "inner"):
        if kind in d and kind in s:
            nd, ns = d[kind], s[kind]
            if kind == "inner" and not _same_lead_shape(nd, ns):
                continue
            if nd.num_partitions is not None and nd.num_partitions > target.num_partitions:
                continue
            if ns.num_partitions is not None and ns.num_partitions > target.num_partitions:
                continue
            return B.Instruction("dma_copy", i1.engine, [nd], [ns], dict(i1.attrs), name=i1.name)
    return None


def coalesce_body(body, module, target):
    count = 0
    i = 0
    while i < len(body):
        n = body[i]
        if n.kind != "inst":
            for sub in block_kind(n)[1]:
                count += coalesce_body(sub, module, target)
            i += 1
            continue
        if i + 1 < len(body) and body[i + 1].kind == "inst":
            m = try_merge(n, body[i + 1], module, target)
            if m is not None:
                body[i:i + 2] = [m]
                count += 1
                continue     # try to extend the merged transfer further
        i += 1
    return count


class DmaOptimization(WalrusPass):
    name = "dma_optimization"

    def run(self, module, ctx):
        had_waits = any(i.waits for i in module.instructions())
        n = coalesce_body(module.body, module, ctx.target)
        if n:
            module.renumber()
            if had_waits:
                from neuronxcc.walrus import deps as D
                D.synchronize(module, all(m.allocated for m in module.memlocs.values()), ctx=ctx)
        ctx.metrics["dma_coalesced"] = n
        log.info("dma_optimization: %d DMA pairs coalesced", n)
        return n > 0
