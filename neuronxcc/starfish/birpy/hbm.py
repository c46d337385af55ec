"""HBM scratch layout by liveness: scratch tensors whose lifetimes do not overlap share bytes.

Owns: the live interval of every scratch tensor over program order, the
assignment of byte offsets in one shared scratch arena, and the HBM
footprint (what is live at once) that the HBM check compares with the core.

Lifetimes: ``live_intervals(module)`` numbers the instructions in pre-order
program order (If branches one after the other). A tensor lives from its
first to its last reference; a reference inside a Loop or While stretches the
interval over that whole outermost loop (a later trip may read what an earlier
one wrote, and every trip runs between the loop's first and last
instruction). Two tensors with disjoint intervals are never accessed at the
same time in any execution, so they may occupy the same bytes; walrus sees the
sharing (``Tensor.arena_offset`` puts both in the one ``ARENA`` memory of its
dependence analysis) and orders the accesses.

Offsets: ``assign(module)`` replays the intervals in order as allocations and
frees on a free list of byte ranges (best fit, neighbours coalesced, the arena
top grows only when no hole fits), O(n log n) in the scratch tensors plus the
live set per allocation. Offsets are aligned to ``ALIGN`` bytes. Tensors of
other kinds keep their own storage (``arena_offset`` None).
"""
import bisect
import heapq

from neuronxcc.starfish.birpy import dtypes as _dt

ALIGN = 64
ARENA = "HBM_ARENA"          # the memory name walrus and birsim give the shared scratch arena


def _nbytes(t):
    n = 1
    for d in t.shape:
        n *= int(d)
    return max(1, n * _dt.itemsize(t.dtype))


def _align(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def live_intervals(module, kinds=("scratch",)):
    """{tensor: (first, last)} with references inside a loop stretched over the outermost loop."""
    names = {n for n, t in module.tensors.items() if t.kind in kinds}
    first, last = {}, {}
    spans = []                               # (start, end) of each outermost loop
    in_loop = {}                             # tensor -> indices of the outermost loops it is used in
    pos = 0

    def refs(n, loop):
        nonlocal pos
        for ap in n.dsts:
            _note(ap.target, loop)
        for ap in n.srcs:
            _note(ap.target, loop)
        pos += 1

    def _note(t, loop):
        if t in names:
            if t not in first:
                first[t] = pos
            last[t] = pos
            if loop is not None:
                s = in_loop.setdefault(t, [])
                if not s or s[-1] != loop:
                    s.append(loop)

    # iterative pre-order walk; ``loop`` is the index of the open outermost loop or None
    stack = [(iter(module.body), None, None)]
    while stack:
        it, loop, opened = stack[-1]
        n = next(it, None)
        if n is None:
            stack.pop()
            if opened is not None:
                spans[opened] = (spans[opened][0], pos - 1)
            continue
        kind = n.kind
        if kind == "inst":
            refs(n, loop)
        elif kind == "if":
            stack.append((iter(list(n.then_body) + list(n.else_body)), loop, None))
        else:
            body = list(getattr(n, "cond_body", None) or []) + list(n.body)
            if loop is None:
                spans.append((pos, pos))
                stack.append((iter(body), len(spans) - 1, len(spans) - 1))
            else:
                stack.append((iter(body), loop, None))
    out = {}
    for t, a in first.items():
        b = last[t]
        for k in in_loop.get(t, ()):
            s, e = spans[k]
            a, b = min(a, s), max(b, e)
        out[t] = (a, b)
    return out


def assign(module):
    """Give every referenced scratch tensor an ``arena_offset`` so that tensors live at the same
    time never overlap; returns the arena size in bytes. A scratch tensor no instruction
    references keeps its own storage."""
    iv = live_intervals(module)
    order = sorted(iv, key=lambda t: (iv[t][0], -_nbytes(module.tensors[t]), t))
    free_off, free_len = [], []             # free holes below the top, sorted by offset
    ends = []                               # heap of (last position, offset, size) of live tensors
    top = high = 0
    for name in order:
        start, end = iv[name]
        while ends and ends[0][0] < start:
            _, off, size = heapq.heappop(ends)
            _release(free_off, free_len, off, size)
        # holes that reach the top merge into it
        if free_off and free_off[-1] + free_len[-1] == top:
            top = free_off.pop()
            free_len.pop()
        size = _align(_nbytes(module.tensors[name]))
        best = -1
        for k in range(len(free_off)):
            if free_len[k] >= size and (best < 0 or free_len[k] < free_len[best]):
                best = k
        if best >= 0:
            off = free_off[best]
            if free_len[best] == size:
                del free_off[best], free_len[best]
            else:
                free_off[best] += size
                free_len[best] -= size
        else:
            off = top
            top += size
            high = max(high, top)
        module.tensors[name].arena_offset = off
        heapq.heappush(ends, (end, off, size))
    return high


def _release(free_off, free_len, off, size):
    k = bisect.bisect_left(free_off, off)
    free_off.insert(k, off)
    free_len.insert(k, size)
    if k + 1 < len(free_off) and free_off[k] + free_len[k] == free_off[k + 1]:
        free_len[k] += free_len[k + 1]
        del free_off[k + 1], free_len[k + 1]
    if k > 0 and free_off[k - 1] + free_len[k - 1] == free_off[k]:
        free_len[k - 1] += free_len[k]
        del free_off[k], free_len[k]


def arena_bytes(module):
    """Bytes of the shared scratch arena (0 when no tensor is placed in it)."""
    top = 0
    for t in module.tensors.values():
        off = getattr(t, "arena_offset", None)
        if off is not None:
            top = max(top, off + _nbytes(t))
    return _align(top) if top else 0


def footprint(module):
    """HBM bytes the program needs at once: tensors with their own storage plus the arena."""
    own = sum(_nbytes(t) for t in module.tensors.values() if getattr(t, "arena_offset", None) is None)
    return own + arena_bytes(module)
