"""Bad input to every tool: one ``[NCC_...]`` line naming the file or input, exit 70, no
traceback, nothing half-written (issue 14 item 8). The tools run in-process through their
mains (``neuronxcc.starfish.tools``); the launchers and neuronx-cc itself as programs."""
import os
import zipfile

import ml_dtypes
import numpy as np
import pytest

from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.tools import run_tool as run_in_process
from support.cli import run_ncc, run_tool

HLO = "HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = f32[4] negate(p)\n}\n"


def _one_line(capsys, rc, *names):
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert rc == 70, out.err
    assert len(lines) == 1, out.err
    assert lines[0].startswith("[NCC_E"), lines[0]               # the user's mistake, not an internal error
    assert "Traceback" not in out.err + out.out
    for n in names:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def _neff(tmp_path):
    from neuronxcc.neff import write_neff
    m = B.Module("addc")
    m.add_tensor("x", "input", "float32", (128, 4))
    m.add_tensor("w", "input", "bfloat16", (128, 4))
    m.add_tensor("y", "output", "float32", (128, 4))
    m.add_memloc("a", "SBUF", 128, 16)
    m.add_memloc("b", "SBUF", 128, 16)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("a")], [b.ap("x")], queue="q0", signals=[("q0", 1)])
    b.inst("dma_copy", "ACT", [b.ap("b")], [b.ap("w")], queue="q1", signals=[("q1", 1)])
    b.inst("tensor_tensor", "DVE", [b.ap("a")], [b.ap("a"), b.ap("b")], op="add", waits=[("q0", 1), ("q1", 1)],
           signals=[("DVE", 1)])
    b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("a")], queue="q0", waits=[("DVE", 1)])
    b.finish()
    path = str(tmp_path / "m.neff")
    write_neff(path, m)
    return path


X = np.ones((128, 4), np.float32)
W = np.ones((128, 4), ml_dtypes.bfloat16)


def _bad_npz(tmp_path):
    """name -> (path, text the error line must carry) of inputs files birsim must refuse."""
    d = {}
    (tmp_path / "empty.npz").write_bytes(b"")
    d["empty"] = (tmp_path / "empty.npz", "is empty")
    np.savez(tmp_path / "good.npz", input0=X, input1=W)
    data = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "trunc.npz").write_bytes(data[: len(data) // 2])
    d["truncated"] = (tmp_path / "trunc.npz", "trunc.npz")
    (tmp_path / "text.npz").write_text("input0 = 1, 2, 3\n")
    d["not npz"] = (tmp_path / "text.npz", "text.npz")
    np.save(tmp_path / "one.npy", X)
    d["npy"] = (tmp_path / "one.npy", "one .npy array")
    np.savez(tmp_path / "miss.npz", input0=X)
    d["missing input"] = (tmp_path / "miss.npz", "input1")
    np.savez(tmp_path / "shape.npz", input0=X[:, :2], input1=W)
    d["wrong shape"] = (tmp_path / "shape.npz", "[128, 2]")
    np.savez(tmp_path / "dtype.npz", input0=X.astype(np.float64), input1=W)
    d["wrong dtype"] = (tmp_path / "dtype.npz", "float64")
    (tmp_path / "missing.npz").unlink(missing_ok=True)
    d["missing file"] = (tmp_path / "missing.npz", "does not exist")
    with zipfile.ZipFile(tmp_path / "zip.npz", "w") as z:
        z.writestr("input0.npy", b"not an array")
    d["bad member"] = (tmp_path / "zip.npz", "zip.npz")
    return d


def test_birsim_bad_inputs(tmp_path, capsys):
    neff = _neff(tmp_path)
    out = tmp_path / "out.npz"
    for name, (path, text) in _bad_npz(tmp_path).items():
        rc = run_in_process("birsim", [neff, "--inputs", str(path), "--output", str(out)])
        line = _one_line(capsys, rc, text)
        assert not out.exists(), name
        if name in ("wrong shape", "wrong dtype"):
            assert "input0" in line and ("[128, 4]" in line or "float32" in line), line   # expected and given


def test_birsim_ranks_checks_inputs_as_one_rank_does(tmp_path, capsys):
    """``--ranks N`` refuses what one rank refuses (dtype, shape, missing input: one line naming the
    input, what it takes and what it got, exit 70, no output); an array is one for every rank or N
    stacked on a leading rank axis."""
    neff = _neff(tmp_path)
    out = tmp_path / "out.npz"
    for name, (path, text) in _bad_npz(tmp_path).items():
        rc = run_in_process("birsim", [neff, "--ranks", "2", "--inputs", str(path), "--output", str(out)])
        line = _one_line(capsys, rc, text)
        assert not out.exists(), name
        if name in ("wrong shape", "wrong dtype"):
            assert "input0" in line and ("[128, 4]" in line or "float32" in line), line
    np.savez(tmp_path / "r3.npz", input0=np.stack([X] * 3), input1=W)
    rc = run_in_process("birsim", [neff, "--ranks", "2", "--inputs", str(tmp_path / "r3.npz"), "--output", str(out)])
    _one_line(capsys, rc, "[3, 128, 4]", "[2, 128, 4]")
    np.savez(tmp_path / "r2.npz", input0=np.stack([X, 2 * X]), input1=W)
    rc = run_in_process("birsim", [neff, "--ranks", "2", "--inputs", str(tmp_path / "r2.npz"), "--output", str(out)])
    assert rc == 0, capsys.readouterr().err
    with np.load(out) as z:
        np.testing.assert_array_equal(z["output0"], np.stack([X + 1, 2 * X + 1]))
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []          # no temp file left


def test_birsim_good_inputs_and_nothing_half_written(tmp_path, capsys):
    neff = _neff(tmp_path)
    np.savez(tmp_path / "in.npz", input0=X, input1=W)
    out = tmp_path / "out.npz"
    assert run_in_process("birsim", [neff, "--inputs", str(tmp_path / "in.npz"), "--output", str(out)]) == 0
    with np.load(out) as z:
        np.testing.assert_array_equal(z["output0"], X + 1)
    capsys.readouterr()
    # the summary cannot be written: neither the outputs nor the summary appear
    out2 = tmp_path / "out2.npz"
    rc = run_in_process("birsim", [neff, "--inputs", str(tmp_path / "in.npz"), "--output", str(out2),
                                   "--summary", str(tmp_path / "no" / "dir" / "s.json")])
    _one_line(capsys, rc, "s.json")
    assert not out2.exists()
    assert [p for p in os.listdir(tmp_path) if p.startswith(".")] == []          # no temp file left


def test_birsim_bad_neff_and_flags(tmp_path, capsys):
    (tmp_path / "empty.neff").write_bytes(b"")
    rc = run_in_process("birsim", [str(tmp_path / "empty.neff"), "--output", str(tmp_path / "o.npz")])
    _one_line(capsys, rc, "empty.neff")
    (tmp_path / "bad.neff").write_bytes(b"not a neff" * 100)
    rc = run_in_process("birsim", [str(tmp_path / "bad.neff"), "--output", str(tmp_path / "o.npz")])
    _one_line(capsys, rc, "bad.neff")
    rc = run_in_process("birsim", [str(tmp_path / "bad.neff"), "--output", "o.npz", "--no-such-flag"])
    _one_line(capsys, rc, "birsim", "--no-such-flag")
    rc = run_in_process("birsim", ["--output", "o.npz"])
    _one_line(capsys, rc, "birsim")


def test_infergoldens_bad_inputs(tmp_path, capsys):
    model = tmp_path / "m.hlo"
    model.write_text(HLO)
    out = tmp_path / "g.npz"
    (tmp_path / "empty.npz").write_bytes(b"")
    np.savez(tmp_path / "good.npz", input0=np.ones(4, np.float32))
    data = (tmp_path / "good.npz").read_bytes()
    (tmp_path / "trunc.npz").write_bytes(data[:40])
    np.savez(tmp_path / "miss.npz", other=np.ones(4, np.float32))
    for name, text in (("empty.npz", "is empty"), ("trunc.npz", "trunc.npz"), ("miss.npz", "input0"),
                       ("nowhere.npz", "does not exist")):
        rc = run_in_process("xla_infergoldens", [str(model), "--output", str(out), "--inputs", str(tmp_path / name)])
        _one_line(capsys, rc, text)
        assert not out.exists()
    rc = run_in_process("xla_infergoldens", [str(model), "--output", str(out), "--bogus"])
    _one_line(capsys, rc, "xla_infergoldens", "--bogus")
    (tmp_path / "empty.hlo").write_bytes(b"")
    rc = run_in_process("xla_infergoldens", [str(tmp_path / "empty.hlo"), "--output", str(out)])
    _one_line(capsys, rc, "empty.hlo")


def test_infergoldens_over_budget_says_so_and_is_not_success(tmp_path, capsys):
    model = tmp_path / "m.hlo"
    model.write_text(HLO)
    rc = run_in_process("xla_infergoldens", [str(model), "--output", str(tmp_path / "g.npz"), "--size-budget", "4"])
    err = capsys.readouterr().err
    assert rc == 3 and "skipped" in err and "--size-budget" in err
    assert not (tmp_path / "g.npz").exists()


@pytest.mark.parametrize("tool, argv", [
    ("hlo2penguin", ["{model}", "--bogus"]),
    ("hlo-opt", ["{model}", "--bogus"]),
    ("hlo-neff-wrapper", ["{model}", "--neff", "x.neff", "--output", "o.pb", "--bogus"]),
    ("walrus_driver", ["--bogus"]),
    ("full_unroll", ["in.json", "--output", "o.json", "--bogus"]),
    ("coloring_allocator_with_loop", ["in.json", "--output", "o.json", "--bogus"]),
    ("walrus_bugpoint_driver", ["in.json", "--predicate", "verifier", "--bogus"]),
])
def test_unknown_flags_exit_70(tool, argv, tmp_path, capsys):
    model = tmp_path / "m.hlo"
    model.write_text(HLO)
    rc = run_in_process(tool, [a.format(model=model) for a in argv])
    _one_line(capsys, rc, "--bogus")


def test_hlo2penguin_bad_model_writes_nothing(tmp_path, capsys):
    out = tmp_path / "p.json"
    for content, text in ((b"", "empty"), (b"HloModule m\nENTRY e {\n  ROOT r = f32[2] add(p, q)\n}\n", "")):
        (tmp_path / "bad.hlo").write_bytes(content)
        rc = run_in_process("hlo2penguin", [str(tmp_path / "bad.hlo"), "--output", str(out)])
        _one_line(capsys, rc, text)
        assert not out.exists()


def test_launchers_and_neuronx_cc(tmp_path):
    """As programs: the launcher prints the one line, and neuronx-cc's own commands too."""
    r = run_tool("birsim", ["nowhere.neff", "--output", str(tmp_path / "o.npz"), "--bogus"])
    assert r.returncode == 70 and len(r.stderr.strip().splitlines()) == 1 and "--bogus" in r.stderr
    assert "Traceback" not in r.stderr
    (tmp_path / "e.neff").write_bytes(b"")
    for args, text in ((["neff-info", str(tmp_path / "e.neff")], "e.neff"),
                       (["neff-info", str(tmp_path / "none.neff")], "none.neff"),
                       (["neff-info", "--bogus", "x"], "--bogus"),
                       (["compile", str(tmp_path / "none.hlo"), "--framework", "XLA"], "none.hlo")):
        r = run_ncc(args, cwd=str(tmp_path))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 70 and lines and lines[-1].startswith("[NCC_E") and text in lines[-1], r.stderr
        assert "Traceback" not in r.stderr + r.stdout
