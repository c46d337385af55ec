"""Interpreter handler for rng-bit-generator (what JAX emits for its 'rbg' and
'unsafe_rbg' PRNG implementations; its default threefry PRNG is plain HLO ops).

XLA:CPU runs ``rng_default`` as Philox4x32-10, and so does this handler;
``rng_three_fry`` is Threefry2x32-20. Both are bit-exact with XLA:CPU
(checked against jax in tests/hlo/test_interp_lax.py).

Philox:

- state u64[2] (s0, s1): key = s0 as two u32 words (low, high); block i uses the
  128-bit counter (s1 + i) + (s0 << 64), i.e. words (lo(s1+i), hi(s1+i),
  lo(s0 + carry), hi(s0 + carry)); the new state is (s0, s1 + blocks).
  state u64[3] (s0, s1, s2): the counter is the 128-bit (s1, s2), new state
  (s0, (s1, s2) + blocks).
- every block yields four u32 words x0..x3 in order; outputs of 8/16/32 bits
  take one word each (truncated), 64-bit outputs take two (x0 | x1 << 32).

Threefry (state u64[2] (s0, s1)): key = s0 as (low, high) words; block i
encrypts the 64-bit counter s1 + i (wrapping) as words (low, high) and yields
two u32 words x0, x1. 64-bit outputs take one block each (x0 | x1 << 32) in
row-major order. For 8/16/32-bit outputs (one word each, truncated) XLA halves
one dimension d (the one needing the fewest blocks, the first on ties): the
blocks fill the halved shape row-major, x0 and x1 are stacked on a new axis
right after d, and the result is cut back to the output shape. The new state
is (s0, s1 + blocks).
"""
import numpy as np

from neuronxcc.errors import HloVerifyError, unsupported_inst
from neuronxcc.hlo.interp_attrs import str_attr
from neuronxcc.hlo.interp_base import dims_of, dtype_of, handler

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_LO = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)

PHILOX_ALGORITHMS = ("rng_default", "rng_philox")
THREEFRY_ALGORITHMS = ("rng_three_fry",)
_THREEFRY_ROT = (13, 15, 26, 6, 17, 29, 16, 24)
_THREEFRY_PARITY = 0x1BD11BDA


def philox4x32(ctr, key, rounds=10):
    """Philox4x32 on counter words ``ctr`` (four u32 arrays) with key (two u32 scalars)."""
    x0, x1, x2, x3 = ctr
    k0, k1 = np.uint32(key[0]), np.uint32(key[1])
    for _ in range(rounds):
        p0 = x0.astype(np.uint64) * _M0
        p1 = x2.astype(np.uint64) * _M1
        hi0, lo0 = (p0 >> _S32).astype(np.uint32), (p0 & _LO).astype(np.uint32)
        hi1, lo1 = (p1 >> _S32).astype(np.uint32), (p1 & _LO).astype(np.uint32)
        x0, x1, x2, x3 = hi1 ^ x1 ^ k0, lo1, hi0 ^ x3 ^ k1, lo0
        k0 = np.uint32((int(k0) + int(_W0)) & 0xFFFFFFFF)
        k1 = np.uint32((int(k1) + int(_W1)) & 0xFFFFFFFF)
    return x0, x1, x2, x3


def _words(v):
    return (v & _LO).astype(np.uint32), (v >> _S32).astype(np.uint32)


def philox_bits(state, dtype, n):
    """(new state, n random values of ``dtype``) from a u64[2] or u64[3] state."""
    state = np.asarray(state).astype(np.uint64).reshape(-1)
    if state.size not in (2, 3):
        raise HloVerifyError("rng-bit-generator: a Philox state has 2 or 3 u64 words, got %d" % state.size)
    per_block = 2 if dtype.itemsize == 8 else 4
    blocks = -(-n // per_block)
    s0 = int(state[0])
    low = int(state[1])
    high = int(state[2]) if state.size == 3 else s0
    i = np.arange(blocks, dtype=np.uint64)
    c_lo = np.uint64(low) + i
    carry = (c_lo < np.uint64(low)).astype(np.uint64)
    c_hi = np.uint64(high) + carry
    w0, w1 = _words(c_lo)
    w2, w3 = _words(c_hi)
    x = philox4x32((w0, w1, w2, w3), (s0 & 0xFFFFFFFF, s0 >> 32))
    words = np.stack(x, axis=1).reshape(-1)
    if per_block == 2:
        pairs = words.reshape(-1, 2).astype(np.uint64)
        vals = pairs[:, 0] | (pairs[:, 1] << _S32)
    else:
        vals = words
    vals = vals[:n].astype(np.dtype("u%d" % dtype.itemsize)).view(dtype)
    total = (high << 64 | low) + blocks
    new = [s0, total & ((1 << 64) - 1)]
    if state.size == 3:
        new.append((total >> 64) & ((1 << 64) - 1))
    return np.array(new, np.uint64), vals


def threefry2x32(x0, x1, key, rounds=20):
    """Threefry2x32 on u32 arrays x0, x1 with a two-word key."""
    k0, k1 = int(key[0]) & 0xFFFFFFFF, int(key[1]) & 0xFFFFFFFF
    ks = [np.uint32(k0), np.uint32(k1), np.uint32(k0 ^ k1 ^ _THREEFRY_PARITY)]
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    for g in range(rounds // 4):
        for j in range(4):
            r = np.uint32(_THREEFRY_ROT[(4 * g + j) % 8])
            x0 = x0 + x1
            x1 = (x1 << r) | (x1 >> (np.uint32(32) - r))
            x1 = x1 ^ x0
        x0 = x0 + ks[(g + 1) % 3]
        x1 = x1 + ks[(g + 2) % 3] + np.uint32(g + 1)
    return x0, x1


def threefry_bits(state, dtype, dims):
    """(new state, random values of ``dtype`` and shape ``dims``) from a u64[2] state."""
    state = np.asarray(state).astype(np.uint64).reshape(-1)
    if state.size != 2:
        raise HloVerifyError("rng-bit-generator: a Threefry state has 2 u64 words, got %d" % state.size)
    dims = tuple(dims) or (1,)
    n = int(np.prod(dims, dtype=np.int64))
    if dtype.itemsize == 8:
        half, split = dims, None
    else:
        # XLA halves the dimension that needs the fewest blocks (the first on ties); x0 and x1
        # of a block sit next to each other along a new axis right after it
        cost = [n // d * ((d + 1) // 2) if d else 0 for d in dims]
        split = cost.index(min(cost))
        half = dims[:split] + ((dims[split] + 1) // 2,) + dims[split + 1:]
    blocks = int(np.prod(half, dtype=np.int64))
    s0, s1 = int(state[0]), int(state[1])
    c = np.arange(blocks, dtype=np.uint64) + np.uint64(s1)
    w0, w1 = _words(c)
    x0, x1 = threefry2x32(w0, w1, (s0 & 0xFFFFFFFF, s0 >> 32))
    if split is None:
        vals = (x0.astype(np.uint64) | (x1.astype(np.uint64) << _S32)).reshape(dims)
    else:
        both = np.stack([x0.reshape(half), x1.reshape(half)], axis=split + 1)
        full = half[:split] + (2 * half[split],) + half[split + 1:]
        vals = both.reshape(full)[tuple(slice(0, d) for d in dims)]
    vals = np.asarray(vals, order="C").astype(np.dtype("u%d" % dtype.itemsize)).view(dtype)
    return np.array([s0, (s1 + blocks) & ((1 << 64) - 1)], np.uint64), vals


@handler("rng_bit_generator")
def h_rng_bit_generator(ev, inst, args):
    alg = str_attr(inst, "algorithm", "rng_default")
    if alg not in PHILOX_ALGORITHMS + THREEFRY_ALGORITHMS:
        raise unsupported_inst(inst, "algorithm=%s (supported: %s)" % (alg, ", ".join(PHILOX_ALGORITHMS + THREEFRY_ALGORITHMS)))
    state_shape, data_shape = inst.shape.tuple_shapes
    dt = dtype_of(data_shape)
    if dt.kind not in "iu":
        raise HloVerifyError("rng-bit-generator %s: output type must be an integer type" % inst.name)
    dims = dims_of(data_shape)
    n = int(np.prod(dims, dtype=np.int64))
    if alg in PHILOX_ALGORITHMS:
        new, vals = philox_bits(args[0], dt, n)
    else:
        new, vals = threefry_bits(args[0], dt, dims)
    return new.astype(dtype_of(state_shape)).reshape(dims_of(state_shape)), vals.reshape(dims)
