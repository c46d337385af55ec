"""Matmuls evaluated in their consumers' row tiles (penguin/mmfuse.py): a layernorm -> matmul ->
gelu -> matmul -> residual chain is one kernel with no HBM intermediate and each weight loaded
once; a layernorm feeding a matmul with several consumers is fused into that matmul; a matmul
whose result fans out to several kernels is computed once. Numerics against jax on birsim."""
import jax
import jax.numpy as jnp
import numpy as np

from neuronxcc.starfish.penguin.codegen import Codegen
from penguin_helpers import check, jax_outputs, penguin_of, run_bir
from neuronxcc.common.tolerances import assert_close


def _ln(x, g):
    m = jnp.mean(x, axis=-1, keepdims=True)
    v = jnp.mean(jnp.square(x - m), axis=-1, keepdims=True)
    return (x - m) * jax.lax.rsqrt(v + 1e-5) * g


def _mlp_block(x, g, w1, w2):
    return x + jax.nn.gelu(_ln(x, g) @ w1) @ w2


def _args(rng, S=260, D=256, F=384, dt=np.float32):
    return [rng.standard_normal((S, D)).astype(dt), (rng.standard_normal(D) * 0.1 + 1).astype(dt),
            (rng.standard_normal((D, F)) * D ** -0.5).astype(dt), (rng.standard_normal((F, D)) * F ** -0.5).astype(dt)]


def _lower(f, args, fusion=True):
    cg = Codegen(penguin_of(f, *args), "trn1")
    cg.mm_fusion = fusion
    return cg.run()


def _scratch(m):
    return [t for t in m.tensors.values() if t.kind == "scratch"]


def _count(m, opcode):
    """Executed instructions with OPCODE (loop bodies times their trip counts)."""
    def walk(body):
        n = 0
        for node in body:
            if node.kind == "inst":
                n += node.opcode == opcode
            elif node.kind == "loop":
                n += node.trip_count * walk(node.body)
            else:
                raise AssertionError("unexpected %s" % node.kind)
        return n
    return walk(m.body)


def _pe_cycles(m):
    """Executed PE cycles (matmuls and transposes) under birpy.cost's rules."""
    from neuronxcc.starfish.birpy.cost import instruction_cost

    def walk(body):
        n = 0
        for node in body:
            if node.kind == "inst":
                n += instruction_cost(node, m, "trn1").cycles if node.engine == "PE" else 0
            elif node.kind == "loop":
                n += node.trip_count * walk(node.body)
        return n
    return walk(m.body)


def _weight_dmas(m, name):
    return [i for i in m.instructions() if i.opcode == "dma_copy" and any(s.target == name for s in i.srcs)]


def test_layernorm_matmul_gelu_matmul_residual_is_one_kernel():
    args = _args(np.random.default_rng(0))
    m = check(_mlp_block, *args)
    assert not _scratch(m), _scratch(m)                 # nothing between the steps goes through HBM
    inputs = [t.name for t in m.tensors.values() if t.kind == "input"]
    for w in inputs[1:]:
        # each weight loaded once, resident; the layernorm scale too (the same for every row tile)
        assert len(_weight_dmas(m, w)) == 1, w
    # and less PE work than the unfused kernels (the GELU output is never transposed: the first
    # matmul is computed transposed, 128 columns of it at a time, straight into the second's operand)
    assert _pe_cycles(m) < _pe_cycles(_lower(_mlp_block, args, fusion=False))
    gelus = [i for i in m.instructions() if i.opcode == "activation" and i.attrs.get("func", "").startswith("gelu")]
    assert gelus and all(m.memory_of(i.srcs[0]) == "PSUM" for i in gelus)
    # PE transposes: of the layernorm's row tiles (260 rows: 3 tiles, K = 256: 2 chunks each), and of
    # its scale vector, loaded as one row (one descriptor) and turned into 2 columns of 128
    tr = [i for i in m.instructions() if i.opcode == "transpose"]
    assert len(tr) == 3 * 2 + 2
    assert sum(1 for i in tr if i.srcs[0].num_partitions == 1) == 2
    gload = [i for i in m.instructions() if i.opcode == "dma_copy" and i.srcs[0].target == inputs[1]]
    assert len(gload) == 1 and gload[0].dsts[0].num_partitions == 1


def test_bf16_chain_matches_jax():
    import ml_dtypes
    args = _args(np.random.default_rng(1), S=200, D=128, F=256, dt=ml_dtypes.bfloat16)
    m = check(_mlp_block, *args)
    assert not _scratch(m)


def test_layernorm_fused_into_a_matmul_with_several_consumers():
    def f(x, g, w):
        y = _ln(x, g) @ w
        return y, jnp.sum(y, axis=0)
    rng = np.random.default_rng(2)
    x, g, w, _ = _args(rng, S=200, D=256, F=320)
    m = check(f, x, g, w)
    # the normalised rows stay on chip: no [200, 256] intermediate in HBM
    assert not [t for t in _scratch(m) if tuple(t.shape) == (200, 256)], _scratch(m)


def test_a_matmul_read_by_two_kernels_is_computed_once():
    def f(x, w, b):
        y = x @ w
        return jnp.tanh(y + b), jnp.max(y, axis=0)
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((130, 256)).astype(np.float32),
            (rng.standard_normal((256, 200)) / 16).astype(np.float32), rng.standard_normal(200).astype(np.float32)]
    m = check(f, *args)
    assert _count(m, "matmul") == _count(_lower(f, args, fusion=False), "matmul")


def test_fusion_off_gives_the_same_numbers():
    args = _args(np.random.default_rng(4), S=70, D=128, F=128)
    m = _lower(_mlp_block, args, fusion=False)
    assert _scratch(m)                                     # the unfused kernels round-trip through HBM
    for a, e in zip(run_bir(m, args), jax_outputs(_mlp_block, *args)):
        assert_close(a, e, "out", row="compiled")


def test_layernorm_statistics_on_the_activation_engine():
    """The variance's square and row sum are one ACT instruction, rsqrt(var / n + eps) another."""
    def f(x, g):
        return _ln(x, g) * 2.0
    rng = np.random.default_rng(5)
    x, g = rng.standard_normal((130, 300)).astype(np.float32) * 3 + 1, rng.standard_normal(300).astype(np.float32)
    m = check(f, x, g)
    acts = [i for i in m.instructions() if i.opcode == "activation"]
    assert any(i.attrs.get("func") == "square" and i.attrs.get("reduce") == "add" for i in acts)
    rs = [i for i in acts if i.attrs.get("func") == "rsqrt"]
    assert rs and all(abs(i.attrs["scale"] - 1 / 300) < 1e-9 and i.attrs["bias"] == np.float32(1e-5) for i in rs)


def test_resident_weights_are_prefetched_off_sp():
    """A fused kernel's resident weights are triggered by a compute engine (SP's in-order stream
    holds the earlier kernels' loads, which wait for their compute) on queues of their own (a
    queue runs in order: behind those loads the weight would not start either), and the program
    still matches jax."""
    from neuronxcc.starfish.penguin.emit import NUM_QUEUES

    def f(x, g, w1, w2):
        y = jnp.tanh(x) * 2.0                 # an earlier kernel with loads of its own on SP
        return y, _mlp_block(x, g, w1, w2)
    args = _args(np.random.default_rng(6))
    m = check(f, *args)
    inputs = [t.name for t in m.tensors.values() if t.kind == "input"]
    for w in inputs[2:]:
        dmas = _weight_dmas(m, w)
        assert dmas and all(i.engine in ("ACT", "DVE", "POOL") for i in dmas), [(i.engine, w) for i in dmas]
        assert all(int(i.attrs["queue"][1:]) >= NUM_QUEUES for i in dmas), [i.attrs["queue"] for i in dmas]
    # the other loads keep SP and the rotation queues
    x_loads = _weight_dmas(m, inputs[0])
    assert x_loads and all(i.engine == "SP" and int(i.attrs["queue"][1:]) < NUM_QUEUES for i in x_loads)


def _qkv_attention(x, g, wqkv):
    s, d = x.shape
    q, k, v = jnp.split(_ln(x, g) @ wqkv, 3, axis=-1)
    q, k, v = (t.reshape(s, 2, d // 2).transpose(1, 0, 2) for t in (q, k, v))
    p = jax.nn.softmax(jnp.einsum("hqd,hkd->hqk", q, k) / np.float32(np.sqrt(d // 2)), axis=-1)
    return jnp.einsum("hqk,hkd->hqd", p, v)


def _lower_layout(f, args, layout):
    cg = Codegen(penguin_of(f, *args), "trn1")
    cg.mm_layout = layout
    return cg.run()


def test_split_projection_stored_in_the_layout_its_matmuls_read():
    """A fused QKV projection: Q and K (contracted over their columns by the scores) are computed
    transposed ([columns, rows]: the layout the attention's matmuls read, no PE transposes of them)
    and V (contracted over its rows) row-major; the attention (two heads of one key block, all
    unrolled) reads all three where the projection left them in SBUF, so none goes through HBM.
    Numerics match jax."""
    rng = np.random.default_rng(7)
    S, D = 260, 256
    args = [rng.standard_normal((S, D)).astype(np.float32), (rng.standard_normal(D) * 0.1 + 1).astype(np.float32),
            (rng.standard_normal((D, 3 * D)) * D ** -0.5).astype(np.float32)]
    m = check(_qkv_attention, *args)
    assert not [t for t in _scratch(m) if S in tuple(t.shape)], _scratch(m)    # no Q, K, V round trip
    dmas = [i for i in m.instructions() if i.opcode == "dma_copy"]
    assert {i.srcs[0].target for i in dmas if m.memory_of(i.srcs[0]) not in ("SBUF", "PSUM")} == \
        {t.name for t in m.tensors.values() if t.kind == "input"}              # loads read only inputs
    old = _lower_layout(_qkv_attention, args, False)
    assert (S, 3 * D) in [tuple(t.shape) for t in _scratch(old)]
    # Q^T and K^T of 2 heads x 3 query / key tiles are no longer PE-transposed, and the PE does less
    assert _count(m, "transpose") < _count(old, "transpose")
    assert _pe_cycles(m) < _pe_cycles(old)
    for a, e in zip(run_bir(old, args), jax_outputs(_qkv_attention, *args)):
        assert_close(a, e, "out", row="compiled")


def test_attention_result_handed_to_the_output_projection_on_chip():
    """The block's attention half, x + attention(layernorm(x) @ wqkv) @ wo: the attention's result
    tiles stay in SBUF for the output projection's row tiles (the residual add fused there), so
    neither the QKV projection nor the attention's result goes through HBM. Matches jax."""
    def f(x, g, wqkv, wo):
        s, d = x.shape
        return x + _qkv_attention(x, g, wqkv).transpose(1, 0, 2).reshape(s, d) @ wo
    rng = np.random.default_rng(8)
    S, D = 260, 256
    args = [rng.standard_normal((S, D)).astype(np.float32), (rng.standard_normal(D) * 0.1 + 1).astype(np.float32),
            (rng.standard_normal((D, 3 * D)) * D ** -0.5).astype(np.float32),
            (rng.standard_normal((D, D)) * D ** -0.5).astype(np.float32)]
    m = check(f, *args)
    assert not _scratch(m), _scratch(m)
    old = _lower_layout(f, args, False)
    assert _scratch(old)


def test_layernorm_before_a_matmul_takes_three_row_instructions():
    """The layernorm feeding a row-tile matmul: x - mean is never computed as a tile (the variance
    is ACT's square(x + (-mean)) with its row sum, the normalisation ACT's x * rstd + (-mean * rstd)),
    and the scale g is applied by the PE transposes' PSUM evictions (per partition after the
    transpose), not as a [rows, D] multiply. Numerics match jax."""
    args = _args(np.random.default_rng(9))
    m = check(_mlp_block, *args)
    D = args[0].shape[1]
    acts = [i for i in m.instructions() if i.opcode == "activation"]
    assert any(i.attrs.get("func") == "square" and i.attrs.get("bias_ap") and i.attrs.get("reduce") for i in acts)
    assert any(i.attrs.get("func") == "identity" and i.attrs.get("bias_ap") and i.attrs.get("scale_ap") for i in acts)
    # no full-row subtract / multiply on DVE or POOL before the first transpose (the layernorm part)
    first_t = next(k for k, i in enumerate(m.instructions()) if i.opcode == "transpose")
    wide = [i for i in m.instructions()[:first_t] if i.engine in ("DVE", "POOL") and i.dsts
            and i.dsts[0].free_size == D and i.opcode in ("tensor_tensor", "tensor_scalar")]
    assert not wide, wide
    evs = [i for i in m.instructions() if i.opcode in ("activation", "tensor_scalar") and i.srcs
           and m.memory_of(i.srcs[0]) == "PSUM" and (i.attrs.get("scale_ap") or i.attrs.get("operand0_ap"))]
    assert len(evs) >= 2 * 3               # 2 K chunks x 3 row tiles, each scaled by its chunk of g
