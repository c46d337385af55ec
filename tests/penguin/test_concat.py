"""A concatenation along the last axis of elementwise pieces is built on chip (penguin/concat.py):
the Llama rotary embedding (rotate-half, cos / sin tables from positions) on q-shaped input,
against jax (bf16 in, fp32 math, compiled tolerance row); one staging tile per 128 rows is stored
as whole rows instead of one narrow store per head and piece, and each piece is computed for all
heads at once. Untimed."""
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from penguin_helpers import check, rotary as _rotary


def _stack(a, b):
    return jnp.concatenate([a * 2.0, b + 1.0], axis=0)


def test_rotary_concatenation_is_built_on_chip_and_matches_jax():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((260, 4, 64)).astype(ml_dtypes.bfloat16)     # 128 + 128 + 4 rows
    mod = check(_rotary, x)
    stages = [m for m in mod.memlocs if m.startswith("cat_out")]
    assert stages, sorted(mod.memlocs)[:20]
    # the result rows leave the chip whole: each store writes H * D contiguous elements per row
    stores = [i for i in mod.instructions() if i.opcode == "dma_copy" and i.srcs[0].target in stages]
    assert stores and all(i.dsts[0].pattern[-1] == [1, 4 * 64] for i in stores), [i.dsts[0].pattern for i in stores]
    # each piece is computed for all heads at once: what fills the staging tile covers every head's
    # half-row (4 heads x 32 columns), not one head's 32 columns per instruction
    fills = [i for i in mod.instructions() if i.opcode != "dma_copy" and i.dsts and i.dsts[0].target in stages]
    assert fills and all(i.dsts[0].free_size == 4 * 32 for i in fills), [i.dsts[0].pattern for i in fills]
    # the bf16 rows are read by the arithmetic as they were loaded (engines compute in fp32): no
    # copy widens them first
    srcs = {m for m in mod.memlocs if m.startswith("cat_src")}
    copies = [i for i in mod.instructions() if i.opcode in ("tensor_copy", "activation")
              and any(a.target in srcs for a in i.srcs)]
    assert not copies, copies[:3]


def test_concatenation_along_a_leading_axis_keeps_the_copy_kernels():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 3, 32)).astype(np.float32)
    b = rng.standard_normal((64, 3, 32)).astype(np.float32)
    mod = check(_stack, a, b)
    assert not [m for m in mod.memlocs if m.startswith("cat_out")]
