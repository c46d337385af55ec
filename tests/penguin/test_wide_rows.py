"""Row fusion of rows longer than rows.ROW_MAX (penguin/rows.py): an RMSNorm over a 4096-wide
hidden state of many tokens is one kernel that reads each row once and reduces it inline, against
jax (bf16 in, fp32 math, the compiled tolerance row); a single 4096-wide row (a decode step) keeps
the materialised two-stage reduce; the live-bytes estimate that gates it counts a [P, 1] column as
4 bytes and a value along the row as N elements; the bf16 rows are read as loaded. Untimed."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from penguin_helpers import check


def _rms_norm(x, w):
    xf = x.astype(jnp.float32)
    r = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + 1e-5)
    return (xf * r * w.astype(jnp.float32)).astype(x.dtype)


def _scratch_reductions(mod):
    """HBM scratch tensors: a reduction materialised between two kernels."""
    return [n for n, t in mod.tensors.items() if t.kind == "scratch"]


def test_wide_rmsnorm_is_one_kernel_and_matches_jax():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 4096)).astype(ml_dtypes.bfloat16)
    w = (1.0 + 0.1 * rng.standard_normal(4096)).astype(ml_dtypes.bfloat16)
    mod = check(_rms_norm, x, w)
    assert not _scratch_reductions(mod), _scratch_reductions(mod)
    # x is read from HBM once: one load of each 128-row tile's whole rows
    loads = [i for i in mod.instructions() if i.opcode == "dma_copy" and i.srcs[0].target == mod.inputs[0]]
    assert loads and all(i.srcs[0].pattern[-1] == [1, 4096] for i in loads), [i.srcs[0].pattern for i in loads]
    # the bf16 rows are read as loaded by the arithmetic (no widening copy of them), and the result
    # is stored by ACT so SP's in-order stream is left to the next tile's loads
    tiles = {i.dsts[0].target for i in loads}
    widen = [i for i in mod.instructions() if i.opcode == "tensor_copy" and i.srcs[0].target in tiles]
    assert not widen, widen[:2]
    stores = [i for i in mod.instructions() if i.opcode == "dma_copy" and i.dsts[0].target == mod.outputs[0]]
    assert stores and all(i.engine == "ACT" for i in stores), [i.engine for i in stores]


def test_one_wide_row_keeps_the_two_stage_reduce():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 4096)).astype(ml_dtypes.bfloat16)
    w = (1.0 + 0.1 * rng.standard_normal(4096)).astype(ml_dtypes.bfloat16)
    mod = check(_rms_norm, x, w)
    assert _scratch_reductions(mod)


def test_peak_row_bytes_counts_columns_as_one_word():
    from neuronxcc.starfish.penguin import rows
    from neuronxcc.starfish.penguin.expr import Node
    from neuronxcc.starfish.penguin.views import Splat, View

    class _Cg:
        rowred = {}
    n = 4096
    x = View("x", "bfloat16", (256, n), (n, 1), 0)
    col = View("c", "float32", (256, n), (1, 0), 0)           # broadcast along the row
    xf = Node("convert", [x], {}, "float32", (256, n))
    a = Node("multiply", [xf, col], {}, "float32", (256, n))
    c2 = Node("add", [col, Splat(1.0, "float32", ())], {}, "float32", (256, n))
    y = Node("multiply", [a, c2], {}, "float32", (256, n))
    # at most x (as fp32 words), xf and a are live along the row at once; col, the splat and c2
    # are columns
    got = rows.peak_row_bytes(_Cg(), y)
    assert 2 * n * 4 <= got <= 3 * n * 4 + 4 * 4, got


def test_wide_rows_need_a_row_for_every_partition():
    from neuronxcc.starfish.penguin import rows
    assert rows.lazy_width_ok(2048, 1)
    assert not rows.lazy_width_ok(4096, 1)
    assert rows.lazy_width_ok(4096, 2048)
    assert not rows.lazy_width_ok(rows.ROW_WIDE_MAX + 1, 2048)



def test_a_bitcast_of_a_row_read_as_loaded_sees_the_wide_bits():
    # the widened bf16 row is still a 2-byte tile; a bitcast of it to int32 must read fp32 words
    def f(x):
        y = x.astype(jnp.float32)
        s = jnp.mean(y * y, axis=-1, keepdims=True)
        b = jax.lax.bitcast_convert_type(y, jnp.int32) >> 16
        return (y * jax.lax.rsqrt(s + 1e-5)).astype(jnp.bfloat16), b + (s > 0).astype(jnp.int32)
    x = np.random.default_rng(3).standard_normal((128, 4096)).astype(ml_dtypes.bfloat16)
    check(f, x)
