"""rng-bit-generator as device code: Philox4x32-10 (rng_default, rng_philox) and
Threefry2x32-20 (rng_three_fry) in uint32 Penguin elementwise ops, bit-exact with XLA:CPU.

The bit streams are the interpreter's (hlo/interp_rng.py documents counters, keys and
how words fill the output). The state's u64 words are taken apart into u32 words at
compile time where the HLO shows them:

* jax's rbg keys: a u32[2,2] (or u32[4] reshaped) bitcast-converted to u64[2]: the words
  are slices of the u32 tensor (element [k, 0] is the low word of state k);
* constants: exact words;
* a concatenate of such pieces (torch-xla's state: the seed next to a constant);
* any other u64/s64 value: its low word as the device holds it (64-bit integers are
  computed in 32 bits on this target, README), the high word its sign extension (s64)
  or zero (u64).

Every engine op is exact uint32 arithmetic (add, multiply and shifts wrap mod 2^32). A
32x32->64 product's high word (Philox's mulhi) is assembled from 16-bit partial products.
Outputs of 8/16/32 bits take one word each (truncated); 64-bit outputs take two words
each (x0 | x1 << 32), of which the device keeps the low one, x0 (it holds 64-bit integers
as their low word): the low 32 bits of every 64-bit value are XLA:CPU's. The new state is
(s0, s1 + blocks) computed as the 64-bit add the program spells (so it too is 32-bit on
this target). A state read from a 64-bit parameter has only its low words on the device.
"""
import numpy as np

from neuronxcc.starfish.penguin.hloinst import penguin_dtype, unsupported

PHILOX = ("rng_default", "rng_philox")
_M0, _M1 = 0xD2511F53, 0xCD9E8D57
_W0, _W1 = 0x9E3779B9, 0xBB67AE85
_ROT = (13, 15, 26, 6, 17, 29, 16, 24)
_PARITY = 0x1BD11BDA
U32 = "uint32"


class _U:
    """uint32 elementwise ops over one shape; scalars (Python ints) become splat constants."""

    def __init__(self, g, loc, name, shape):
        self.g, self.loc, self.name, self.shape = g, loc, name, tuple(shape)

    def op(self, kind, ins, dtype=U32, attrs=None, shape=None):
        shape = self.shape if shape is None else tuple(shape)
        ins = [self.c(i, shape) if isinstance(i, (int, np.integer)) else i for i in ins]
        return self.g.add_op(kind, ins, [(self.name + "." + kind, shape, dtype)], attrs or {}, self.loc)[0]

    def c(self, v, shape=None):
        shape = self.shape if shape is None else tuple(shape)
        return self.g.add_op("constant", [], [(self.name + ".c", shape, U32)], {"value": int(v) & 0xFFFFFFFF},
                             self.loc)[0]

    def full(self, w):
        """A word (Python int or scalar value) as a value of the block shape."""
        if isinstance(w, (int, np.integer)):
            return self.c(w)
        if self.g.values[w].shape == self.shape:
            return w
        return self.op("broadcast", [w], attrs={"dimensions": []})

    def add(self, a, b):
        """a + b for words that may be Python ints or values (keys stay scalars)."""
        if isinstance(a, int) and isinstance(b, int):
            return (a + b) & 0xFFFFFFFF
        if isinstance(a, int):
            a, b = b, a
        return self.op("add", [a, b], shape=self.g.values[a].shape)

    def xor(self, a, b):
        if isinstance(a, int) and isinstance(b, int):
            return a ^ b
        return self.op("xor", [a, b])

    def mul(self, a, b):
        return self.op("multiply", [a, b])

    def shr(self, a, k):
        return self.op("shift-right-logical", [a, k])

    def shl(self, a, k):
        return self.op("shift-left", [a, k])

    def band(self, a, m):
        return self.op("and", [a, m])

    def rotl(self, a, r):
        return self.op("or", [self.shl(a, r), self.shr(a, 32 - r)])

    def lt(self, a, b):
        return self.op("compare", [a, b], "bool", {"direction": "LT", "type": "UNSIGNED"})

    def eq0(self, a):
        return self.op("compare", [a, 0], "bool", {"direction": "EQ", "type": "UNSIGNED"})

    def b2u(self, p):
        return self.op("convert", [p])

    def mulhilo(self, x, m):
        """(high, low) words of x * m for a constant m."""
        lo = self.mul(x, m)
        ml, mh = m & 0xFFFF, m >> 16
        xl, xh = self.band(x, 0xFFFF), self.shr(x, 16)
        ll, lh, hl, hh = self.mul(xl, ml), self.mul(xl, mh), self.mul(xh, ml), self.mul(xh, mh)
        mid = self.op("add", [self.op("add", [self.shr(ll, 16), self.band(lh, 0xFFFF)]), self.band(hl, 0xFFFF)])
        hi = self.op("add", [self.op("add", [hh, self.shr(lh, 16)]),
                             self.op("add", [self.shr(hl, 16), self.shr(mid, 16)])])
        return hi, lo


# -- state words -----------------------------------------------------------------------------------------

def state_words(conv, g, inst, env, loc):
    """[(lo, hi)] u32 words of each u64 state element: Python ints or scalar uint32 values."""
    st = inst.operands[0]
    n = int(np.prod(st.shape.dims)) if st.shape.dims else 1
    return [_words(conv, g, st, k, env, loc, inst.name) for k in range(n)]


def _words(conv, g, x, k, env, loc, name):
    op = x.opcode
    if op == "get-tuple-element" and x.operands[0].opcode == "rng-bit-generator" and \
            id(x.operands[0]) in getattr(conv, "rng_states", {}):
        return conv.rng_states[id(x.operands[0])][k]      # a generator's new state, word by word
    if op == "constant":
        v = int(np.asarray(x.literal).reshape(-1)[k].astype(np.uint64))
        return v & 0xFFFFFFFF, v >> 32
    if op in ("reshape", "bitcast", "copy") and x.operands[0].shape.element_type == x.shape.element_type:
        return _words(conv, g, x.operands[0], k, env, loc, name)
    if op == "concatenate" and len(x.shape.dims) == 1:
        for o in x.operands:
            m = o.shape.dims[0]
            if k < m:
                return _words(conv, g, o, k, env, loc, name)
            k -= m
    if op == "bitcast-convert" and x.operands[0].shape.element_type == "u32" and \
            int(np.prod(x.operands[0].shape.dims)) == 2 * int(np.prod(x.shape.dims or (1,))):
        inner = x.operands[0]
        if inner.opcode == "bitcast-convert" and inner.operands[0].shape.element_type in ("u64", "s64"):
            return _words(conv, g, inner.operands[0], k, env, loc, name)     # u64 -> u32 pairs -> u64
        src = env[id(x.operands[0])]
        flat = g.add_op("reshape", [src], [(name + ".key", (int(np.prod(x.operands[0].shape.dims)),), U32)], {},
                        loc)[0]
        return tuple(_scalar_of(g, flat, 2 * k + j, loc, name) for j in (0, 1))
    # any other 64-bit value: its low word as the device holds it, the high word by sign/zero extension
    v = env[id(x)]
    flat = g.add_op("reshape", [v], [(name + ".st", (int(np.prod(x.shape.dims or (1,))),), g.values[v].dtype)],
                    {}, loc)[0]
    s = _scalar_of(g, flat, k, loc, name)
    dt = g.values[v].dtype
    if dt in ("int64", "int32"):
        lo32 = g.add_op("convert", [s], [(name + ".lo", (), "int32")], {}, loc)[0]
        sign = g.add_op("shift-right-arithmetic", [lo32, _const(g, 31, "int32", loc, name)],
                        [(name + ".sign", (), "int32")], {}, loc)[0]
        return tuple(g.add_op("bitcast-convert", [w], [(name + ".w", (), U32)], {}, loc)[0] for w in (lo32, sign))
    lo = g.add_op("convert", [s], [(name + ".lo", (), U32)], {}, loc)[0]
    return lo, 0


def _const(g, v, dt, loc, name):
    return g.add_op("constant", [], [(name + ".c", (), dt)], {"value": int(v)}, loc)[0]


def _scalar_of(g, flat, k, loc, name):
    dt = g.values[flat].dtype
    s = g.add_op("slice", [flat], [(name + ".s", (1,), dt)], {"starts": [k], "limits": [k + 1], "strides": [1]},
                 loc)[0]
    return g.add_op("reshape", [s], [(name + ".w", (), dt)], {}, loc)[0]


# -- the generators ------------------------------------------------------------------------------------------

def lower(conv, g, inst, env, loc):
    """[new state, bits] Penguin values of an rng-bit-generator instruction."""
    from neuronxcc.hlo import interp_attrs as A
    alg = A.str_attr(inst, "algorithm", "rng_default")
    state_shape, data_shape = inst.shape.tuple_shapes
    odt = penguin_dtype(data_shape)
    width = np.dtype(odt).itemsize if odt != "bool" else 1
    dims = tuple(data_shape.dims)
    n = int(np.prod(dims)) if dims else 1
    words = state_words(conv, g, inst, env, loc)
    wide = width == 8
    if alg in PHILOX:
        if len(words) not in (2, 3):
            raise unsupported(inst, "a Philox state of %d words" % len(words))
        if wide:
            # two words per value (x0 | x1 << 32): the device keeps the low one (x0)
            blocks = -(-n // 2)
            flat = _philox(g, loc, inst.name, words, blocks, 4 * blocks)
            b = _U(g, loc, inst.name, (2 * blocks, 2))
            pairs = b.op("reshape", [flat], shape=(2 * blocks, 2))
            lo = b.op("slice", [pairs], attrs={"starts": [0, 0], "limits": [2 * blocks, 1], "strides": [1, 1]},
                      shape=(2 * blocks, 1))
            flat = b.op("reshape", [lo], shape=(2 * blocks,))
            if 2 * blocks != n:
                flat = b.op("slice", [flat], attrs={"starts": [0], "limits": [n], "strides": [1]}, shape=(n,))
        else:
            blocks = -(-n // 4)
            flat = _philox(g, loc, inst.name, words, blocks, n)
        bits = flat
    else:
        if len(words) != 2:
            raise unsupported(inst, "a Threefry state of %d words" % len(words))
        bits, blocks = _threefry(g, loc, inst.name, words, dims, wide)
    bits = g.add_op("reshape", [bits], [(inst.name + ".bits", dims, U32)], {}, loc)[0] if \
        g.values[bits].shape != dims else bits
    if wide:
        # the device holds a 64-bit integer as its low word (README): x0, zero- or sign-extended
        b = _U(g, loc, inst.name, dims)
        bits = b.op("convert", [b.op("bitcast-convert", [bits], "int32")], odt) if odt == "int64" else \
            b.op("convert", [bits], odt)
    elif odt != U32:
        mask = (1 << (8 * width)) - 1
        b = _U(g, loc, inst.name, dims)
        bits = b.op("convert", [b.band(bits, mask)], "uint%d" % (8 * width) if width < 4 else U32)
        if odt.startswith("int"):
            bits = b.op("bitcast-convert", [bits], odt)
    new_state = _new_state(conv, g, inst, env, loc, blocks)
    if not hasattr(conv, "rng_states"):
        conv.rng_states = {}
    conv.rng_states[id(inst)] = _advance(g, loc, inst.name, words, blocks)
    return [new_state, bits]


def _advance(g, loc, name, words, blocks):
    """The new state's words: (s0, s1 + blocks), the carry running into s2 for 3-word states."""
    b = _U(g, loc, name, ())
    out = [words[0]]
    carry = blocks
    for lo, hi in words[1:]:
        if isinstance(lo, int) and isinstance(hi, int) and isinstance(carry, int):
            v = (hi << 32 | lo) + carry
            out.append((v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF))
            carry = v >> 64
            continue
        lo, hi = b.full(lo), b.full(hi)
        nlo = b.op("add", [lo, carry])
        c1 = b.b2u(b.lt(nlo, lo))
        nhi = b.op("add", [hi, c1])
        out.append((nlo, nhi))
        carry = b.b2u(b.op("and", [b.op("compare", [c1, 1], "bool", {"direction": "EQ"}), b.eq0(nhi)], "bool"))
    return out


def _counter(b, lo, hi, blocks):
    """(lo, hi) words of the 64-bit lo|hi + i for block i, and the carry out of the 64 bits."""
    i = b.op("iota", [], attrs={"dimension": 0})
    w0 = b.op("add", [b.full(lo), i])
    c1 = b.lt(w0, i)                                   # carry out of the low word
    w1 = b.op("add", [b.full(hi), b.b2u(c1)])
    carry = b.op("and", [c1, b.eq0(w1)], "bool")
    return w0, w1, carry


def _philox(g, loc, name, words, blocks, n):
    b = _U(g, loc, name, (blocks,))
    (k0, k1) = words[0]
    if len(words) == 2:
        lo, hi = words[1]
        w0, w1, carry = _counter(b, lo, hi, blocks)
        w2 = b.op("add", [b.full(k0), b.b2u(carry)])
        c2 = b.op("and", [carry, b.eq0(w2)], "bool")
        w3 = b.op("add", [b.full(k1), b.b2u(c2)])
    else:
        lo, hi = words[1]
        w0, w1, carry = _counter(b, lo, hi, blocks)
        h0, h1 = words[2]
        w2 = b.op("add", [b.full(h0), b.b2u(carry)])
        c2 = b.op("and", [carry, b.eq0(w2)], "bool")
        w3 = b.op("add", [b.full(h1), b.b2u(c2)])
    x = [w0, w1, w2, w3]
    key0, key1 = k0, k1
    for r in range(10):
        hi0, lo0 = b.mulhilo(x[0], _M0)
        hi1, lo1 = b.mulhilo(x[2], _M1)
        x = [b.xor(b.xor(hi1, x[1]), b.full(key0)), lo1, b.xor(b.xor(hi0, x[3]), b.full(key1)), lo0]
        if r < 9:
            key0, key1 = b.add(key0, _W0), b.add(key1, _W1)
    cols = [b.op("reshape", [w], shape=(blocks, 1)) for w in x]
    inter = b.op("concatenate", cols, attrs={"dimension": 1}, shape=(blocks, 4))
    flat = b.op("reshape", [inter], shape=(4 * blocks,))
    if 4 * blocks != n:
        flat = b.op("slice", [flat], attrs={"starts": [0], "limits": [n], "strides": [1]}, shape=(n,))
    return flat


def _threefry(g, loc, name, words, dims, wide=False):
    """(bits, blocks): one u32 word per output element; for 64-bit outputs (``wide``) one block
    per element in row-major order, its x0 (the low word of x0 | x1 << 32)."""
    dims = tuple(dims) or (1,)
    n = int(np.prod(dims))
    if wide:
        split, half = None, dims
    else:
        cost = [n // d * ((d + 1) // 2) if d else 0 for d in dims]
        split = cost.index(min(cost))
        half = dims[:split] + ((dims[split] + 1) // 2,) + dims[split + 1:]
    blocks = int(np.prod(half))
    b = _U(g, loc, name, (blocks,))
    (k0, k1), (lo, hi) = words
    x0, x1, _ = _counter(b, lo, hi, blocks)
    k2 = (k0 ^ k1 ^ _PARITY) if isinstance(k0, int) and isinstance(k1, int) else \
        b.op("xor", [b.op("xor", [b.full(k0), b.full(k1)]), _PARITY])
    ks = [k0, k1, k2]
    x0 = b.op("add", [x0, b.full(ks[0])])
    x1 = b.op("add", [x1, b.full(ks[1])])
    for grp in range(5):
        for j in range(4):
            r = _ROT[(4 * grp + j) % 8]
            x0 = b.op("add", [x0, x1])
            x1 = b.op("xor", [b.rotl(x1, r), x0])
        x0 = b.op("add", [x0, b.full(ks[(grp + 1) % 3])])
        x1 = b.op("add", [b.op("add", [x1, b.full(ks[(grp + 2) % 3])]), grp + 1])
    if wide:
        return x0, blocks
    stacked_shape = half[:split + 1] + (1,) + half[split + 1:]
    parts = [b.op("reshape", [x], shape=stacked_shape) for x in (x0, x1)]
    both = b.op("concatenate", parts, attrs={"dimension": split + 1},
                shape=half[:split + 1] + (2,) + half[split + 1:])
    full = half[:split] + (2 * half[split],) + half[split + 1:]
    y = b.op("reshape", [both], shape=full)
    if full != dims:
        y = b.op("slice", [y], attrs={"starts": [0] * len(dims), "limits": list(dims), "strides": [1] * len(dims)},
                 shape=dims)
    return y, blocks


def _new_state(conv, g, inst, env, loc, blocks):
    """(s0, s1 + blocks) as the program's own 64-bit add (s1's 128-bit carry for 3-word states)."""
    st = inst.operands[0]
    v = env[id(st)]
    dt = g.values[v].dtype
    shape = tuple(st.shape.dims)
    inc = np.zeros(shape, np.uint64)
    inc.reshape(-1)[1] = blocks
    c = g.add_op("constant", [], [(inst.name + ".inc", shape, dt)], {"data": inc.astype(np.dtype(dt))}, loc)[0]
    return g.add_op("add", [v, c], [(inst.name + ".state", shape, dt)], {}, loc)[0]
