"""Fused (flash-style) attention in Penguin codegen (penguin/attention.py): the pattern is
recognised as jax emits it (plain, causal, GQA einsum with bf16 operands and f32 scores, a
softmax written out by hand as torch-xla lowers it), the scores never reach HBM, and the results
match jax within the compiled tolerance row. Untimed: structure and numerics only."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from penguin_helpers import bir_of, check, penguin_of


def _scratch_elems(mod):
    return [int(np.prod(t.shape)) for t in mod.tensors.values() if t.kind == "scratch"]


def _acts(mod, func, **attrs):
    return [i for i in mod.instructions() if i.opcode == "activation" and i.attrs.get("func") == func
            and all(i.attrs.get(k) == v for k, v in attrs.items())]


def _fused(f, *args):
    from neuronxcc.starfish.penguin.codegen import Codegen
    cg = Codegen(penguin_of(f, *args))
    mod = cg.run()
    return getattr(cg, "flash_fused", 0), mod


def attention(q, k, v):
    s = jnp.einsum("hqd,hkd->hqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)


def causal(q, k, v):
    n = q.shape[1]
    s = jnp.einsum("hqd,hkd->hqk", q, k) / np.float32(np.sqrt(q.shape[-1]))
    s = jnp.where(jnp.tril(jnp.ones((n, n), jnp.bool_))[None], s, -1e30)
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)


def handwritten(q, k, v):
    # softmax as torch-xla lowers aten::_softmax: max, subtract, exp, sum, divide (no maximum(-inf))
    s = jnp.einsum("hqd,hkd->hqk", q, k) * np.float32(0.125)
    e = jnp.exp(s - jax.lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True)))
    return jnp.einsum("hqk,hkd->hqd", e / jnp.sum(e, axis=-1, keepdims=True), v)


def gqa(q, k, v):
    # Llama-style: q (T, 4 heads, d), k/v (T, 2 kv heads, d) in bf16, f32 scores, causal
    t, nh, hd = q.shape
    nkv = k.shape[1]
    qg = q.reshape(t, nkv, nh // nkv, hd)
    s = jnp.einsum("tkgd,ckd->kgtc", qg, k, preferred_element_type=jnp.float32) / np.float32(np.sqrt(hd))
    pos = jnp.arange(t)
    s = jnp.where((pos[:, None] >= pos[None, :])[None, None], s, np.float32(-1e30))
    p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
    return jnp.einsum("kgtc,ckd->tkgd", p, v).reshape(t, nh * hd)


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# exps: the exp(x - m) instructions: one per query tile of a step (1, 2 or QUERY_TILES tiles of 128
# interleaved; up to QUERY_TILES uneven ones, 260 = 128 + 128 + 4, in one step) and key-block body (a
# peeled remainder block, or query tile, is a second body); a few heads of one query step and one key
# block each are unrolled into one wavefront (attention.WAVE_TILES): one per query tile of every head
@pytest.mark.parametrize("fn,h,s,d,exps", [(attention, 2, 130, 64, 1), (causal, 2, 200, 32, 1), (causal, 1, 640, 64, 2),
                                           (causal, 1, 260, 32, 3), (attention, 1, 768, 32, 4),
                                           (handwritten, 2, 96, 32, 2)])
def test_attention_is_fused_and_matches_jax(fn, h, s, d, exps):
    rng = np.random.default_rng(s)
    args = [_f32(rng, h, s, d) for _ in range(3)]
    n, _ = _fused(fn, *args)
    assert n == 1
    mod = check(fn, *args)
    # the [h, s, s] scores and probabilities are never materialised in HBM
    assert all(e < h * s * s for e in _scratch_elems(mod)), _scratch_elems(mod)
    # exp(x - running max) with the row sum accumulated by the same ACT instruction
    assert len(_acts(mod, "exp", bias_ap=True, reduce="add")) == exps


def test_gqa_bf16_attention_is_fused_and_matches_jax():
    rng = np.random.default_rng(0)
    t, nh, nkv, hd = 160, 4, 2, 64
    q = _f32(rng, t, nh, hd).astype(ml_dtypes.bfloat16)
    k = _f32(rng, t, nkv, hd).astype(ml_dtypes.bfloat16)
    v = _f32(rng, t, nkv, hd).astype(ml_dtypes.bfloat16)
    n, mod = _fused(gqa, q, k, v)
    assert n == 1
    # both matmuls of the fused kernel take the bf16 data (the f32 converts are not materialised)
    mm = [i for i in mod.instructions() if i.opcode == "matmul"]
    assert mm and all(i.srcs[0].dtype == "bfloat16" for i in mm)
    assert all(e < nh * t * t for e in _scratch_elems(mod))
    # the result is stored in the layout the heads-back transpose/reshape reads: no copy of it
    assert t * nh * hd not in _scratch_elems(mod), _scratch_elems(mod)
    check(gqa, q, k, v)


def test_scores_used_elsewhere_are_not_fused():
    def both(q, k, v):
        s = jnp.einsum("hqd,hkd->hqk", q, k)
        return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v), s

    rng = np.random.default_rng(1)
    args = [_f32(rng, 2, 64, 32) for _ in range(3)]
    n, _ = _fused(both, *args)
    assert n == 0
    check(both, *args)


def test_block_instruction_count_does_not_grow_with_sequence():
    # causal: at most MAX_BANDS copies of the query loop (bands of one block take the mask matmul,
    # longer ones the mask expression), so the count is bounded and the same from 2*MAX_BANDS
    # key blocks on
    from neuronxcc.starfish.penguin import causal as causal_masks
    counts = []
    for s in (causal_masks.MAX_BANDS * 512, 2 * causal_masks.MAX_BANDS * 512, 4 * causal_masks.MAX_BANDS * 512):
        args = [jax.ShapeDtypeStruct((2, s, 64), jnp.float32)] * 3
        counts.append(len(bir_of(causal, *args).instructions()))
    assert counts[0] <= counts[1] == counts[2], counts
    counts = []
    for s in (1024, 2048):
        args = [jax.ShapeDtypeStruct((2, s, 64), jnp.float32)] * 3
        counts.append(len(bir_of(attention, *args).instructions()))
    assert counts[0] == counts[1], counts


def _mask_matmuls(mod):
    return [i for i in mod.instructions() if i.opcode == "matmul" and i.srcs[0].target.startswith("fa_ident")]


def _causal_lower(q, k, v):
    # the same mask written k <= q (LE with the key index first)
    n = q.shape[1]
    s = jnp.einsum("hqd,hkd->hqk", q, k) * np.float32(0.125)
    pos = jnp.arange(n)
    s = jnp.where(pos[None, :] <= pos[:, None], s, -jnp.inf)
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)


def _anti_causal(q, k, v):
    # k >= q: not the causal form; the general path evaluates the mask on every block
    n = q.shape[1]
    s = jnp.einsum("hqd,hkd->hqk", q, k) * np.float32(0.125)
    pos = jnp.arange(n)
    s = jnp.where(pos[None, :] >= pos[:, None], s, np.float32(-1e30))
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)


def _bf16(rng, *shape):
    return _f32(rng, *shape).astype(ml_dtypes.bfloat16)


@pytest.mark.parametrize("fn,s,bands", [(causal, 512, None), (causal, 1024, None), (_causal_lower, 1024, None),
                                        (causal, 1024, 1)])
def test_causal_blocks_skipped_and_match_jax(fn, s, bands, monkeypatch):
    """Causal masks: hidden key blocks are not computed, fully visible ones take no mask work, and
    the diagonal blocks take one mask matmul (bands of one block) or the mask expression (bands of
    several, MAX_BANDS patched to 1); results match jax."""
    from neuronxcc.starfish.penguin import attention as fa, causal as causal_masks
    if bands is not None:
        monkeypatch.setattr(causal_masks, "MAX_BANDS", bands)
    rng = np.random.default_rng(s)
    h, d = 1, 64
    args = [_f32(rng, h, s, d) for _ in range(3)]
    from neuronxcc.starfish.penguin.codegen import Codegen
    cg = Codegen(penguin_of(fn, *args))
    mod = cg.run()
    assert cg.flash_causal == 1
    nblk = s // 512
    check(fn, *args)
    # executed matmuls: per key block a query tile computes, one score matmul (K = 64) and four
    # P@V matmuls (128-key chunks), plus the mask matmul (bands of one block); query tile i of band
    # b (G blocks per band) computes b*G + G blocks, not all nblk
    from neuronxcc.starfish import birsim
    res = birsim.simulate(mod, [np.asarray(a) for a in args])
    nband = min(nblk, causal_masks.MAX_BANDS)
    G = nblk // nband
    blocks = sum((i // (4 * G)) * G + G for i in range(s // 128))
    masks = blocks if G == 1 else 0
    assert res.counts["matmuls"] == 5 * blocks + masks, (res.counts, blocks)
    if nband > 1:
        assert blocks < (s // 128) * nblk
    if bands is None:
        # one per band and query tile of the step (bands of 512 queries: QUERY_TILES tiles)
        assert len(_mask_matmuls(mod)) == fa.QUERY_TILES * min(nblk, causal_masks.MAX_BANDS)
        assert not [i for i in mod.instructions() if i.opcode == "select"]
    else:
        assert not _mask_matmuls(mod)


def test_gqa_bf16_causal_prefill_form_matches_jax():
    from neuronxcc.starfish.penguin import attention as fa
    # Llama-3 prefill's attention (GQA, bf16 operands, pos[:, None] >= pos[None, :]) over two key
    # blocks: band 0 one diagonal block, band 1 one visible block and one diagonal block
    rng = np.random.default_rng(3)
    t, nh, nkv, hd = 1024, 4, 2, 64
    q, k, v = _bf16(rng, t, nh, hd), _bf16(rng, t, nkv, hd), _bf16(rng, t, nkv, hd)
    from neuronxcc.starfish.penguin.codegen import Codegen
    cg = Codegen(penguin_of(gqa, q, k, v))
    mod = cg.run()
    assert cg.flash_fused == 1 and cg.flash_causal == 1
    assert len(_mask_matmuls(mod)) == 2 * fa.QUERY_TILES      # two bands, QUERY_TILES query tiles per step
    # the result tiles are stored by ACT, which makes them; SP's in-order stream is left to the next
    # query step's loads (behind a store there they waited for this step's last activation)
    out = mod.outputs[0]
    stores = [i for i in mod.instructions() if i.opcode == "dma_copy" and i.dsts[0].target == out]
    assert stores and all(i.engine == "ACT" for i in stores), [i.engine for i in stores]
    check(gqa, q, k, v)


def test_anti_causal_mask_takes_the_general_path():
    rng = np.random.default_rng(4)
    args = [_f32(rng, 1, 1024, 32) for _ in range(3)]
    from neuronxcc.starfish.penguin.codegen import Codegen
    cg = Codegen(penguin_of(_anti_causal, *args))
    mod = cg.run()
    assert cg.flash_fused == 1 and cg.flash_causal == 0 and not _mask_matmuls(mod)
    check(_anti_causal, *args)


@pytest.mark.parametrize("h,s", [(2, 260), (1, 384)])
def test_one_causal_block_takes_the_mask_table(h, s):
    """Causal scores of one key block shorter than 512 (the corpus block's 260): all the query tiles
    share one step, and each takes the mask as one PE matmul of the bias table into its scores
    (no iota, compare or select); with one block the softmax is exact at once: no running-max
    rescale of an accumulator (scalar_tensor_tensor) and no memsets of the running state; results
    match jax."""
    rng = np.random.default_rng(s)
    args = [_f32(rng, h, s, 32) for _ in range(3)]
    from neuronxcc.starfish.penguin.codegen import Codegen
    cg = Codegen(penguin_of(causal, *args))
    mod = cg.run()
    assert cg.flash_fused == 1 and cg.flash_causal == 1
    # one per query tile of the one step (the h heads unrolled into one wavefront: per head)
    assert len(_mask_matmuls(mod)) == h * -(-s // 128)
    # P @ V: with the heads unrolled, a query tile multiplies only the 128-key chunks it sees
    # (the later ones of its P are exactly 0); in the loop over heads every chunk
    tiles = [(m0, min(128, s - m0)) for m0 in range(0, s, 128)]
    seen = sum(-(-(m0 + mn) // 128) for m0, mn in tiles) if h > 1 else len(tiles) * -(-s // 128)
    pv = [i for i in mod.instructions() if i.opcode == "matmul" and i.srcs[0].target.startswith("fa_pT")]
    assert len(pv) == h * seen, (len(pv), h * seen)
    assert not [i for i in mod.instructions() if i.opcode in ("select", "iota", "scalar_tensor_tensor")]
    assert not [i for i in mod.instructions() if i.opcode == "memset"
                and i.dsts[0].target.startswith(("fa_negmax", "fa_sum", "fa_acc"))]
    # the scores, their mask and the softmax likewise span only those chunks (unrolled heads)
    widths = sorted(min(s, 128 * -(-(m0 + mn) // 128)) if h > 1 else s for m0, mn in tiles) * h
    assert sorted(i.dsts[0].free_size for i in _mask_matmuls(mod)) == sorted(widths)
    exps = [i for i in mod.instructions() if i.opcode == "activation" and i.attrs.get("func") == "exp"]
    assert sorted(i.dsts[0].free_size for i in exps) == sorted(widths)
    check(causal, *args)


def test_several_key_blocks_keep_the_online_softmax():
    rng = np.random.default_rng(7)
    args = [_f32(rng, 1, 640, 32) for _ in range(3)]
    _, mod = _fused(attention, *args)
    assert [i for i in mod.instructions() if i.opcode == "scalar_tensor_tensor"]
    check(attention, *args)


def _attn_proj(q, k, v, wo, x):
    # a transformer block's attention, its output projection and the residual add
    h, s, d = q.shape
    return x + causal(q, k, v).transpose(1, 0, 2).reshape(s, h * d) @ wo


def _attn_proj_out(q, k, v, wo):
    h, s, d = q.shape
    return causal(q, k, v).transpose(1, 0, 2).reshape(s, h * d) @ wo


def _proj_args(s, rng):
    h, d = 2, 128
    q, k, v = (rng.standard_normal((h, s, d)).astype(np.float32) for _ in range(3))
    wo = (rng.standard_normal((h * d, 192)) * (h * d) ** -0.5).astype(np.float32)
    return q, k, v, wo, rng.standard_normal((s, 192)).astype(np.float32)


@pytest.mark.parametrize("s", [260, 128])
def test_attention_hands_o_transposed_to_its_projection(s):
    # the projection (evaluated in the residual add's row tiles) reads O^T as its L^T chunks on chip:
    # P @ V computes O^T (V stationary, P^T moving), 1/l goes into P^T (matmuls with diag(1/l) in
    # place of P's transposes), and neither O's PE transposes nor its HBM round trip remain
    h = 2
    args = _proj_args(s, np.random.default_rng(7))
    n, mod = _fused(_attn_proj, *args)
    assert n == 1
    check(_attn_proj, *args)
    assert not _scratch_elems(mod)               # O never goes through HBM
    # the only PE transposes are of the Q and K loads (row-major in HBM here), none of P or O
    tr = [i.srcs[0].target for i in mod.instructions() if i.opcode == "transpose"]
    assert tr and not [t for t in tr if t.startswith("fa_")], tr
    diag = [i for i in mod.instructions() if i.opcode == "matmul" and any(a.target.startswith("fa_diag") for a in i.srcs)]
    ntiles = -(-s // 128)
    assert len(diag) == h * sum(range(1, ntiles + 1))     # causal: query tile t sees t + 1 key chunks


def test_o_stays_row_major_for_an_ordinary_projection():
    # the projection is the program's result (an ordinary matmul kernel, reading O from HBM): O is
    # computed and stored row-major as before, no O^T (its element-strided store would be slow)
    args = _proj_args(260, np.random.default_rng(8))[:4]
    n, mod = _fused(_attn_proj_out, *args)
    assert n == 1
    check(_attn_proj_out, *args)
    assert not [m for m in mod.memlocs if m.startswith(("fa_outT", "fa_diag"))]
