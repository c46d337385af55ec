"""LNC=2: one logical NeuronCore of two physical cores sharing HBM (trn2).

The program's kernels (each materialised value's loop nest, as codegen emits
them) are divided between the two cores: both run the same instruction
stream, each kernel sits in an ``If`` on the core-id register (core 1 runs the
then-branch, core 0 the else-branch). Work is estimated as
instructions x loop trips, so independent
kernels (Q/K/V projections, gate/up) run side by side. Placement is greedy on
estimated start time: a kernel goes to the core where it can start first,
counting that a kernel needing the other core's result waits at a barrier
placed right after that result's kernel (so the producer's core runs on while
the other one starts). A kernel that needs
values both cores wrote since the last barrier is preceded by a barrier; so is
the end of the program (every output complete on both cores). A barrier is a
``collective`` instruction with ``op="barrier"`` over cores [0, 1] on queue
``qBarrier``; its input and output are the last HBM tensor written since the
previous barrier, and ``op="fence"`` instructions on the same in-order queue
stand for the others (one before the barrier, one after): no data moves, but
walrus orders them after the tensors' writers and every later access after
them like any instruction with those access patterns.

Module attrs: ``lnc`` = 2, ``core_id_tensor`` (a const int32[1] the runtime --
birsim -- fills with the physical core's index). The NEFF header says
``lnc_size`` 2.

Programs it does not split (While / conditional regions, collectives, NKI
kernels, custom ops, fewer than two kernels) stay on one core and the compiler
says so in one warning line (``not_split_reason``).
"""
import logging

import numpy as np

from neuronxcc.starfish import birpy

log = logging.getLogger("neuronxcc.penguin.lnc")

__all__ = ["requested", "not_split_reason", "LncSplitter", "CORE_ID_TENSOR", "CORE_REGISTER"]

CORE_ID_TENSOR = "lnc_core_id"
CORE_REGISTER = "lnc_core"
_UNSPLIT_KINDS = {"while": "While loops", "conditional": "conditionals", "nki_kernel": "NKI kernels",
                  "sort": "custom-op sorts", "topk": "custom-op top-k", "custom-call": "custom calls",
                  "all_reduce": "collectives", "all_gather": "collectives", "reduce_scatter": "collectives",
                  "all_to_all": "collectives", "collective_permute": "collectives", "rank_id": "device ids"}


def requested(options, target):
    """The logical-core size the compile asks for (options: argparse namespace or dict)."""
    v = options.get("logical_nc_config") if isinstance(options, dict) else getattr(options, "logical_nc_config",
                                                                                    None)
    return int(v or 1) if target in ("trn2", "trn2n", "trn3") else 1


def not_split_reason(graph):
    """Why GRAPH stays on one core, or '' when the splitter can take it."""
    for op in graph.ops:
        why = _UNSPLIT_KINDS.get(op.kind)
        if why:
            return "it has %s (%s)" % (why, op.loc.get("hlo") or op.kind)
    return ""


def _work(nodes):
    w = 0
    for n in nodes:
        if n.kind == "inst":
            w += 1
        elif n.kind == "loop":
            w += max(1, n.trip_count) * _work(n.body)
        elif n.kind == "while":
            w += 8 * _work(n.body)
        else:
            w += max(_work(n.then_body), _work(n.else_body))
    return w


def _insts(nodes):
    for n in nodes:
        if n.kind == "inst":
            yield n
        elif n.kind in ("loop", "while"):
            yield from _insts(n.body)
        else:
            yield from _insts(n.then_body)
            yield from _insts(n.else_body)


class LncSplitter:
    """Wraps codegen's per-op lowering (see the module docstring)."""

    def __init__(self, cg):
        self.cg = cg
        self.m = cg.m
        self.load = [0, 0]
        self.placed = []             # [(body index of the If node, core, that core's load after it)]
        self.pending = {}            # HBM tensor -> [(core, body index)] writes since the last barrier
        self.read_by = {}            # HBM tensor -> [(core, body index)] reads since the last barrier
        self.kernels = [0, 0]
        self.barriers = 0
        self.m.attrs["lnc"] = 2
        self.m.attrs["core_id_tensor"] = CORE_ID_TENSOR
        cg.em.tensor(CORE_ID_TENSOR, "const", "int32", (1,), data=np.zeros(1, np.int32), exact_name=True)
        ap = cg.em.hbm(CORE_ID_TENSOR, 0, [[1, 1]])
        cg.em.b.inst("register_load", "SP", [], [ap], register=CORE_REGISTER, min=0, max=1, name="lnc.core_id")

    def run(self, fn):
        """Run FN (which emits top-level instructions) and place what it emitted on one core."""
        body = self.m.body
        n0 = len(body)
        fn()
        new = body[n0:]
        if not new:
            return
        del body[n0:]
        reads, writes = set(), set()
        for i in _insts(new):
            for ap in i.dsts:
                if ap.target in self.m.tensors:
                    writes.add(ap.target)
            for ap in i.srcs:
                if ap.target in self.m.tensors:
                    reads.add(ap.target)
        w = _work(new)

        def conflicts(core):
            """Body indices of the other core's accesses this kernel on CORE must follow."""
            idx = []
            for t in reads | writes:
                idx += [k for c, k in self.pending.get(t, ()) if c != core]
            for t in writes:
                idx += [k for c, k in self.read_by.get(t, ()) if c != core]
            return idx

        # the core where the kernel starts earliest: its own load, or the other core's load at the
        # point it must wait for (a barrier placed right after that access)
        best = None
        for core in (0, 1):
            idx = conflicts(core)
            start = self.load[core]
            if idx:
                start = max(start, self._load_at(1 - core, max(idx)))
            key = (start, bool(idx), core)
            if best is None or key < best[0]:
                best = (key, core, idx)
        _, core, idx = best
        if idx:
            self.barrier(max(idx) + 1)
            self.load[core] = max(self.load[core], self._load_at(1 - core, max(idx)))
        node = birpy.If(CORE_REGISTER, new if core == 1 else [], new if core == 0 else [])
        pos = len(body)
        body.append(node)
        self.load[core] += w
        self.kernels[core] += 1
        self.placed.append((pos, core, self.load[core]))
        for t in writes:
            self.pending.setdefault(t, []).append((core, pos))
        for t in reads:
            self.read_by.setdefault(t, []).append((core, pos))

    def _load_at(self, core, index):
        """CORE's load after the last of its kernels at body index <= INDEX."""
        best = 0
        for pos, c, load in self.placed:
            if c == core and pos <= index:
                best = load
        return best

    def barrier(self, at=None):
        """Meet both cores at body index AT (default: the end): every access before it is visible
        to both after it."""
        body = self.m.body
        at = len(body) if at is None else at
        written = sorted(t for t, accs in self.pending.items() if any(k < at for _, k in accs))
        if not written:
            return
        em = self.cg.em
        saved = body[at:]
        del body[at:]

        def on(t, op):
            ap = em.hbm(t, 0, birpy.row_major_pattern(self.m.tensors[t].shape))
            em.b.inst("collective", "SP", [ap], [ap], queue="qBarrier", op=op, groups=[[0, 1]], name="lnc." + op)
        # one queue, in order: fences after the writers of all but the last tensor, the barrier (after
        # the last one's writer), fences that every later access of those tensors waits for
        for t in written[:-1]:
            on(t, "fence")
        on(written[-1], "barrier")
        for t in written[:-1]:
            on(t, "fence")
        shift = len(body) - at
        body.extend(saved)
        self.barriers += 1

        def keep(accs):
            return [(c, k + shift) for c, k in accs if k >= at]
        self.pending = {t: keep(a) for t, a in self.pending.items() if keep(a)}
        self.read_by = {t: keep(a) for t, a in self.read_by.items() if keep(a)}
        self.placed = [(p + shift if p >= at else p, c, l) for p, c, l in self.placed]

    def finish(self):
        self.barrier()
        if min(self.kernels) == 0:
            log.warning("--lnc 2: one physical NeuronCore of the logical core does all the work (lnc_size 2): "
                        "the program has %d kernel(s) and none that can run beside another",
                        sum(self.kernels))
        log.info("LNC=2: %d kernels on core 0, %d on core 1 (work %d / %d), %d barriers", self.kernels[0],
                 self.kernels[1], self.load[0], self.load[1], self.barriers)
