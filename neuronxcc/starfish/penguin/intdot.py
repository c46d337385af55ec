"""Integer dots computed exactly on a PE that accumulates in fp32.

XLA's integer dot (``s8 x s8 -> s32``, the int8 matmul of a quantised model; ``s32 x s32``) is exact
in 32-bit wrapping arithmetic. The PE multiplies and accumulates in fp32 (hardware reference:
"PSUM accumulation ... always in FP32"), which is exact only while every partial sum stays below
2^24: an int8 matmul with K = 4096 reaches 127 * 127 * 4096 = 6.6e7 and came back rounded.

The dot is rewritten into fp32-exact pieces:
* each operand, as the int32 word the device holds it in, is split into bytes (limbs): one for an
  8-bit type, two for 16, four for 32 and 64 (the low word); the low limbs are unsigned (0..255),
  the top one keeps the sign, so every limb is an integer of at most 8 bits plus sign and exact in
  bfloat16;
* K is cut into chunks short enough that a chunk's sum of limb products stays below 2^24 (256
  elements for two full bytes, 1024 for two signed 8-bit values), as one batched bf16 dot over
  (batch, chunk), whose fp32 results are exact and are converted to int32;
* the chunks are summed, each limb pair shifted by its byte position, and the pairs added, all in
  int32 (POOL's exact integer ALU; wrapping as XLA's s32 does). Pairs shifted 32 bits or more
  vanish mod 2^32 and are not computed: 10 dots for 32-bit operands, 1 for 8-bit ones.

The op count does not depend on the tensor sizes (the chunks are a batch dimension).
"""
from neuronxcc.starfish.penguin.hloinst import penguin_dtype

# bits of an operand type's value, by HLO element type (64-bit: its 32-bit word)
WIDTH = {"s8": 8, "u8": 8, "s16": 16, "u16": 16, "s32": 32, "u32": 32, "s64": 32, "u64": 32}
EXACT = 1 << 24          # fp32 holds every integer up to this exactly


def _limb_bound(et, nlimbs, k):
    """The largest magnitude limb ``k`` of an ``et`` operand split into ``nlimbs`` takes."""
    if nlimbs == 1:
        return 128 if et.startswith("s") else 255
    return 128 if (k == nlimbs - 1 and et.startswith("s")) else 255


def lower(g, inst, ins, loc):
    """The Penguin value of an integer dot, exact; None for any other dot."""
    from neuronxcc.hlo import interp_attrs as A
    out_et = inst.shape.element_type
    lt, rt = (o.shape.element_type for o in inst.operands)
    if out_et not in WIDTH or lt not in WIDTH or rt not in WIDTH or not inst.shape.is_array:
        return None
    d = A.dot_dims(inst)
    lb, lc = list(d["lhs_batch_dims"]), list(d["lhs_contracting_dims"])
    rb, rc = list(d["rhs_batch_dims"]), list(d["rhs_contracting_dims"])
    ls = tuple(inst.operands[0].shape.dims)
    rs = tuple(inst.operands[1].shape.dims)
    lf = [k for k in range(len(ls)) if k not in lb + lc]
    rf = [k for k in range(len(rs)) if k not in rb + rc]

    def prod(dims, shape):
        p = 1
        for k in dims:
            p *= shape[k]
        return p
    B, M, K, N = prod(lb, ls), prod(lf, ls), prod(lc, ls), prod(rf, rs)
    name = inst.name

    def op(kind, xs, shape, dtype, attrs=None, suffix=""):
        return g.add_op(kind, xs, [("%s.%s" % (name, suffix or kind), tuple(shape), dtype)], attrs or {}, loc)[0]

    def const(v, dtype="int32"):
        return op("constant", [], (), dtype, {"value": v}, "c")

    def word(x, et, perm, shape3):
        """x as int32 words, its dims permuted and folded into ``shape3``."""
        dt = g.values[x].dtype
        if dt == "uint32":
            x = op("bitcast-convert", [x], g.values[x].shape, "int32", suffix="bits")
        elif dt != "int32":
            x = op("convert", [x], g.values[x].shape, "int32", suffix="i32")
        if perm != list(range(len(perm))):
            x = op("transpose", [x], [g.values[x].shape[p] for p in perm], "int32", {"permutation": perm})
        return op("reshape", [x], shape3, "int32")

    L = word(ins[0], lt, lb + lf + lc, (B, M, K))
    R = word(ins[1], rt, rb + rc + rf, (B, K, N))
    nl, nr = WIDTH[lt] // 8, WIDTH[rt] // 8
    amax = max(_limb_bound(lt, nl, k) for k in range(nl))
    bmax = max(_limb_bound(rt, nr, k) for k in range(nr))
    kc = K        # one chunk when the whole of K stays exact, else the longest power of two that does
    if K * amax * bmax > EXACT:
        kc = 1
        while kc * 2 * amax * bmax <= EXACT:
            kc *= 2
    nc = -(-K // kc)
    if nc * kc != K:         # zero rows pad K to whole chunks
        z = const(0)
        L = op("pad", [L, z], (B, M, nc * kc), "int32", {"padding": [[0, 0, 0], [0, 0, 0], [0, nc * kc - K, 0]]})
        R = op("pad", [R, z], (B, nc * kc, N), "int32", {"padding": [[0, 0, 0], [0, nc * kc - K, 0], [0, 0, 0]]})
    # chunks as a batch dimension: L [B*nc, M, kc], R [B*nc, kc, N]
    L = op("reshape", [L], (B, M, nc, kc), "int32")
    L = op("transpose", [L], (B, nc, M, kc), "int32", {"permutation": [0, 2, 1, 3]})
    L = op("reshape", [L], (B * nc, M, kc), "int32")
    R = op("reshape", [R], (B * nc, kc, N), "int32")

    def limbs(x, n, et):
        if n == 1:
            return [op("convert", [x], g.values[x].shape, "bfloat16", suffix="limb")]
        sh = g.values[x].shape
        out = []
        for k in range(n):
            if k < n - 1:
                v = op("shift-right-logical", [x, op("broadcast", [const(8 * k)], sh, "int32", {"dimensions": []})],
                       sh, "int32", suffix="shr") if k else x
                v = op("and", [v, op("broadcast", [const(255)], sh, "int32", {"dimensions": []})], sh, "int32",
                       suffix="byte")
            else:
                v = op("shift-right-arithmetic" if et.startswith("s") or WIDTH[et] == 32 else "shift-right-logical",
                       [x, op("broadcast", [const(8 * k)], sh, "int32", {"dimensions": []})], sh, "int32",
                       suffix="top")
            out.append(op("convert", [v], sh, "bfloat16", suffix="limb"))
        return out

    Ls, Rs = limbs(L, nl, lt), limbs(R, nr, rt)
    dims = {"lhs_batch_dims": [0], "lhs_contracting_dims": [2], "rhs_batch_dims": [0], "rhs_contracting_dims": [1]}
    acc = None
    for i, a in enumerate(Ls):
        for j, b in enumerate(Rs):
            s = 8 * (i + j)
            if s >= 32:
                continue
            p = op("dot", [a, b], (B * nc, M, N), "float32", dict(dims), "dot")
            p = op("convert", [p], (B * nc, M, N), "int32", suffix="exact")
            if nc > 1:
                p = op("reshape", [p], (B, nc, M, N), "int32")
                p = op("reduce", [p, const(0)], (B, M, N), "int32", {"dimensions": [1], "reducer": "add"}, "chunks")
            else:
                p = op("reshape", [p], (B, M, N), "int32")
            if s:
                p = op("shift-left", [p, op("broadcast", [const(s)], (B, M, N), "int32", {"dimensions": []})],
                       (B, M, N), "int32", suffix="place")
            acc = p if acc is None else op("add", [acc, p], (B, M, N), "int32", suffix="sum")
    dt = penguin_dtype(inst.shape)
    out = op("reshape", [acc], tuple(inst.shape.dims), "int32")
    if dt == "int32":
        return g.add_op("copy", [out], [(name, tuple(inst.shape.dims), dt)], {}, loc)[0]
    if dt == "uint32":
        return g.add_op("bitcast-convert", [out], [(name, tuple(inst.shape.dims), dt)], {}, loc)[0]
    return g.add_op("convert", [out], [(name, tuple(inst.shape.dims), dt)], {}, loc)[0]
