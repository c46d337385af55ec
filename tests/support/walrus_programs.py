"""Random small BIR programs with loops, for the walrus tests.

Programs move data between HBM and a few SBUF buffers and combine them with
ACT/DVE/POOL ops (and the PE through PSUM) in loops, on partial partition
and free ranges, so that there are RAW, WAR and WAW dependences within and
across iterations, between engines and between DMA queues. All arithmetic
is linear with small constants (no overflow, no NaN), so results are exact
and any reordering that breaks a dependence changes them.
"""
import numpy as np

from neuronxcc import pelican
from neuronxcc.starfish import birpy as B

F = 16          # fp32 elements per partition in a buffer


KINDS = ("load", "unary", "binary", "act", "copy", "store", "store_fixed")


def chip(name, p0, np_, f0, nf):
    """An fp32 SBUF/PSUM access: partitions [p0, p0+np_), free elements [f0, f0+nf)."""
    return B.AccessPattern(name, "float32", f0, [[1, nf]], p0, np_)


def random_op(bld, rng, bufs, iv, row, kinds, queues, f=F):
    """Emit one random op at loop index ``iv`` on buffers ``bufs``.

    ``row`` is the row length (fp32 elements) of the HBM tensors x and y, each
    iteration owning ``f`` of them (``f``: the buffers' fp32 elements per partition). Kinds: DMA load from x / store to y (at the
    iteration's slot or a fixed one), DVE/ACT/POOL compute, and "pe" (a copy
    through PSUM with the ``ident`` matrix into ``ps``, which the module must
    hold). All arithmetic is small-integer exact.
    """
    kind = str(rng.choice(list(kinds)))
    p0, np_ = [(0, 128), (0, 64), (64, 64), (32, 32)][int(rng.integers(0, 4))]
    f0, nf = [(0, f), (0, f // 2), (f // 2, f // 2)][int(rng.integers(0, 3))]
    a, b, c = (str(x) for x in rng.choice(bufs, 3))
    q = str(rng.choice(list(queues)))
    eng_dma = str(rng.choice(["SP", "ACT", "POOL"]))
    if kind == "load":
        bld.inst("dma_copy", eng_dma, [chip(a, p0, np_, f0, nf)],
                 [B.AccessPattern("x", "float32", iv * f + p0 * row + f0, [[row, np_], [1, nf]])], queue=q)
    elif kind == "unary":
        bld.inst("tensor_scalar", str(rng.choice(["DVE", "ACT", "POOL"])), [chip(a, p0, np_, f0, nf)],
                 [chip(b, p0, np_, f0, nf)], op0="mult", operand0=float(rng.choice([0.5, -1.0, 2.0])),
                 op1="add", operand1=float(rng.integers(-2, 3)))
    elif kind == "binary":
        bld.inst("tensor_tensor", str(rng.choice(["DVE", "POOL"])), [chip(a, p0, np_, f0, nf)],
                 [chip(b, p0, np_, f0, nf), chip(c, p0, np_, f0, nf)], op=str(rng.choice(["add", "subtract"])))
    elif kind == "act":
        bld.inst("activation", "ACT", [chip(a, p0, np_, f0, nf)], [chip(b, p0, np_, f0, nf)],
                 func="identity", scale=0.5, bias=1.0)
    elif kind == "copy":
        bld.inst("tensor_copy", str(rng.choice(["DVE", "POOL"])), [chip(a, p0, np_, f0, nf)],
                 [chip(b, p0, np_, f0, nf)])
    elif kind in ("store", "store_fixed"):
        off = (iv * f if kind == "store" else pelican.const(0)) + p0 * row + f0
        bld.inst("dma_copy", eng_dma, [B.AccessPattern("y", "float32", off, [[row, np_], [1, nf]])],
                 [chip(a, p0, np_, f0, nf)], queue=q)
    else:  # PE: ps = ident^T @ b (K = 128 partitions from partition 0), then a copy out of PSUM
        bld.inst("matmul", "PE", [chip("ps", 0, 128, 0, f)], [chip("ident", 0, 128, 0, 128), chip(b, 0, 128, 0, f)],
                 psum_zero=True)
        bld.inst("tensor_copy", str(rng.choice(["DVE", "ACT"])), [chip(a, p0, np_, f0, nf)],
                 [chip("ps", p0, np_, f0, nf)])


def random_program(seed, nbuf=4, trips=(2, 4), nested=True, with_pe=True, control=False):
    """control=True adds an If (on an input flag) and a While (trip count from an input)."""
    rng = np.random.default_rng(seed)
    T = int(rng.integers(trips[0], trips[1] + 1))
    J = int(rng.integers(1, 3)) if nested else 1
    m = B.Module("rand%d" % seed)
    m.add_tensor("x", "input", "float32", (128, T * J * F))
    m.add_tensor("y", "output", "float32", (128, T * J * F))
    m.add_tensor("z", "output", "float32", (nbuf, 128, F))
    if control:
        m.add_tensor("ctl", "input", "int32", (2,))      # [if flag, while trips]
        m.add_memloc("cnt", "SBUF", 1, 4)
    bufs = ["b%d" % k for k in range(nbuf)]
    for b in bufs:
        m.add_memloc(b, "SBUF", 128, F * 4)
    if with_pe:
        m.add_memloc("ps", "PSUM", 128, F * 4)
        m.add_memloc("ident", "SBUF", 128, 128 * 4)
    bld = B.Builder(m)

    for b in bufs:
        bld.inst("memset", str(rng.choice(["DVE", "POOL"])), [chip(b, 0, 128, 0, F)], value=float(rng.integers(-3, 4)))
    if with_pe:
        # an identity matrix for PE "copies" through PSUM: iota(p - f) == 0
        bld.inst("memset", "POOL", [chip("ident", 0, 128, 0, 128)], value=1.0)
        bld.inst("affine_select", "POOL", [chip("ident", 0, 128, 0, 128)], [chip("ident", 0, 128, 0, 128)],
                 pattern=[[-1, 128]], offset=0, channel_multiplier=1, cmp="eq", on_false=0.0)

    kinds = KINDS + (("pe",) if with_pe else ())

    def op(iv):
        random_op(bld, rng, bufs, iv, T * J * F, kinds, ("q0", "q1", "q2"))

    nops = int(rng.integers(4, 9))
    if control:
        bld.inst("register_load", "SP", [], [B.AccessPattern("ctl", "int32", 0, [[1, 1]])], register="flag",
                 min=0, max=1)
        with bld.if_("flag"):
            for _ in range(int(rng.integers(2, 5))):
                op(pelican.const(0))
        with bld.else_():
            for _ in range(int(rng.integers(1, 4))):
                op(pelican.const(min(1, T * J - 1)))
        bld.inst("dma_copy", "SP", [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)],
                 [B.AccessPattern("ctl", "int32", 1, [[1, 1]])], queue="q3")
        bld.inst("register_load", "SP", [], [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)], register="w",
                 min=0, max=8)
        with bld.while_("w", max_trips=8):
            for _ in range(int(rng.integers(2, 6))):
                op(pelican.const(T * J - 1))
            bld.inst("tensor_scalar", "POOL", [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)],
                     [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)], op0="add", operand0=-1.0)
            bld.inst("register_load", "SP", [], [B.AccessPattern("cnt", "int32", 0, [[1, 1]], 0, 1)],
                     register="w", min=0, max=8)
    with bld.loop("i", 0, T) as i:
        if J > 1:
            with bld.loop("j", 0, J) as j:
                for _ in range(nops):
                    op(i * J + j)
        else:
            for _ in range(nops):
                op(i)
    for k, b in enumerate(bufs):
        bld.inst("dma_copy", "SP", [B.AccessPattern("z", "float32", k * 128 * F, [[F, 128], [1, F]])],
                 [chip(b, 0, 128, 0, F)], queue="q0")
    bld.finish()
    return m


def inputs_for(module, seed=0):
    rng = np.random.default_rng(seed + 1000)
    out = []
    for n in module.inputs:
        if n == "ctl":
            out.append(np.array([rng.integers(0, 2), rng.integers(1, 4)], np.int32))
        else:
            out.append(rng.integers(-4, 5, module.tensors[n].shape).astype(np.float32))
    return out
