"""The BIR opcode table: one registry of instruction names, as data.

Each ``OpcodeInfo`` says which engines may issue the opcode, its operand
roles (destinations then sources), which memories each role may touch, which
roles are optional (present only when a boolean attribute is set), and the
attribute defaults. Engine-level memory rules (``ENGINE_READS`` /
``ENGINE_WRITES``) apply on top for compute opcodes: TensorE reads SBUF and
writes PSUM only, GpSimd never touches PSUM, ScalarE/VectorE use SBUF and PSUM.
DMA and sequencer opcodes are exempt from engine rules (the DMA queues and
the sequencer move the data, not the engine's datapath).

The ALU op names, reduce op names and activation function names are also
registries here (``ALU_OPS``, ``REDUCE_OPS``, ``ACT_FUNCS``). Semantics are
defined by ``neuronxcc.starfish.birsim`` (the executable definition).

Helpers other layers use: ``get(name)``, ``operand_roles(instr)`` (role name,
is_dst, allowed memories for every operand actually present) and
``reads_writes(instr)``.
"""
from dataclasses import dataclass, field

__all__ = ["ENGINES", "COMPUTE_ENGINES", "MEMORIES", "ENGINE_READS", "ENGINE_WRITES", "Role",
           "OpcodeInfo", "OPCODES", "ALU_OPS", "SCAN_OPS", "REDUCE_OPS", "ACT_FUNCS", "CUSTOM_OP_FUNCTIONS",
           "get", "operand_roles", "CUSTOM_OP_OPCODE", "is_dma", "indexed_operand", "full_attrs"]

ENGINES = ("PE", "ACT", "DVE", "POOL", "SP")
COMPUTE_ENGINES = ("PE", "ACT", "DVE", "POOL")
MEMORIES = ("HBM", "SBUF", "PSUM")

ENGINE_READS = {"PE": ("SBUF",), "ACT": ("SBUF", "PSUM"), "DVE": ("SBUF", "PSUM"), "POOL": ("SBUF",),
                "SP": ()}
ENGINE_WRITES = {"PE": ("PSUM",), "ACT": ("SBUF", "PSUM"), "DVE": ("SBUF", "PSUM"), "POOL": ("SBUF",),
                 "SP": ()}

CUSTOM_OP_OPCODE = 133

# ALU ops (tensor_tensor, tensor_scalar, scalar_tensor_tensor): name -> class.
#  arith:   computed in fp32 (exact int64 math on POOL when every operand is an integer type)
#  bitvec:  raw integer bits; integer dtypes only
#  compare: 1 if true else 0
#  logical: operands tested != 0; result 0/1
ALU_OPS = {
    "add": "arith", "subtract": "arith", "mult": "arith", "divide": "arith", "max": "arith",
    "min": "arith", "pow": "arith", "mod": "arith", "average": "arith", "bypass": "arith",
    "abs_max": "arith", "rsub": "arith",
    "bitwise_and": "bitvec", "bitwise_or": "bitvec", "bitwise_xor": "bitvec",
    "arith_shift_left": "bitvec", "arith_shift_right": "bitvec",
    "logical_shift_left": "bitvec", "logical_shift_right": "bitvec",
    "eq": "compare", "ne": "compare", "lt": "compare", "le": "compare", "gt": "compare", "ge": "compare",
    "logical_and": "logical", "logical_or": "logical", "logical_xor": "logical",
}

# Reduce ops (tensor_reduce, partition_reduce).
REDUCE_OPS = ("add", "max", "min", "mult", "bitwise_and", "bitwise_or", "logical_and", "logical_or")

# ScalarE activation functions: out = func(in * scale + bias).
ACT_FUNCS = ("copy", "identity", "exp", "log", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh",
             "gelu_apprx_sigmoid", "gelu_dx", "silu", "silu_dx", "erf", "erf_dx", "sqrt", "rsqrt",
             "reciprocal", "square", "abs", "sign", "sin", "arctan", "softplus", "mish", "lrelu",
             "prelu")

# Custom-op kernels in the builtin GpSimd libraries (ucode_lib function names).
CUSTOM_OP_FUNCTIONS = ("sort_f32", "topk_f32")

# tensor_tensor_scan ops
SCAN_OPS = ("add", "subtract", "mult", "max", "min", "bypass")

_ONCHIP = ("SBUF", "PSUM")


@dataclass(frozen=True)
class Role:
    name: str
    memories: tuple
    present_if: str = None     # optional operand: present iff attrs[present_if] is truthy


@dataclass(frozen=True)
class OpcodeInfo:
    name: str
    code: int                  # numeric opcode (custom_op is 133)
    engines: tuple
    dsts: tuple                # Roles
    srcs: tuple                # Roles
    attrs: dict = field(default_factory=dict)   # defaults; keys not listed here are rejected
    kind: str = "compute"      # compute | dma | sequencer
    doc: str = ""

    def dst_roles(self, attrs):
        return [r for r in self.dsts if r.present_if is None or attrs.get(r.present_if)]

    def src_roles(self, attrs):
        return [r for r in self.srcs if r.present_if is None or attrs.get(r.present_if)]


def _R(name, *mems, present_if=None):
    return Role(name, tuple(mems), present_if)


_TABLE = [
    OpcodeInfo("matmul", 1, ("PE",), (_R("out", "PSUM"),), (_R("stationary", "SBUF"), _R("moving", "SBUF")),
               {"psum_zero": True},
               doc="out[M,N] (fp32 PSUM) = (0 if psum_zero else out) + stationary[K,M].T @ moving[K,N]"),
    OpcodeInfo("transpose", 2, ("PE", "DVE"), (_R("out", *_ONCHIP),), (_R("in", *_ONCHIP),), {},
               doc="out[F,P] = in[P,F]; PE: <=128x128 SBUF->PSUM; DVE: <=32x32"),
    OpcodeInfo("activation", 3, ("ACT",), (_R("out", *_ONCHIP), _R("accum", *_ONCHIP, present_if="reduce")),
               (_R("in", *_ONCHIP), _R("bias", *_ONCHIP, present_if="bias_ap"),
                _R("scale", *_ONCHIP, present_if="scale_ap")),
               {"func": "identity", "scale": 1.0, "bias": 0.0, "alpha": 0.01, "reduce": None,
                "bias_ap": False, "scale_ap": False},
               doc="out = func(in*scale + bias); scale/bias a float or a [P,1] operand; "
                   "reduce='add' writes accum[P,1] = sum over free of out (fp32)"),
    OpcodeInfo("tensor_tensor", 4, ("DVE", "POOL"), (_R("out", *_ONCHIP),), (_R("in0", *_ONCHIP), _R("in1", *_ONCHIP)),
               {"op": "add"}, doc="out = in0 op in1 (elementwise, flattened free order)"),
    OpcodeInfo("tensor_scalar", 5, ("DVE", "ACT", "POOL"), (_R("out", *_ONCHIP),),
               (_R("in", *_ONCHIP), _R("operand0", *_ONCHIP, present_if="operand0_ap"),
                _R("operand1", *_ONCHIP, present_if="operand1_ap")),
               {"op0": "add", "operand0": 0.0, "reverse0": False, "op1": None, "operand1": 0.0,
                "reverse1": False, "operand0_ap": False, "operand1_ap": False},
               doc="out = (in op0 s0) op1 s1; s a float or a [P,1] operand; reverse swaps operands"),
    OpcodeInfo("scalar_tensor_tensor", 6, ("DVE", "POOL"), (_R("out", *_ONCHIP),),
               (_R("in0", *_ONCHIP), _R("in1", *_ONCHIP), _R("operand0", *_ONCHIP, present_if="operand0_ap")),
               {"op0": "mult", "operand0": 1.0, "reverse0": False, "op1": "add", "operand0_ap": False},
               doc="out = (in0 op0 s0) op1 in1"),
    OpcodeInfo("tensor_tensor_scan", 14, ("DVE",), (_R("out", *_ONCHIP),),
               (_R("in0", *_ONCHIP), _R("in1", *_ONCHIP), _R("initial", *_ONCHIP, present_if="initial_ap")),
               {"op0": "mult", "op1": "add", "initial": 0.0, "initial_ap": False},
               doc="out[i] = (in0[i] op0 out[i-1]) op1 in1[i] along each partition's free elements, "
                   "out[-1] = initial (a float or a [P,1] operand); ops add/subtract/mult/max/min/bypass"),
    OpcodeInfo("tensor_reduce", 7, ("DVE", "POOL"), (_R("out", *_ONCHIP),), (_R("in", *_ONCHIP),),
               {"op": "add", "axes": 1, "negate": False},
               doc="reduce the innermost `axes` free dims of in; out holds the remaining dims"),
    OpcodeInfo("partition_reduce", 8, ("POOL",), (_R("out", "SBUF"),), (_R("in", "SBUF"),),
               {"op": "add"}, doc="out[1,F] = reduce over partitions of in[P,F]"),
    OpcodeInfo("tensor_copy", 9, ("DVE", "ACT", "POOL"), (_R("out", *_ONCHIP),), (_R("in", *_ONCHIP),), {},
               doc="out = cast(in); bit exact on DVE/POOL when dtypes match; ACT goes through fp32"),
    OpcodeInfo("iota", 10, ("POOL",), (_R("out", "SBUF"),), (),
               {"pattern": [[1, 1]], "offset": 0, "channel_multiplier": 0},
               doc="out[p,i..] = offset + p*channel_multiplier + sum(i_k*step_k) (int32 math)"),
    OpcodeInfo("memset", 11, ("DVE", "POOL"), (_R("out", *_ONCHIP),), (), {"value": 0.0},
               doc="out = value"),
    OpcodeInfo("select", 12, ("DVE", "POOL"), (_R("out", *_ONCHIP),),
               (_R("pred", *_ONCHIP), _R("on_true", *_ONCHIP), _R("on_false", *_ONCHIP)), {},
               doc="out = on_true if pred != 0 else on_false"),
    OpcodeInfo("affine_select", 13, ("POOL",), (_R("out", "SBUF"),), (_R("in", "SBUF"),),
               {"pattern": [[1, 1]], "offset": 0, "channel_multiplier": 0, "cmp": "ge", "on_false": 0.0},
               doc="v = iota value; out = in if (v cmp 0) else on_false"),
    OpcodeInfo("dma_copy", 20, ENGINES, (_R("out", "HBM", "SBUF"),), (_R("in", "HBM", "SBUF"),),
               {"queue": "q0"}, kind="dma",
               doc="out = cast(in) (raw copy when dtypes match, else via fp32; int->int exact)"),
    OpcodeInfo("dma_gather", 21, ENGINES, (_R("out", "SBUF"),), (_R("in", "HBM", "SBUF"), _R("index", "SBUF")),
               {"queue": "q0", "index_stride": 1, "index_min": 0, "index_max": 0, "oob": "clamp"}, kind="dma",
               doc="out[p, :] = cast(in at offset + clamp(index[p], index_min, index_max) * index_stride "
                   "+ pattern); index is [P,1] int32; in's pattern covers one row (out's free size); "
                   "oob='skip' leaves rows with an index outside [index_min, index_max] untouched, "
                   "oob='error' stops the program on one"),
    OpcodeInfo("dma_scatter", 22, ENGINES, (_R("out", "HBM", "SBUF"),), (_R("in", "SBUF"), _R("index", "SBUF")),
               {"queue": "q0", "index_stride": 1, "index_min": 0, "index_max": 0, "accumulate": None,
                "oob": "clamp"}, kind="dma",
               doc="for p in order: out at offset + clamp(index[p]) * index_stride + pattern = cast(in[p, :]) "
                   "(accumulate='add': += in fp32); out's pattern covers one row"),
    OpcodeInfo("collective", 40, ("SP",), (_R("out", "HBM"),), (_R("in", "HBM"),),
               {"queue": "qCollective", "op": "all_reduce", "reduce": None, "groups": None, "pairs": None,
                "collective_id": 0}, kind="dma",
               doc="run by the collective engine between the ranks of groups (global rank ids; every "
                   "rank in exactly one group) or pairs ([source, target] for op=permute); element "
                   "order of each AP is row-major over its pattern. all_reduce: out = reduce over the "
                   "group of in, members in group order (fp32 math rounded to the dtype after each "
                   "member, exact for ints). all_gather: out = "
                   "the members' in, member k's as block k. reduce_scatter: in is G blocks; out = "
                   "reduce of every member's block k for member k. all_to_all: block j of in goes to "
                   "member j, which stores it as its block k (k = the sender's position). permute: "
                   "out = in of the source whose pair targets this rank, zeros when none does. "
                   "reduce: add | max | min | mult | bitwise_and | bitwise_or | logical_and | logical_or. "
                   "LNC=2 (penguin/lnc.py): barrier = the group's cores wait for each other, fence = "
                   "orders accesses on its queue; neither moves data"),
    OpcodeInfo("register_load", 30, ENGINES, (), (_R("in", "HBM", "SBUF"),),
               {"register": None, "min": None, "max": None}, kind="sequencer",
               doc="register = clamp(int32 in[0], min, max)"),
    OpcodeInfo("nop", 31, ENGINES, (), (), {}, kind="sequencer", doc="semaphore waits/signals only"),
    OpcodeInfo("custom_op", CUSTOM_OP_OPCODE, ("POOL",),
               (_R("values", "SBUF"), _R("indices", "SBUF", present_if="with_indices")), (_R("in", "SBUF"),),
               {"sub_opcode": 0, "function": None, "library": "libbuiltincustomop", "k": 0,
                "descending": True, "with_indices": True},
               doc="call the staged GpSimd library function on rows = partitions (fp32 in)"),
]

# the nki.isa instructions without an older BIR counterpart (their own module)
from neuronxcc.starfish.birpy.opcodes_nki import table as _nki_table  # noqa: E402

_TABLE.extend(_nki_table(OpcodeInfo, _R))

OPCODES = {o.name: o for o in _TABLE}
OPCODES_BY_CODE = {o.code: o for o in _TABLE}


def get(name):
    """The OpcodeInfo for NAME. Raises KeyError."""
    return OPCODES[name]


def full_attrs(instr):
    """instr.attrs with the table defaults filled in."""
    info = OPCODES[instr.opcode]
    out = dict(info.attrs)
    out.update(instr.attrs)
    return out


def operand_roles(instr):
    """[(ap, role_name, is_dst, allowed_memories)] for every operand of instr.

    Allowed memories are the role's, intersected with the engine's read/write
    rule for compute opcodes.
    """
    info = OPCODES[instr.opcode]
    attrs = full_attrs(instr)
    out = []
    for is_dst, roles, aps in ((True, info.dst_roles(attrs), instr.dsts), (False, info.src_roles(attrs), instr.srcs)):
        for role, ap in zip(roles, aps):
            mems = role.memories
            if info.kind == "compute":
                eng = (ENGINE_WRITES if is_dst else ENGINE_READS).get(instr.engine, ())
                mems = tuple(m for m in mems if m in eng)
            out.append((ap, role.name, is_dst, mems))
    return out


def is_dma(instr):
    """True for opcodes that run on a DMA queue (dma_copy, dma_gather, dma_scatter, collective)."""
    return OPCODES[instr.opcode].kind == "dma"


def indexed_operand(instr):
    """For dma_gather/dma_scatter: (the indexed AP, lo, hi) where the AP's offset
    moves by an element delta in [lo, hi] (index_min/max x index_stride) at run
    time; None for every other opcode. Dependence analysis must widen that
    operand's box by the delta range."""
    if instr.opcode not in ("dma_gather", "dma_scatter"):
        return None
    a = full_attrs(instr)
    st = int(a["index_stride"])
    lo, hi = int(a["index_min"]) * st, int(a["index_max"]) * st
    ap = instr.srcs[0] if instr.opcode == "dma_gather" else instr.dsts[0]
    return ap, min(lo, hi), max(lo, hi)
