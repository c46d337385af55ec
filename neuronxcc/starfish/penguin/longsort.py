"""Sorts of rows longer than one sort_f32 custom-op call holds (top-p sampling sorts a whole
vocabulary: 128256 logits, descending, with their positions).

The custom op sorts rows of at most C = SORT_MAX_ROW elements (= partitions' free length). A longer
row is padded to N = C * 2**m elements, cut into chunks of C that the custom op sorts, and the sorted
chunks are merged by a bitonic merging network, elementwise over HBM views (a data-oblivious
schedule: graph-sized code, any data):

* every element is a (key, position) pair: the key is the custom op's order as a signed 32-bit
  integer (the float's bits, negatives with their magnitude bits flipped; all NaNs one key above
  +inf; zeros and subnormals one key, as XLA compares with denormals as zero; bit-inverted for a
  descending sort), the position its column in the row. Pairs order by key, then position, so the
  order is total and the result is the stable sort's;
* merging two sorted runs of L into 2L: the first run's i-th pair against the second run's
  (L-1-i)-th (a reversed view), the smaller to the first; then half-cleaners at distances L/2, ...,
  1, the smaller to the lower position. Each step reads one buffer set (key, position, value) and
  writes the other, through one materialised swap mask;
* padding sorts last: NaN (ascending) or -inf (descending) ties the last real key and loses on its
  position, so the first n of the merged row are the answer.

log2(N/C) merge levels of log2(C) + 1 ... log2(N) steps: 62 steps for 128256 elements.
"""
from neuronxcc.starfish.penguin.expr import Node
from neuronxcc.starfish.penguin.tiles import IOTA_BASE
from neuronxcc.starfish.penguin.views import Splat, View

_SIGN_FREE = 0x7FFFFFFF
_EXP = 0x7F800000
_MANT = 0x007FFFFF


def _cmp(a, b, d, shape):
    return Node("compare", [a, b], {"direction": d}, "bool", shape)


def _i32(v, shape):
    return Splat(v, "int32", shape)


def order_key(v, shape, descending):
    """The signed int32 key whose order is sort_f32's order of float32 values v."""
    b = Node("bitcast-convert", [v], {}, "int32", shape)
    e = Node("and", [b, _i32(_EXP, shape)], {}, "int32", shape)
    m = Node("and", [b, _i32(_MANT, shape)], {}, "int32", shape)
    nan = Node("and", [_cmp(e, _i32(_EXP, shape), "EQ", shape), _cmp(m, _i32(0, shape), "NE", shape)], {},
               "bool", shape)
    flipped = Node("xor", [b, _i32(_SIGN_FREE, shape)], {}, "int32", shape)
    s = Node("select", [_cmp(b, _i32(0, shape), "LT", shape), flipped, b], {}, "int32", shape)
    s = Node("select", [_cmp(e, _i32(0, shape), "EQ", shape), _i32(0, shape), s], {}, "int32", shape)
    s = Node("select", [nan, _i32(_SIGN_FREE, shape), s], {}, "int32", shape)
    if descending:
        s = Node("xor", [s, _i32(-1, shape)], {}, "int32", shape)
    return s


def _halves(v, rows, N, j, flip):
    """(first, second) halves of every block of 2j along the row; the second reversed for a flip."""
    nb = N // (2 * j)
    r = v.reshape((rows, nb, 2, j))
    a = r.slice([0, 0, 0, 0], [rows, nb, 1, j], [1, 1, 1, 1]).reshape((rows, nb, j))
    b = r.slice([0, 0, 1, 0], [rows, nb, 2, j], [1, 1, 1, 1]).reshape((rows, nb, j))
    return a, (b.reverse([2]) if flip else b)


def sort_long_rows(wm, src, rows, n, chunk, descending, vdtype, op):
    """(values (rows, n) of vdtype, positions (rows, n) int32) of the stable sort of each row of src
    (a (rows, n) View), in sort_f32's order; ``wm`` is the codegen (its elementwise, materialise and
    custom_rows)."""
    em = wm.em
    nch = -(-n // chunk)
    M = 1 << (nch - 1).bit_length()
    N = M * chunk
    t = em.tensor("lsort_in", "scratch", "float32", (rows, N))
    padded = View.contiguous(t, "float32", (rows, N))
    if N != n:
        wm.elementwise(Splat(float("-inf") if descending else float("nan"), "float32", (rows, N - n)),
                       padded.slice([0, n], [rows, N], [1, 1]))
    wm.elementwise(src if src.dtype == "float32" else Node("convert", [src], {}, "float32", src.shape),
                   padded.slice([0, 0], [rows, n], [1, 1]))
    V0, I0 = wm.custom_rows(padded.reshape((rows * M, chunk)), rows * M, chunk, chunk, "sort_f32", descending,
                             ("float32",), op)
    shape = (rows, N)
    bufs = []
    for k in range(2):
        bufs.append([View.contiguous(em.tensor("lsort_%s%d" % (nm, k), "scratch", dt, shape), dt, shape)
                     for nm, dt in (("key", "int32"), ("pos", "int32"), ("val", "float32"))])
    V = V0.reshape(shape)
    wm.elementwise(order_key(V, shape, descending), bufs[0][0])
    off = View(IOTA_BASE, "int32", (rows, M, chunk), [0, chunk, 0], 0)
    wm.elementwise(Node("add", [I0.reshape((rows, M, chunk)), off], {}, "int32", (rows, M, chunk)),
                   bufs[0][1].reshape((rows, M, chunk)))
    wm.elementwise(V, bufs[0][2])
    steps = []
    L = chunk
    while L < N:
        steps.append((L, True))
        j = L // 2
        while j >= 1:
            steps.append((j, False))
            j //= 2
        L *= 2
    hshape = (rows, N // 2)
    mask_t = em.tensor("lsort_swap", "scratch", "uint8", hshape)
    cur = 0
    for j, flip in steps:
        X, Y = bufs[cur], bufs[1 - cur]
        (ka, kb), (pa, pb) = _halves(X[0], rows, N, j, flip), _halves(X[1], rows, N, j, flip)
        hs = ka.shape
        swap = Node("or", [_cmp(kb, ka, "LT", hs),
                           Node("and", [_cmp(kb, ka, "EQ", hs), _cmp(pb, pa, "LT", hs)], {}, "bool", hs)], {},
                    "bool", hs)
        sw = View.contiguous(mask_t, "bool", hs)
        wm.elementwise(swap, sw)
        for x, y, dt in zip(X, Y, ("int32", "int32", "float32")):
            xa, xb = _halves(x, rows, N, j, flip)
            ya, yb = _halves(y, rows, N, j, flip)
            wm.elementwise(Node("select", [sw, xb, xa], {}, dt, hs), ya)
            wm.elementwise(Node("select", [sw, xa, xb], {}, dt, hs), yb)
        cur = 1 - cur
    _, P, Vf = bufs[cur]
    vt = em.tensor("lsort_vals", "scratch", vdtype if vdtype != "bool" else "float32", (rows, n))
    it = em.tensor("lsort_idx", "scratch", "int32", (rows, n))
    vo = View.contiguous(vt, vdtype, (rows, n))
    io = View.contiguous(it, "int32", (rows, n))
    vs = Vf.slice([0, 0], [rows, n], [1, 1])
    wm.elementwise(vs if vdtype == "float32" else Node("convert", [vs], {}, vdtype, (rows, n)), vo)
    wm.elementwise(P.slice([0, 0], [rows, n], [1, 1]), io)
    return vo, io
