"""Interpreter handler for rng-bit-generator (what JAX emits for its 'rbg' and
'unsafe_rbg' PRNG implementations; its default threefry PRNG is plain HLO ops).

XLA:CPU runs ``rng_default`` as Philox4x32-10, and so does this handler,
bit-exact with XLA:CPU (checked against jax in tests/hlo/test_interp_lax.py):

- state u64[2] (s0, s1): key = s0 as two u32 words (low, high); block i uses the
  128-bit counter (s1 + i) + (s0 << 64), i.e. words (lo(s1+i), hi(s1+i),
  lo(s0 + carry), hi(s0 + carry)); the new state is (s0, s1 + blocks).
  state u64[3] (s0, s1, s2): the counter is the 128-bit (s1, s2), new state
  (s0, (s1, s2) + blocks).
- every block yields four u32 words x0..x3 in order; outputs of 8/16/32 bits
  take one word each (truncated), 64-bit outputs take two (x0 | x1 << 32).

``rng_three_fry`` is not supported (UnsupportedOperatorError).
"""
import numpy as np

from neuronxcc.errors import HloVerifyError, UnsupportedOperatorError
from neuronxcc.hlo.interp_attrs import str_attr
from neuronxcc.hlo.interp_base import dims_of, dtype_of, handler

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
_W0, _W1 = np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
_LO = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)

PHILOX_ALGORITHMS = ("rng_default", "rng_philox")


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


@handler("rng_bit_generator")
def h_rng_bit_generator(ev, inst, args):
    alg = str_attr(inst, "algorithm", "rng_default")
    if alg not in PHILOX_ALGORITHMS:
        raise UnsupportedOperatorError(
            "rng-bit-generator with algorithm=%s is not supported (instruction %s); only %s"
            % (alg, inst.name, " and ".join(PHILOX_ALGORITHMS)))
    state_shape, data_shape = inst.shape.tuple_shapes
    dt = dtype_of(data_shape)
    if dt.kind not in "iu":
        raise HloVerifyError("rng-bit-generator %s: output type must be an integer type" % inst.name)
    dims = dims_of(data_shape)
    n = int(np.prod(dims, dtype=np.int64))
    new, vals = philox_bits(args[0], dt, n)
    return new.astype(dtype_of(state_shape)).reshape(dims_of(state_shape)), vals.reshape(dims)
