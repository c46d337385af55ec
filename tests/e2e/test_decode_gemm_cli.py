"""End to end through the CLI (walrus allocation and scheduling, then birsim) for the two
kernels tests/penguin checks before walrus: the grouped-query decode attention over several key
blocks (penguin/decode_attn.py) and a matmul whose moving side fits SBUF whole with the
pipelined M loop (penguin/gemm.py). One program computes both; each output is compared with
``jax.jit`` through ``neuronxcc.common.tolerances.mismatch``."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from neuronxcc.common.tolerances import mismatch
from support.cli import run_ncc
from support.llama import decode_attention

def program(q, kc, vc, pos, x, w):
    return decode_attention(q, kc, vc, pos), jnp.dot(x, w)


def _args(seed):
    rng = np.random.default_rng(seed)
    bf = ml_dtypes.bfloat16
    return [rng.standard_normal((1, 8, 64)).astype(bf), rng.standard_normal((1536, 2, 64)).astype(bf),
            rng.standard_normal((1536, 2, 64)).astype(bf), np.asarray([1100], np.int32),
            (rng.standard_normal((640, 1024)) / 32).astype(bf), rng.standard_normal((1024, 1024)).astype(bf)]


def test_decode_attention_and_gemm_through_the_cli(tmp_path):
    from neuronxcc.starfish.birsim import run_neff
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(jax.jit(program).lower(*_args(0)).compiler_ir("hlo").as_serialized_hlo_module_proto())
    neff = str(tmp_path / "out.neff")
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", neff],
                cwd=str(tmp_path))
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    args = _args(1)
    outs = run_neff(neff, [np.asarray(a) for a in args])
    ref = [np.asarray(a) for a in jax.jit(program)(*args)]
    assert len(outs) == len(ref)
    problems = ["output%d: %s" % (k, why) for k, (a, e) in enumerate(zip(outs, ref))
                for why in [mismatch(np.asarray(a), e)] if why]
    assert not problems, problems
