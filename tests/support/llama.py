"""Llama-shaped JAX programs for the program-size measurements and tests.

Owns: the decode step (layers unrolled by a Python loop, or as one
``lax.scan`` over stacked layer weights: an HLO While), the prefill, and the
small full model (token ids and position in, logits and caches out), at the
Llama-3-8B shape or at small dims. Weights are parameters (bf16), never
constants, so the program text grows with the layer count exactly as a user's
exported graph does.

Shapes (``LLAMA3_8B``): hidden 4096, 32 query / 8 KV heads, head dim 128,
SwiGLU FFN 14336, RMSNorm, rotary embeddings, batch 1, KV cache 2048.
"""
import jax
import jax.numpy as jnp
import numpy as np

LLAMA3_8B = dict(hidden=4096, heads=32, kv_heads=8, head_dim=128, ffn=14336, vocab=128256, cache=2048)
SMALL = dict(hidden=256, heads=4, kv_heads=2, head_dim=64, ffn=512, vocab=1000, cache=64)

WDT = jnp.bfloat16
LAYER_WEIGHTS = ("attn_norm", "wq", "wk", "wv", "wo", "ffn_norm", "w1", "w3", "w2")


def layer_shapes(cfg):
    h, nh, nkv, hd, f = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["ffn"]
    return {"attn_norm": (h,), "wq": (h, nh * hd), "wk": (h, nkv * hd), "wv": (h, nkv * hd),
            "wo": (nh * hd, h), "ffn_norm": (h,), "w1": (h, f), "w3": (h, f), "w2": (f, h)}


def cache_shape(cfg):
    return (cfg["cache"], cfg["kv_heads"], cfg["head_dim"])


def _rms_norm(x, w, eps=1e-5):
    xf = x.astype(jnp.float32)
    r = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps)
    return (xf * r * w.astype(jnp.float32)).astype(x.dtype)


def _rotary(x, pos, hd):
    """x (..., T, heads, hd), pos (T,) int32: rotate-half rotary embedding."""
    inv = 1.0 / (500000.0 ** (np.arange(0, hd, 2, dtype=np.float32) / hd))
    ang = pos.astype(jnp.float32)[:, None] * jnp.asarray(inv)[None, :]         # (T, hd/2)
    cos, sin = jnp.cos(ang)[:, None, :], jnp.sin(ang)[:, None, :]
    xf = x.astype(jnp.float32)
    x1, x2 = xf[..., : hd // 2], xf[..., hd // 2:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(x.dtype)


def _ffn(x, w):
    a = x @ w["w1"]
    b = x @ w["w3"]
    return (jax.nn.silu(a.astype(jnp.float32)).astype(x.dtype) * b) @ w["w2"]


def _attention(q, k, v, mask, cfg):
    """q (T, nh, hd); k, v (C, nkv, hd); mask (T, C) bool: (T, nh, hd)."""
    nh, nkv, hd = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    g = nh // nkv
    t = q.shape[0]
    qg = q.reshape(t, nkv, g, hd)
    s = jnp.einsum("tkgd,ckd->kgtc", qg, k, preferred_element_type=jnp.float32) / np.float32(np.sqrt(hd))
    s = jnp.where(mask[None, None], s, np.float32(-1e30))
    p = jax.nn.softmax(s, axis=-1).astype(v.dtype)
    o = jnp.einsum("kgtc,ckd->tkgd", p, v)
    return o.reshape(t, nh * hd)


def decode_attention(q, kc, vc, pos):
    """q (T, nh, hd), kc/vc (C, nkv, hd) bf16, pos (T,) int32: the grouped-query attention of one decode
    step as the Llama decode layer writes it (scores in fp32, keys past each position masked)."""
    t, nh, hd = q.shape
    nkv = kc.shape[1]
    qg = q.reshape(t, nkv, nh // nkv, hd)
    s = jnp.einsum("tkgd,ckd->kgtc", qg, kc, preferred_element_type=jnp.float32) / np.float32(np.sqrt(hd))
    mask = jnp.arange(kc.shape[0], dtype=jnp.int32)[None, :] <= pos[:, None]
    s = jnp.where(mask[None, None], s, np.float32(-1e30))
    p = jax.nn.softmax(s, axis=-1).astype(vc.dtype)
    return jnp.einsum("kgtc,ckd->tkgd", p, vc).reshape(t, nh * hd)


def decode_layer(x, pos, w, kc, vc, cfg):
    """One decoder layer at one token: x (1, H), pos () int32. Returns (x, kc, vc)."""
    nh, nkv, hd = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    h = _rms_norm(x, w["attn_norm"])
    p1 = pos.reshape(1)
    q = _rotary((h @ w["wq"]).reshape(1, nh, hd), p1, hd)
    k = _rotary((h @ w["wk"]).reshape(1, nkv, hd), p1, hd)
    v = (h @ w["wv"]).reshape(1, nkv, hd)
    kc = jax.lax.dynamic_update_slice(kc, k, (pos, 0, 0))
    vc = jax.lax.dynamic_update_slice(vc, v, (pos, 0, 0))
    mask = (jnp.arange(cfg["cache"], dtype=jnp.int32) <= pos)[None, :]
    x = x + _attention(q, kc, vc, mask, cfg) @ w["wo"]
    x = x + _ffn(_rms_norm(x, w["ffn_norm"]), w)
    return x, kc, vc


def decode_unrolled(cfg, layers):
    """fn(x, pos, [layer weights..., k cache, v cache] * layers) -> (x, k caches, v caches)."""
    nw = len(LAYER_WEIGHTS)

    def fn(x, pos, *flat):
        ks, vs = [], []
        for i in range(layers):
            base = i * (nw + 2)
            w = dict(zip(LAYER_WEIGHTS, flat[base:base + nw]))
            x, kc, vc = decode_layer(x, pos, w, flat[base + nw], flat[base + nw + 1], cfg)
            ks.append(kc)
            vs.append(vc)
        return x, tuple(ks), tuple(vs)
    return fn


def decode_unrolled_args(cfg, layers, concrete=False, seed=0):
    shapes = layer_shapes(cfg)
    specs = [((1, cfg["hidden"]), WDT), ((), jnp.int32)]
    for _ in range(layers):
        specs += [(shapes[n], WDT) for n in LAYER_WEIGHTS] + [(cache_shape(cfg), WDT)] * 2
    return _args(specs, cfg, concrete, seed)


def decode_scan(cfg, layers):
    """fn(x, pos, stacked weights..., k caches, v caches): the layers as one lax.scan."""
    del layers

    def fn(x, pos, *stacked):
        ws = dict(zip(LAYER_WEIGHTS, stacked[:len(LAYER_WEIGHTS)]))
        kcs, vcs = stacked[len(LAYER_WEIGHTS):]

        def body(x, xs):
            w, kc, vc = xs
            x, kc, vc = decode_layer(x, pos, w, kc, vc, cfg)
            return x, (kc, vc)
        x, (kcs, vcs) = jax.lax.scan(body, x, (ws, kcs, vcs))
        return x, kcs, vcs
    return fn


def decode_scan_args(cfg, layers, concrete=False, seed=0):
    shapes = layer_shapes(cfg)
    specs = [((1, cfg["hidden"]), WDT), ((), jnp.int32)]
    specs += [((layers,) + shapes[n], WDT) for n in LAYER_WEIGHTS]
    specs += [((layers,) + cache_shape(cfg), WDT)] * 2
    return _args(specs, cfg, concrete, seed)


def prefill(cfg, layers, seq):
    """fn(x (seq, H), [layer weights...] * layers) -> (x, k, v per layer): causal attention over seq."""
    nw = len(LAYER_WEIGHTS)
    nh, nkv, hd = cfg["heads"], cfg["kv_heads"], cfg["head_dim"]

    def fn(x, *flat):
        pos = jnp.arange(seq, dtype=jnp.int32)
        mask = pos[:, None] >= pos[None, :]
        ks, vs = [], []
        for i in range(layers):
            w = dict(zip(LAYER_WEIGHTS, flat[i * nw:(i + 1) * nw]))
            h = _rms_norm(x, w["attn_norm"])
            q = _rotary((h @ w["wq"]).reshape(seq, nh, hd), pos, hd)
            k = _rotary((h @ w["wk"]).reshape(seq, nkv, hd), pos, hd)
            v = (h @ w["wv"]).reshape(seq, nkv, hd)
            x = x + _attention(q, k, v, mask, cfg) @ w["wo"]
            x = x + _ffn(_rms_norm(x, w["ffn_norm"]), w)
            ks.append(k)
            vs.append(v)
        return x, tuple(ks), tuple(vs)
    return fn


def prefill_args(cfg, layers, seq, concrete=False, seed=0):
    shapes = layer_shapes(cfg)
    specs = [((seq, cfg["hidden"]), WDT)]
    for _ in range(layers):
        specs += [(shapes[n], WDT) for n in LAYER_WEIGHTS]
    return _args(specs, cfg, concrete, seed)


def full_model(cfg, layers):
    """fn(token (1,) int32, pos () int32, embed (V, H), [layer weights, kc, vc] * layers, final_norm,
    lm_head (H, V)) -> (logits (1, V) f32, k caches, v caches)."""
    step = decode_unrolled(cfg, layers)

    def fn(token, pos, embed, *rest):
        flat, final_norm, head = rest[:-2], rest[-2], rest[-1]
        x = jnp.take(embed, token, axis=0)                         # (1, H): the embedding gather
        x, ks, vs = step(x, pos, *flat)
        logits = (_rms_norm(x, final_norm) @ head).astype(jnp.float32)
        return logits, ks, vs
    return fn


def full_model_args(cfg, layers, concrete=False, seed=0):
    shapes = layer_shapes(cfg)
    specs = [((1,), jnp.int32), ((), jnp.int32), ((cfg["vocab"], cfg["hidden"]), WDT)]
    for _ in range(layers):
        specs += [(shapes[n], WDT) for n in LAYER_WEIGHTS] + [(cache_shape(cfg), WDT)] * 2
    specs += [((cfg["hidden"],), WDT), ((cfg["hidden"], cfg["vocab"]), WDT)]
    return _args(specs, cfg, concrete, seed)


def _args(specs, cfg, concrete, seed):
    if not concrete:
        return [jax.ShapeDtypeStruct(s, d) for s, d in specs]
    rng = np.random.default_rng(seed)
    out = []
    for s, d in specs:
        if d == jnp.int32:
            hi = cfg["vocab"] if s == (1,) else cfg["cache"] // 2
            out.append(jnp.asarray(rng.integers(0, hi, size=s), jnp.int32))
        elif len(s) == 1:                                          # norm weights
            out.append(jnp.asarray(1.0 + 0.1 * rng.standard_normal(s), d))
        else:                                                      # matrices scaled by 1/sqrt(fan-in)
            fan = s[-2] if len(s) >= 2 else 1
            out.append(jnp.asarray(rng.standard_normal(s) / np.sqrt(max(fan, 1)), d))
    return out


PROGRAMS = {
    "decode": (decode_unrolled, decode_unrolled_args),
    "decode_scan": (decode_scan, decode_scan_args),
}


def program(kind, layers, cfg=LLAMA3_8B, seq=2048, concrete=False):
    """(fn, args) of ``kind`` in decode | decode_scan | prefill | full at ``layers``."""
    if kind == "prefill":
        return prefill(cfg, layers, seq), prefill_args(cfg, layers, seq, concrete)
    if kind == "full":
        return full_model(cfg, layers), full_model_args(cfg, layers, concrete)
    make, make_args = PROGRAMS[kind]
    return make(cfg, layers), make_args(cfg, layers, concrete)


def hlo_proto(kind, layers, cfg=LLAMA3_8B, seq=2048):
    """Serialized HloModuleProto of ``program(kind, layers)``."""
    fn, args = program(kind, layers, cfg, seq)
    return jax.jit(fn).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
