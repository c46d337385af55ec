"""Grouped-query decode attention (penguin/decode_attn.py): the few query rows of every KV head
share one tile, the result matches jax within the compiled tolerance row, and the instruction
count does not grow with the cache length or the number of KV heads. Untimed."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from penguin_helpers import bir_of, check, penguin_of
from support.llama import decode_attention


def _args(rng, t, nh, nkv, hd, c):
    bf = ml_dtypes.bfloat16
    q = rng.standard_normal((t, nh, hd)).astype(bf)
    kc = rng.standard_normal((c, nkv, hd)).astype(bf)
    vc = rng.standard_normal((c, nkv, hd)).astype(bf)
    pos = np.asarray(rng.integers(c // 3, c, size=t), np.int32)
    return q, kc, vc, pos


def _counts(args):
    from neuronxcc.starfish.penguin.codegen import Codegen
    cg = Codegen(penguin_of(decode_attention, *args))
    mod = cg.run()
    return getattr(cg, "decode_fused", 0), getattr(cg, "flash_fused", 0), mod


# (query positions, query heads, KV heads, head dim, cache length): a remainder key block of 128,
# a cache shorter than one 128-key chunk, a loop over key blocks, two query heads per KV head
@pytest.mark.parametrize("t,nh,nkv,hd,c", [(1, 8, 2, 64, 640), (1, 8, 4, 32, 96), (1, 8, 2, 64, 1536),
                                           (1, 4, 2, 32, 256)])
def test_decode_attention_one_tile_matches_jax(t, nh, nkv, hd, c):
    args = _args(np.random.default_rng(c + nh), t, nh, nkv, hd, c)
    dec, flash, mod = _counts(args)
    assert (dec, flash) == (1, 1)
    # one exp over whole rows, not one per KV head and key block
    exps = [i for i in mod.instructions() if i.opcode == "activation" and i.attrs.get("func") == "exp"]
    assert len(exps) == 1 and exps[0].dsts[0].num_partitions == t * nh, exps
    check(decode_attention, *args)


def test_decode_attention_instruction_count_flat_in_cache_and_heads():
    # key blocks, V blocks and heads are loops (a bounded number of them peeled: key blocks and
    # heads in pairs with two buffers, the first V blocks loaded before the softmax), so the count
    # is the same at 4096 and 8192 keys and at 4 and 8 KV heads
    counts = []
    for nkv, c in ((4, 4096), (4, 8192), (8, 4096), (8, 8192)):
        args = [jax.ShapeDtypeStruct((1, 4 * nkv, 128), jnp.bfloat16),
                jax.ShapeDtypeStruct((c, nkv, 128), jnp.bfloat16),
                jax.ShapeDtypeStruct((c, nkv, 128), jnp.bfloat16), jax.ShapeDtypeStruct((1,), jnp.int32)]
        counts.append(len(bir_of(decode_attention, *args).instructions()))
    assert len(set(counts)) == 1, counts


@pytest.mark.parametrize("t", [32, 2])
def test_other_query_rows_keep_the_per_head_kernel(t):
    # 32 positions: 2 KV heads x 4 query heads x 32 = 256 rows, more than one tile holds; 2
    # positions: a per-position mask does not flatten onto the (head, query head, position) rows
    args = _args(np.random.default_rng(t), t, 8, 2, 32, 128)
    dec, flash, _ = _counts(args)
    assert (dec, flash) == (0, 1)
    check(decode_attention, *args)
