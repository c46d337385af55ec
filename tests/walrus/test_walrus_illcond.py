"""bir_sim on an ill-conditioned program: a tanh recurrence over N(0,1) golden inputs is chaotic,
so the golden itself moves by O(1) under a few ulp of input change. xla_infergoldens records
that sensitivity (``spread{i}``) and bir_sim widens its tolerance by SPREAD_K * spread, so the
correct compile passes (and its NEFF matches jax); a wrong constant in a well-conditioned program
(spread ~0) is still caught (test_walrus_cli.test_bir_sim_catches_an_injected_numerical_bug)."""
import numpy as np

from neuronxcc.walrus.passes.simcheck import SPREAD_K, compare
from support.cli import run_ncc
from neuronxcc.common.tolerances import assert_close


def _rnn(xs, w):
    import jax
    import jax.numpy as jnp
    h, _ = jax.lax.scan(lambda h, x: (jnp.tanh(h @ w + x), None), jnp.zeros(32, xs.dtype), xs)
    return h


def test_chaotic_scan_compiles_and_matches_jax(tmp_path):
    import jax
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((60, 32)).astype(np.float32)
    w = rng.standard_normal((32, 32)).astype(np.float32)
    comp = jax.jit(_rnn).lower(xs, w).compiler_ir("hlo")
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(comp.as_serialized_hlo_module_proto())
    neff = tmp_path / "out.neff"
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(neff),
                 "--pipeline", "compile", "SaveTemps"], cwd=str(tmp_path))
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    logs = "".join(p.read_text(errors="replace") for p in tmp_path.rglob("walrus_driver.log"))
    assert "'output0' is ill-conditioned at the golden inputs" in logs
    goldens = list(tmp_path.rglob("goldens.npz"))
    assert goldens, "no goldens.npz in the work dir"
    with np.load(str(goldens[0])) as z:
        assert "spread0" in z.files and z["spread0"].dtype == np.float32
        assert z["spread0"].shape == z["output0"].shape
        assert float(z["spread0"].max()) > 0.1      # the golden is ill-conditioned at its inputs
    from neuronxcc.starfish.birsim import run_neff
    # well-conditioned inputs for the NEFF check itself (small weights: a contracting recurrence)
    w2 = (0.1 * rng.standard_normal((32, 32))).astype(np.float32)
    out = np.asarray(run_neff(str(neff), [xs, w2])[0], np.float64)
    ref = np.asarray(_rnn(xs, w2), np.float64)
    assert_close(out, ref, row="compiled")


def test_compare_spread_widens_elementwise_only():
    want = np.zeros(4, np.float32)
    got = np.array([0, 0.5, 0, 0], np.float32)
    spread = np.array([0, 0.5 / SPREAD_K + 1e-3, 0, 0], np.float32)
    assert compare("o", got, want, "float32", spread) is None
    msg = compare("o", got, want, "float32", spread[::-1].copy())
    assert msg and "at [1]" in msg and "np.int64" not in msg
    assert compare("o", got, want, "float32") is not None


def test_injected_bug_still_caught_with_spreads_in_the_goldens(tmp_path):
    # the goldens as xla_infergoldens now writes them (spread{i} from a 4-ulp perturbed run):
    # a wrong constant in a well-conditioned program moves the output far beyond its spread
    from neuronxcc.starfish import birpy as B
    from neuronxcc.starfish.birsim import run_module
    from support.cli import run_tool
    from support.walrus_programs import inputs_for, random_program
    m = random_program(2)
    x = inputs_for(m, 0)
    outs = run_module(B.from_json(B.to_json(m)), x)
    rng = np.random.default_rng(1)
    xp = [a * (1 + 4 * np.finfo(np.float32).eps * rng.standard_normal(a.shape)).astype(a.dtype)
          if a.dtype.kind == "f" else a for a in x]
    outs2 = run_module(B.from_json(B.to_json(m)), xp)
    d = {"input%d" % i: a for i, a in enumerate(x)}
    d.update({"output%d" % i: a for i, a in enumerate(outs)})
    d.update({"spread%d" % i: np.abs(a.astype(np.float64) - b.astype(np.float64)).astype(np.float32)
              for i, (a, b) in enumerate(zip(outs, outs2)) if a.dtype.kind == "f"})
    assert any(k.startswith("spread") for k in d)
    np.savez(str(tmp_path / "goldens.npz"), **d)
    ins = next(i for i in m.instructions() if i.opcode in ("tensor_scalar", "activation"))
    if ins.opcode == "tensor_scalar":
        ins.attrs["operand1"] = float(ins.attrs.get("operand1", 0.0)) + 0.25
    else:
        ins.attrs["bias"] = float(ins.attrs.get("bias", 0.0)) + 0.25
    B.save(m, str(tmp_path / "bir.json"))
    r = run_tool("walrus_driver", ["--input", str(tmp_path / "bir.json"), "--output", str(tmp_path / "o.json"),
                                   "--walrus-passes", "lsa,coloring_allocator,anti_dependency_analyzer,bir_sim",
                                   "--goldens", str(tmp_path / "goldens.npz")])
    assert r.returncode == 70
    assert "[NCC_IBSM001]" in r.stderr and "worst |got - want|" in r.stderr and "spread" in r.stderr
    assert "ill-conditioned" not in r.stderr
