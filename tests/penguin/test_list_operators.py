"""list-operators is the truth: every opcode it prints compiles (HLO -> Penguin -> BIR), and every
opcode of the op table it does not print is refused naming the op and the reason."""
import pytest

from neuronxcc.hlo import ops

ADD = "add_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n"
GE = "ge_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GE\n}\n"
LT = "lt_f {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LT\n}\n"
NEG = "neg_f {\n  a = f32[8] parameter(0)\n  ROOT n = f32[8] negate(a)\n}\n"
COND = ("cond_f {\n  t = (s32[], f32[8]) parameter(0)\n  i = s32[] get-tuple-element(t), index=0\n"
        "  k = s32[] constant(3)\n  ROOT c = pred[] compare(i, k), direction=LT\n}\n")
BODY = ("body_f {\n  t = (s32[], f32[8]) parameter(0)\n  i = s32[] get-tuple-element(t), index=0\n"
        "  x = f32[8] get-tuple-element(t), index=1\n  one = s32[] constant(1)\n  j = s32[] add(i, one)\n"
        "  y = f32[8] add(x, x)\n  ROOT r = (s32[], f32[8]) tuple(j, y)\n}\n")

# opcode -> (computations before ENTRY, ENTRY body lines using p = f32[8] parameter(0)); the default for an
# elementwise op is `ROOT r = f32[8] OP(p[, p])`.
BODIES = {
    "parameter": ("", "ROOT r = f32[8] negate(p)"),
    "constant": ("", "c = f32[8] constant({1,2,3,4,5,6,7,8})\n  ROOT r = f32[8] add(p, c)"),
    "iota": ("", "i = f32[8] iota(), iota_dimension=0\n  ROOT r = f32[8] add(p, i)"),
    "after-all": ("", "t = token[] after-all()\n  ROOT r = f32[8] add-dependency(p, t)"),
    "add-dependency": ("", "t = token[] after-all()\n  ROOT r = f32[8] add-dependency(p, t)"),
    "opt-barrier": ("", "t = (f32[8]) tuple(p)\n  b = (f32[8]) opt-barrier(t)\n  ROOT r = f32[8] get-tuple-element(b), index=0"),
    "tuple": ("", "ROOT r = (f32[8], f32[8]) tuple(p, p)"),
    "get-tuple-element": ("", "t = (f32[8], f32[8]) tuple(p, p)\n  ROOT r = f32[8] get-tuple-element(t), index=1"),
    "copy": ("", "ROOT r = f32[8] copy(p)"),
    "popcnt": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] popcnt(i)"),
    "count-leading-zeros": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] count-leading-zeros(i)"),
    "not": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] not(i)"),
    "is-finite": ("", "ROOT r = pred[8] is-finite(p)"),
    "convert": ("", "ROOT r = s32[8] convert(p)"),
    "bitcast-convert": ("", "ROOT r = s32[8] bitcast-convert(p)"),
    "reduce-precision": ("", "ROOT r = f32[8] reduce-precision(p), exponent_bits=8, mantissa_bits=7"),
    "and": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] and(i, i)"),
    "or": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] or(i, i)"),
    "xor": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] xor(i, i)"),
    "shift-left": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] shift-left(i, i)"),
    "shift-right-logical": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] shift-right-logical(i, i)"),
    "shift-right-arithmetic": ("", "i = s32[8] convert(p)\n  ROOT r = s32[8] shift-right-arithmetic(i, i)"),
    "compare": ("", "ROOT r = pred[8] compare(p, p), direction=LT"),
    "select": ("", "c = pred[8] compare(p, p), direction=LT\n  ROOT r = f32[8] select(c, p, p)"),
    "clamp": ("", "ROOT r = f32[8] clamp(p, p, p)"),
    "map": (ADD, "ROOT r = f32[8] map(p, p), dimensions={0}, to_apply=add_f"),
    "broadcast": ("", "ROOT r = f32[3,8] broadcast(p), dimensions={1}"),
    "reshape": ("", "ROOT r = f32[2,4] reshape(p)"),
    "bitcast": ("", "ROOT r = f32[2,4] bitcast(p)"),
    "transpose": ("", "q = f32[2,4] reshape(p)\n  ROOT r = f32[4,2] transpose(q), dimensions={1,0}"),
    "slice": ("", "ROOT r = f32[3] slice(p), slice={[1:7:2]}"),
    "concatenate": ("", "ROOT r = f32[16] concatenate(p, p), dimensions={0}"),
    "pad": ("", "z = f32[] constant(0)\n  ROOT r = f32[12] pad(p, z), padding=1_3"),
    "reverse": ("", "ROOT r = f32[8] reverse(p), dimensions={0}"),
    "dynamic-slice": ("", "i = s32[] constant(2)\n  ROOT r = f32[3] dynamic-slice(p, i), dynamic_slice_sizes={3}"),
    "dynamic-update-slice": ("", "i = s32[] constant(2)\n  u = f32[3] slice(p), slice={[0:3]}\n"
                                 "  ROOT r = f32[8] dynamic-update-slice(p, u, i)"),
    "gather": ("", "q = f32[8,1] reshape(p)\n  i = s32[2,1] constant({{1},{5}})\n"
                   "  ROOT r = f32[2,1] gather(q, i), offset_dims={1}, collapsed_slice_dims={0}, "
                   "start_index_map={0}, index_vector_dim=1, slice_sizes={1,1}"),
    "scatter": (ADD, "i = s32[2,1] constant({{1},{5}})\n  u = f32[2] slice(p), slice={[0:2]}\n"
                     "  ROOT r = f32[8] scatter(p, i, u), update_window_dims={}, inserted_window_dims={0}, "
                     "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add_f"),
    "reduce": (ADD, "z = f32[] constant(0)\n  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add_f"),
    "reduce-window": (ADD, "z = f32[] constant(0)\n  ROOT r = f32[4] reduce-window(p, z), "
                           "window={size=2 stride=2}, to_apply=add_f"),
    "select-and-scatter": (GE + ADD, "s = f32[4] slice(p), slice={[0:4]}\n  z = f32[] constant(0)\n"
                                     "  ROOT r = f32[8] select-and-scatter(p, s, z), window={size=2 stride=2}, "
                                     "select=ge_f, scatter=add_f"),
    "batch-norm-training": ("", "q = f32[2,4] reshape(p)\n  s = f32[4] constant({1,1,1,1})\n"
                                "  o = f32[4] constant({0,0,0,0})\n  ROOT r = (f32[2,4], f32[4], f32[4]) "
                                "batch-norm-training(q, s, o), epsilon=0.001, feature_index=1"),
    "batch-norm-inference": ("", "q = f32[2,4] reshape(p)\n  s = f32[4] constant({1,2,1,1})\n"
                                 "  ROOT r = f32[2,4] batch-norm-inference(q, s, s, s, s), epsilon=0.001, "
                                 "feature_index=1"),
    "batch-norm-grad": ("", "q = f32[2,4] reshape(p)\n  s = f32[4] constant({1,2,1,1})\n"
                            "  ROOT r = (f32[2,4], f32[4], f32[4]) batch-norm-grad(q, s, s, s, q), epsilon=0.001, "
                            "feature_index=1"),
    "dot": ("", "q = f32[2,4] reshape(p)\n  ROOT r = f32[2,2] dot(q, q), lhs_contracting_dims={1}, "
                "rhs_contracting_dims={1}"),
    "convolution": ("", "x = f32[1,8,1] reshape(p)\n  w = f32[3,1,1] constant({{{1}},{{2}},{{1}}})\n"
                        "  ROOT r = f32[1,6,1] convolution(x, w), window={size=3}, dim_labels=b0f_0io->b0f"),
    "cholesky": ("", "q = f32[2,4] reshape(p)\n  a = f32[4,4] dot(q, q), lhs_contracting_dims={0}, "
                     "rhs_contracting_dims={0}\n  ROOT r = f32[4,4] cholesky(a), lower=true"),
    "triangular-solve": ("", "q = f32[2,4] reshape(p)\n  a = f32[4,4] dot(q, q), lhs_contracting_dims={0}, "
                             "rhs_contracting_dims={0}\n  ROOT r = f32[2,4] triangular-solve(a, q), left_side=false, "
                             "lower=true, unit_diagonal=false, transpose_a=NO_TRANSPOSE"),
    "sort": (LT, "ROOT r = f32[8] sort(p), dimensions={0}, to_apply=lt_f"),
    "topk": ("", "ROOT r = (f32[3], s32[3]) topk(p), k=3, largest=true"),
    "custom-call": ("", "q = f32[1,8] reshape(p)\n  ROOT r = (f32[1,3], s32[1,3]) custom-call(q), "
                        "custom_call_target=\"TopK\""),
    "all-reduce": (ADD, "ROOT r = f32[8] all-reduce(p), replica_groups={}, to_apply=add_f"),
    "all-reduce-start": (ADD, "s = f32[8] all-reduce-start(p), replica_groups={}, to_apply=add_f\n"
                              "  ROOT r = f32[8] all-reduce-done(s)"),
    "all-gather": ("", "ROOT r = f32[8] all-gather(p), dimensions={0}, replica_groups={}"),
    "all-gather-start": ("", "s = (f32[8], f32[8]) all-gather-start(p), dimensions={0}, replica_groups={}\n"
                             "  ROOT r = f32[8] all-gather-done(s)"),
    "reduce-scatter": (ADD, "ROOT r = f32[8] reduce-scatter(p), dimensions={0}, replica_groups={}, "
                            "to_apply=add_f"),
    "all-to-all": ("", "ROOT r = f32[8] all-to-all(p), dimensions={0}, replica_groups={}"),
    "collective-permute": ("", "ROOT r = f32[8] collective-permute(p), source_target_pairs={{0,0}}"),
    "collective-permute-start": ("", "s = (f32[8], f32[8]) collective-permute-start(p), "
                                     "source_target_pairs={{0,0}}\n  ROOT r = f32[8] collective-permute-done(s)"),
    "replica-id": ("", "i = u32[] replica-id()\n  f = f32[] convert(i)\n  b = f32[8] broadcast(f), dimensions={}\n"
                       "  ROOT r = f32[8] add(p, b)"),
    "partition-id": ("", "i = u32[] partition-id()\n  f = f32[] convert(i)\n  b = f32[8] broadcast(f), "
                         "dimensions={}\n  ROOT r = f32[8] add(p, b)"),
    "rng-bit-generator": ("", "k = u64[2] constant({1, 2})\n  r = (u64[2], u32[8]) rng-bit-generator(k), "
                              "algorithm=rng_default\n  ROOT b = u32[8] get-tuple-element(r), index=1"),
    "call": (NEG, "ROOT r = f32[8] call(p), to_apply=neg_f"),
    "fusion": (NEG, "ROOT r = f32[8] fusion(p), kind=kLoop, calls=neg_f"),
    "while": (COND + BODY, "z = s32[] constant(0)\n  t = (s32[], f32[8]) tuple(z, p)\n"
                           "  w = (s32[], f32[8]) while(t), condition=cond_f, body=body_f\n"
                           "  ROOT r = f32[8] get-tuple-element(w), index=1"),
    "conditional": (NEG + NEG.replace("neg_f", "id_f").replace("negate", "copy"),
                    "c = pred[] constant(true)\n  ROOT r = f32[8] conditional(c, p, p), "
                    "true_computation=neg_f, false_computation=id_f"),
}
BODIES["optimization-barrier"] = BODIES["opt-barrier"]
BODIES["all-reduce-done"] = BODIES["all-reduce-start"]
BODIES["all-gather-done"] = BODIES["all-gather-start"]
BODIES["collective-permute-done"] = BODIES["collective-permute-start"]


def _program(opcode):
    if opcode in BODIES:
        pre, body = BODIES[opcode]
    else:
        cat = ops.category(opcode)
        assert cat in (ops.UNARY, ops.BINARY), "no test program for listed op %s" % opcode
        pre, body = "", "ROOT r = f32[8] %s(p%s)" % (opcode, ", p" if cat == ops.BINARY else "")
    return "HloModule op_%s\n%sENTRY main {\n  p = f32[8] parameter(0)\n  %s\n}\n" % (
        opcode.replace("-", "_"), pre, body)


@pytest.mark.parametrize("opcode", ops.supported_opcodes())
def test_every_listed_op_compiles(opcode):
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    module = parse_hlo_text(_program(opcode))
    assert any(i.opcode == opcode for c in module.computations.values() for i in c.instructions) or \
        opcode in ("optimization-barrier",)
    bir = lower_graph(hlo_to_penguin(module))
    assert list(bir.instructions())


@pytest.mark.parametrize("opcode", list(ops.NOT_LOWERED))
def test_every_unlisted_op_is_refused_with_its_reason(opcode):
    from neuronxcc.errors import UnsupportedOperatorError
    from neuronxcc.hlo.model import HloComputation, HloInstruction, HloModule, Shape
    from neuronxcc.starfish.penguin.hlo2penguin import Converter
    assert opcode not in ops.supported_opcodes()
    p = HloInstruction("p", "parameter", Shape("f32", (4,)), [], {}, parameter_number=0)
    x = HloInstruction("x", opcode, Shape("f32", (4,)), [p], {})
    m = HloModule("m", [HloComputation("main", [p, x], x)], "main")
    with pytest.raises(UnsupportedOperatorError) as ei:
        Converter(m).convert_entry()
    line = ei.value.one_line()
    assert opcode in line and ops.NOT_LOWERED[opcode] in line
