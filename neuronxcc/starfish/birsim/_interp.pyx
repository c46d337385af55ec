# cython: language_level=3, boundscheck=False, wraparound=False
"""birsim's program-order interpreter loop, typed: it runs once per simulated
instruction, so its per-instruction work (plan lookup, the plan call, the
access records, the timeline step) happens without a Python frame of its own:
the timeline's core step is a C call on the instruction's cached record, and
only a deadlock, a race or tracing goes back to ``Timeline.after``.

Semantics: exactly ``Executor.run_body`` + ``Executor.execute`` (the Python
definitions, which the streams order and the reference path ``plans=False``
still use): loop variables set per trip and restored after the loop, While
trips capped at ``max_trips``, If on a register, BirSimError messages with the
instruction's id, opcode and engine.
"""
from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birsim._timecore cimport Core, Rec


cdef object _reg(dict regs, object name, object node):
    try:
        return regs[name]
    except KeyError:
        raise BirSimError("%s #%s reads register %r before any register_load" % (node.kind, node.id, name))


cpdef run_body(object ex, list body, dict env, dict regs, object tl, long long default_max_trips):
    """Execute BODY in program order: ENV holds the loop variables and registers (REGS, the same
    dict in program order), TL is the timeline (``Timeline.step`` semantics)."""
    cdef tuple p
    cdef dict plans = ex._plans
    cdef dict recs = tl.recs
    cdef Core core = tl.core
    cdef bint trace = tl.trace
    cdef Rec r
    cdef long long trips, limit
    cdef object se
    for n in body:
        k = n.kind
        if k == "inst":
            p = plans.get(id(n))
            if p is None or p[0] is not n:
                p = ex._prepare(n)
                plans = ex._plans
            try:
                p[1](env)
            except BirSimError as e:
                raise BirSimError("instruction #%s %s@%s: %s" % (n.id, n.opcode, n.engine, e.message))
            r = recs.get(id(n))
            if r is None or r.instr is not n:
                r = tl.rec(n)
            if p[2] is None:
                se = core.step(r, env, ex._indirect_regions(n, p[3]))
            else:
                se = core.step_infos(r, env, p[2])
            if se is None or core.raced or trace:
                tl.after(n, r, se)
        elif k == "loop":
            var = n.var
            saved = env.get(var)
            inner = n.body
            for v in range(n.start, n.stop, n.step):
                env[var] = v
                run_body(ex, inner, env, regs, tl, default_max_trips)
            if saved is None:
                env.pop(var, None)
            else:
                env[var] = saved
        elif k == "while":
            limit = n.max_trips if n.max_trips is not None else default_max_trips
            trips = 0
            while _reg(regs, n.cond, n) != 0:
                trips += 1
                if trips > limit:
                    raise BirSimError("While #%s on %s ran more than %d trips" % (n.id, n.cond, limit))
                run_body(ex, n.body, env, regs, tl, default_max_trips)
        else:
            run_body(ex, n.then_body if _reg(regs, n.cond, n) != 0 else n.else_body, env, regs, tl,
                     default_max_trips)
