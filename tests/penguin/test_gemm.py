"""Matmuls whose moving side fits SBUF whole per super-tile (penguin/gemm.py): each operand
crosses HBM once, R is K-permuted in long runs, the first tiles take R's parts as they arrive, and
the results match jax within the compiled tolerance row. Untimed: structure and numerics only."""
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from penguin_helpers import penguin_of


def _mm(x, w):
    return jnp.dot(x, w)


def _bias_relu(x, w, b):
    return jnp.maximum(jnp.dot(x, w) + b, 0)


def _lower(f, *args, mm_fusion=True):
    from neuronxcc.starfish.penguin.codegen import Codegen
    cg = Codegen(penguin_of(f, *args))
    cg.mm_fusion = mm_fusion
    mod = cg.run()
    return getattr(cg, "mm_gemm", 0), mod


def _check_sim(mod, f, *args):
    from neuronxcc.starfish.birsim.sim import simulate
    from penguin_helpers import assert_close, jax_outputs
    res = simulate(mod, list(args))
    assert_close(res.outputs[0], jax_outputs(f, *args)[0], "output0", row="compiled")
    return res


# (M, K, N, dtype): two M tiles (the peeled pair only, R in two K parts), five (the first three tiles
# K part by K part, L two tiles ahead) and eight (two first tiles, then the pipelined loop and its tail,
# four K parts), f32 with two N super-tiles (L one tile ahead)
@pytest.mark.parametrize("m,k,n,dt", [(256, 256, 512, ml_dtypes.bfloat16), (640, 1024, 1024, ml_dtypes.bfloat16),
                                      (1024, 1024, 1024, ml_dtypes.bfloat16), (768, 512, 2048, np.float32)])
def test_gemm_matches_jax_and_moves_each_operand_once(m, k, n, dt):
    rng = np.random.default_rng(m + k + n)
    x = (rng.standard_normal((m, k)) * k ** -0.5).astype(dt)
    w = rng.standard_normal((k, n)).astype(dt)
    used, mod = _lower(_mm, x, w)
    assert used == 1
    res = _check_sim(mod, _mm, x, w)
    # x crosses HBM once per N super-tile, w and the result once (no operand is loaded twice)
    supers = 2 if n > 1024 else 1
    assert res.counts["dma_bytes"] == (m * k * supers + k * n + m * n) * np.dtype(dt).itemsize


@pytest.mark.parametrize("m", [384, 896])
def test_gemm_epilogue_matches_jax(m):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((m, 512)) * 512 ** -0.5).astype(ml_dtypes.bfloat16)
    w = rng.standard_normal((512, 512)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((512,)).astype(ml_dtypes.bfloat16)
    # the row-tile matmul fusion (penguin/mmfuse.py) takes this chain first; without it the bias and
    # relu reach the kernel as its eviction epilogue
    used, mod = _lower(_bias_relu, x, w, b, mm_fusion=False)
    assert used == 1
    _check_sim(mod, _bias_relu, x, w, b)


def test_gemm_instruction_count_flat_in_m():
    import jax
    counts = []
    for m in (1152, 2176):      # 9 and 17 M tiles: the same loop and tail
        args = [jax.ShapeDtypeStruct((m, 1024), jnp.bfloat16), jax.ShapeDtypeStruct((1024, 1024), jnp.bfloat16)]
        counts.append(len(_lower(_mm, *args)[1].instructions()))
    assert counts[0] == counts[1], counts
