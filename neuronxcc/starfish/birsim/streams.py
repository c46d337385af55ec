"""birsim's stream order: run each engine's instruction stream on its own, as
the hardware does, interleaved by the timeline.

``order="streams"`` in ``simulate``: the module is split with
``birpy.split_by_engine``; each engine walks its own stream (its own loop
variables, the module-wide register file, While/If conditions read when the
engine reaches them). Each instruction takes effect (reads and writes memory)
at its completion time; at every step, among the engines whose next
instruction has its waits satisfied by the signals so far, the one that
would complete first executes (ties by id). Completion times only grow in
this order, so it is a valid event order. Data therefore flows only as the
semaphores allow: a missing wait makes a reader that finishes before the
writer see stale data, like a race on the device. Without any semaphores every engine
runs freely, so this order is for synchronised BIR (after walrus's sync
passes). A state where no engine can proceed is a deadlock (BirSimError).
"""
from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birpy import split_by_engine

__all__ = ["run_streams"]


def _walk(body, env, ex, eng):
    for n in body:
        k = n.kind
        if k == "inst":
            yield n
        elif k == "loop":
            for v in range(n.start, n.stop, n.step):
                env[n.var] = v
                yield from _walk(n.body, env, ex, eng)
            env.pop(n.var, None)
        elif k == "while":
            trips = 0
            limit = n.max_trips if n.max_trips is not None else 1000000
            while ex._reg(n.cond, n) != 0:
                trips += 1
                if trips > limit:
                    raise BirSimError("While #%s on %s ran more than %d trips (%s stream)" % (n.id, n.cond, limit, eng))
                yield from _walk(n.body, env, ex, eng)
        else:
            yield from _walk(n.then_body if ex._reg(n.cond, n) != 0 else n.else_body, env, ex, eng)


def run_streams(ex, module):
    """Execute MODULE's engine streams with executor EX (its timeline decides the order)."""
    tl = ex.tl
    regs = {}
    ex.regs = regs
    streams = split_by_engine(module)
    live = {}
    for eng, nodes in streams.items():
        env = {}
        gen = _walk(nodes, env, ex, eng)
        nxt = next(gen, None)
        if nxt is not None:
            live[eng] = (gen, env, nxt)
    while live:
        best = None
        best_key = None
        for eng, (gen, env, instr) in live.items():
            if regs:
                merged = dict(regs)
                merged.update(env)
            else:
                merged = env          # read-only here: no registers to merge
            t = tl.end_time(instr, merged)
            if t is None:
                continue
            key = (t, instr.id if instr.id is not None else 0)
            if best is None or key < best_key:
                best, best_key = eng, key
        if best is None:
            waiting = "; ".join("%s #%s waits %s" % (e, i.id, ", ".join("%s>=%s" % w for w in i.waits))
                                for e, (_, _, i) in live.items())
            raise BirSimError("deadlock: no engine can proceed (%s)" % waiting)
        gen, env, instr = live[best]
        if regs or instr.opcode == "register_load":
            merged = dict(regs)
            merged.update(env)
        else:
            merged = env              # nothing writes the env but register_load
        ex.env = merged
        ex.execute(instr)
        nxt = next(gen, None)
        if nxt is None:
            del live[best]
        else:
            live[best] = (gen, env, nxt)
