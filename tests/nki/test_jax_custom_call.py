"""nki.jit on jax arrays: inside jax.jit the kernel lowers to a custom-call AwsNeuronCustomNativeKernel
carrying the traced kernel inline; ``neuronx-cc compile`` compiles the JAX program with the kernel in it
(bir_sim against the goldens) and the NEFF on birsim matches JAX computing the same math with jnp.
Eagerly on concrete jax arrays the kernel is simulated."""
import jax
import jax.numpy as jnp
import numpy as np

from neuronxcc import nki
from neuronxcc.hlo import load_module, nki_call
from support import nki_tutorial_kernels as T
from support.cli import run_ncc
from neuronxcc.common.tolerances import assert_close


def _rms_jnp(a, g, eps=1e-6):
    return a / jnp.sqrt(jnp.mean(a * a, axis=1, keepdims=True) + eps) * g[None, :]


def program(x, g, w):
    h = jnp.tanh(x) * 2.0
    y = T.rmsnorm(h, g)                 # @nki.jit (mode auto): jax tracers -> the custom-call
    return y @ w + 1.0


def program_jnp(x, g, w):
    return _rms_jnp(jnp.tanh(x) * 2.0, g) @ w + 1.0


def _args(seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((256, 64)).astype(np.float32), rng.standard_normal(64).astype(np.float32),
            rng.standard_normal((64, 32)).astype(np.float32))


def test_lowering_is_one_custom_call_with_the_kernel_inline():
    comp = jax.jit(program).lower(*_args(0)).compiler_ir("hlo")
    m = load_module(comp.as_serialized_hlo_module_proto())
    calls = [i for c in m.computations.values() for i in c.instructions if i.opcode == "custom-call"]
    assert len(calls) == 1 and calls[0].attrs["custom_call_target"] == "AwsNeuronCustomNativeKernel"
    call = nki_call.kernel_call_of(calls[0])
    assert call.func_name == "rmsnorm" and call.input_names == ["a_tensor", "g_tensor"]


def test_jax_program_with_kernel_compiled_by_neuronx_cc(tmp_path):
    args = _args(1)
    proto = jax.jit(program).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto()
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(proto)
    neff = tmp_path / "out.neff"
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(neff)],
                cwd=str(tmp_path))
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    from neuronxcc.starfish.birsim import run_neff
    fresh = _args(2)
    out, = run_neff(str(neff), list(fresh))
    want = np.asarray(jax.jit(program_jnp)(*fresh))
    assert_close(out, want, row="compiled")


def test_out_argument_kernel_under_jit_returns_the_written_parameter():
    k = nki.jit(T.tensor_add_out, mode="jax")[2]
    a, b = _args(3)[0][:256], _args(4)[0][:256]

    def f(a, b):
        return k(a, b, jnp.zeros_like(a))
    text = jax.jit(f).lower(a, b).as_text(dialect="hlo")
    assert "AwsNeuronCustomNativeKernel" in text and "output_to_operand_aliasing" in text
    m = load_module(jax.jit(f).lower(a, b).compiler_ir("hlo").as_serialized_hlo_module_proto())
    from neuronxcc.hlo.interpreter import evaluate
    out, = evaluate(m, [a, b])
    np.testing.assert_array_equal(out, a + b)


def test_eager_jax_arrays_are_simulated():
    x, g, _ = _args(5)
    y = T.rmsnorm(jnp.asarray(x), jnp.asarray(g))
    assert isinstance(y, jax.Array)
    assert_close(np.asarray(y), T.ref_rmsnorm(x, g), row="compiled")


def test_flash_fwd_in_a_jax_program_compiled_by_neuronx_cc(tmp_path):
    """The flash-attention kernel (loops, PSUM accumulation, masks) spliced into a JAX program: walrus
    schedules and allocates it with the program's own ops; bir_sim checks it against the goldens."""
    from neuronxcc.nki.kernels.attention import FlashConfig, flash_fwd
    from neuronxcc.starfish.birsim import run_neff
    from support import nki_attention_refs as R
    bs, nh, d, s = 1, 2, 64, 256

    def prog(q, k, v):
        o = flash_fwd[bs, nh](q * 2.0, k, v, jnp.zeros((1,), jnp.int32), use_causal_mask=True,
                              mixed_precision=False, config=FlashConfig(training=False))
        return o + 1.0
    rng = np.random.default_rng(9)
    q, k = (rng.standard_normal((bs, nh, d, s)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((bs, nh, s, d)).astype(np.float32)
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(jax.jit(prog).lower(q, k, v).compiler_ir("hlo").as_serialized_hlo_module_proto())
    neff = tmp_path / "out.neff"
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(neff)],
                cwd=str(tmp_path))
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    out, = run_neff(str(neff), [q, k, v])
    want = R.flash_fwd(q * 2.0, k, v, 1.0 / np.sqrt(d), True)[0] + 1.0
    assert_close(out, want, row="compiled")


def _compile_and_run(tmp_path, f, args, fresh):
    from neuronxcc.starfish.birsim import run_neff
    model = tmp_path / "model.hlo_module.pb"
    model.write_bytes(jax.jit(f).lower(*args).compiler_ir("hlo").as_serialized_hlo_module_proto())
    neff = tmp_path / "out.neff"
    r = run_ncc(["compile", str(model), "--framework", "XLA", "--target", "trn1", "--output", str(neff)],
                cwd=str(tmp_path))
    assert r.returncode == 0, (r.stdout[-2000:], r.stderr[-2000:])
    return run_neff(str(neff), list(fresh))


def test_kernel_inside_a_loop_body_and_a_bf16_kernel(tmp_path):
    """The kernel inside a fori_loop (a while body reached through a call) runs every trip; a bf16 kernel's
    tensors bind to bf16 program tensors."""
    import ml_dtypes

    def loop(x, g):
        return jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(T.rmsnorm(h, g)) + h * 0.5, x)

    def loop_jnp(x, g):
        return jax.lax.fori_loop(0, 3, lambda i, h: jnp.tanh(_rms_jnp(h, g)) + h * 0.5, x)
    x, g, _ = _args(6)
    x2, g2, _ = _args(7)
    (tmp_path / "loop").mkdir()
    out, = _compile_and_run(tmp_path / "loop", loop, (x, g), (x2, g2))
    want = np.asarray(jax.jit(loop_jnp)(x2, g2))
    assert_close(out, want, row="compiled")

    def bf(a, b):
        return T.tensor_add(a * 2, b).astype(jnp.float32) + 1
    a, b = (y.astype(ml_dtypes.bfloat16) for y in _args(8)[:1] * 2)
    (tmp_path / "bf").mkdir()
    b3 = b * 3
    out, = _compile_and_run(tmp_path / "bf", bf, (a, b), (a, b3))
    f32 = np.float32
    want = (a.astype(f32) * 2 + b3.astype(f32)).astype(ml_dtypes.bfloat16).astype(f32) + 1   # the kernel's bf16 sum
    np.testing.assert_array_equal(out, want)


def test_flash_attention_training_step_with_custom_vjp_compiled(tmp_path):
    """jax.grad through a jax.custom_vjp whose forward is flash_fwd (training: o and lse) and whose backward is
    flash_attn_bwd: two kernel custom-calls in one gradient program, compiled by neuronx-cc, against jax's
    autodiff of the same attention in jnp."""
    from neuronxcc.nki.kernels.attention import flash_attn_bwd, flash_fwd
    bs, nh, d, s = 1, 1, 32, 256

    def sw(x):
        return jnp.swapaxes(x, -1, -2)

    def seed():
        return jnp.zeros((1,), jnp.int32)

    @jax.custom_vjp
    def attn(q, k, v):
        return flash_fwd[bs, nh](q, k, v, seed(), use_causal_mask=True, mixed_precision=False)[0]

    def attn_fwd(q, k, v):
        o, lse = flash_fwd[bs, nh](q, k, v, seed(), use_causal_mask=True, mixed_precision=False)
        return o, (q, k, v, o, lse)

    def attn_bwd(res, g):
        q, k, v, o, lse = res
        dq, dk, dv = flash_attn_bwd[bs, nh](q, k, sw(v), sw(o), sw(g), lse, seed(), use_causal_mask=True)
        return dq, dk, sw(dv)
    attn.defvjp(attn_fwd, attn_bwd)

    def ref_attn(q, k, v):
        sc = jnp.einsum("bhdq,bhdk->bhqk", q, k) / np.sqrt(d)
        return jax.nn.softmax(jnp.where(jnp.tri(s, dtype=bool), sc, -jnp.inf), axis=-1) @ v

    def grads(f):
        return jax.grad(lambda q, k, v, w: jnp.sum(jnp.tanh(f(q, k, v)) * w), argnums=(0, 1, 2))

    def make(seed_):
        rng = np.random.default_rng(seed_)
        q, k = (rng.standard_normal((bs, nh, d, s)).astype(np.float32) for _ in range(2))
        return q, k, rng.standard_normal((bs, nh, s, d)).astype(np.float32), \
            rng.standard_normal((bs, nh, s, d)).astype(np.float32)
    text = jax.jit(grads(attn)).lower(*make(0)).as_text(dialect="hlo")
    assert text.count("AwsNeuronCustomNativeKernel") == 2
    fresh = make(1)
    outs = _compile_and_run(tmp_path, grads(attn), make(0), fresh)
    for got, want in zip(outs, jax.jit(grads(ref_attn))(*fresh)):
        want = np.asarray(want)
        assert_close(got, want, row="compiled")
