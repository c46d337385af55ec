"""Collectives in the HLO layer: group modes, the N-rank reference interpreter
against XLA:CPU on 8 host devices, rank counts, goldens per rank, and the
error (not a hang) when ranks cannot meet."""
import numpy as np
import pytest

from neuronxcc.collectives import groups as G
from neuronxcc.errors import CollectiveError
from neuronxcc.hlo import load_module
from neuronxcc.hlo.interpreter import evaluate_ranks
from neuronxcc.hlo.ranks import rank_space
from neuronxcc.common.tolerances import assert_close, mismatch
from neuronxcc.hlo import module_to_proto_bytes, module_to_text
from support import spmd


@pytest.mark.parametrize("name", spmd.PROGRAMS)
def test_interpreter_matches_xla_per_rank(spmd_dir, name):
    text, ins, ref = spmd.load(spmd_dir, name)
    for form in ("text", "proto"):
        m = load_module(text)
        if form == "proto":
            m = load_module(module_to_proto_bytes(m))
        assert rank_space(m).size == spmd.NRANKS
        got = evaluate_ranks(m, ins)
        bad = ["rank %d output%d: %s" % (d, k, mismatch(a, b))
               for d in range(spmd.NRANKS) for k, (a, b) in enumerate(zip(got[d], ref[d])) if mismatch(a, b)]
        assert not bad, (form, bad[:4])


def test_group_modes():
    assert G.group_mode("all-reduce", None, False) == G.CROSS_REPLICA
    assert G.group_mode("all-reduce", 1, False) == G.CROSS_REPLICA_AND_PARTITION
    assert G.group_mode("all-gather", 1, True) == G.FLATTENED_ID
    assert G.group_mode("all-to-all", 1, None) == G.CROSS_PARTITION
    assert G.group_mode("collective-permute", 1, None) == G.CROSS_PARTITION
    assert G.group_mode("collective-permute", None, None) == G.CROSS_REPLICA
    with pytest.raises(CollectiveError):
        G.group_mode("all-reduce", None, True)
    sp = G.RankSpace(2, 4)   # device = replica * 4 + partition
    assert G.participant_groups(G.CROSS_REPLICA, (), sp) == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert G.participant_groups(G.CROSS_PARTITION, ((0, 1), (2, 3)), sp) == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert G.participant_groups(G.CROSS_REPLICA_AND_PARTITION, ((0, 1),), sp) == ((0, 1, 2, 3, 4, 5, 6, 7),)
    assert G.participant_groups(G.CROSS_REPLICA_AND_PARTITION, ((1,), (0,)), sp) == ((4, 5, 6, 7), (0, 1, 2, 3))
    assert G.participant_groups(G.FLATTENED_ID, ((0, 7), (1, 6)), sp) == ((0, 7), (1, 6))
    with pytest.raises(CollectiveError, match="out of range"):
        G.participant_groups(G.CROSS_REPLICA, ((0, 2),), sp)
    with pytest.raises(CollectiveError, match="more than one"):
        G.participant_groups(G.FLATTENED_ID, ((0, 1), (1, 2)), sp)
    assert G.permute_pairs(G.CROSS_PARTITION, ((0, 1),), sp) == ((0, 1), (4, 5))


def test_rank_count_sources():
    hdr = "HloModule m, replica_count=2, num_partitions=4\n\nENTRY e {\n  ROOT r = u32[] replica-id()\n}\n"
    m = load_module(hdr)
    assert (m.replica_count, m.num_partitions) == (2, 4)
    back = load_module(module_to_proto_bytes(m))           # carried in the proto's device_assignment
    assert (back.replica_count, back.num_partitions) == (2, 4)
    assert "replica_count=2, num_partitions=4" in module_to_text(m)
    assert [o[0] for o in evaluate_ranks(m, [[]] * 8)] == [0, 0, 0, 0, 1, 1, 1, 1]
    bare = load_module(spmd.NXD_TEXT.replace(", replica_count=8", ""))   # from the replica groups
    assert rank_space(bare) == G.RankSpace(8, 1)
    assert rank_space(bare, ranks=16).size == 16
    with pytest.raises(CollectiveError):
        rank_space(m, ranks=4)


DEADLOCK = """HloModule dl, replica_count=4

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

reduce_it {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={}, to_apply=add
}

keep {
  ROOT p = f32[4] parameter(0)
}

ENTRY e {
  x = f32[4] parameter(0)
  r = u32[] replica-id()
  z = u32[] constant(0)
  first = pred[] compare(r, z), direction=EQ
  ROOT c = f32[4] conditional(first, x, x), true_computation=reduce_it, false_computation=keep
}
"""


def test_a_collective_some_rank_never_reaches_is_an_error():
    m = load_module(DEADLOCK)
    ins = [[np.ones(4, np.float32)] for _ in range(4)]
    with pytest.raises(CollectiveError, match=r"never reach") as ei:
        evaluate_ranks(m, ins)
    assert ei.value.code == "NCC_ECCL001"
    assert "rank 1 finished" in str(ei.value)


def test_mismatched_shapes_are_an_error():
    text = DEADLOCK.replace("ROOT p = f32[4] parameter(0)",
                            "p = f32[4] parameter(0)\n  b = f32[2,2] reshape(p)\n"
                            "  ar = f32[2,2] all-reduce(b), replica_groups={}, to_apply=add\n"
                            "  ROOT o = f32[4] reshape(ar)")
    m = load_module(text)
    ins = [[np.ones(4, np.float32)] for _ in range(4)]
    with pytest.raises(CollectiveError, match=r"ranks disagree .*all-reduce of float32\[2, 2\] over ranks"):
        evaluate_ranks(m, ins)


def test_infergoldens_per_rank(spmd_dir, tmp_path):
    from neuronxcc.hlo import infergoldens
    text, ins, ref = spmd.load(spmd_dir, "nxd_text")
    src = tmp_path / "m.hlo"
    src.write_text(text)
    inp = tmp_path / "in.npz"
    np.savez(inp, input0=np.stack([i[0] for i in ins]), input1=ins[0][1])   # input1 the same on every rank
    out = tmp_path / "g.npz"
    assert infergoldens.main([str(src), "--output", str(out), "--inputs", str(inp)]) == 0
    z = np.load(out)
    assert list(z["rank_space"]) == [8, 1]
    assert z["input1"].shape == (8, 32, 16) and z["output0"].shape == (8, 4, 16)
    xs = np.stack([i[0] for i in ins])
    d = np.einsum("rij,jk->rik", xs, ins[0][1]) + np.arange(8, dtype=np.float32)[:, None, None]
    want = d.sum(0)[None] + np.concatenate([np.repeat(d[:4].max(0)[None], 4, 0), np.repeat(d[4:].max(0)[None], 4, 0)])
    assert not mismatch(z["output0"], want.astype(np.float32))
    assert "spread0" in z.files and z["spread0"].shape == (8, 4, 16)
    out2 = tmp_path / "r.npz"
    assert infergoldens.main([str(src), "--output", str(out2), "--ranks", "4"]) == 70   # disagrees with the header
    assert not out2.exists()


def test_every_group_mode_against_numpy():
    """2 replicas x 4 partitions: cross-replica (several operands), cross-replica-and-partition
    (all-gather order, int max), flattened ids (pred and, bf16 with iota groups), cross-partition
    (all-to-all, permute), replica-id / partition-id (XLA:CPU aborts on this per-device module)."""
    m = load_module(spmd.MODES_TEXT)
    assert rank_space(m) == G.RankSpace(2, 4)
    ins = spmd.modes_inputs()
    got = evaluate_ranks(m, ins)
    for d, (f32, sb) in enumerate(spmd.modes_expected(ins)):
        a, b = spmd.split_modes(got[d][0])
        assert not mismatch(a, f32), (d, mismatch(a, f32))
        assert_close(b, sb, dtype="bf16")               # bf16 values held in f32
