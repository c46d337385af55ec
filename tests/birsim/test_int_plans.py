"""The exact int64 plans (birsim._plans.IntElementWise, IntSelect, Fill) on the operand forms and
sizes the integer corpus programs (random bits, the integer op zoo) execute: per-partition [P, 1]
scalar operands of tensor_scalar and tiles past the fp32 whole-tile limit (plans.EW_MAX), against
the reference path (every instruction through its handler): bit-identical memory and timeline."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from neuronxcc.hwm import get_target
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birsim import _plans, plans
from neuronxcc.starfish.birsim.executor import Executor
from neuronxcc.starfish.birsim.state import MachineState
from neuronxcc.starfish.birsim.timeline import Timeline

from birsim.test_plans import _run

_OPS = sorted(_plans.INT_OPS)


def _typed(m, inst):
    tm = get_target("trn1")
    ex = Executor(m, MachineState(m, tm), Timeline(m, tm))
    return ex._prepare(inst)[1]


def _same(m, ins):
    m.ensure_ids()
    fast, s1 = _run(m, ins, True)
    ref, s2 = _run(m, ins, False)
    for a, b in zip(fast, ref):
        assert a.tobytes() == b.tobytes()
    assert s1 == s2


@settings(max_examples=80, deadline=None)
@given(st.sampled_from(_OPS), st.sampled_from(_OPS + [None]), st.sampled_from(["int32", "uint32", "int8", "uint16"]),
       st.sampled_from(["int32", "uint32", "int16", "uint8"]), st.sampled_from(["int32", "uint32", "int8"]),
       st.booleans(), st.booleans(), st.booleans(), st.integers(-40, 40), st.integers(0, 99))
def test_per_partition_integer_scalars_match_the_handler(op0, op1, dt_in, dt_out, dt_s, ap1, rev0, rev1, s1, seed):
    """tensor_scalar on POOL in the integer domain with operand0 (and maybe operand1) a [P, 1]
    operand: every alu_i op of the typed plan, reversed operands, shift counts past the width,
    divide / mod by zero, narrow scalar dtypes (read as int64 like the handler's)."""
    P, F = 8, 12
    m = B.Module("int_ts_ap")
    m.add_tensor("x", "input", "int32", (P, F))
    m.add_tensor("s", "input", "int32", (P, 2))
    m.add_tensor("y", "output", "int32", (P, F))
    m.add_memloc("a", "SBUF", P, F * 4)
    m.add_memloc("c", "SBUF", P, 8)
    m.add_memloc("o", "SBUF", P, F * 4)
    b = B.Builder(m)
    b.inst("dma_copy", "SP", [B.AccessPattern("a", "int32", 0, [[1, F]], 0, P)], [b.ap("x")], queue="q0")
    b.inst("dma_copy", "SP", [B.AccessPattern("c", "int32", 0, [[1, 2]], 0, P)], [b.ap("s")], queue="q0")
    k = 4 // np.dtype(dt_s).itemsize        # scalar element 1 of the narrower view sits at byte 4
    scal = [B.AccessPattern("c", dt_s, 0, [[1, 1]], 0, P)] + ([B.AccessPattern("c", dt_s, k, [[1, 1]], 0, P)]
                                                               if ap1 and op1 else [])
    src = B.AccessPattern("a", dt_in, 0, [[1, F]], 0, P)
    out = B.AccessPattern("o", dt_out, 0, [[1, F]], 0, P)
    i = b.inst("tensor_scalar", "POOL", [out], [src] + scal, op0=op0, operand0_ap=True, reverse0=rev0, op1=op1,
               operand1=float(s1), operand1_ap=bool(ap1 and op1), reverse1=rev1)
    b.inst("dma_copy", "SP", [b.ap("y")], [B.AccessPattern("o", "int32", 0, [[1, F]], 0, P)], queue="q1")
    b.finish()
    rng = np.random.default_rng(seed)
    x = rng.integers(-2 ** 31, 2 ** 31, (P, F)).astype(np.int32)
    s = rng.integers(-40, 40, (P, 2)).astype(np.int32)
    s[:4, :] = [[0, 0], [31, 32], [-1, 33], [8, -8]]      # zero divisors, shift counts at the width's edges
    m.ensure_ids()
    assert isinstance(_typed(m, i), _plans.IntElementWise)
    _same(m, [x, s])


@pytest.mark.parametrize("dtype", ["int32", "uint32", "int16"])
def test_integer_plans_take_tiles_past_the_whole_tile_limit(dtype):
    """A [125, 208] tile (26000 elements, past plans.EW_MAX) strided a partition apart, as the random
    bits program's: tensor_tensor, tensor_scalar with a [P, 1] shift count, an integer select, a
    converting copy, memset and iota all take the typed plans, bit-identical to the handlers."""
    P, F = 125, 208
    assert P * F > plans.EW_MAX
    m = B.Module("int_big")
    m.add_tensor("x", "input", "int32", (P, 2 * F))
    m.add_tensor("y", "output", "int32", (P, 6 * F))
    m.add_memloc("a", "SBUF", P, 2 * F * 4)
    m.add_memloc("c", "SBUF", P, 4)
    m.add_memloc("o", "SBUF", P, 6 * F * 4)
    b = B.Builder(m)

    def a(dt, off, n=F):
        return B.AccessPattern("a", dt, off, [[1, n]], 0, P)

    def o(dt, off, n=F):
        return B.AccessPattern("o", dt, off, [[1, n]], 0, P)
    b.inst("dma_copy", "SP", [a("int32", 0, 2 * F)], [b.ap("x")], queue="q0")
    b.inst("dma_copy", "SP", [B.AccessPattern("c", "int32", 0, [[1, 1]], 0, P)],
           [B.AccessPattern("x", "int32", 0, [[2 * F, P], [1, 1]])], queue="q0")
    b.inst("tensor_scalar", "POOL", [B.AccessPattern("c", "int32", 0, [[1, 1]], 0, P)],
           [B.AccessPattern("c", "int32", 0, [[1, 1]], 0, P)], op0="bitwise_and", operand0=31.0)
    typed = [
        b.inst("tensor_tensor", "POOL", [o(dtype, 0)], [a(dtype, 0), a(dtype, F)], op="bitwise_xor"),
        b.inst("tensor_scalar", "POOL", [o(dtype, F)], [a(dtype, 0), B.AccessPattern("c", "int32", 0, [[1, 1]], 0, P)],
               op0="logical_shift_right", operand0_ap=True, op1="add", operand1=7.0),
        b.inst("tensor_scalar", "POOL", [o("int32", 2 * F)], [a(dtype, F)], op0="logical_shift_left", operand0=13.0,
               op1="bitwise_or", operand1=5.0),
        b.inst("select", "POOL", [o(dtype, 3 * F)], [a("int32", 0), o(dtype, 0), o(dtype, F)]),
        b.inst("memset", "POOL", [o("int32", 4 * F)], [], value=-3.0),
        b.inst("tensor_copy", "POOL", [o("int16", 5 * F)], [a("int32", F)]),
    ]
    b.inst("dma_copy", "SP", [b.ap("y")], [o("int32", 0, 6 * F)], queue="q1")
    b.finish()
    m.ensure_ids()
    x = np.random.default_rng(5).integers(-2 ** 31, 2 ** 31, (P, 2 * F)).astype(np.int32)
    for i in typed:
        assert isinstance(_typed(m, i), (_plans.IntElementWise, _plans.IntSelect, _plans.Fill)), i.opcode
    _same(m, [x])
