"""Traced kernels spliced into a program in-process (hlo2penguin + Penguin codegen, then birsim on the
program's BIR without walrus), against the HLO interpreter (which runs each kernel alone) and numpy:
a kernel that allocates SBUF directly (its placement is handed to the program's allocator), a kernel with a
constant tensor (nl.shared_constant), and two different kernels plus the same kernel twice in one program."""
import numpy as np

import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
from neuronxcc.hlo import parse_hlo_text
from neuronxcc.hlo.interpreter import evaluate
from neuronxcc.nki._trace import trace_kernel
from neuronxcc.starfish.birsim import run_module
from neuronxcc.starfish.penguin.codegen import lower_graph
from neuronxcc.starfish.penguin.hlo2penguin import hlo_to_penguin
from support import nki_fragments as F
from neuronxcc.common.tolerances import assert_close


def scale_direct_alloc(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    t[...] = nl.load(x)
    u = nl.ndarray(x.shape, dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=4096))
    u[...] = nl.multiply(t, 3.0)
    nl.store(out, value=u)
    return out


def add_table(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    c = nl.shared_constant(np.arange(x.shape[0] * x.shape[1], dtype=np.float32).reshape(x.shape))
    nl.store(out, value=nl.add(nl.load(x), nl.load(c)))
    return out


def _program(text, inputs):
    m = parse_hlo_text(text)
    bir = lower_graph(hlo_to_penguin(m))
    return bir, run_module(bir, inputs), evaluate(m, inputs)


def test_direct_allocation_kernel_is_placed_with_the_program():
    x = F.random_inputs(0, (128, 256))[0]
    tk = trace_kernel(scale_direct_alloc, [x])
    assert all(ml.allocated for ml in tk.module.memlocs.values())
    bir, (out,), (ref,) = _program(F.hlo_text_torch_style(tk), [x])
    assert not any(ml.allocated for ml in bir.memlocs.values())
    np.testing.assert_array_equal(out, 3 * x)
    np.testing.assert_array_equal(ref, 3 * x)


def test_kernel_constant_tensor_travels_with_it():
    x = F.random_inputs(1, (64, 32))[0]
    tk = trace_kernel(add_table, [x])
    bir, (out,), (ref,) = _program(F.hlo_text_torch_style(tk), [x])
    want = x + np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(ref, want)
    assert any(t.kind == "const" and t.data is not None for t in bir.tensors.values())


def test_two_kernels_and_one_kernel_twice_in_one_program():
    x = F.random_inputs(2, (64, 32))[0]
    k1 = F.hlo_text_torch_style(trace_kernel(add_table, [x]))
    k2 = F.hlo_text_torch_style(trace_kernel(scale_direct_alloc, [x]))
    cfg1 = k1.split('backend_config="')[1].split('"')[0]
    cfg2 = k2.split('backend_config="')[1].split('"')[0]
    cc = ('custom-call(%s), custom_call_target="AwsNeuronCustomNativeKernel", backend_config="%s"')
    text = """HloModule two_kernels, entry_computation_layout={(f32[64,32])->f32[64,32]}

ENTRY main {
  p = f32[64,32] parameter(0)
  a = f32[64,32] %s
  b = f32[64,32] %s
  c = f32[64,32] %s
  ROOT r = f32[64,32] add(b, c)
}
""" % (cc % ("p", cfg1), cc % ("a", cfg2), cc % ("b", cfg1))
    _, (out,), (ref,) = _program(text, [x])
    t = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    b = 3 * (x + t)
    np.testing.assert_array_equal(out, b + (b + t))
    np.testing.assert_array_equal(ref, out)


def test_kernel_in_a_conditional_branch_with_tuple_operands():
    """jax.lax.cond whose branch takes (x, g): the kernel runs in the true branch only. (Also the fix that lets
    hlo2penguin convert a conditional with tuple branch operands and an array result at all.)"""
    import jax
    import jax.numpy as jnp

    from neuronxcc.hlo import load_module
    from support import nki_tutorial_kernels as T

    def f(p, x, g):
        return jax.lax.cond(p[0] > 0, lambda x: T.rmsnorm(x, g), lambda x: x * 2.0 + g[None, :], x)

    def plain(p, x, g):
        return jax.lax.cond(p[0] > 0, lambda x: jnp.tanh(x) * g[None, :], lambda x: x * 2.0, x)
    x = F.random_inputs(3, (128, 64))[0]
    g = F.random_inputs(4, (64,))[0]
    for fn, want_true in ((f, T.ref_rmsnorm(x, g)), (plain, np.tanh(x) * g[None, :])):
        m = load_module(jax.jit(fn).lower(np.array([1], np.int32), x, g).compiler_ir("hlo")
                        .as_serialized_hlo_module_proto())
        bir = lower_graph(hlo_to_penguin(m))
        for p in (1, -1):
            ins = [np.array([p], np.int32), x, g]
            out = run_module(bir, ins)[0]
            ref = evaluate(m, ins)[0]
            assert_close(out, ref, row="compiled")
            want = want_true if p > 0 else (2 * x + g[None, :] if fn is f else 2 * x)
            assert_close(ref, want, row="compiled")
