"""birsim's timeline: per-engine in-order issue, semaphores, DMA queues, trace.

Model (program order is the order instructions execute in):
  * a compute/sequencer instruction on engine E starts at
    max(E free, time every wait (sem >= value) became true), occupies E for
    its cost (``birpy.cost``), and applies its signal increments at its end;
  * a DMA is issued by its engine at that same start time (the engine is not
    held), its transfer starts when its queue is free, occupies the queue for
    fixed latency + bytes / bandwidth (queues are in order; no pipelining),
    and signals at the end of the transfer;
  * a wait that the signals issued so far (in program order) can never satisfy
    is a deadlock: BirSimError.
  * memory dependences: every operand's touched region (rows x bytes bounding
    box of the physical storage) is recorded with its end time. In
    ``sync="semaphores"`` mode (default when the module has any wait or
    signal) an instruction that starts before a conflicting access of another
    track (RAW, WAR, WAW) has ended is recorded as a race
    (``summary()["races"]``; ``strict=True`` raises BirSimError). In
    ``sync="dependencies"`` mode (default for a module without semaphores,
    e.g. BIR before walrus scheduling) the instruction simply starts after
    them, which gives a meaningful estimate for unsynchronised BIR. Only the
    last 64 accesses per storage are remembered; bounding boxes can report a
    race for interleaved but disjoint patterns.
Totals: ``total_s`` = the last end time; per track busy seconds and
utilisation = busy / total. Trace: Chrome trace-event JSON, one track (tid) per
engine and DMA queue, one "X" event per executed instruction.
"""
import bisect
import json

from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birpy.cost import instruction_cost
from neuronxcc.starfish.birsim._tracker import AccessTracker

__all__ = ["Timeline"]

ENGINE_TRACKS = ("PE", "ACT", "DVE", "POOL", "SP")


class _Sem:
    """Signal events of one semaphore sorted by time, with running totals."""

    __slots__ = ("times", "incs", "cums")

    def __init__(self):
        self.times = []
        self.incs = []
        self.cums = []

    def add(self, t, inc):
        if not self.times or t >= self.times[-1]:
            self.times.append(t)
            self.incs.append(inc)
            self.cums.append((self.cums[-1] if self.cums else 0) + inc)
            return
        i = bisect.bisect_right(self.times, t)
        self.times.insert(i, t)
        self.incs.insert(i, inc)
        self.cums.insert(i, 0)
        acc = self.cums[i - 1] if i else 0
        for k in range(i, len(self.cums)):
            acc += self.incs[k]
            self.cums[k] = acc

    @property
    def value(self):
        return self.cums[-1] if self.cums else 0

    def time_reaching(self, v):
        if v <= 0:
            return 0.0
        i = bisect.bisect_left(self.cums, v)
        if i >= len(self.cums):
            return None
        return self.times[i]


class Timeline:
    def __init__(self, module, tm, trace=False, sync="auto", strict=False):
        if sync == "auto":
            has_sem = any(n.kind == "inst" and (n.waits or n.signals) for n in module.walk())
            sync = "semaphores" if has_sem else "dependencies"
        if sync not in ("semaphores", "dependencies"):
            raise ValueError("sync must be auto, semaphores or dependencies")
        self.sync = sync
        self.strict = strict
        self.races = []
        self._acc = AccessTracker()
        self._track_ids = {}
        self.module = module
        self.tm = tm
        self.free = {}
        self.busy = {}
        self.sems = {}
        self.end = 0.0
        self.count = 0
        self.trace = trace
        self.events = []
        self._recs = {}
        self.sync_deps = sync == "dependencies"

    def _cost(self, instr):
        return self._rec(instr)[8]

    def _rec(self, instr):
        """Per-instruction record, built once: (instr, track, track id, busy_s, latency_s,
        track is the engine, waits [(sem name, int value or None, expr)], signals
        [(sem name, inc)], Cost). Nothing in it depends on loop variables."""
        r = self._recs.get(id(instr))
        if r is None or r[0] is not instr:
            c = instruction_cost(instr, self.module, self.tm)
            waits = tuple((sem, v if isinstance(v, int) else None, v) for sem, v in instr.waits)
            r = (instr, c.track, self._track_id(c.track), c.busy_s, c.latency_s, c.track == instr.engine,
                 waits, tuple(instr.signals), c)
            self._recs[id(instr)] = r
        return r

    def _track_id(self, track):
        t = self._track_ids.get(track)
        if t is None:
            t = self._track_ids[track] = len(self._track_ids)
        return t

    def _issue_time(self, instr, env, waits=None):
        """(time INSTR's engine can issue it, None) or (None, (sem, value, have)) when a wait
        cannot be satisfied by the signals recorded so far."""
        t = self.free.get(instr.engine, 0.0)
        if waits is None:
            waits = self._rec(instr)[6]
        for sem, v, e in waits:
            if v is None:
                v = e.eval(env)
            s = self.sems.get(sem)
            if s is None:
                if v <= 0:
                    continue
                return None, (sem, v, 0)
            if v <= 0:
                continue
            cums = s.cums
            i = bisect.bisect_left(cums, v)
            if i >= len(cums):
                return None, (sem, v, s.value)
            at = s.times[i]
            if at > t:
                t = at
        return t, None

    def end_time(self, instr, env):
        """When INSTR would complete if issued now (engine or DMA queue free, waits met), or
        None when a wait is not yet satisfied. (Memory-dependence timing is not included.)"""
        r = self._rec(instr)
        t, _ = self._issue_time(instr, env, r[6])
        if t is None:
            return None
        if r[5]:
            return t + r[3]
        return max(t, self.free.get(r[1], 0.0)) + r[4] + r[3]

    def step(self, instr, env, regions=()):
        """Account one execution of INSTR; REGIONS = [(key, r0, r1, b0, b1, is_write)].
        Returns (start, end) seconds."""
        r = self._recs.get(id(instr))
        if r is None or r[0] is not instr:
            r = self._rec(instr)
        _, track, tid, busy_s, latency_s, on_engine, waits, signals, _c = r
        free = self.free
        if waits:
            t, blocked = self._issue_time(instr, env, waits)
            if t is None:
                sem, v, have = blocked
                raise BirSimError("deadlock: instruction #%s %s@%s waits for %s >= %d but only %d signals precede "
                                  "it in program order" % (instr.id, instr.opcode, instr.engine, sem, v, have))
        else:
            t = free.get(instr.engine, 0.0)
        if regions:
            acc = self._acc
            dep = acc.conflict_time(tid, regions)
            if self.sync_deps:
                if dep > t:
                    t = dep
        else:
            dep = 0.0
        if on_engine:
            start = t
            end = t + busy_s
            free[track] = end
        else:
            start = free.get(track, 0.0)
            if t > start:
                start = t
            end = start + latency_s + busy_s
            free[track] = end
            if instr.engine not in free:
                free[instr.engine] = t
        if dep > start * (1 + 1e-12) + 1e-15 and not self.sync_deps:
            msg = "instruction #%s %s@%s starts at %.4g us before #%s's conflicting access ends (%.4g us)" % (
                instr.id, instr.opcode, instr.engine, start * 1e6, self._acc.last_conflict_id, dep * 1e6)
            if self.strict:
                raise BirSimError("race: " + msg)
            if len(self.races) < 1000:
                self.races.append(msg)
        if regions:
            acc.record(tid, regions, end, instr.id if instr.id is not None else -1)
        busy = self.busy
        busy[track] = busy.get(track, 0.0) + (end - start)
        if signals:
            sems = self.sems
            for sem, inc in signals:
                s = sems.get(sem)
                if s is None:
                    s = sems[sem] = _Sem()
                s.add(end, inc)
        if end > self.end:
            self.end = end
        self.count += 1
        if self.trace:
            out = instr.dsts[0] if instr.dsts else None
            if out is None:
                parts = free = 0
            elif out.num_partitions is not None:
                parts, free = out.num_partitions, out.free_size
            else:
                shp = out.shape
                parts = shp[0] if shp else 1
                free = out.num_elements // max(parts, 1)
            self.events.append((track, instr, start, end, parts, free))
        return start, end

    # -- results ------------------------------------------------------------
    def summary(self):
        total = self.end
        tracks = sorted(self.busy)
        return {"total_s": total, "instructions": self.count, "sync": self.sync, "races": list(self.races),
                "busy_s": {k: self.busy[k] for k in tracks},
                "utilisation": {k: (self.busy[k] / total if total > 0 else 0.0) for k in tracks}}

    def trace_json(self):
        tracks = [t for t in ENGINE_TRACKS]
        for ev in self.events:
            if ev[0] not in tracks:
                tracks.append(ev[0])
        tid = {t: i + 1 for i, t in enumerate(tracks)}
        out = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "NeuronCore (birsim)"}}]
        for t in tracks:
            out.append({"ph": "M", "name": "thread_name", "pid": 1, "tid": tid[t], "args": {"name": t}})
            out.append({"ph": "M", "name": "thread_sort_index", "pid": 1, "tid": tid[t], "args": {"sort_index": tid[t]}})
        for track, instr, start, end, parts, free in self.events:
            args = {"opcode": instr.opcode, "engine": instr.engine, "partitions": parts, "free": free, "id": instr.id}
            if instr.name:
                args["name"] = instr.name
            if track.startswith("DMA:"):
                args["queue"] = track[4:]
            out.append({"name": instr.opcode, "cat": track, "ph": "X", "pid": 1, "tid": tid[track],
                        "ts": start * 1e6, "dur": (end - start) * 1e6, "args": args})
        return {"traceEvents": out, "displayTimeUnit": "ns", "otherData": dict(self.summary(), target=self.tm.name)}

    def write_trace(self, path):
        with open(path, "w") as f:
            json.dump(self.trace_json(), f)
