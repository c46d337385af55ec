"""How many BIR instructions birsim executes for programs whose lowering once multiplied them: flat
elementwise runs spread over the partitions, and shifts whose amount is provably in range lowered
to the plain shift. Counts are structural bounds on the executed stream (deterministic), and every
case also checks the results against JAX."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from neuronxcc.starfish.birsim import simulate
from neuronxcc.starfish.penguin.kernels import PMAX, flat_rows
from penguin_helpers import assert_close, bir_of, jax_outputs


def _run(f, *args):
    mod = bir_of(f, *args)
    res = simulate(mod, list(args))
    exp = jax_outputs(f, *args)
    assert len(res.outputs) == len(exp)
    for k, (a, e) in enumerate(zip(res.outputs, exp)):
        assert_close(a, e, "output%d" % k, row="compiled")
    return mod, res


def _compute(mod):
    return [i for i in mod.instructions() if not i.opcode.startswith("dma_") and i.dsts
            and i.dsts[0].num_partitions is not None]


def test_flat_rows_picks_a_divisor_near_128():
    assert flat_rows(78000) == 125          # 260 x 300
    assert flat_rows(256) == 128
    assert flat_rows(100) == 1              # fits one partition's free dim already
    assert flat_rows(2 * 1031) == 1         # no divisor in [64, 128]


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.float32])
def test_contiguous_elementwise_not_divisible_by_128_uses_the_partitions(dt):
    # [260, 300] collapses to 78000 contiguous elements, not a multiple of 128: it used to run as 312
    # one-partition steps of 250 elements (4 instructions each); now one step of 125 x 624
    r = np.random.default_rng(0)
    a = r.integers(-1000, 1000, (260, 300)).astype(dt)
    b = r.integers(-1000, 1000, (260, 300)).astype(dt)
    f = (lambda a, b: a ^ b) if dt != np.float32 else (lambda a, b: a + b)
    mod, res = _run(f, a, b)
    assert res.instructions <= 16, res.instructions
    assert min(i.dsts[0].num_partitions for i in _compute(mod)) >= 64


def test_long_run_without_a_divisor_is_a_full_head_and_a_short_tail():
    n = 2 * 1031                            # 2 x prime: no divisor in [64, 128]
    r = np.random.default_rng(1)
    a = r.integers(-50, 50, (n,)).astype(np.int32)
    b = r.integers(-50, 50, (n,)).astype(np.int32)
    mod, res = _run(lambda a, b: a * b + lax.iota(jnp.int32, n), a, b)
    parts = sorted(i.dsts[0].num_partitions for i in _compute(mod))
    assert parts[-1] == PMAX and parts[0] >= 1
    assert res.instructions <= 24, res.instructions
