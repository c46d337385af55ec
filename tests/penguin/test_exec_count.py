"""How many BIR instructions birsim executes for programs whose lowering once multiplied them: flat
elementwise runs spread over the partitions, and shifts whose amount is provably in range lowered
to the plain shift. Counts are structural bounds on the executed stream (deterministic), and every
case also checks the results against JAX."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from neuronxcc.starfish.birsim import simulate
from neuronxcc.starfish.penguin.flatrun import PMAX, flat_rows
from penguin_helpers import assert_close, bir_of, jax_outputs


def _run(f, *args):
    mod = bir_of(f, *args)
    res = simulate(mod, list(args))
    exp = jax_outputs(f, *args)
    assert len(res.outputs) == len(exp)
    for k, (a, e) in enumerate(zip(res.outputs, exp)):
        assert_close(a, e, "output%d" % k, row="compiled")
    return mod, res


def _compute(mod):
    return [i for i in mod.instructions() if not i.opcode.startswith("dma_") and i.dsts
            and i.dsts[0].num_partitions is not None]


def test_flat_rows_picks_a_divisor_near_128():
    assert flat_rows(78000) == 125          # 260 x 300
    assert flat_rows(256) == 128
    assert flat_rows(100) == 1              # fits one partition's free dim already
    assert flat_rows(2 * 1031) == 1         # no divisor in [64, 128]


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.float32])
def test_contiguous_elementwise_not_divisible_by_128_uses_the_partitions(dt):
    # [260, 300] collapses to 78000 contiguous elements, not a multiple of 128: it used to run as 312
    # one-partition steps of 250 elements (4 instructions each); now one step of 125 x 624
    r = np.random.default_rng(0)
    a = r.integers(-1000, 1000, (260, 300)).astype(dt)
    b = r.integers(-1000, 1000, (260, 300)).astype(dt)
    f = (lambda a, b: a ^ b) if dt != np.float32 else (lambda a, b: a + b)
    mod, res = _run(f, a, b)
    assert res.instructions <= 16, res.instructions
    assert min(i.dsts[0].num_partitions for i in _compute(mod)) >= 64


def test_long_run_without_a_divisor_is_a_full_head_and_a_short_tail():
    n = 2 * 1031                            # 2 x prime: no divisor in [64, 128]
    r = np.random.default_rng(1)
    a = r.integers(-50, 50, (n,)).astype(np.int32)
    b = r.integers(-50, 50, (n,)).astype(np.int32)
    mod, res = _run(lambda a, b: a * b + lax.iota(jnp.int32, n), a, b)
    parts = sorted(i.dsts[0].num_partitions for i in _compute(mod))
    assert parts[-1] == PMAX and parts[0] >= 1
    assert res.instructions <= 24, res.instructions


# -- shifts --------------------------------------------------------------------------------------

SHIFTS = (lax.shift_left, lax.shift_right_logical, lax.shift_right_arithmetic)
DTYPES = (np.int32, np.uint32, np.int8, np.uint8, np.int16, np.uint16)


def _amounts(dt):
    w = np.iinfo(dt).bits
    vals = [0, 1, w // 2, w - 1, w, w + 1, 2 * w, np.iinfo(dt).max, np.iinfo(dt).min]
    if np.iinfo(dt).min < 0:
        vals += [-1, -w, -(w - 1)]
    return np.array(vals, np.int64).astype(dt)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_shifts_by_amounts_in_and_out_of_range_match_jax(dt):
    s = _amounts(dt)
    info = np.iinfo(dt)
    xs = np.array([0, 1, -1, info.max, info.min, 5, -77, info.max // 3], np.int64).astype(dt)
    x = np.repeat(xs, len(s)).astype(dt)                  # every value against every amount
    a = np.tile(s, len(xs)).astype(dt)
    _run(lambda x, a: tuple(f(x, a) for f in SHIFTS), x, a)


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.uint8], ids=lambda d: np.dtype(d).name)
def test_shifts_by_scalar_constants_in_and_out_of_range_match_jax(dt):
    w = np.iinfo(dt).bits
    x = np.array([0, 1, 3, 77, np.iinfo(dt).max, np.iinfo(dt).min, 12, 100], np.int64).astype(dt)
    ks = [0, 3, w - 1, w, w + 5]
    _run(lambda x: tuple(f(x, jnp.asarray(k, dt)) for f in SHIFTS for k in ks), x)


def _rotl_loop(x, rot):
    """Rotate x left by amounts read from a loop-carried array (threefry's shape of loop)."""
    def body(c):
        i, x, r0, r1 = c
        k = lax.dynamic_index_in_dim(r0, i % 4, keepdims=False)
        x = lax.shift_left(x, k) | lax.shift_right_logical(x, jnp.uint32(32) - k)
        return i + 1, x, r1, r0
    return lax.while_loop(lambda c: c[0] < 5, body, (0, x, rot[0], rot[1]))[1]


def _range_checks(mod, w=32):
    """The instructions of a shift's range check: min(amount, w - 1) and amount < w."""
    return [i for i in mod.instructions() if i.opcode == "tensor_scalar" and
            (i.attrs.get("op0"), i.attrs.get("operand0")) in (("min", w - 1), ("lt", w))]


def test_loop_carried_amounts_in_range_lower_to_plain_shifts():
    x = np.arange(1, 261 * 300 + 1, dtype=np.uint32).reshape(261, 300) * np.uint32(2654435761)
    rot = jnp.array([[13, 15, 26, 6], [17, 29, 16, 24]], jnp.uint32)
    mod, res = _run(lambda x: _rotl_loop(x, rot), x)
    assert not _range_checks(mod)                 # amounts in [6, 29] and 32 - them in [3, 26]
    assert res.instructions <= 5 * 60, res.instructions


def test_loop_carried_amount_that_can_leave_the_range_keeps_xla_semantics():
    # the amounts grow by 9 every trip (0, 9, 18, 27, 36): the last trip shifts everything out
    x = np.arange(1, 301, dtype=np.uint32) * np.uint32(2654435761)

    def f(x):
        def body(c):
            i, x, k = c
            return i + 1, lax.shift_left(x, k) ^ lax.shift_right_logical(x, k), k + jnp.uint32(9)
        return lax.while_loop(lambda c: c[0] < 5, body, (0, x, jnp.uint32(0)))[1]
    mod, _ = _run(f, x)
    assert _range_checks(mod)                 # the range check stayed (one compare, shared by both shifts)


def test_masked_and_remainder_amounts_are_proven_in_range():
    r = np.random.default_rng(3)
    x = r.integers(-2 ** 31, 2 ** 31, (128, 64)).astype(np.int32)
    s = r.integers(-2 ** 31, 2 ** 31, (128, 64)).astype(np.int32)
    mod, _ = _run(lambda x, s: (lax.shift_left(x, s & 31), lax.shift_right_arithmetic(x, lax.rem(s, 32) & 31),
                                lax.shift_right_logical(x, jnp.clip(s, 1, 30))), x, s)
    assert not _range_checks(mod)


def test_remainder_by_a_divisor_that_can_be_zero_keeps_the_dividends_range():
    # XLA's x % 0 is x: (s & 63) % clamp(k, 0, 31) can be up to 63, not below 31
    from neuronxcc.hlo import load_module
    from neuronxcc.starfish.penguin import intrange
    m = load_module("""HloModule r
ENTRY e {
  s = s32[8] parameter(0)
  k = s32[8] parameter(1)
  m = s32[8] constant({63, 63, 63, 63, 63, 63, 63, 63})
  a = s32[8] and(s, m)
  lo = s32[] constant(0)
  hi = s32[] constant(31)
  d = s32[8] clamp(lo, k, hi)
  ROOT r = s32[8] remainder(a, d)
}""")
    comp = [c for c in m.computations.values() if any(i.opcode == "remainder" for i in c.instructions)][0]
    rem = [i for i in comp.instructions if i.opcode == "remainder"][0]
    assert intrange.of(m, rem) == (0, 63)
    assert intrange.of(m, rem.operands[1]) == (0, 31)


def test_unproven_amount_costs_one_unsigned_compare():
    r = np.random.default_rng(4)
    x = r.integers(-2 ** 31, 2 ** 31, (128, 64)).astype(np.int32)
    s = r.integers(-40, 40, (128, 64)).astype(np.int32)
    mod, _ = _run(lambda x, s: lax.shift_left(x, s), x, s)
    assert len(_range_checks(mod)) == 2
    ops = [i.opcode for i in mod.instructions() if not i.opcode.startswith("dma_")]
    # min(amount, 31), shift, amount < 32 (unsigned), select with a zero tile
    assert len(ops) <= 5, ops


def test_threefry_rotation_amounts_are_proven_in_range():
    # jax.random's threefry rotates by slices of two loop-carried u32[4] constants that swap every
    # trip; intrange proves every amount (and 32 minus it) inside [0, 32)
    from neuronxcc.hlo import load_module
    from neuronxcc.starfish.penguin import intrange
    from support import corpus
    p = corpus.get("random_normal")
    m = load_module(corpus.lower(p, p.make_args(0, "tiled"))[0])
    shifts = [i for c in m.computations.values() for i in c.instructions if i.opcode.startswith("shift")
              and i.operands[1].opcode != "constant" and c.name.startswith("closed_call")]
    assert len(shifts) >= 16
    for i in shifts:
        lo, hi = intrange.of(m, i.operands[1])
        assert 0 <= lo <= hi < 32, (i.name, lo, hi)


def test_random_normal_executes_few_instructions():
    # 361,960 executed instructions before the flat-tiling and shift fixes (312 one-partition tiles
    # per threefry step, eight ops per rotation); about 4,700 of Penguin's BIR now
    from support import corpus
    p = corpus.get("random_normal")
    args = p.make_args(0, "tiled")
    mod, res = _run(p.fn, *args)
    assert not _range_checks(mod)
    assert res.instructions <= 6000, res.instructions


# -- grouped convolutions with one output feature per group --------------------------------------

def _dw_weight_grad(stride, dil, pad):
    def f(x, dy):
        c = x.shape[-1]
        w = jnp.zeros((3, 3, 1, c), x.dtype)          # the gradient does not depend on w's values

        def conv(w):
            return lax.conv_general_dilated(x, w, stride, pad, rhs_dilation=dil,
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=c)
        return jax.vjp(conv, w)[1](dy)[0]
    return f


@pytest.mark.parametrize("stride,dil,pad", [((1, 1), (1, 1), "SAME"), ((2, 1), (1, 2), "VALID"),
                                            ((1, 2), (2, 1), ((2, 1), (0, 3)))])
def test_depthwise_weight_gradient_is_a_reduction_not_tiny_matmuls(stride, dil, pad):
    # the weight gradient of a depthwise conv is a convolution with batch_group_count = channels:
    # one [Cg x M] x [Cg x 1] matmul per group and output row before; now a reduction over the
    # window with the channels on the partitions
    r = np.random.default_rng(5)
    x = r.standard_normal((2, 9, 8, 130)).astype(np.float32)
    w = (r.standard_normal((3, 3, 1, 130)) * 0.3).astype(np.float32)
    y = jax.eval_shape(lambda x, w: lax.conv_general_dilated(
        x, w, stride, pad, rhs_dilation=dil, dimension_numbers=("NHWC", "HWIO", "NHWC"),
        feature_group_count=130), x, w)
    dy = r.standard_normal(y.shape).astype(np.float32)
    mod, res = _run(_dw_weight_grad(stride, dil, pad), x, dy)
    assert not [i for i in mod.instructions() if i.opcode == "matmul"]
    assert res.instructions <= 5000, res.instructions       # 141,470 / 19,500 / 79,070 as matmuls


def test_batch_grouped_convolution_with_two_batches_per_group():
    r = np.random.default_rng(6)
    x = r.standard_normal((6, 7, 4)).astype(np.float32)          # N = 6 = 3 groups x 2, W, C
    k = r.standard_normal((3, 4, 3)).astype(np.float32)          # W, I, O = 3 groups x 1
    f = lambda x, k: lax.conv_general_dilated(x, k, (1,), "VALID", dimension_numbers=("NWC", "WIO", "NWC"),
                                              batch_group_count=3)
    mod, _ = _run(f, x, k)
    assert not [i for i in mod.instructions() if i.opcode == "matmul"]


def test_small_loop_state_moves_hbm_to_hbm():
    # the counter and the swapped u32[4] rotation arrays are copied into the loop state by one
    # direct DMA each, not a load into SBUF and a store back
    x = np.arange(1, 301, dtype=np.uint32) * np.uint32(2654435761)
    rot = jnp.array([[13, 15, 26, 6], [17, 29, 16, 24]], jnp.uint32)
    mod, _ = _run(lambda x: _rotl_loop(x, rot), x)
    writers = {}
    for i in mod.instructions():
        for d in i.dsts:
            writers.setdefault(d.target, []).append(i)
    loaded = {m for m, ws in writers.items() if m in mod.memlocs and
              all(w.opcode == "dma_copy" and w.srcs[0].target in mod.tensors for w in ws)}
    bounces = [i for i in mod.instructions() if i.opcode == "dma_copy" and i.dsts[0].target in mod.tensors
               and i.srcs[0].target in loaded]        # HBM -> SBUF -> HBM with nothing computed
    assert not bounces, bounces
