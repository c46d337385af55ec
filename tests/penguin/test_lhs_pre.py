"""The stationary side of a large matmul transposed once into HBM (penguin/lhs_pre.py): a SwiGLU
FFN whose weights are too large to stay resident whole (several N tiles) reads x^T and h^T from
pre-transposed scratches, w1 and w3 share x's, the PE transposes each value once instead of once
per N tile, and the result matches jax (bf16, compiled tolerance row). Untimed."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

from penguin_helpers import check


def swiglu(x, w1, w3, w2):
    a = x @ w1
    b = x @ w3
    return (jax.nn.silu(a.astype(jnp.float32)).astype(x.dtype) * b) @ w2


def test_swiglu_reads_pretransposed_activations_and_matches_jax():
    rng = np.random.default_rng(0)
    M, H, F = 512, 1024, 3072          # w1/w3: 3 N tiles of 1024 (two PSUM banks); w2: one N tile
    bf = ml_dtypes.bfloat16
    x = rng.standard_normal((M, H)).astype(bf)
    w1 = (rng.standard_normal((H, F)) / np.sqrt(H)).astype(bf)
    w3 = (rng.standard_normal((H, F)) / np.sqrt(H)).astype(bf)
    w2 = (rng.standard_normal((F, H)) / np.sqrt(F)).astype(bf)
    mod = check(swiglu, x, w1, w3, w2)
    pre = [t for t in mod.tensors if t.startswith("lhsT_pre")]
    # x^T, shared by w1 and w3; w2's one N tile transposes h^T in its own M loop, once
    assert len(pre) == 1, pre
    from neuronxcc.starfish import birsim
    res = birsim.simulate(mod, [x, w1, w3, w2])
    # one 128x128 transpose per tile of x (4 x 8) and of h (4 x 24); per N tile it would be 3*32*2 + 96
    assert res.counts["pe_transposes"] == 4 * 8 + 4 * 24, res.counts



def _long_k(x, w):
    return x @ w


def _long_k_residual(x, w, r):
    return (r.astype(jnp.float32) + x @ w).astype(jnp.bfloat16)


def test_long_k_matmul_splits_k_and_matches_jax():
    """K = 10240 bf16 (penguin/splitk.py): the double-buffered resident tile would be 256 columns;
    two K halves of 512-column tiles, the first half's fp32 products added on the second's
    evicted tile, with and without a fused epilogue (a residual add and the cast)."""
    rng = np.random.default_rng(1)
    M, K, N = 256, 10240, 1024
    bf = ml_dtypes.bfloat16
    x = rng.standard_normal((M, K)).astype(bf)
    w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(bf)
    r = rng.standard_normal((M, N)).astype(bf)
    for fn, args in ((_long_k, (x, w)), (_long_k_residual, (x, w, r))):
        mod = check(fn, *args)
        assert [t for t in mod.tensors if t.startswith("splitk")]
        mm = [i for i in mod.instructions() if i.opcode == "matmul"]
        assert mm and {i.srcs[1].free_size for i in mm} == {512}


def _proj(x, w):
    return x @ w


def test_resident_moving_side_loads_in_chunks_and_matches_jax():
    """penguin/reschunk.py: with L^T pre-transposed and the resident R tile wider than one chunk,
    R (all of K for one N tile) is loaded as several whole-K-tile transfers, on their own queue and
    triggered from GpSimd; with two K groups (bf16 here) each chunk has a buffer of its own and the
    K groups read the chunk holding each tile; a K needing more groups than reschunk.MAX_GROUPS
    keeps the single transfer."""
    from neuronxcc.starfish.penguin import reschunk
    rng = np.random.default_rng(2)
    bf = ml_dtypes.bfloat16
    M, K, N = 256, 2048, 1536
    x = rng.standard_normal((M, K)).astype(bf)
    w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(bf)
    mod = check(_proj, x, w)
    res = [i for i in mod.instructions() if i.opcode == "dma_copy" and i.dsts[0].target.startswith("rhs_res")]
    assert res and all(i.engine == reschunk.ENGINE and i.attrs["queue"] == reschunk.QUEUE for i in res)
    bufs = {i.dsts[0].target for i in res}
    assert 2 <= len(bufs) <= reschunk.MAX_CHUNKS, bufs
    # two N tiles of 768 columns, each over two PSUM banks: each stationary tile feeds both banks
    assert {i.srcs[1].free_size for i in mod.instructions() if i.opcode == "matmul"} == {512, 256}
    mm = [i for i in mod.instructions() if i.opcode == "matmul"]
    assert {i.srcs[1].target for i in mm} == bufs          # every chunk feeds the PE, nothing else does
    # the planner: one transfer when K needs too many groups, or the tile is narrow
    assert reschunk.plan(8192 * 4, 128, 2, 512, 2, 1) is None
    assert reschunk.plan(4096, 128, 16, 2, 2, 1) is None
    assert reschunk.plan(4096, 128, 16, 512, 2, 1) == 4


def _in_loop(mod, pred):
    """Instructions satisfying pred, each with the number of Loops around it."""
    out = []

    def walk(body, depth):
        for n in body:
            if n.kind == "inst":
                if pred(n):
                    out.append((n, depth))
            elif hasattr(n, "body"):
                walk(n.body, depth + (n.kind == "loop"))
    walk(mod.body, 0)
    return out


def test_next_resident_tile_loads_inside_the_m_loop_and_matches_jax():
    """penguin/respipe.py: two N tiles of 1024 with L^T pre-transposed go as one pair, each with a
    resident buffer of its own; the first tile's R is loaded up front, and every M step of one
    tile loads its share of the other buffer's K tiles (for the pair's second tile, then the next
    pair's first). K = 3584 in 7 L^T groups rotates over three buffers (one peeled lead group)."""
    rng = np.random.default_rng(3)
    bf = ml_dtypes.bfloat16
    M, K, N = 512, 3584, 2048
    x = rng.standard_normal((M, K)).astype(bf)
    w = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(bf)
    mod = check(_proj, x, w)
    res = _in_loop(mod, lambda i: i.opcode == "dma_copy" and i.dsts[0].target.startswith("rhs_res"))
    assert len({i.dsts[0].target for i, _ in res}) == 2, res
    # the first tile's, then one in each M loop (one pair: the pair axis is no loop here)
    assert sorted(d for _, d in res) == [0, 1, 1], res
    assert {i.dsts[0].num_elements for i, d in res if d} == {128 * (28 // 2) * 1024}   # 14 K tiles a step
    lt = {i.dsts[0].target for i in mod.instructions() if i.opcode == "dma_copy" and i.dsts[0].target.startswith("lhsT")
          and not i.dsts[0].target.startswith("lhsT_pre")}
    assert len(lt) == 2 * 2 * 3, lt                           # 2 M loops x 2 halves x 3 L^T buffers
    assert {i.srcs[1].free_size for i in mod.instructions() if i.opcode == "matmul"} == {512}


def _loop_of(mod, ins):
    """The innermost Loop whose body holds ``ins`` directly, or None."""
    def walk(body, loop):
        for n in body:
            if n is ins:
                return loop
            if n.kind != "inst":
                for sub in n.children():
                    got = walk(sub, n if n.kind == "loop" else loop)
                    if got is not None:
                        return got
        return None
    return walk(mod.body, None)


def _count(body):
    return sum(1 if n.kind == "inst" else sum(_count(b) for b in n.children()) for n in body)


def test_chunked_resident_matmul_is_the_same_code_at_every_k():
    """The chunk loads and the K groups of a chunked resident tile are loops: the N tile's code
    is the same at K = 3072 (6 L^T groups of 4 fp32 tiles, 8 chunks of 3) and K = 4096 (8 groups,
    8 chunks of 4). Unrolled, each group and each chunk was code of its own."""
    from penguin_helpers import bir_of
    sizes = {}
    for K in (3072, 4096):
        mod = bir_of(_proj, jax.ShapeDtypeStruct((256, K), jnp.float32), jax.ShapeDtypeStruct((K, 1536), jnp.float32))
        res = [i for i in mod.instructions() if i.opcode == "dma_copy" and i.dsts[0].target.startswith("rhs_res")]
        assert len(res) == 1 and _loop_of(mod, res[0]).trip_count == 8, K      # a loop of 8 chunks
        n_loop = next(n for n in mod.walk() if n.kind == "loop" and res[0] in list(_insts(n.body)))
        sizes[K] = _count(n_loop.body)
    assert sizes[3072] == sizes[4096], sizes


def _insts(body):
    for n in body:
        if n.kind == "inst":
            yield n
        else:
            for sub in n.children():
                yield from _insts(sub)
