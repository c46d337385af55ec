"""Small hand-built BIR modules for the NEFF tests (tests/neff)."""
import numpy as np

from neuronxcc.starfish import birpy


def add_program(name="add_prog", input_names=("x", "y"), output_names=("out",)):
    """out = x + c (c a constant); y (bf16) and a bf16 constant ride along; a loop of nops on POOL."""
    m = birpy.Module(name)
    x, y = input_names
    m.add_tensor(x, "input", "float32", (4, 8))
    m.add_tensor(y, "input", "bfloat16", (4, 8))
    m.add_tensor("c", "const", "float32", (4, 8), data=np.arange(32, dtype=np.float32).reshape(4, 8) / 7)
    m.add_tensor("c/bf16 weird:name", "const", "bfloat16", (2, 3),
                 data=np.array([[1.5, -2.25, 3e38], [0.1, np.inf, -0.0]], dtype=np.float32))
    m.add_tensor(output_names[0], "output", "float32", (4, 8))
    m.add_tensor("tmp", "scratch", "float32", (4, 8))
    m.add_memloc("s0", "SBUF", 4, 32)
    m.add_memloc("s1", "SBUF", 4, 32)
    b = birpy.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("s0", dtype="float32", free=8)], [b.ap(x)], queue="q_in", signals=[("s", 1)])
    b.inst("dma_copy", "ACT", [b.ap("s1", dtype="float32", free=8)], [b.ap("c")], queue="q_const",
           signals=[("s", 1)])
    b.inst("tensor_tensor", "DVE", [b.ap("s0", dtype="float32", free=8)],
           [b.ap("s0", dtype="float32", free=8), b.ap("s1", dtype="float32", free=8)], op="add",
           waits=[("s", 2)], signals=[("t", 1)])
    with b.loop("i", 0, 2):
        b.inst("nop", "POOL")
    b.inst("dma_copy", "SP", [b.ap(output_names[0])], [b.ap("s0", dtype="float32", free=8)], queue="q_out",
           waits=[("t", 1)])
    return b.finish()


def sort_program(function="sort_f32", rows=16, n=10, k=0):
    """values (and indices) = custom op FUNCTION over the rows of x."""
    m = birpy.Module("sort_prog")
    out_n = k if function == "topk_f32" else n
    m.add_tensor("x", "input", "float32", (rows, n))
    m.add_tensor("vals", "output", "float32", (rows, out_n))
    m.add_tensor("idx", "output", "int32", (rows, out_n))
    m.add_memloc("xin", "SBUF", rows, 4 * n)
    m.add_memloc("v", "SBUF", rows, 4 * out_n)
    m.add_memloc("i", "SBUF", rows, 4 * out_n)
    b = birpy.Builder(m)
    b.inst("dma_copy", "SP", [b.ap("xin", dtype="float32", free=n)], [b.ap("x")], queue="q0", signals=[("a", 1)])
    b.inst("custom_op", "POOL", [b.ap("v", dtype="float32", free=out_n), b.ap("i", dtype="int32", free=out_n)],
           [b.ap("xin", dtype="float32", free=n)], function=function, k=k, descending=False, with_indices=True,
           library="libbuiltincustomop", waits=[("a", 1)], signals=[("b", 1)])
    b.inst("dma_copy", "SP", [b.ap("vals")], [b.ap("v", dtype="float32", free=out_n)], queue="q1",
           waits=[("b", 1)])
    b.inst("dma_copy", "SP", [b.ap("idx")], [b.ap("i", dtype="int32", free=out_n)], queue="q1", waits=[("b", 1)])
    return b.finish()
