"""pre_sched / post_sched: replaying the schedule respects every dependence.

The check recomputes dependences itself, from the executed instances of the
original module: two instructions of one block conflict when the exact
(target, partition, element) cells they touch over all iterations intersect
and one writes. The scheduled module must keep every such pair in order,
keep every instruction in its block, and compute the same outputs.
"""
import numpy as np
import pytest

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_module
from neuronxcc.walrus.registry import PassContext, run_passes
from support.walrus_checks import dynamic_instances, raw_equal
from support.walrus_programs import inputs_for, random_program


def _cells(ins, env, dst, names):
    """Exact byte cells an instance touches, as int64 keys (target, partition, byte)."""
    keys = []
    for ap in (ins.dsts if dst else ins.srcs):
        idx = np.array([ap.offset.eval(env)], np.int64)
        for st, n in ap.pattern:
            idx = (idx[:, None] + st * np.arange(n)[None, :]).reshape(-1)
        isz = B.dtypes.itemsize(ap.dtype)
        byts = (idx[:, None] * isz + np.arange(isz)[None, :]).reshape(-1)
        parts = np.arange(ap.start_partition, ap.start_partition + ap.num_partitions) if ap.num_partitions \
            else np.zeros(1, np.int64)
        t = names.setdefault(ap.target, len(names))
        keys.append(((t * 256 + parts[:, None]) << 32) + byts[None, :])
    return np.unique(np.concatenate([k.reshape(-1) for k in keys])) if keys else np.zeros(0, np.int64)


def _blocks(body, out, path=()):
    run = []
    for k, n in enumerate(body):
        if n.kind == "inst":
            run.append(n.name)
        else:
            out.append((path, tuple(run)))
            run = []
            _blocks(n.body, out, path + (k,))
    out.append((path, tuple(run)))
    return out


def _conflicting_pairs(m):
    reads, writes, tnames = {}, {}, {}
    for ins, env in dynamic_instances(m):
        reads.setdefault(ins.name, []).append(_cells(ins, env, False, tnames))
        writes.setdefault(ins.name, []).append(_cells(ins, env, True, tnames))
    reads = {k: np.unique(np.concatenate(v)) for k, v in reads.items()}
    writes = {k: np.unique(np.concatenate(v)) for k, v in writes.items()}

    def meet(x, y):
        return np.intersect1d(x, y, assume_unique=True).size > 0
    pairs = []
    for _, names in _blocks(m.body, []):
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                if meet(writes[a], reads[b]) or meet(writes[a], writes[b]) or meet(reads[a], writes[b]):
                    pairs.append((a, b))
    return pairs


@pytest.mark.parametrize("passes", [["pre_sched"], ["coloring_allocator", "post_sched"],
                                    ["pre_sched", "coloring_allocator", "anti_dependency_analyzer", "post_sched"]])
@pytest.mark.parametrize("seed", range(6))
def test_schedule_respects_recomputed_dependences(passes, seed):
    m = random_program(seed)
    for k, ins in enumerate(m.instructions()):
        ins.name = "n%d" % k
    pairs = _conflicting_pairs(m)
    blocks_before = sorted((p, tuple(sorted(r))) for p, r in _blocks(m.body, []))
    x = inputs_for(m, seed)
    ref = run_module(B.from_json(B.to_json(m)), x)
    ctx = PassContext(get_target("trn1"), options={"sched_force": True})
    run_passes(m, ["lsa"] + passes, ctx)
    order = {ins.name: k for k, ins in enumerate(m.instructions())}
    for a, b in pairs:
        assert order[a] < order[b], "%s must stay before %s" % (a, b)
    assert sorted((p, tuple(sorted(r))) for p, r in _blocks(m.body, [])) == blocks_before
    assert all(raw_equal(u, v) for u, v in zip(ref, run_module(m, x)))


def test_scheduler_reorders_and_never_slows_down():
    moved = 0
    for seed in range(10):
        m = random_program(seed)
        names = [i.name for i in m.instructions()]
        ctx = PassContext(get_target("trn1"))
        run_passes(m, ["pre_sched"], ctx)
        st = ctx.metrics["scheduling"]["pre_sched"]
        assert st["estimated_gain_s"] >= 0
        moved += st["blocks_reordered"]
    assert moved >= 2
