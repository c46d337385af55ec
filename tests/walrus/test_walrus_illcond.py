"""bir_sim on an ill-conditioned program: a tanh recurrence over N(0,1) golden inputs is chaotic,
so the golden itself moves by O(1) under a few ulp of input change. xla_infergoldens records
that sensitivity (``spread{i}``) and bir_sim widens its tolerance by SPREAD_K * spread, so the
correct compile passes (and its NEFF matches jax); a wrong constant in a well-conditioned program
(spread ~0) is still caught (test_walrus_cli.test_bir_sim_catches_an_injected_numerical_bug)."""
import numpy as np

from neuronxcc.walrus.passes.simcheck import SPREAD_K, compare
from support.cli import run_ncc


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
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5)


def test_compare_spread_widens_elementwise_only():
    want = np.zeros(4, np.float32)
    got = np.array([0, 0.5, 0, 0], np.float32)
    spread = np.array([0, 0.5 / SPREAD_K + 1e-3, 0, 0], np.float32)
    assert compare("o", got, want, "float32", spread) is None
    msg = compare("o", got, want, "float32", spread[::-1].copy())
    assert msg and "at [1]" in msg and "np.int64" not in msg
    assert compare("o", got, want, "float32") is not None
