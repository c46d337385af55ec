"""Codegen against the honest cost model: layouts that keep DMAs large and contiguous (PE
transposes instead of one-element descriptors), checked on the BIR and, for numbers, in birsim."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from neuronxcc.hwm import get_target
from neuronxcc.starfish.birpy.cost import dma_shape
from neuronxcc.starfish.birsim import simulate
from penguin_helpers import assert_close, bir_of, jax_outputs

TM = get_target("trn1")


def _dma_runs(mod):
    """Bytes per descriptor of every DMA in MOD."""
    out = []
    for i in mod.instructions():
        if i.opcode.startswith("dma_"):
            nbytes, runs, _, _ = dma_shape(i, mod, TM)
            out.append(nbytes / runs)
    return out


@pytest.mark.parametrize("dt", ["float32", "bfloat16"])
def test_row_major_matmul_transposes_on_the_pe(dt):
    n = 256
    s = jax.ShapeDtypeStruct((n, n), getattr(jnp, dt))
    mod = bir_of(lambda x, w: x @ w, s, s)
    ops = [(i.opcode, i.engine) for i in mod.instructions()]
    assert ("transpose", "PE") in ops
    runs = _dma_runs(mod)
    assert min(runs) >= 128 * np.dtype(ml_dtypes.bfloat16 if dt == "bfloat16" else np.float32).itemsize
    rng = np.random.default_rng(0)
    npdt = ml_dtypes.bfloat16 if dt == "bfloat16" else np.float32
    x, w = [(rng.standard_normal((n, n)) / 4).astype(npdt) for _ in range(2)]
    res = simulate(mod, [x, w])
    assert_close(res.outputs[0], jax_outputs(lambda x, w: x @ w, x, w)[0], "x @ w")
    assert res.counts["pe_transposes"] >= (n // 128) ** 2 and res.counts["matmuls"] >= (n // 128) ** 2


def _executions(nodes, mult=1):
    """(instruction, times it executes) over NODES, loops expanded by their trip counts."""
    for n in nodes:
        if n.kind == "inst":
            yield n, mult
        else:
            yield from _executions(n.body, mult * getattr(n, "trip_count", 1))


@pytest.mark.parametrize("m,k,n", [(4, 1024, 6144)])
def test_few_rows_matmul_streams_the_weight_in_large_runs(m, k, n):
    # a few rows times a large weight: the weight is read once, 128 rows of >= 4 KiB per DMA
    s = [jax.ShapeDtypeStruct((m, k), jnp.bfloat16), jax.ShapeDtypeStruct((k, n), jnp.bfloat16)]
    mod = bir_of(lambda x, w: x @ w, *s)
    weight_dmas = [i for i in mod.instructions() if i.opcode == "dma_copy" and i.srcs[0].target == "input1"]
    assert weight_dmas
    for i in weight_dmas:
        nbytes, runs, _, _ = dma_shape(i, mod, TM)
        assert runs == 128 and nbytes / runs >= 4096
    rng = np.random.default_rng(2)
    x, w = [(rng.standard_normal(a.shape) / 8).astype(ml_dtypes.bfloat16) for a in s]
    assert_close(simulate(mod, [x, w]).outputs[0], jax_outputs(lambda x, w: x @ w, x, w)[0], "x @ w")


@pytest.mark.parametrize("k,n,dt,epilogue", [(512, 4096, "bfloat16", False), (4096, 4096, "bfloat16", False),
                                             (2048, 14336, "bfloat16", True), (1024, 2048, "float32", True),
                                             (256, 32768, "bfloat16", True), (256, 20480, "bfloat16", False),
                                             (4096, 1024, "bfloat16", False)])
def test_decode_matvec_streams_the_weight_once_in_long_runs_over_balanced_queues(k, n, dt, epilogue):
    # one row times a large weight (the decode step): the weight is the PE's stationary side, so
    # a weight DMA is whole rows: one contiguous run of >= 16 KiB (>= 28 KiB at Llama's FFN width)
    # per partition, 128 per DMA; every weight byte crosses HBM once; the K loop's weight DMAs
    # alternate between two queues with equal bytes; every 128x128 weight tile is one matmul
    d = getattr(jnp, dt)
    isz = np.dtype(ml_dtypes.bfloat16 if dt == "bfloat16" else np.float32).itemsize
    s = [jax.ShapeDtypeStruct((1, k), d), jax.ShapeDtypeStruct((k, n), d)]
    s += [jax.ShapeDtypeStruct((n,), d)] if epilogue else []

    def f(x, w, *b):
        return jax.nn.silu(x @ w + b[0]) if b else x @ w
    mod = bir_of(f, *s)
    per_queue, nbytes_all, ndma = {}, 0, 0
    for i, times in _executions(mod.body):
        if i.opcode == "dma_copy" and i.srcs[0].target == "input1":
            nbytes, runs, _, _ = dma_shape(i, mod, TM)
            assert runs == 128 and nbytes / runs >= min(16384, k * n * isz // 128), (nbytes, runs)
            if 16384 <= n * isz <= 32768:
                assert nbytes / runs >= n * isz        # whole rows while one fits the buffer
            per_queue[i.attrs["queue"]] = per_queue.get(i.attrs["queue"], 0) + nbytes * times
            nbytes_all += nbytes * times
            ndma += times
    assert nbytes_all == k * n * isz
    assert ndma <= max(1, k * n * isz // (128 * 16384))
    if ndma >= 3:
        assert len(per_queue) >= 2 and max(per_queue.values()) <= 0.5 * nbytes_all, per_queue
    mms = sum(t for i, t in _executions(mod.body) if i.opcode == "matmul")
    assert mms == (k // 128) * (n // 128)
    rng = np.random.default_rng(2)
    npdt = ml_dtypes.bfloat16 if dt == "bfloat16" else np.float32
    args = [(rng.standard_normal(a.shape) / 8).astype(npdt) for a in s]
    assert_close(simulate(mod, args).outputs[0], jax_outputs(f, *args)[0], "f")


def test_dynamic_update_slice_copies_its_operand_hbm_to_hbm_over_queues():
    # the KV-cache update of a decode step: the 4 MiB operand copy is a few direct HBM->HBM DMAs
    # on different queues (each byte moved once, runs of whole rows), not [128, 1024] SBUF trips
    cache = jax.ShapeDtypeStruct((2048, 8, 128), jnp.bfloat16)
    upd = jax.ShapeDtypeStruct((1, 8, 128), jnp.bfloat16)
    pos = jax.ShapeDtypeStruct((), jnp.int32)

    def f(c, u, p):
        return jax.lax.dynamic_update_slice(c, u, (p, 0, 0))
    mod = bir_of(f, cache, upd, pos)
    reads = [(i, t) for i, t in _executions(mod.body) if i.opcode == "dma_copy" and i.srcs[0].target == "input0"]
    assert reads and len(reads) <= 4 and len({i.attrs["queue"] for i, _ in reads}) == len(reads)
    nbytes_all = 0
    for i, t in reads:
        assert mod.memory_of(i.dsts[0]) == "HBM"
        nbytes, runs, _, _ = dma_shape(i, mod, TM)
        assert nbytes / runs >= 2048
        nbytes_all += nbytes * t
    assert nbytes_all == 2048 * 8 * 128 * 2
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(cache.shape).astype(ml_dtypes.bfloat16),
            rng.standard_normal(upd.shape).astype(ml_dtypes.bfloat16), np.int32(77)]
    np.testing.assert_array_equal(simulate(mod, args).outputs[0], jax_outputs(f, *args)[0])


def _scalar_load_runs(mod, name):
    """Descriptors of each DMA that reads HBM tensor NAME (a scalar parameter)."""
    return [dma_shape(i, mod, TM)[1] for i in mod.instructions()
            if i.opcode == "dma_copy" and i.srcs[0].target == name]


@pytest.mark.parametrize("dt", ["float32", "int32", "uint32"])
def test_broadcast_scalar_loads_one_element_per_partition_exactly(dt):
    # a scalar broadcast over a tile (RMSNorm's 1/rms, the decode mask's position) is a [P,1]
    # column: one descriptor per partition, not one per element; integer columns stay exact
    # (values above 2^24 through POOL's integer ALU, not DVE's fp32)
    npdt = np.dtype(dt)
    x = jax.ShapeDtypeStruct((256, 512), getattr(jnp, dt))
    s = jax.ShapeDtypeStruct((), getattr(jnp, dt))
    if dt == "float32":
        def f(x, s):
            return x * s
    else:
        def f(x, s):
            return jnp.where(x <= s, x, s), (x == s).astype(jnp.int32)
    mod = bir_of(f, x, s)
    runs = _scalar_load_runs(mod, "input1")
    assert runs and max(runs) <= 128, runs
    rng = np.random.default_rng(5)
    if dt == "float32":
        args = [rng.standard_normal(x.shape).astype(npdt), np.float32(1.5)]
    else:
        big = (1 << 24) + 3 if dt == "int32" else (1 << 31) + 5
        xa = (big + rng.integers(-4, 4, x.shape)).astype(npdt)
        args = [xa, npdt.type(big)]
    got = simulate(mod, args).outputs
    for g, w in zip(got, jax_outputs(f, *args)):
        np.testing.assert_array_equal(g, w)


def test_k_contiguous_moving_side_and_broadcast_loads_keep_descriptors_large():
    # x @ w.T: the moving side lies K-contiguous (as K^T of attention scores does); it is loaded
    # as it lies and transposed on the PE, not moved one element per descriptor. The causal mask's
    # row iota inside the loops is one element per partition, not one per element.
    n = 260

    def f(x, w):
        y = x @ w.T
        return jnp.where(jnp.arange(n)[:, None] >= jnp.arange(n)[None, :], y, 0.0)

    s = jax.ShapeDtypeStruct((n, n), jnp.float32)
    mod = bir_of(f, s, s)
    # every DMA moves runs of >= 128 bytes, except the [P,1] iota columns (one element per partition)
    for i in mod.instructions():
        if i.opcode.startswith("dma_"):
            nbytes, runs, _, _ = dma_shape(i, mod, TM)
            chip = i.dsts[0] if not i.dsts[0].is_hbm else i.srcs[0]
            if chip.pattern != [[1, 1]]:
                assert nbytes / runs >= 128, (str(i.srcs[0]), str(i.dsts[0]), nbytes / runs)
    assert sum(1 for i in mod.instructions() if i.opcode == "transpose" and i.engine == "PE") >= 3
    rng = np.random.default_rng(3)
    x, w = [(rng.standard_normal((n, n)) / 4).astype(np.float32) for _ in range(2)]
    res = simulate(mod, [x, w])
    assert_close(res.outputs[0], jax_outputs(f, x, w)[0], "mask(x @ w.T)")


def test_tile_choice_fills_the_partitions():
    from neuronxcc.starfish.penguin.emit import choose_tile
    assert choose_tile(260, 128) == 128      # 128 + 128 + 4, not 4 x 65
    assert choose_tile(16000, 256) == 250    # a divisor when it costs at most 1/8 more tiles
    assert choose_tile(300, 128) == 100
