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

The program's last stream has no next weight to hide its end behind: after its last weight DMA
lands, the PE still runs that step's matmuls and then those of the held last step (loaded before the
K loop, its matmuls after it, see matvec.py), about 3 us each at 4 MiB. ``held_first`` moves the held
step's matmuls of the last stream in front of its K loop, so they run while the loop's weights
stream. Only matmuls move: they read the held tile and the vector (neither written by the loop) and
accumulate into the loop's PSUM bank after step 0 zeroed it, so the sum is the same up to fp32
rounding order.
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


def held_first(module, tail, streamed):
    """TAIL: (the held step's matmul nodes, the K loop node, its matvec's number) of the last top-level
    streamed matvec that has them, or None; STREAMED: how many matvecs streamed in all. Moves those
    nodes to just before the K loop when that matvec is the program's last. Returns how many moved."""
    if not tail or tail[2] != streamed:
        return 0
    nodes, kloop = tail[:2]
    body = module.body
    pos = {id(n): k for k, n in enumerate(body)}
    ks = [pos.get(id(n)) for n in nodes]
    k_loop = pos.get(id(kloop))
    if not nodes or k_loop is None or None in ks or min(ks) < k_loop or max(ks) - min(ks) + 1 != len(nodes):
        return 0
    moved = set(id(n) for n in nodes)
    body[:] = body[:k_loop] + list(nodes) + [n for n in body[k_loop:] if id(n) not in moved]
    return len(nodes)
