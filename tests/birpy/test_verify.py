"""The verifier accepts legal BIR and rejects each broken rule with BirVerifyError."""
import numpy as np
import pytest

from neuronxcc.errors import BirVerifyError
from neuronxcc.pelican import var
from neuronxcc.starfish import birpy as B
from neuronxcc.starfish.birpy.opcodes import OPCODES, operand_roles
from neuronxcc.starfish.birpy.cost import instruction_cost


def AP(t, dt, off=0, pat=((1, 1),), sp=0, np_=1):
    return B.AccessPattern(t, dt, off, [list(p) for p in pat], sp, np_)


def _base():
    m = B.Module("v")
    m.add_tensor("x", "input", "bfloat16", (4, 128, 64))
    m.add_tensor("y", "output", "float32", (128, 512))
    m.add_tensor("i", "input", "int32", (1,))
    m.add_memloc("a", "SBUF", 128, 2048)
    m.add_memloc("w", "SBUF", 128, 1024)
    m.add_memloc("ps", "PSUM", 128, 4096)
    m.add_memloc("o", "SBUF", 128, 2048)
    m.add_memloc("r", "SBUF", 1, 4)
    b = B.Builder(m)
    with b.loop("k", 0, 4) as k:
        b.inst("dma_copy", "SP", [AP("a", "bfloat16", k * 64, [[1, 64]], 0, 128)],
               [B.AccessPattern("x", "bfloat16", k * 8192, [[64, 128], [1, 64]])])
    b.inst("matmul", "PE", [AP("ps", "float32", 0, [[1, 256]], 0, 128)],
           [AP("w", "bfloat16", 0, [[1, 128]], 0, 128), AP("a", "bfloat16", 0, [[1, 256]], 0, 128)])
    b.inst("dma_copy", "SP", [AP("r", "int32", 0, [[1, 1]], 0, 1)], [b.ap("i")])
    b.inst("register_load", "SP", [], [AP("r", "int32", 0, [[1, 1]], 0, 1)], register="rr", min=0, max=1)
    b.inst("activation", "ACT", [AP("o", "float32", var("rr") * 256, [[1, 256]], 0, 128)],
           [AP("ps", "float32", 0, [[1, 256]], 0, 128)], func="exp")
    b.inst("dma_copy", "SP", [b.ap("y")], [AP("o", "float32", 0, [[1, 512]], 0, 128)])
    return b.finish()


def test_base_module_is_legal():
    B.verify(_base())


def _insts(m):
    return m.instructions()


def _mutate(fn):
    m = _base()
    fn(m, _insts(m))
    return m


CASES = [
    ("unknown opcode", lambda m, I: setattr(I[1], "opcode", "fft"), "unknown opcode"),
    ("engine not allowed", lambda m, I: setattr(I[1], "engine", "DVE"), "cannot run matmul"),
    ("PE writes SBUF", lambda m, I: setattr(I[1].dsts[0], "target", "o"), "operand out is in SBUF"),
    ("POOL touches PSUM", lambda m, I: (setattr(I[4], "engine", "POOL"), setattr(I[4], "opcode", "tensor_copy"),
                                       I[4].attrs.clear()), "in PSUM"),
    ("DMA into PSUM", lambda m, I: setattr(I[0].dsts[0], "target", "ps"), "operand out is in PSUM"),
    ("too many partitions", lambda m, I: m.add_memloc("big", "SBUF", 129, 4), "129 partitions"),
    ("memloc too large", lambda m, I: m.add_memloc("huge", "PSUM", 1, 16385), "16385 bytes"),
    ("allocation outside SBUF", lambda m, I: (setattr(m.memlocs["o"], "start_partition", 8),
                                              setattr(m.memlocs["o"], "byte_offset", 0)), "partitions 8..136"),
    ("bounds over loop iterations", lambda m, I: setattr(m.body[0], "stop", 17), "reaches bytes"),
    ("HBM bounds", lambda m, I: setattr(m.body[0].body[0].srcs[0], "offset", B.to_expr(var("k") * 8192 + 1)),
     "reaches elements"),
    ("register without range", lambda m, I: I[3].attrs.pop("max"), "no min/max"),
    ("register range too wide", lambda m, I: I[3].attrs.update(max=8), "reaches bytes"),
    ("unknown register", lambda m, I: setattr(I[4].dsts[0], "offset", B.to_expr(var("zz"))), "neither a loop"),
    ("HBM dtype mismatch", lambda m, I: setattr(I[5].dsts[0], "dtype", "bfloat16"), "differs from tensor"),
    ("matmul output bf16", lambda m, I: setattr(I[1].dsts[0], "dtype", "bfloat16"), "must be float32"),
    ("fp32 mixed with bf16", lambda m, I: setattr(I[1].srcs[0], "dtype", "float32"), "fp32/tf32 must be paired"),
    ("tf32 mixed with bf16", lambda m, I: setattr(I[1].srcs[0], "dtype", "tfloat32"), "fp32/tf32 must be paired"),
    ("matmul M > 128", lambda m, I: I[1].srcs[0].__setattr__("pattern", [[1, 129]]), "exceed"),
    ("matmul N > 512", lambda m, I: (I[1].srcs[1].__setattr__("pattern", [[1, 513]]),
                                    I[1].dsts[0].__setattr__("pattern", [[1, 513]])), "exceed"),
    ("matmul K mismatch", lambda m, I: setattr(I[1].srcs[1], "num_partitions", 64), "K=128 and moving K=64"),
    ("PSUM bank crossing", lambda m, I: setattr(I[1].dsts[0], "offset", B.to_expr(384)), "cross a 2048-byte PSUM bank"),
    ("start partition rule", lambda m, I: (setattr(I[4].dsts[0], "num_partitions", 48),
                                          setattr(I[4].dsts[0], "start_partition", 16),
                                          setattr(I[4].srcs[0], "num_partitions", 48)), "starts at partition 16"),
    ("shape mismatch", lambda m, I: setattr(I[4].srcs[0], "pattern", [[1, 128]]), "shapes"),
    ("unknown attribute", lambda m, I: I[4].attrs.update(fucn="exp"), "unknown attribute"),
    ("unknown activation", lambda m, I: I[4].attrs.update(func="swish9"), "unknown activation"),
    ("operand count", lambda m, I: I[4].srcs.append(I[4].srcs[0]), "expects 1 dsts / 1 srcs"),
    ("bitvec on floats", lambda m, I: (setattr(I[4], "engine", "DVE"), setattr(I[4], "opcode", "tensor_scalar"),
                                      I[4].attrs.clear(), I[4].attrs.update(op0="bitwise_and")), "integer dtypes"),
    ("negative signal", lambda m, I: setattr(I[1], "signals", [("PE", 0)]), "must be positive"),
    ("while on unloaded register", lambda m, I: m.body.append(B.While("nope", [])), "not a loaded register"),
    ("shadowed loop var", lambda m, I: m.body[0].body.append(B.Loop("k", 0, 2, 1, [])), "shadows"),
    ("custom op function", lambda m, I: m.body.append(B.Instruction(
        "custom_op", "POOL", [AP("o", "float32", 0, [[1, 4]], 0, 4), AP("o", "int32", 8, [[1, 4]], 0, 4)],
        [AP("o", "float32", 16, [[1, 4]], 0, 4)], {"function": "fft_f32"})), "unknown custom-op function"),
    ("register load dtype", lambda m, I: setattr(I[3].srcs[0], "dtype", "float32"), "one int32 element"),
    ("const without data", lambda m, I: m.add_tensor("c", "const", "float32", (2,)), "has no data"),
    ("negative tensor dim", lambda m, I: m.add_tensor("t", "scratch", "float32", (-1,)), "shape"),
    ("unknown operand dtype", lambda m, I: setattr(I[1].srcs[0], "dtype", "float128"), "unknown dtype"),
    ("wrong attribute type", lambda m, I: I[4].attrs.update(scale="2"), "wrong type"),
    ("register without a name", lambda m, I: I[3].attrs.update(register=7), "register name"),
    ("register min > max", lambda m, I: I[3].attrs.update(min=2, max=1), "min <= max"),
    ("unknown target", lambda m, I: setattr(m, "target", "trn9"), "unknown target"),
]


@pytest.mark.parametrize("what,fn,match", CASES, ids=[c[0] for c in CASES])
def test_each_rule_rejects(what, fn, match):
    m = _mutate(fn)
    with pytest.raises(BirVerifyError, match=match) as e:
        B.verify(m)
    assert e.value.code == "NCC_IBIR001"
    assert "\n" not in e.value.one_line()


def test_opcode_table_is_consistent():
    from neuronxcc.starfish.birsim import nki_ops
    from neuronxcc.starfish.birsim.executor import Executor
    for name, info in OPCODES.items():
        # the nki.isa opcodes (birpy.opcodes_nki) have their semantics in birsim.nki_ops
        assert hasattr(Executor, "op_" + name) or name in nki_ops._OPS, name
        for role in info.dsts + info.srcs:
            assert set(role.memories) <= {"HBM", "SBUF", "PSUM"}
            assert role.present_if is None or role.present_if in info.attrs
    assert OPCODES["custom_op"].code == 133
    m = _base()
    roles = operand_roles(m.instructions()[1])
    assert [(r, d, mem) for _, r, d, mem in roles] == [("out", True, ("PSUM",)), ("stationary", False, ("SBUF",)),
                                                       ("moving", False, ("SBUF",))]


def test_cost_rules():
    from neuronxcc.hwm import get_target
    v2, v3 = get_target("trn1"), get_target("trn2")
    m = _base()
    I = m.instructions()
    mm = instruction_cost(I[1], m)        # bf16 matmul, Ns=128, Nm=256 -> max(min(64,128), 256) = 256 cycles
    assert mm.track == "PE" and mm.cycles == 256 and mm.busy_s == pytest.approx(256 / v2.pe_hz)
    I[1].srcs[0].dtype = I[1].srcs[1].dtype = "float32"
    assert instruction_cost(I[1], m).cycles == 256 * v2.fp32_matmul_slowdown == 1024
    act = instruction_cost(I[4], m)       # max(64, 256) + 60
    assert act.cycles == 316 and act.busy_s == pytest.approx(316 / v2.act_hz)
    dma = instruction_cost(I[0], m)       # 128 x 64 bf16: 128 descriptors (one per partition) over 16 engines
    assert dma.track == "DMA:q0" and dma.latency_s == v2.dma_fixed_latency_s and dma.width == 16
    assert dma.busy_s == pytest.approx((128 * 64 * 2 / v2.dma_bytes_per_sec_per_engine
                                        + 128 * v2.dma_descriptor_overhead_s) / 16)
    assert instruction_cost(I[1], m, "trn2").busy_s == pytest.approx(1024 / v3.pe_hz)
    # small matmul: the stationary side's 64-cycle floor
    I[1].srcs[1].pattern = [[1, 8]]
    I[1].dsts[0].pattern = [[1, 8]]
    assert instruction_cost(I[1], m).cycles == 64 * v2.fp32_matmul_slowdown
