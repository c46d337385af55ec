"""run_neff and the birsim tool on NEFFs written by neuronxcc.neff (Kelper)."""
import json

import numpy as np
import pytest

from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import run_neff
from support.cli import run_tool
from birsim.birsim_helpers import rand

neff = pytest.importorskip("neuronxcc.neff")


def _module():
    m = B.Module("addc")
    m.add_tensor("x", "input", "float32", (128, 32))
    m.add_tensor("w", "input", "bfloat16", (128, 32))
    m.add_tensor("c", "const", "float32", (128, 32), data=np.full((128, 32), 0.25, np.float32))
    m.add_tensor("y", "output", "float32", (128, 32))
    m.add_tensor("z", "output", "bfloat16", (128, 32))
    for n in ("a", "b", "cc"):
        m.add_memloc(n, "SBUF", 128, 128)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("a")], [b.ap("x")], queue="q0", signals=[("q0", 1)])
    b.inst("dma_copy", "ACT", [b.ap("b")], [b.ap("w")], queue="q1", signals=[("q1", 1)])
    b.inst("dma_copy", "POOL", [b.ap("cc")], [b.ap("c")], queue="q2", signals=[("q2", 1)])
    b.inst("tensor_tensor", "DVE", [b.ap("a")], [b.ap("a"), b.ap("b")], op="mult",
           waits=[("q0", 1), ("q1", 1)], signals=[("DVE", 1)])
    b.inst("tensor_tensor", "DVE", [b.ap("a")], [b.ap("a"), b.ap("cc")], op="add", waits=[("q2", 1)],
           signals=[("DVE", 1)])
    b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("a")], queue="q0", waits=[("DVE", 2)])
    b.inst("dma_copy", "SP", [b.ap("z", dtype="bfloat16")], [b.ap("a")], queue="q1", waits=[("DVE", 2)])
    b.finish()
    B.verify(m)
    return m


def _inputs():
    import ml_dtypes
    return rand((128, 32), 1), rand((128, 32), 2).astype(ml_dtypes.bfloat16)


def test_run_neff_matches_numpy(tmp_path):
    import ml_dtypes
    path = str(tmp_path / "m.neff")
    neff.write_neff(path, _module())
    x, w = _inputs()
    y, z = run_neff(path, [x, w])
    ref = x * w.astype(np.float32) + np.float32(0.25)
    np.testing.assert_array_equal(y, ref)
    np.testing.assert_array_equal(z.view(np.uint16), ref.astype(ml_dtypes.bfloat16).view(np.uint16))


def test_birsim_tool(tmp_path):
    path = str(tmp_path / "m.neff")
    neff.write_neff(path, _module())
    x, w = _inputs()
    np.savez(tmp_path / "in.npz", input0=x, input1=w)
    r = run_tool("birsim", [path, "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz"),
                            "--trace", str(tmp_path / "t.json")], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    with np.load(tmp_path / "out.npz") as z:
        assert sorted(z.files) == ["output0", "output1"]
        np.testing.assert_array_equal(z["output0"], x * w.astype(np.float32) + np.float32(0.25))
    doc = json.loads((tmp_path / "t.json").read_text())
    tracks = {e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "thread_name"}
    assert {"DMA:q0", "DMA:q1", "DMA:q2", "DVE"} <= tracks
    assert sum(1 for e in doc["traceEvents"] if e["ph"] == "X") == 7


def test_birsim_tool_errors_exit_70_one_line(tmp_path):
    path = str(tmp_path / "m.neff")
    neff.write_neff(path, _module())
    np.savez(tmp_path / "in.npz", input0=rand((128, 32), 1))
    r = run_tool("birsim", [path, "--inputs", str(tmp_path / "in.npz"), "--output", str(tmp_path / "o.npz")])
    assert r.returncode == 70 and r.stderr.count("\n") == 1 and "[NCC_EINP001]" in r.stderr
    assert "input1" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "bad.neff").write_bytes(b"not a neff" * 200)
    r = run_tool("birsim", [str(tmp_path / "bad.neff"), "--output", str(tmp_path / "o.npz")])
    assert r.returncode == 70 and r.stderr.startswith("[NCC_") and "Traceback" not in r.stderr
    assert not (tmp_path / "o.npz").exists()


def test_run_neff_applies_io_transposes(tmp_path):
    # the program stores its input and output transposed: y_stored[j, i] = 2 * x_stored[j, i]
    m = B.Module("iot")
    m.add_tensor("x", "input", "float32", (8, 4))          # stored = logical [4, 8] transposed
    m.add_tensor("y", "output", "float32", (8, 4))
    m.add_memloc("a", "SBUF", 8, 16)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("a")], [b.ap("x")])
    b.inst("tensor_scalar", "DVE", [b.ap("a")], [b.ap("a")], op0="mult", operand0=2.0)
    b.inst("dma_copy", "SP", [b.ap("y")], [b.ap("a")])
    b.finish()
    iot = {"version": 1, "transposes": [{"name": "x", "kind": "input", "shape": [4, 8], "permutation": [1, 0]},
                                        {"name": "y", "kind": "output", "shape": [4, 8], "permutation": [1, 0]}]}
    path = str(tmp_path / "t.neff")
    neff.write_neff(path, m, io_transposes=iot)
    x = rand((4, 8), 3)
    (y,) = run_neff(path, [x])
    np.testing.assert_array_equal(y, 2 * x)
