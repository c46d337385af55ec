"""Acceptance: multi-rank programs compiled by neuronx-cc and run on N simulated
NeuronCores equal XLA:CPU on 8 host devices, rank by rank.

The programs (support/spmd.py): a TP=8 Llama-shaped decoder layer with
shard_map (all-reduce after attention and after the MLP), its
sequence-parallel variant (all-gather, reduce-scatter), a data-parallel
training step (gradient all-reduce), a ring of collective-permutes,
all-to-all MoE routing, a hand-written NxD-style per-rank HLO text
(replica_count=8, cross-replica all-reduce, replica-id) and async / iota-group
forms. The compile's own bir_sim check runs every rank against the per-rank
goldens; this test checks against XLA itself."""
import json

import numpy as np
import pytest

from neuronxcc.common.tolerances import assert_close, mismatch
from neuronxcc.neff import read_neff
from neuronxcc.starfish.birsim import simulate_neff_ranks
from support import spmd
from support.cli import run_ncc, tool_path


@pytest.mark.parametrize("name", spmd.PROGRAMS)
def test_compiled_program_matches_xla_on_every_rank(spmd_dir, tmp_path, name):
    text, ins, ref = spmd.load(spmd_dir, name)
    src = tmp_path / (name + ".hlo")
    src.write_text(text)
    neff = tmp_path / (name + ".neff")
    r = run_ncc(["compile", str(src), "--framework", "XLA", "--target", "trn1", "--output", str(neff)], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    n = read_neff(str(neff))
    cc = n.collectives
    assert cc["num_ranks"] == spmd.NRANKS and cc["collectives"]
    assert n.def_json["replica_groups"] or n.def_json["src_target_pairs"]
    assert n.header.num_tpb == 1
    res = simulate_neff_ranks(str(neff), ins)
    bad = ["rank %d output%d: %s" % (d, k, mismatch(a, b))
           for d in range(spmd.NRANKS) for k, (a, b) in enumerate(zip(res.outputs[d], ref[d])) if mismatch(a, b)]
    assert not bad, bad[:4]
    s = res.summary()
    assert len(s["collectives"]) == spmd.NRANKS and min(s["collectives"]) == len(cc["collectives"])
    assert all(0 < f <= 1 for f in s["collective_share"])


def test_birsim_tool_runs_every_rank(spmd_dir, tmp_path):
    import subprocess
    text, ins, ref = spmd.load(spmd_dir, "nxd_text")
    src = tmp_path / "m.hlo"
    src.write_text(text)
    neff = tmp_path / "m.neff"
    assert run_ncc(["compile", str(src), "--framework", "XLA", "--output", str(neff)], cwd=tmp_path).returncode == 0
    inp = tmp_path / "in.npz"
    np.savez(inp, input0=np.stack([i[0] for i in ins]), input1=np.stack([i[1] for i in ins]))
    out, trace, summ = tmp_path / "out.npz", tmp_path / "t.json", tmp_path / "s.json"
    cmd = [tool_path("birsim"), str(neff), "--inputs", str(inp), "--output", str(out),
           "--trace", str(trace), "--summary", str(summ)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "8 ranks" in p.stdout
    got = np.load(out)["output0"]
    assert got.shape == (8, 4, 16)
    assert not any(mismatch(got[d], ref[d][0]) for d in range(8))
    tr = json.loads(trace.read_text())
    assert {e["pid"] for e in tr["traceEvents"]} == set(range(1, 9))        # one process per core
    assert json.loads(summ.read_text())["ranks"] == 8
    # a rank count that disagrees with the NEFF is one clear line, exit 70
    p = subprocess.run(cmd[:-6] + ["--output", str(out), "--ranks", "4", "--inputs", str(inp)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 70 and "compiled for 8 ranks" in p.stderr and "Traceback" not in p.stderr


def test_every_group_mode_compiled(tmp_path):
    """The 2 x 4 program of every group mode (support/spmd.MODES_TEXT) compiled and run on 8 cores
    against numpy (the compile's bir_sim already checked every rank against the interpreter)."""
    src = tmp_path / "modes.hlo"
    src.write_text(spmd.MODES_TEXT)
    neff = tmp_path / "modes.neff"
    r = run_ncc(["compile", str(src), "--framework", "XLA", "--output", str(neff)], cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert read_neff(str(neff)).collectives["rank_space"] == [2, 4]
    ins = spmd.modes_inputs()
    res = simulate_neff_ranks(str(neff), ins)
    for d, (f32, sb) in enumerate(spmd.modes_expected(ins)):
        a, b = spmd.split_modes(res.outputs[d][0])
        assert not mismatch(a, f32), (d, mismatch(a, f32))
        assert_close(b, sb, row="compiled", dtype="bf16")


def test_a_rank_count_only_the_flag_gives(tmp_path):
    """A torch-xla-style module with no device assignment and empty replica groups: without a
    rank count it is one rank (the all-reduce of one); --internal-num-ranks 4 makes it four."""
    text = spmd.NXD_TEXT.replace(", replica_count=8", "").replace("replica_groups={{0,1,2,3,4,5,6,7}}",
                                                                  "replica_groups={}")
    text = text.replace("  mx = f32[4,16]{1,0} all-reduce(d2), replica_groups={{0,1,2,3},{4,5,6,7}}, to_apply=max\n",
                        "  mx = f32[4,16]{1,0} all-reduce(d2), replica_groups={}, to_apply=max\n")
    src = tmp_path / "t.hlo"
    src.write_text(text)
    neff = tmp_path / "t.neff"
    r = run_ncc(["compile", str(src), "--framework", "XLA", "--output", str(neff), "--internal-num-ranks", "4"],
                cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert read_neff(str(neff)).collectives["num_ranks"] == 4
    rng = np.random.default_rng(1)
    ins = [[rng.standard_normal((4, 32)).astype(np.float32), rng.standard_normal((32, 16)).astype(np.float32)]
           for _ in range(4)]
    res = simulate_neff_ranks(str(neff), ins)
    d = [x @ w + k for k, (x, w) in enumerate(ins)]
    want = sum(d) + np.max(d, axis=0)
    assert not any(mismatch(res.outputs[k][0], want.astype(np.float32)) for k in range(4))
    bad = tmp_path / "b.hlo"
    bad.write_text(spmd.NXD_TEXT)
    r = run_ncc(["compile", str(bad), "--framework", "XLA", "--output", str(tmp_path / "b.neff"),
                 "--internal-num-ranks", "4"], cwd=tmp_path)
    assert r.returncode == 70 and "[NCC_ECCL002]" in r.stderr and "Traceback" not in r.stderr
