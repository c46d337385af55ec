"""Weight prefetch across kernels: a streamed weight's first DMA goes out before the kernels in front
of its matmul.

Owns: moving, after codegen, the first weight DMAs of each streamed matvec (``penguin/matvec.py``
records it) up the top-level instruction list, to just after the previous streamed matvec's weight
loads (or to the program's start for the first one). The kernels in between (a norm, the rotary
embedding, the attention, a residual add) are short compute on a few KiB, and the DMA queues would
sit idle while they run: the weight DMA does not depend on them, so the next weight streams while
they compute, and the DMA engines, which bound a decode step, stay busy.

Invariants: a DMA is moved only over nodes that neither touch its SBUF buffer (a fresh memloc, so
nothing earlier does) nor write the HBM tensor it reads; it never moves ahead of an earlier stream's
weight loads, so the weights still cross the DMA engines in program order. The buffers' live ranges
grow by the kernels they moved over (two weight tiles, at most ``matvec.WS_BUF_BYTES`` per partition each).
Each top-level node is scanned at most once per stream boundary: linear in the program.
"""


def _touches(node, buf, src):
    """True when NODE (an instruction or a control node) reads or writes memloc BUF or writes the
    HBM tensor SRC."""
    if node.kind == "inst":
        for ap in node.dsts:
            if ap.target == buf or ap.target == src:
                return True
        return any(ap.target == buf for ap in node.srcs)
    return any(_touches(n, buf, src) for body in node.children() for n in body)


def hoist(module, streams):
    """STREAMS: [(the kernel's first weight DMAs, the top-level node holding its last weight DMA)] in program
    order, all at the module's top level. Moves those DMAs up as far as the module doc says (keeping
    their order). Returns how many moved."""
    body = module.body
    if not streams:
        return 0
    pos = {id(n): k for k, n in enumerate(body)}
    moves = {}                     # insertion index -> [instructions] (in program order)
    moved = set()
    floor = 0                      # first index a DMA may move to: after the previous stream's loads
    for firsts, last in streams:
        at = floor
        for first in firsts:
            k = pos.get(id(first))
            if k is None or first.kind != "inst" or len(first.dsts) != 1 or len(first.srcs) != 1:
                break
            buf, src = first.dsts[0].target, first.srcs[0].target
            j = k
            while j > at and not _touches(body[j - 1], buf, src):
                j -= 1
            if j == k:
                break
            moves.setdefault(j, []).append(first)
            moved.add(id(first))
            at = j                 # the next one goes after this one (same index: appended after it)
        e = pos.get(id(last))
        if e is not None and e + 1 > floor:
            floor = e + 1
    if not moved:
        return 0
    out = []
    for k, n in enumerate(body):
        out.extend(moves.get(k, ()))
        if id(n) not in moved:
            out.append(n)
    body[:] = out
    return len(moved)
