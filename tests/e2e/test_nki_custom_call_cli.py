"""NKI kernels inside compiled programs: ``neuronx-cc compile`` on HLO holding AwsNeuronCustomNativeKernel
custom-calls (placed as torch-xla places them: inside ``call``ed computations; and with an in-place
output), the kernel's BIR spliced into the program, walrus over the whole, bir_sim against the goldens,
the NEFF run on birsim with fresh inputs and compared with numpy. A backend_config of the closed compiler
fails the compile with one [NCC_ENKC001] line and exit 70."""
import base64
import json

import numpy as np

from support import nki_fragments as F
from support.cli import run_ncc
from neuronxcc.common.tolerances import assert_close


def _compile(tmp_path, text):
    model = tmp_path / "model.hlo"
    model.write_text(text)
    neff = tmp_path / "out.neff"
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(neff)],
                cwd=str(tmp_path))
    return r, neff


def _run(neff, args):
    from neuronxcc.starfish.birsim import run_neff
    return run_neff(str(neff), args)


def test_kernel_in_called_computations_compiles_and_runs(tmp_path):
    r, neff = _compile(tmp_path, F.hlo_text_two_calls())
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    p0, p1 = F.random_inputs(7, (128, 64), (128, 64))
    out, = _run(neff, [p0, p1])
    assert_close(out, F.two_calls_reference(p0, p1), row="compiled")


def test_kernel_with_in_place_output(tmp_path):
    r, neff = _compile(tmp_path, F.hlo_text_aliased())
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    x, o = F.random_inputs(8, (128, 64), (128, 64))
    out, = _run(neff, [x, o])
    assert_close(out, F.aliased_reference(x, o), row="compiled")


def test_closed_compiler_kernel_is_one_error_line(tmp_path):
    cfg = base64.b64encode(json.dumps({"kernel_version": 1, "func_name": "nki_matmul",
                                       "klir_binary": {"binary": "/home/u/k/nki_matmul.klir"}}).encode()).decode()
    r, neff = _compile(tmp_path, F.hlo_text_foreign(cfg))
    assert r.returncode == 70, r.stderr[-2000:]
    lines = [ln for ln in r.stderr.splitlines() if "[NCC_" in ln]
    assert len(lines) == 1 and lines[0].startswith("[NCC_ENKC001]"), r.stderr[-2000:]
    assert "nki_matmul.klir" in lines[0] and "model.py:12" in lines[0]
    assert "Traceback" not in r.stderr and not neff.exists()


def test_attention_isa_kernel_as_torch_xla_places_it(tmp_path):
    """NxD-Inference's call, traced by our nki: attention_isa_kernel(q, k, v, scale, out, kernel_name=...) with
    out mutated, inside a ``call``ed computation; the compiled program's out is the attention."""
    from neuronxcc.nki._private_kernels.attention import attention_isa_kernel
    from neuronxcc.nki._trace import trace_kernel
    from support import nki_attention_refs as R
    bh, d, s = 2, 64, 256
    q, k, v = F.random_inputs(10, (bh, d, s), (bh, d, s), (bh, s, d))
    out0 = np.zeros((bh, s, d), np.float32)
    tk = trace_kernel(attention_isa_kernel, [q, k, v, 0.125, out0],
                      {"kernel_name": "CausalAttentionMMSoftmaxMMWithoutSwap"})
    r, neff = _compile(tmp_path, F.hlo_text_torch_style(tk))
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    q2, k2, v2 = F.random_inputs(11, (bh, d, s), (bh, d, s), (bh, s, d))
    out, = _run(neff, [q2, k2, v2, out0])
    sc = R.scores(q2, k2, 0.125, True)
    p = np.exp(sc - sc.max(-1, keepdims=True))
    assert_close(out, (p / p.sum(-1, keepdims=True)) @ v2.astype(np.float64), row="compiled")


def test_bir_sim_catches_a_kernel_bound_to_the_wrong_tensors(tmp_path):
    """The goldens hold the kernel's own value, so bir_sim checks the splice: the same program with the kernel's
    two operands swapped in the Penguin IR compiles through walrus but fails bir_sim ([NCC_IBSM001])."""
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish import birpy
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    from support.cli import run_tool
    text = F.hlo_text_two_calls()
    (tmp_path / "model.hlo").write_text(text)
    r = run_tool("xla_infergoldens", ["model.hlo", "--output", "goldens.npz"], cwd=str(tmp_path))
    assert r.returncode == 0, r.stderr
    passes = "lsa,pre_sched,coloring_allocator,post_sched,birverifier,bir_sim"
    for swap in (False, True):
        g = hlo_to_penguin(parse_hlo_text(text))
        ops = [op for op in g.ops if op.kind == "nki_kernel"]
        assert len(ops) == 2
        if swap:
            ops[0].attrs["input_names"] = list(reversed(ops[0].attrs["input_names"]))
        birpy.save(lower_graph(g), str(tmp_path / "bir.json"))
        r = run_tool("walrus_driver", ["--input", "bir.json", "--output", "w.json", "--walrus-passes", passes,
                                       "--goldens", "goldens.npz"], cwd=str(tmp_path))
        if not swap:
            assert r.returncode == 0, r.stderr[-2000:]
        else:
            assert r.returncode == 70 and "NCC_IBSM001" in r.stderr, r.stderr[-2000:]
