"""birsim's timeline: per-engine in-order issue, semaphores, DMA queues, trace.

Model (program order is the order instructions execute in):
  * a compute/sequencer instruction on engine E starts at
    max(E free, time every wait (sem >= value) became true), occupies E for
    its cost (``birpy.cost``), and applies its signal increments at its end;
  * the result of an instruction is visible (signals, dependent accesses,
    the same engine's dependent instructions, which interlock) its cost's
    ``latency_s`` after its end (ACT and DVE pipeline latency); the engine
    itself is free at the end, so independent instructions pipeline;
  * an instruction that uses a shared port (v2: DVE and POOL share the SBUF
    port, DVE and ACT the PSUM port) starts at the first gap of that port
    at or after its issue time and holds it for its II;
  * a DMA is triggered by its engine at that same issue time: the trigger is
    an instruction of the engine's in-order stream ([DMA]: "the sequencer
    instruction to trigger the transfer may wait on any semaphore"), so what
    follows it on that engine issues no earlier, but the engine is not held
    for the transfer. The transfer becomes ready the fixed latency after the
    trigger (so the latency of transfers issued back to back overlaps); it
    runs on its DMA engines (``birpy.cost``: the engines of the 8-partition
    groups of its on-chip side, or the ``width`` engines free first for
    HBM->HBM), each piece taking the earliest gap of its engine at or after
    the queue's earlier work on that engine (a queue is in order on each
    engine; all queues share the engines, whose rate is capped so that all
    16 together stay within the HBM bandwidth, and an engine serves the
    queues that have work on it round-robin, one chunk each in turn, [DMA]:
    a transfer that finds the engine busy with other queues' work is done
    after its own time plus, per other queue, the lesser of that queue's
    work left there and one of its chunks per chunk of its own; a chunk is
    one descriptor, the transfer's contiguous run, at most
    ``TargetModel.dma_queue_chunk_bytes``; what it took from the queues it
    overtook delays their next transfers, as ``_timecore.Core._serve``
    says), and it signals when every
    engine has passed it in its queue (each engine writes the completion
    semaphore, even one that moved nothing). A queue's busy time is the span
    of its transfers; "DMA" in ``busy_s`` and ``utilisation`` is the
    engines' busy time over all 16 engines;
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
utilisation = busy / total; ``counts``: matmuls, PE transposes, PSUM
evictions (ACT/DVE reading PSUM into SBUF), DMA transfers and bytes. Trace: Chrome trace-event JSON, one track (tid) per
engine and DMA queue, one "X" event per executed instruction.
"""
import json

from neuronxcc.errors import BirSimError
from neuronxcc.starfish.birpy.cost import dma_shape, instruction_cost
from neuronxcc.starfish.birsim._timecore import Core, Rec
from neuronxcc.starfish.birsim._tracker import AccessTracker

__all__ = ["Timeline"]

ENGINE_TRACKS = ("PE", "ACT", "DVE", "POOL", "SP")
_KINDS = {"": 0, "dma": 1, "matmul": 2, "pe_transpose": 3, "psum_eviction": 4}


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
        self._core = Core(self._acc, sync == "dependencies", tm.dma_engines, tm.dma_queue_chunk_bytes > 0)
        self._port_ids = {}
        self._track_ids = {}
        self._track_names = []
        self._sem_ids = {}
        self._sem_names = []
        self.module = module
        self.tm = tm
        self.trace = trace
        self.events = []
        self._recs = {}

    def reset(self, trace=None):
        """Time zero again for another execution of the same module: engines, queues, semaphores,
        ports, the access tracker, races and trace events start empty; the per-instruction records
        (costs, typed waits) and the track/semaphore/port numbering are kept (they depend on the
        instructions only). TRACE: keep events in the next run (None: as before)."""
        if trace is not None:
            self.trace = trace
        self.races = []
        self.events = []
        self._acc = AccessTracker()
        self._core = Core(self._acc, self.sync == "dependencies", self.tm.dma_engines,
                          self.tm.dma_queue_chunk_bytes > 0)
        self._core.ensure_tracks(len(self._track_ids))
        self._core.ensure_sems(len(self._sem_ids))
        self._core.ensure_ports(len(self._port_ids))

    def _cost(self, instr):
        return self._rec(instr).cost

    def _rec(self, instr):
        """The core's per-instruction record (cost, track ids, waits, signals), built once."""
        r = self._recs.get(id(instr))
        if r is None or r.instr is not instr:
            c = instruction_cost(instr, self.module, self.tm)
            waits = tuple((self._sem_id(sem), v if isinstance(v, int) else None, v) for sem, v in instr.waits)
            signals = tuple((self._sem_id(sem), int(inc)) for sem, inc in instr.signals)
            track = self._track_id(c.track)
            ports = tuple(self._port_id(p) for p in c.ports)
            nbytes = 0.0
            chunk_s = 0.0
            if c.kind == "dma":
                nbytes = float(max(instr.dsts[0].num_elements * instr.dsts[0].itemsize,
                                   instr.srcs[0].num_elements * instr.srcs[0].itemsize))
                chunk_s = self._chunk_s(instr, c, nbytes)
            r = Rec(instr, self._track_id(instr.engine), track, c.busy_s, c.latency_s, c.track == instr.engine,
                    waits, signals, c, ports, c.engine_s, c.width, _KINDS.get(c.kind, 0), nbytes,
                    c.first_engine, c.shares, chunk_s)
            self._recs[id(instr)] = r
        return r

    def _chunk_s(self, instr, c, nbytes):
        """Engine-seconds of one round-robin chunk of a DMA: one descriptor, the transfer's contiguous
        run (``birpy.cost.dma_shape``), at most ``dma_queue_chunk_bytes``, at the transfer's own
        engine-seconds per byte (descriptor overhead included); 0 when queues are not interleaved."""
        cap = self.tm.dma_queue_chunk_bytes
        if cap <= 0 or nbytes <= 0:
            return 0.0
        _, runs, _, _ = dma_shape(instr, self.module, self.tm)
        return c.engine_s * min(nbytes / runs, cap) / nbytes

    def _track_id(self, track):
        t = self._track_ids.get(track)
        if t is None:
            t = self._track_ids[track] = len(self._track_ids)
            self._track_names.append(track)
            self._core.ensure_tracks(len(self._track_ids))
        return t

    def _port_id(self, port):
        k = self._port_ids.get(port)
        if k is None:
            k = self._port_ids[port] = len(self._port_ids)
            self._core.ensure_ports(len(self._port_ids))
        return k

    def _sem_id(self, sem):
        k = self._sem_ids.get(sem)
        if k is None:
            k = self._sem_ids[sem] = len(self._sem_ids)
            self._sem_names.append(sem)
            self._core.ensure_sems(len(self._sem_ids))
        return k

    def end_time(self, instr, env):
        """When INSTR would complete if issued now (engine or DMA queue free, waits met), or
        None when a wait is not yet satisfied. (Memory-dependence timing is not included.)"""
        t = self._core.end_time(self._rec(instr), env)
        return None if t < 0 else t

    def step(self, instr, env, regions=()):
        """Account one execution of INSTR; REGIONS = [(key, r0, r1, b0, b1, is_write)].
        Returns (start, end) seconds. (The typed interpreter loop, ``_interp``, does the same
        with ``rec``, ``core`` and ``after`` directly.)"""
        r = self._recs.get(id(instr))
        if r is None or r.instr is not instr:
            r = self._rec(instr)
        core = self._core
        se = core.step(r, env, regions if regions.__class__ is list else list(regions))
        if se is None or core.raced or self.trace:
            self.after(instr, r, se)
        return se

    @property
    def core(self):
        return self._core

    def rec(self, instr):
        """The step record of INSTR (cached in ``recs``, by id)."""
        r = self._recs.get(id(instr))
        if r is None or r.instr is not instr:
            r = self._rec(instr)
        return r

    @property
    def recs(self):
        return self._recs

    def after(self, instr, r, se):
        """What a step does beyond the core's accounting: a deadlock (SE None) raises, a race
        is recorded (or raised with strict), a trace event is kept."""
        core = self._core
        if se is None:
            sem, v, have = core.blocked
            raise BirSimError("deadlock: instruction #%s %s@%s waits for %s >= %d but only %d signals precede "
                              "it in program order" % (instr.id, instr.opcode, instr.engine, self._sem_names[sem],
                                                       v, have))
        if core.raced:
            msg = "instruction #%s %s@%s starts at %.4g us before #%s's conflicting access ends (%.4g us)" % (
                instr.id, instr.opcode, instr.engine, se[0] * 1e6, core.race_who, core.race_dep * 1e6)
            if self.strict:
                raise BirSimError("race: " + msg)
            if len(self.races) < 1000:
                self.races.append(msg)
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
            self.events.append((self._track_names[r.track], instr, se[0], se[1], parts, free))

    @property
    def end(self):
        return self._core.end

    @property
    def count(self):
        return self._core.count

    @property
    def busy(self):
        """{track: busy seconds} of the tracks that ran something."""
        out = {}
        for k, name in enumerate(self._track_names):
            b, ran = self._core.busy_of(k)
            if ran:
                out[name] = b
        return out

    # -- results ------------------------------------------------------------
    def summary(self):
        total = self.end
        busy = self.busy
        util = {k: (busy[k] / total if total > 0 else 0.0) for k in busy}
        eng_busy = self._core.dma_engine_busy()
        if eng_busy > 0:
            busy["DMA"] = eng_busy
            util["DMA"] = eng_busy / (self.tm.dma_engines * total) if total > 0 else 0.0
        tracks = sorted(busy)
        kc = self._core.kind_counts()
        counts = {"dma_transfers": kc[1], "dma_bytes": int(self._core.dma_bytes), "matmuls": kc[2],
                  "pe_transposes": kc[3], "psum_evictions": kc[4]}
        return {"total_s": total, "instructions": self.count, "sync": self.sync, "races": list(self.races),
                "busy_s": {k: busy[k] for k in tracks}, "utilisation": {k: util[k] for k in tracks},
                "counts": counts}

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
