"""Compile errors through the CLI: exit 70 and one [NCC_...] line naming the cause, never a traceback."""
import jax
import jax.numpy as jnp
import numpy as np

from support.cli import run_ncc


def _compile(tmp_path, f, *args):
    proto = jax.jit(f).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(proto)
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output",
                 str(tmp_path / "out.neff")], cwd=str(tmp_path))
    return r, [ln for ln in r.stderr.splitlines() if "[NCC_" in ln]


def test_tensor_larger_than_hbm(tmp_path):
    s = jax.ShapeDtypeStruct((100000, 100000), jnp.float32)          # 40 GB > 16 GiB per trn1 core
    r, lines = _compile(tmp_path, lambda a: a * 2.0, s)
    assert r.returncode == 70, r.stderr[-1500:]
    assert lines and "NCC_EOOM001" in lines[-1], r.stderr[-1500:]
    assert "Traceback" not in r.stderr and not (tmp_path / "out.neff").exists()


def test_unsupported_op_names_op_instruction_and_source_line(tmp_path):
    def f(x):           # complex numbers have no on-chip dtype
        return jnp.real(x.astype(jnp.complex64) * 2)
    r, lines = _compile(tmp_path, f, np.ones(8, np.float32))
    assert r.returncode == 70
    assert lines and "'convert'" in lines[-1] and "complex" in lines[-1] and "instruction" in lines[-1]
    assert "test_errors_cli.py:" in lines[-1]
    assert "Traceback" not in r.stderr and not (tmp_path / "out.neff").exists()
