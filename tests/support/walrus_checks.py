"""An allocation checker independent of the walrus allocators' bookkeeping.

It recomputes, from nothing but the (start, end, partitions, bytes) of every
value and the placement, that no two simultaneously live values overlap in
(partition range x byte range), that placements respect the target's limits
(partition-start rules, capacity, alignment) and, for PSUM, the bank rule.
It is written pair-wise on purpose: slow and obvious.
"""


def legal_starts(nparts):
    if nparts > 64:
        return {0}
    if nparts > 32:
        return {0, 64}
    return {0, 32, 64, 96}


def check_placement(values, capacity, num_partitions=128, align=1, bank_bytes=0):
    """values: list of dicts with start, end (inclusive), nparts, size, pstart, offset.

    Returns a list of human-readable violations (empty when the placement is legal).
    """
    bad = []
    for i, v in enumerate(values):
        if v["pstart"] not in legal_starts(v["nparts"]):
            bad.append("value %d: start partition %d illegal for %d partitions" % (i, v["pstart"], v["nparts"]))
        if v["pstart"] + v["nparts"] > num_partitions:
            bad.append("value %d: partitions beyond %d" % (i, num_partitions))
        if v["offset"] < 0 or v["offset"] + v["size"] > capacity:
            bad.append("value %d: bytes [%d,%d) outside [0,%d)" % (i, v["offset"], v["offset"] + v["size"], capacity))
        if align > 1 and v["offset"] % align:
            bad.append("value %d: offset %d not %d-aligned" % (i, v["offset"], align))
        if bank_bytes:
            first, last = v["offset"] // bank_bytes, (v["offset"] + v["size"] - 1) // bank_bytes
            if v["size"] <= bank_bytes and first != last:
                bad.append("value %d: crosses a PSUM bank boundary" % i)
            if v["size"] > bank_bytes and v["offset"] % bank_bytes:
                bad.append("value %d: multi-bank value not bank-aligned" % i)
    for i in range(len(values)):
        a = values[i]
        for j in range(i + 1, len(values)):
            b = values[j]
            live = a["start"] <= b["end"] and b["start"] <= a["end"]
            parts = a["pstart"] < b["pstart"] + b["nparts"] and b["pstart"] < a["pstart"] + a["nparts"]
            byts = a["offset"] < b["offset"] + b["size"] and b["offset"] < a["offset"] + a["size"]
            if live and parts and byts:
                bad.append("values %d and %d overlap while both live" % (i, j))
    return bad


# -- dynamic checks over BIR modules (independent of walrus) -------------------------

def recorded_instances(module, inputs, target="trn1"):
    """[(instr, env)] executed by birsim in program order (registers included in env)."""
    from neuronxcc.hwm import get_target
    from neuronxcc.starfish.birsim.executor import Executor
    from neuronxcc.starfish.birsim.state import MachineState

    out = []

    class Recorder(Executor):
        def execute(self, instr):
            out.append((instr, dict(self.env)))
            return super().execute(instr)

    module.ensure_ids()
    st = MachineState(module, get_target(target), poison=True)
    for name, v in zip(module.inputs, inputs):
        st.set_input(name, v)
    # plans=False: the Python execute path, which the recorder hooks (the typed loop does not call it)
    Recorder(module, st, _NoTimeline(), plans=False).run()
    return out


def dynamic_instances(module):
    """[(instr, env)] in program order, loops expanded (no While/If: see recorded_instances)."""
    out = []

    def walk(body, env):
        for n in body:
            if n.kind == "inst":
                out.append((n, dict(env)))
            elif n.kind == "loop":
                for v in range(n.start, n.stop, n.step):
                    env[n.var] = v
                    walk(n.body, env)
                env.pop(n.var, None)
            else:
                raise NotImplementedError("dynamic_instances: %s" % n.kind)
    walk(module.body, {})
    return out


class _NoTimeline:
    def step(self, instr, env, *rest):
        return 0.0, 0.0


def run_interleaved(module, inputs, seed, target="trn1"):
    """Execute ``module`` with its engine streams interleaved at random, honouring only
    the semaphores (control decisions and register values as in a program-order
    run): an engine issues its instructions in program order, each once
    its waits hold; a DMA issued by an engine runs later on its queue (queues in
    order); signals apply when an instruction (a DMA: its transfer) completes.
    Raises AssertionError on a deadlock. Returns the outputs.
    """
    import collections
    import random

    from neuronxcc.hwm import get_target
    from neuronxcc.starfish.birsim.executor import Executor
    from neuronxcc.starfish.birsim.state import MachineState

    tm = get_target(target)
    module.ensure_ids()
    st = MachineState(module, tm, poison=True)
    for name, v in zip(module.inputs, inputs):
        st.set_input(name, v)
    ex = Executor(module, st, _NoTimeline())
    rnd = random.Random(seed)
    streams = collections.OrderedDict()
    for ins, env in recorded_instances(module, inputs, target):
        streams.setdefault(ins.engine, []).append((ins, env))
    assert streams or not module.instructions(), "the program-order run recorded no instruction"
    heads = {e: 0 for e in streams}
    queues = collections.OrderedDict()
    sems = collections.Counter()
    weight = {e: rnd.choice([0.05, 1.0, 20.0]) for e in streams}

    def ready(ins, env):
        for sem, v in ins.waits:
            val = v if isinstance(v, int) else v.eval(env)
            if sems[sem] < val:
                return False
        return True

    def run(ins, env):
        ex.env = env
        ex.execute(ins)
        for sem, inc in ins.signals:
            sems[sem] += inc

    while True:
        actions = []
        for e, seq in streams.items():
            if heads[e] < len(seq) and ready(*seq[heads[e]]):
                actions.append(("issue", e))
        for q, dq in queues.items():
            if dq:
                actions.append(("dma", q))
        if not actions:
            left = sum(len(seq) - heads[e] for e, seq in streams.items())
            assert left == 0, "deadlock with %d instructions left; heads: %s" % (
                left, {e: (seq[heads[e]][0].id if heads[e] < len(seq) else None) for e, seq in streams.items()})
            break
        ws = [weight.get(a[1], rnd.choice([0.05, 1.0, 20.0])) for a in actions]
        kind, k = rnd.choices(actions, weights=ws)[0]
        if kind == "issue":
            ins, env = streams[k][heads[k]]
            heads[k] += 1
            if ins.opcode == "dma_copy":
                q = ins.attrs.get("queue", "q0")
                queues.setdefault(q, collections.deque()).append((ins, env))
                weight.setdefault(q, rnd.choice([0.05, 1.0, 20.0]))
            else:
                run(ins, env)
        else:
            ins, env = queues[k].popleft()
            run(ins, env)
    return [st.get_tensor(n) for n in module.outputs]


def raw_equal(a, b):
    """Bitwise equality (NaN payloads included)."""
    import numpy as np
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.view(np.uint8).tobytes() == b.view(np.uint8).tobytes()


def check_no_clobber(module, target="trn1"):
    """Walk the program in order; every on-chip read must find the bytes its memloc last
    wrote (no other memloc wrote them in between). PSUM matmul outputs must stay in a
    bank. Returns a list of violations. Uses only the memlocs' addresses and the APs.
    """
    import numpy as np

    from neuronxcc.hwm import get_target
    from neuronxcc.starfish.birpy import dtypes as dt
    tm = get_target(target)
    ids = {name: k for k, name in enumerate(module.memlocs)}
    owner = {"SBUF": np.full((tm.num_partitions, tm.sbuf_partition_bytes), -1, np.int32),
             "PSUM": np.full((tm.num_partitions, tm.psum_partition_bytes), -1, np.int32)}
    bad = []

    def cells(ap, env):
        ml = module.memlocs[ap.target]
        isz = dt.itemsize(ap.dtype)
        off = ap.offset.eval(env)
        idx = np.array([off])
        for step, num in ap.pattern:
            idx = (idx[:, None] + step * np.arange(num)[None, :]).reshape(-1)
        byts = (ml.byte_offset + idx[:, None] * isz + np.arange(isz)[None, :]).reshape(-1)
        p0 = ml.start_partition + ap.start_partition
        return ml, slice(p0, p0 + ap.num_partitions), byts

    for ins, env in dynamic_instances(module):
        for ap in ins.srcs:
            if ap.target not in module.memlocs:
                continue
            ml, ps, byts = cells(ap, env)
            o = owner[ml.memory][ps][:, byts]
            wrong = (o != ids[ap.target]) & (o != -1)
            if wrong.any():
                other = list(module.memlocs)[int(o[wrong][0])]
                bad.append("#%s reads %s but %s overwrote it" % (ins.id, ap.target, other))
        for ap in ins.dsts:
            if ap.target not in module.memlocs:
                continue
            ml, ps, byts = cells(ap, env)
            owner[ml.memory][ps, byts[:, None].T] = ids[ap.target]
            if ins.opcode == "matmul":
                bank = tm.psum_bank_bytes
                if byts.min() // bank != byts.max() // bank:
                    bad.append("#%s matmul output crosses a PSUM bank" % ins.id)
    return bad
