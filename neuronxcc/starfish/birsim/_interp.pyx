# cython: language_level=3, boundscheck=False, wraparound=False
"""birsim's program-order interpreter loop, typed: it runs once per simulated
instruction, so its per-instruction work (plan lookup, the plan call, the
access records, the timeline step) happens without a Python frame of its own;
each body list is indexed once (``_Body``), so a loop body's instructions find
their plans and timeline records by position, not by dictionary lookups;
the timeline's core step is a C call on the instruction's cached record, and
only a deadlock, a race or tracing goes back to ``Timeline.after``.

Semantics: exactly ``Executor.run_body`` + ``Executor.execute`` (the Python
definitions, which the streams order and the reference path ``plans=False``
still use): loop variables set per trip and restored after the loop, While
trips capped at ``max_trips``, If on a register, BirSimError messages with the
instruction's id, opcode and engine.
"""
from libc.stdlib cimport malloc, free
from sys import intern

from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birsim._plans cimport Plan
from neuronxcc.starfish.birsim._timecore cimport Core, Rec


cdef object _reg(dict regs, object name, object node):
    try:
        return regs[name]
    except KeyError:
        raise BirSimError("%s #%s reads register %r before any register_load" % (node.kind, node.id, name))


cdef class _Body:
    """One body list as the loop runs it: node kinds as ints, and per node what the loop caches
    (an instruction's plan and timeline record once it first ran; a loop's, while's or if's
    nested bodies), so a body executed many times looks nothing up per instruction."""
    cdef list nodes
    cdef int* kinds
    cdef list plans            # instruction: plan tuple or None (not yet run)
    cdef list runs             # instruction: its typed Plan (run by a C call), or None (a Python callable)
    cdef list recs             # instruction: Rec or None
    cdef list infos            # instruction: its [(APInfo, is_write)] (None: an indirect DMA's regions)
    cdef unsigned char* ready  # instruction: plan, infos and record cached (the node itself is not read again)
    cdef list subs             # loop / while: _Body of the body; if: (then, else) _Bodies
    cdef list names            # loop: its variable, while / if: its register, interned (env lookups by identity)
    cdef Py_ssize_t n

    def __cinit__(self):
        self.kinds = NULL
        self.ready = NULL

    def __dealloc__(self):
        free(self.kinds)
        free(self.ready)


cdef _Body _body_of(object ex, list body):
    cdef dict cache = ex._bodies
    cdef _Body b = cache.get(id(body))
    cdef Py_ssize_t i
    if b is not None and b.nodes is body:
        return b
    b = _Body()
    b.nodes = body
    b.n = len(body)
    b.kinds = <int*>malloc(max(1, b.n) * sizeof(int))
    b.ready = <unsigned char*>malloc(max(1, b.n))
    if b.kinds == NULL or b.ready == NULL:
        raise MemoryError()
    b.plans = [None] * b.n
    b.runs = [None] * b.n
    b.recs = [None] * b.n
    b.infos = [None] * b.n
    b.subs = [None] * b.n
    b.names = [None] * b.n
    for i in range(b.n):
        b.ready[i] = 0
        k = body[i].kind
        b.kinds[i] = 0 if k == "inst" else 1 if k == "loop" else 2 if k == "while" else 3
        if k == "loop":
            b.names[i] = intern(body[i].var)
        elif k != "inst":
            b.names[i] = intern(body[i].cond)
    cache[id(body)] = b
    return b


cpdef run_body(object ex, list body, dict env, dict regs, object tl, long long default_max_trips):
    """Execute BODY in program order: ENV holds the loop variables and registers (REGS, the same
    dict in program order), TL is the timeline (``Timeline.step`` semantics)."""
    _run(ex, _body_of(ex, body), env, regs, tl, tl.core, tl.trace, default_max_trips)


cdef _run(object ex, _Body b, dict env, dict regs, object tl, Core core, bint trace, long long default_max_trips):
    cdef tuple p
    cdef Rec r
    cdef long long trips, limit
    cdef object se
    cdef Py_ssize_t i
    cdef int kind
    cdef _Body inner
    cdef object infos
    for i in range(b.n):
        kind = b.kinds[i]
        if kind == 0:
            if not b.ready[i]:
                # the first execution: plan and record cached by position; later ones never read the
                # node (or the plan tuple) again, only what they need of it
                n = b.nodes[i]
                p = ex._plans.get(id(n))
                if p is None or p[0] is not n:
                    p = ex._prepare(n)
                b.plans[i] = p
                b.runs[i] = p[1] if isinstance(p[1], Plan) else None
                b.infos[i] = p[2]
            run = b.runs[i]
            try:
                if run is not None:
                    (<Plan>run).run(env)
                else:
                    (<tuple>b.plans[i])[1](env)
            except BirSimError as e:
                n = b.nodes[i]
                raise BirSimError("instruction #%s %s@%s: %s" % (n.id, n.opcode, n.engine, e.message))
            if not b.ready[i]:
                b.recs[i] = tl.rec(b.nodes[i])
                b.ready[i] = 1
            r = <Rec>b.recs[i]
            infos = b.infos[i]
            if infos is None:
                n = b.nodes[i]
                se = core.step(r, env, ex._indirect_regions(n, (<tuple>b.plans[i])[3]))
            else:
                se = core.step_infos(r, env, <list>infos)
            if se is None or core.raced or trace:
                tl.after(b.nodes[i], r, se)
        elif kind == 1:
            n = b.nodes[i]
            var = b.names[i]
            saved = env.get(var)
            if b.subs[i] is None:
                b.subs[i] = _body_of(ex, n.body)
            inner = <_Body>b.subs[i]
            for v in range(n.start, n.stop, n.step):
                env[var] = v
                _run(ex, inner, env, regs, tl, core, trace, default_max_trips)
            if saved is None:
                env.pop(var, None)
            else:
                env[var] = saved
        elif kind == 2:
            n = b.nodes[i]
            limit = n.max_trips if n.max_trips is not None else default_max_trips
            trips = 0
            if b.subs[i] is None:
                b.subs[i] = _body_of(ex, n.body)
            inner = <_Body>b.subs[i]
            while _reg(regs, b.names[i], n) != 0:
                trips += 1
                if trips > limit:
                    raise BirSimError("While #%s on %s ran more than %d trips" % (n.id, n.cond, limit))
                _run(ex, inner, env, regs, tl, core, trace, default_max_trips)
        else:
            n = b.nodes[i]
            if b.subs[i] is None:
                b.subs[i] = (_body_of(ex, n.then_body), _body_of(ex, n.else_body))
            inner = <_Body>(b.subs[i][0] if _reg(regs, b.names[i], n) != 0 else b.subs[i][1])
            _run(ex, inner, env, regs, tl, core, trace, default_max_trips)
