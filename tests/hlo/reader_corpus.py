"""JAX programs lowered to HLO for the reader tests (proto and text of one module).

Each entry: name -> (function, example args). Shapes stay tiny so lowering is
fast; the point is coverage of ops, attribute forms and literal types.
"""
import numpy as np

import jax
import jax.numpy as jnp
import ml_dtypes


def _mlp(x, w1, b1, w2):
    h = jax.nn.gelu(x @ w1 + b1)
    return jax.nn.softmax(h @ w2, axis=-1)


def _conv(x, w):
    y = jax.lax.conv_general_dilated(x, w, (2, 1), ((1, 1), (0, 2)), lhs_dilation=(1, 1), rhs_dilation=(1, 2),
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    g = jax.lax.conv_general_dilated(x, jnp.ones((3, 3, 1, 4), x.dtype), (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=4)
    return y, g


def _conv_grad(x, w, wg):
    def loss(x, w, wg):
        y = jax.lax.conv_general_dilated(x, w, (2, 2), ((1, 2), (0, 1)), rhs_dilation=(2, 1),
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        z = jax.lax.conv_general_dilated(y, wg, (1, 1), "SAME", feature_group_count=2,
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
        return (z ** 2).sum()
    return jax.grad(loss, argnums=(0, 1, 2))(x, w, wg)


def _reduce(x):
    return x.sum(0), x.max(1), jnp.argmax(x, axis=1), jnp.argmin(x, axis=0), x.mean(), jnp.cumsum(x, axis=1)


def _gather_scatter(x, idx, upd):
    a = x[idx]
    b = x.at[idx].add(upd)
    c = x.at[idx].set(upd)
    d = jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)
    return a, b, c, d


def _sort(x, y):
    s = jnp.sort(x, axis=0)
    k, v = jax.lax.sort((x, y), num_keys=1)
    return s, k, v, jnp.argsort(-x, axis=1, stable=True)


def _while(x, n):
    def body(i, c):
        return c * 1.5 + i
    y = jax.lax.fori_loop(0, n, body, x)
    z = jax.lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] * 2), (0, x))
    return y, z


def _scan(xs):
    def step(c, x):
        c = jnp.tanh(c + x)
        return c, c * 2
    return jax.lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)


def _cond(p, i, x):
    a = jax.lax.cond(p, lambda v: v * 2, lambda v: v - 1, x)
    b = jax.lax.switch(i, [lambda v: v + 1, lambda v: v * v, lambda v: -v], x)
    return a, b


def _rng(key, x):
    bits = jax.lax.rng_bit_generator(key, (4, 3), dtype=jnp.uint32)
    return bits, x + jax.random.normal(jax.random.key(1), x.shape)


def _custom_call(x):
    return jax.lax.top_k(x, 2), jnp.linalg.cholesky(x[:3, :3] @ x[:3, :3].T + 3 * jnp.eye(3, dtype=x.dtype))


def _bf16(a, b):
    c = jax.lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
    return c.astype(jnp.bfloat16) * jnp.bfloat16(1.25), jnp.exp(a).max()


def _int(a, b):
    return (a + b, a * b, a // jnp.maximum(b, 1), a % jnp.maximum(b, 1), a << 2, a >> 1,
            jax.lax.shift_right_logical(a, 1), a & b, a | b, a ^ b, ~a, jnp.clip(a, -3, 3), -a, jnp.abs(a),
            jax.lax.population_count(a), jax.lax.clz(a))


def _pred(a, b):
    return a & b, a | b, jnp.logical_not(a), a ^ b, jnp.where(a, 1.0, 2.0), a.any(), b.all()


def _shapes(x):
    return (jnp.pad(x, ((1, 2), (0, 1))), jnp.concatenate([x, x * 2], axis=1), x[::-1, 1:3], x.T,
            jnp.reshape(x, (2, -1)), jnp.broadcast_to(x[:, None, :], (4, 2, 6)), jnp.arange(5, dtype=jnp.int32),
            jax.lax.dynamic_slice(x, (1, 2), (2, 3)), jax.lax.dynamic_update_slice(x, jnp.ones((2, 2)), (3, 4)),
            jax.lax.bitcast_convert_type(x, jnp.int32), jax.lax.reduce_precision(x, 5, 10),
            jax.lax.pad(x, 0.0, ((1, 1, 1), (0, -1, 0))), jnp.flip(x, (0, 1)), jnp.expm1(x), jnp.log1p(jnp.abs(x)),
            jax.lax.rsqrt(jnp.abs(x) + 1), jnp.round(x), jnp.floor(x), jnp.sign(x), jnp.isfinite(x),
            jnp.arctan2(x, x + 1), x ** 3.5, jax.lax.erf(x), jnp.tan(x), jax.lax.cbrt(x))


def _pool(x):
    m = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    a = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, 3, 3, 1), (1, 1, 1, 1), "SAME")
    g = jax.grad(lambda v: jax.lax.reduce_window(v, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1),
                                                 "VALID").sum())(x)
    return m, a, g


def _attention(q, k, v, mask):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1])
    s = jnp.where(mask, s, -1e9)
    p = jax.nn.softmax(s, axis=-1)
    o = jnp.einsum("bqk,bkd->bqd", p, v)
    mu = o.mean(-1, keepdims=True)
    ln = (o - mu) * jax.lax.rsqrt(((o - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    rms = o * jax.lax.rsqrt((o * o).mean(-1, keepdims=True) + 1e-6)
    return ln, rms


def _train(w, x, y):
    def loss(w):
        return ((jnp.tanh(x @ w) - y) ** 2).mean()
    l, g = jax.value_and_grad(loss)(w)
    return l, w - 0.1 * g


_CONSTS = {
    "f16": np.array([1.5, -2.25, 65504.0], np.float16),
    "bf16": np.array([1.5, -2.25, 3.0e38, 1e-3], ml_dtypes.bfloat16),
    "s8": np.array([-128, 0, 127], np.int8), "u8": np.array([0, 200, 255], np.uint8),
    "s16": np.array([-32768, 5, 32767], np.int16), "u16": np.array([0, 65535, 7], np.uint16),
    "u32": np.array([0, 4294967295, 12345], np.uint32), "s32": np.array([[-2147483648, 1], [2, 2147483647]], np.int32),
    "f32": np.array([[1.0, np.inf], [-np.inf, 1e-30]], np.float32),
    "f8e4m3fn": np.array([0.5, -448.0, 1.125], ml_dtypes.float8_e4m3fn),
    "f8e5m2": np.array([0.5, -57344.0, 1.25], ml_dtypes.float8_e5m2),
    "pred": np.array([True, False, True]),
    "f32 NaN payloads": np.array([0x7fc00001, 0xffc00000, 0x7f800001, 0xffc00003], np.uint32).view(np.float32),
    "bf16 NaN payloads": np.array([0x7fc1, 0xffc0, 0x7f81], np.uint16).view(ml_dtypes.bfloat16),
}


def _constants(x):
    outs = [jnp.asarray(v) for v in _CONSTS.values()]
    return tuple(outs) + (x + jnp.asarray(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)),)


def _dtypes(h, i8, u8, u32, f8a, f8b):
    return (h * h + 1, (i8 * 3).astype(jnp.int16), u8 // 3, u32 >> 3, f8a.astype(jnp.float32) + 1,
            (f8b.astype(jnp.bfloat16) * 2).astype(ml_dtypes.float8_e5m2), h.astype(ml_dtypes.float8_e4m3fn))


def _misc(x, idx):
    oh = jax.nn.one_hot(idx, 5)
    ss = jnp.searchsorted(jnp.sort(x[0]), x[1])
    cm = jax.lax.cummax(x, axis=1)
    rem = jax.checkpoint(lambda v: jnp.sin(v) * 2)(x)
    sc = jax.lax.associative_scan(jnp.add, x, axis=1)
    return oh, ss, cm, rem, sc


def _fft(x):
    return jnp.fft.fft(x.astype(jnp.complex64)), jnp.fft.rfft(x)


def _f(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


PROGRAMS = {
    "mlp": (_mlp, (_f(4, 8), _f(8, 16, seed=1), _f(16, seed=2), _f(16, 5, seed=3))),
    "conv": (_conv, (_f(1, 6, 6, 4), _f(3, 2, 4, 2, seed=1))),
    "reduce": (_reduce, (_f(3, 5),)),
    "conv_grad": (_conv_grad, (_f(2, 3, 7, 6), _f(4, 3, 2, 3, seed=1), _f(4, 2, 3, 3, seed=2))),
    "gather_scatter": (_gather_scatter, (_f(5, 3), np.array([4, 0, 2], np.int32), _f(3, 3, seed=1))),
    "sort": (_sort, (_f(4, 3), np.arange(12, dtype=np.int32).reshape(4, 3))),
    "while": (_while, (_f(3), np.int32(4))),
    "scan": (_scan, (_f(5, 3),)),
    "cond": (_cond, (np.bool_(True), np.int32(1), _f(3))),
    "rng": (_rng, (np.array([1, 2, 3, 4], np.uint32), _f(2, 2))),
    "custom_call": (_custom_call, (_f(4, 4),)),
    "bf16": (_bf16, (_f(3, 4, dtype=ml_dtypes.bfloat16), _f(4, 2, dtype=ml_dtypes.bfloat16, seed=1))),
    "int": (_int, (np.array([-5, 3, 7, 0], np.int32), np.array([2, -3, 0, 9], np.int32))),
    "pred": (_pred, (np.array([True, False, True]), np.array([False, False, True]))),
    "shapes": (_shapes, (_f(4, 6),)),
    "pool": (_pool, (_f(1, 4, 4, 2),)),
    "attention": (_attention, (_f(2, 3, 4), _f(2, 3, 4, seed=1), _f(2, 3, 4, seed=2),
                               np.tril(np.ones((3, 3), bool))[None].repeat(2, 0))),
    "train": (_train, (_f(4, 3), _f(5, 4, seed=1), _f(5, 3, seed=2))),
    "constants": (_constants, (_f(3, 4),)),
    "dtypes": (_dtypes, (_f(3, dtype=np.float16), np.array([-7, 0, 9], np.int8), np.array([0, 7, 255], np.uint8),
                         np.array([1, 2 ** 31, 2 ** 32 - 1], np.uint32), _f(3, dtype=ml_dtypes.float8_e4m3fn),
                         _f(3, dtype=ml_dtypes.float8_e5m2))),
    "misc": (_misc, (_f(2, 6), np.array([0, 4, 2], np.int32))),
    "fft": (_fft, (_f(8),)),
}

_CACHE = {}


def xla_hlo():
    """jaxlib's HLO module API (HloModule, hlo_module_from_text, HloPrintOptions); skips the test if absent."""
    try:
        from jaxlib import _hlo
        return _hlo
    except ImportError:
        pass
    try:
        from jax._src.lib import xla_client
        return xla_client._xla
    except (ImportError, AttributeError):
        import pytest
        pytest.skip("this jaxlib exposes no HLO module API")


def lowered(name):
    """(proto bytes, XLA text with large constants and metadata, XLA text as as_hlo_text prints it)."""
    if name not in _CACHE:
        _hlo = xla_hlo()
        fn, args = PROGRAMS[name]
        comp = jax.jit(fn).lower(*args).compiler_ir("hlo")
        opts = _hlo.HloPrintOptions()
        opts.print_metadata = True
        opts.print_large_constants = True
        _CACHE[name] = (comp.as_serialized_hlo_module_proto(), comp.get_hlo_module().to_string(opts),
                        comp.as_hlo_text(print_large_constants=True))
    return _CACHE[name]


def xla_text(data_or_text, metadata=False):
    """XLA's own rendering of a module given as proto bytes or HLO text (for comparisons)."""
    _hlo = xla_hlo()
    if isinstance(data_or_text, bytes):
        m = _hlo.HloModule.from_serialized_hlo_module_proto(data_or_text)
    else:
        m = _hlo.hlo_module_from_text(data_or_text)
    opts = _hlo.HloPrintOptions()
    opts.print_metadata = metadata
    opts.print_large_constants = True
    return m.to_string(opts)
