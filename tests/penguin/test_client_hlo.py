"""HLO that real clients emit, at the edges XLA's own op tests check, compiled through Penguin and
run on birsim against JAX (scripts/probe_hlo.py found each of these failing):

* vmapped scatter (``input_batching_dims``: ``jax.vmap`` of ``.at[].add``, the gradient of
  ``take_along_axis`` in a cross-entropy loss) used to be refused;
* zero-element tensors (a K = 0 dot, a sum over an empty axis) ended in a ZeroDivisionError;
* shifts by amounts outside [0, width), arithmetic shifts of unsigned and logical shifts of signed
  narrow types, bit counts of narrow types were computed on 32-bit words;
* sorts of 32-bit integer keys went through float32 keys (values above 2^24 came back rounded);
* reduce-window with padding and an init value that is not the identity added the init once per
  padded element;
* compare with type=TOTALORDER (XLA's HLO tests; -NaN < -inf < -0 < +0 < +NaN) followed IEEE order.
"""
import numpy as np
import pytest

import jax
import jax.numpy as jnp
from jax import lax

from penguin_helpers import check

R = np.random.RandomState(11)


def test_vmapped_scatter_add_and_set():
    x = R.randn(3, 6, 2).astype(np.float32)
    i = np.array([[0, 5, 0], [2, 2, 1], [4, 3, 3]], np.int32)
    u = R.randn(3, 3, 2).astype(np.float32)
    check(lambda x, i, u: (jax.vmap(lambda r, j, v: r.at[j].add(v))(x, i, u),
                           jax.vmap(lambda r, j, v: r.at[j].set(v))(x, i, u)), x, i, u)


def test_cross_entropy_gradient_scatters_with_batching_dims():
    logits = R.randn(6, 11).astype(np.float32)
    labels = R.randint(0, 11, 6).astype(np.int32)

    def f(lg, lb):
        return jax.value_and_grad(lambda z: -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(z), lb[:, None], 1)))(lg)
    text = jax.jit(f).lower(logits, labels).as_text()
    assert "scatter" in text
    check(f, logits, labels)


def test_zero_element_tensors():
    a, b, e = np.zeros((3, 0), np.float32), np.zeros((0, 4), np.float32), np.zeros((2, 0), np.float32)
    x = R.randn(2, 3).astype(np.float32)
    check(lambda a, b, e, x: (a @ b, jnp.sum(e, axis=1), jnp.max(e, axis=1, initial=-jnp.inf),
                              jnp.concatenate([e, x], axis=1), jnp.sort(e, axis=1), e * 2,
                              lax.pad(e, 1.5, ((0, 0, 0), (1, 2, 0)))), a, b, e, x)


def test_shifts_by_every_amount():
    a = np.array([1, -1, 12345, -12345, 7, -8, 2 ** 30, -2 ** 31], np.int32)
    s = np.array([0, 31, 32, 33, -1, 100, 1, 5], np.int32)
    check(lambda a, s: (lax.shift_left(a, s), lax.shift_right_logical(a, s), lax.shift_right_arithmetic(a, s),
                        lax.shift_left(a, jnp.int32(32)), lax.shift_right_arithmetic(a, jnp.int32(40))), a, s)


def test_narrow_and_unsigned_shifts():
    u8 = np.array([0, 7, 128, 133, 255, 64], np.uint8)
    s8 = np.array([0, -1, -128, 127, -3, 64], np.int8)
    u32 = np.array([0x80000000, 0xFFFFFFFF, 5, 0x7FFFFFFF, 1, 0xF0000000], np.uint32)
    s16 = np.array([-1, 2 ** 14, -2 ** 15, 3, -300, 12], np.int16)
    k = np.array([3, 1, 7, 8, 0, 2], np.uint8)
    check(lambda u8, s8, u32, s16, k: (
        lax.shift_right_arithmetic(u8, jnp.uint8(3)), lax.shift_right_arithmetic(u8, k),
        lax.shift_right_logical(s8, jnp.int8(1)), lax.shift_right_logical(s8, k.astype(jnp.int8)),
        lax.shift_left(s8, k.astype(jnp.int8)), lax.shift_right_arithmetic(u32, jnp.uint32(4)),
        lax.shift_right_logical(s16, k.astype(jnp.int16)), lax.shift_right_arithmetic(s16, k.astype(jnp.int16) * 3)),
        u8, s8, u32, s16, k)


def test_narrow_bit_counts():
    u8 = np.arange(0, 256, 7, dtype=np.uint8)
    s8 = (np.arange(0, 256, 7) - 128).astype(np.int8)
    s16 = np.array([-1, 0, 1, 300, -300, 2 ** 14, -2 ** 15], np.int16)
    u16 = np.array([0, 1, 255, 256, 65535, 4096, 3], np.uint16)
    check(lambda u8, s8, s16, u16: (lax.clz(u8), lax.population_count(s8), lax.clz(s8), lax.clz(s16),
                                    lax.population_count(s16), lax.clz(u16)), u8, s8, s16, u16)


@pytest.mark.parametrize("descending", [False, True])
def test_sort_32_bit_integer_keys_exactly(descending):
    u = np.array([3, 2 ** 31 + 5, 0, 7, 2 ** 31 + 3, 2 ** 32 - 1, 2 ** 24 + 1, 2 ** 24], np.uint32)
    i = np.array([2 ** 30 + 1, 2 ** 30, -2 ** 31, 5, -(2 ** 30) - 1, -(2 ** 30), 2 ** 24 + 1, 2 ** 24], np.int32)
    check(lambda u, i: (jnp.sort(u, descending=descending), jnp.sort(i, descending=descending),
                        jnp.argsort(i, descending=descending, stable=True)), u, i)


def test_two_key_sort_with_integer_keys():
    k1 = np.array([1, 0, 1, 0, 2 ** 25, 2 ** 25 + 1], np.int32)
    k2 = np.array([2 ** 25 + 1, 3, 2 ** 25, 3, 0, 0], np.int32)
    v = np.arange(6, dtype=np.float32)
    check(lambda a, b, c: lax.sort((a, b, c), num_keys=2, is_stable=True), k1, k2, v)


def test_reduce_window_padding_is_left_out_of_the_reduction():
    x = (R.randn(7) - 2).astype(np.float32)
    y = R.randn(5, 6).astype(np.float32)
    check(lambda x, y: (lax.reduce_window(x, 1.0, lax.add, (3,), (2,), ((2, 1),)),
                        lax.reduce_window(y, 2.0, lax.mul, (2, 2), (1, 2), ((1, 0), (0, 1))),
                        lax.reduce_window(y, 0.5, lax.max, (3, 3), (2, 2), ((1, 1), (1, 1)))), x, y)


TOTAL_ORDER = """HloModule total
ENTRY main {
  a = f32[8] parameter(0)
  b = f32[8] parameter(1)
  lt = pred[8] compare(a, b), direction=LT, type=TOTALORDER
  ge = pred[8] compare(a, b), direction=GE, type=TOTALORDER
  eq = pred[8] compare(a, b), direction=EQ, type=TOTALORDER
  hb = bf16[8] convert(a)
  hc = bf16[8] convert(b)
  gt = pred[8] compare(hb, hc), direction=GT, type=TOTALORDER
  ROOT t = (pred[8], pred[8], pred[8], pred[8]) tuple(lt, ge, eq, gt)
}"""


def test_total_order_compare_against_xla():
    from neuronxcc.common.tolerances import assert_close
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    from penguin_helpers import run_bir
    from support.corpus import xla_run
    nan = np.float32(np.nan)
    a = np.array([-0.0, 0.0, -nan, nan, -np.inf, 1.0, -nan, 2.0], np.float32)
    b = np.array([0.0, -0.0, -np.inf, np.inf, -nan, 1.0, nan, nan], np.float32)
    try:
        want = xla_run(TOTAL_ORDER, [a, b])
    except NotImplementedError as e:
        pytest.skip(str(e))
    got = run_bir(lower_graph(hlo_to_penguin(parse_hlo_text(TOTAL_ORDER))), [a, b])
    for k, (x, y) in enumerate(zip(got, want)):
        assert_close(x, y, "output%d" % k, row="compiled")


def test_bitcast_convert_across_widths():
    # quantisation and hashing code bitcasts floats to their bytes and back (was refused)
    x = np.array([[1.5, -0.0, np.inf, -3.25e-5], [np.nan, 7.0, -1e30, 2.0 ** -130]], np.float32)
    u = R.randint(0, 2 ** 32, size=(3, 2), dtype=np.uint64).astype(np.uint32)
    h = R.randn(5).astype(np.float16)
    b8 = R.randint(-128, 128, size=(3, 4)).astype(np.int8)

    def f(x, u, h, b8):
        as_u8 = lax.bitcast_convert_type(x, jnp.uint8)
        return (as_u8, lax.bitcast_convert_type(as_u8, jnp.float32),
                lax.bitcast_convert_type(x.astype(jnp.bfloat16), jnp.uint8),
                lax.bitcast_convert_type(u, jnp.uint16), lax.bitcast_convert_type(lax.bitcast_convert_type(u, jnp.int16),
                                                                                  jnp.uint32),
                lax.bitcast_convert_type(h, jnp.int8), lax.bitcast_convert_type(b8, jnp.float32),
                lax.bitcast_convert_type(x[0, 0], jnp.uint8))
    check(f, x, u, h, b8)


def test_atan2_of_two_infinities_and_zeros():
    inf = np.inf
    y = np.array([inf, inf, -inf, -inf, 0.0, -0.0, 0.0, -0.0, 1.0, np.nan], np.float32)
    x = np.array([inf, -inf, inf, -inf, 0.0, 0.0, -0.0, -0.0, -inf, inf], np.float32)
    check(lambda y, x: jnp.arctan2(y, x), y, x)


def test_top_k_over_rows_longer_than_one_custom_op_call():
    # LLM sampling takes the top k of a vocabulary's logits (32000 and more); rows over 8192 were refused.
    # 9001 columns: two chunks, the last padded; repeated values check that ties go to the lower index
    x = np.round(R.randn(2, 9001) * 4).astype(np.float32)
    x[1, 8999] = 100.0
    check(lambda x: lax.top_k(x, 20), x)
    check(lambda x: lax.top_k(x.astype(jnp.bfloat16), 5), x)


def _off_cpu_hlo(f, *args):
    """The HLO JAX emits for f on a platform without LAPACK custom calls (the cholesky and
    triangular-solve opcodes), as an HloModuleProto; skips when this jaxlib cannot give it."""
    try:
        from jax import export
        from jax._src.lib import _jax
        mlir = export.export(jax.jit(f), platforms=["tpu"])(*args).mlir_module()
        comp = _jax.mlir.mlir_module_to_xla_computation(mlir, use_tuple_args=False, return_tuple=False)
    except (ImportError, AttributeError) as e:
        pytest.skip("no off-CPU lowering in this jaxlib: %s" % e)
    return comp.as_serialized_hlo_module_proto(), comp.as_hlo_text()


def test_cholesky_and_triangular_solves_as_jax_emits_them_off_cpu():
    from neuronxcc.common.tolerances import assert_close
    from neuronxcc.hlo import load_module
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    from penguin_helpers import jax_outputs, run_bir
    a = R.randn(2, 6, 6).astype(np.float32)
    a = a @ a.transpose(0, 2, 1) + 6 * np.eye(6, dtype=np.float32)
    b = R.randn(2, 6, 3).astype(np.float32)

    def f(a, b):
        ll = jnp.linalg.cholesky(a)
        return (ll, jax.scipy.linalg.cho_solve((ll, True), b),
                jax.scipy.linalg.solve_triangular(a, b, lower=False, trans=1, unit_diagonal=True),
                jax.scipy.linalg.solve_triangular(ll[0].astype(jnp.bfloat16), b[0].astype(jnp.bfloat16), lower=True))
    pb, text = _off_cpu_hlo(f, a, b)
    assert "cholesky(" in text and "triangular-solve(" in text
    got = run_bir(lower_graph(hlo_to_penguin(load_module(pb))), [a, b])
    for k, (x, y) in enumerate(zip(got, jax_outputs(f, a, b))):
        assert_close(x, y, "output%d" % k, row="compiled")


TRSM = """HloModule trsm
ENTRY main {
  a = f32[3,1,5,5] parameter(0)
  b = f32[3,1,4,5] parameter(1)
  c = f32[3,1,5,5] cholesky(a), lower=false
  x = f32[3,1,4,5] triangular-solve(c, b), left_side=false, lower=false, transpose_a=TRANSPOSE
  y = f32[3,1,4,5] triangular-solve(a, b), left_side=false, lower=true, unit_diagonal=true, transpose_a=NO_TRANSPOSE
  ROOT t = (f32[3,1,5,5], f32[3,1,4,5], f32[3,1,4,5]) tuple(c, x, y)
}"""


def test_upper_cholesky_and_right_side_solves_against_xla():
    from neuronxcc.common.tolerances import assert_close
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    from penguin_helpers import run_bir
    from support.corpus import xla_run
    a = R.randn(3, 1, 5, 5).astype(np.float32)
    a = a @ np.swapaxes(a, -1, -2) + 5 * np.eye(5, dtype=np.float32)
    b = R.randn(3, 1, 4, 5).astype(np.float32)
    try:
        want = xla_run(TRSM, [a, b])
    except NotImplementedError as e:
        pytest.skip(str(e))
    got = run_bir(lower_graph(hlo_to_penguin(parse_hlo_text(TRSM))), [a, b])
    for k, (x, y) in enumerate(zip(got, want)):
        assert_close(x, y, "output%d" % k, row="compiled")


def test_cholesky_of_a_matrix_that_is_not_positive_definite_is_all_nan():
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    from penguin_helpers import run_bir
    from support.corpus import xla_run
    text = "HloModule c\nENTRY main {\n  a = f32[2,4,4] parameter(0)\n  ROOT l = f32[2,4,4] cholesky(a), lower=true\n}"
    a = np.stack([np.diag([4.0, 1.0, 2.0, 3.0]), np.diag([4.0, -1.0, 2.0, 3.0])]).astype(np.float32)
    try:
        want = xla_run(text, [a])[0]
    except NotImplementedError as e:
        pytest.skip(str(e))
    got = run_bir(lower_graph(hlo_to_penguin(parse_hlo_text(text))), [a])[0]
    from neuronxcc.common.tolerances import assert_close
    assert np.isnan(want[1]).all() and np.isnan(got[1]).all()
    assert_close(got[0], want[0], "output0", row="compiled")


def test_64_bit_bit_counts_of_values_that_fit_the_word():
    """clz / popcnt of s64 and u64 count the high word too (64 - bit length, the sign fill's set
    bits): clz(s64 1) is 63, popcnt(s64 -1) is 64. They used to count only the 32-bit word the
    device holds a 64-bit value in (and the compile's own bir_sim check then failed)."""
    s = np.array([0, 1, -1, 12345, -12345, 2 ** 31 - 1, -2 ** 31, 7], np.int64)
    u = np.array([0, 1, 2 ** 32 - 1, 7, 2 ** 31, 12345, 255, 2 ** 20], np.uint64)
    jax.config.update("jax_enable_x64", True)
    try:
        check(lambda s, u: (lax.clz(s), lax.population_count(s), lax.clz(u), lax.population_count(u)), s, u)
    finally:
        jax.config.update("jax_enable_x64", False)


def test_integer_dots_are_exact_beyond_fp32s_24_bits():
    """An int8 matmul with K = 4100 (partial sums up to 128 * 128 * 4100 = 6.7e7 > 2^24), an int32
    one that wraps, u8 x u8, s16 with batch dims: exact, as XLA's integer dot is. The PE
    accumulates in fp32, so each used to come back rounded."""
    a8 = R.randint(-128, 128, (4, 4100)).astype(np.int8)
    b8 = R.randint(-128, 128, (4100, 6)).astype(np.int8)
    a32 = R.randint(-2 ** 31, 2 ** 31 - 1, (3, 70)).astype(np.int32)
    b32 = R.randint(-2 ** 31, 2 ** 31 - 1, (70, 5)).astype(np.int32)
    u8 = R.randint(0, 256, (5, 300)).astype(np.uint8)
    s16 = R.randint(-2 ** 15, 2 ** 15, (2, 3, 200)).astype(np.int16)
    check(lambda a8, b8, a32, b32, u8, s16: (
        lax.dot(a8, b8, preferred_element_type=jnp.int32), a32 @ b32,
        lax.dot(u8, u8.T, preferred_element_type=jnp.int32),
        jnp.einsum("bmk,bnk->bmn", s16, s16, preferred_element_type=jnp.int32)), a8, b8, a32, b32, u8, s16)


def test_reduce_windows_of_more_positions_than_the_kernel_unrolls():
    """Windows of 500, 100 (dilated, padded) and 10 x 10 positions, over ints and floats, with an
    init that is not the reducer's identity: split into windows the kernel unrolls (at most 64
    positions). They used to be refused."""
    b = R.randint(-2 ** 20, 2 ** 20, (4, 3000)).astype(np.int32)
    x = R.randn(2, 700).astype(np.float32)
    y = R.randn(1, 3, 40, 40).astype(np.float32)
    check(lambda b, x, y: (
        lax.reduce_window(b, 0, lax.add, (1, 500), (1, 250), "VALID"),
        lax.reduce_window(x, -jnp.inf, lax.max, (1, 100), (1, 3), ((0, 0), (20, 7)), window_dilation=(1, 2)),
        lax.reduce_window(x, 2.5, lax.min, (2, 77), (1, 5), "VALID"),
        lax.reduce_window(y, 1.0, lax.add, (1, 1, 10, 10), (1, 1, 6, 6), "SAME") / 100.0), b, x, y)


def test_scatters_of_rows_wider_than_the_scatter_window():
    """Embedding-gradient scatters into rows of 16384 elements (a 405B-class width; the kernel's
    window holds 8192), with add and max combiners and an out-of-range row that XLA drops: split
    into column chunks. They used to be refused."""
    table = R.randn(40, 16384).astype(np.float32)
    ids = np.array([[3, 39, 0], [7, 7, 45]], np.int32)
    g = R.randn(2, 3, 16384).astype(np.float32)
    check(lambda t, i, g: (t.at[i].add(g, mode="drop"), t.at[i[0]].max(g[0])), table, ids, g)


def test_partitioning_annotations_are_their_operand_on_one_core():
    """jax.lax.with_sharding_constraint emits custom-call "Sharding" (torch-xla's mark_sharding and
    shard_map emit it and the SPMD shape changes too): on one NeuronCore each is its operand. A
    shape change to a shard of its own is refused by name. They used to be refused as unknown
    custom-call targets."""
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from neuronxcc.errors import UnsupportedOperatorError
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish.penguin import hlo2penguin
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    x, w = R.randn(8, 16).astype(np.float32), R.randn(16, 4).astype(np.float32)

    def f(x, w):
        return jnp.tanh(jax.lax.with_sharding_constraint(x @ w, NamedSharding(mesh, PartitionSpec("d", None))))
    assert "Sharding" in jax.jit(f).lower(x, w).compiler_ir("hlo").as_hlo_text()
    check(f, x, w)
    text = """HloModule m
ENTRY e {
  p = f32[8,4] parameter(0)
  ROOT s = f32[4,4] custom-call(p), custom_call_target="SPMDFullToShardShape", sharding={manual}
}
"""
    with pytest.raises(UnsupportedOperatorError) as ei:
        hlo2penguin.hlo_to_penguin(parse_hlo_text(text))
    assert "SPMDFullToShardShape" in ei.value.one_line() and "shard" in ei.value.one_line()


def test_sorts_on_three_keys_and_stable_descending_with_an_iota_tie_break():
    """jnp.lexsort's three keys, a two-key descending sort, and torch-xla's stable descending sort
    (GT on the values, then LT on an iota of positions: a stable tie-break) compile and match JAX /
    XLA; a comparator ordering its keys in both directions is refused by name. Sorts on more than two
    keys, and two-key descending ones, used to be refused."""
    from neuronxcc.errors import CompilerError
    a = np.array([3, 1, 2, 3, 1, 2, 3, 1], np.int32)
    b = np.array([0, 1, 1, 0, 0, 1, 1, 0], np.int32)
    x = R.randn(8).astype(np.float32)
    check(lambda a, b, x: (jnp.lexsort((x, b, a)), lax.sort((a, b, x), num_keys=3),
                           lax.sort((-a, -b, x), num_keys=2)), a, b, x)
    from neuronxcc.hlo import parse_hlo_text
    from neuronxcc.starfish.penguin.codegen import lower_graph
    from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
    from neuronxcc.common.tolerances import assert_close
    from penguin_helpers import run_bir
    from support.corpus import xla_run

    def bir_of_text(t):
        return lower_graph(hlo_to_penguin(parse_hlo_text(t)))
    torch_style = """HloModule s
cmp {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  i = s32[] parameter(2)
  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(i, j), direction=LT
  t = pred[] and(eq, lt)
  ROOT r = pred[] or(gt, t)
}
ENTRY e {
  x = f32[9] parameter(0)
  io = s32[9] iota(), iota_dimension=0
  s = (f32[9], s32[9]) sort(x, io), dimensions={0}, to_apply=cmp
  v = f32[9] get-tuple-element(s), index=0
  k = s32[9] get-tuple-element(s), index=1
  ROOT t = (f32[9], s32[9]) tuple(v, k)
}"""
    xs = np.array([1.0, 3.0, 1.0, 2.0, 3.0, 1.0, 0.5, 2.0, 3.0], np.float32)
    outs = run_bir(bir_of_text(torch_style), [xs])
    want = xla_run(torch_style, [xs])
    for k, (o, w) in enumerate(zip(outs, want)):
        assert_close(np.asarray(o), np.asarray(w), "output%d" % k, row="compiled")
    # the same comparator on a second key that is not the positions: descending, then ascending
    mixed = torch_style.replace("io = s32[9] iota(), iota_dimension=0", "io = s32[9] parameter(1)")
    with pytest.raises(CompilerError) as ei:
        bir_of_text(mixed)
    assert "both directions" in ei.value.one_line()
