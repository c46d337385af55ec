"""``nki.jit`` on jax arrays (``mode="jax"``, or ``mode="auto"`` with a jax argument).

Inside ``jax.jit`` (or any jax transformation that lowers) the kernel becomes one XLA
``custom-call`` with target ``AwsNeuronCustomNativeKernel``: the kernel is traced once per
argument shapes/dtypes and compile-time constants, and the traced kernel (BIR plus its I/O binding,
``TracedKernel.to_json()``) travels inline, base64-encoded, in the instruction's
``backend_config`` (``neuronxcc.hlo.nki_call``). ``neuronx-cc compile`` splices it into the program.
Operands are the kernel's tensor parameters in signature order; the result is the kernel's return
value (one array or a tuple) followed by the parameters it writes (out-argument style), which are
declared as ``output_operand_aliasing`` of their operands. Called eagerly on concrete jax arrays,
the kernel is simulated on birsim instead (no device to run a custom-call on) and the outputs come
back as jax arrays.

jax is imported only when a jax value is seen; it is a test-time dependency, never a runtime one.
The custom-call is made with ``jax.ffi.ffi_call`` (typed-FFI lowering with a legacy string
backend_config, api_version 2 = API_VERSION_STATUS_RETURNING as JAX emits for NKI kernels), which
lowers on every platform including CPU.
"""
import inspect
import sys

TARGET = "AwsNeuronCustomNativeKernel"


def is_jax_value(x):
    """True for a jax Array or tracer (without importing jax)."""
    if "jax" not in sys.modules:
        return False
    mod = type(x).__module__ or ""
    return mod.startswith("jax") or mod.startswith("jaxlib")


def has_jax_args(args, kwargs):
    return any(is_jax_value(a) for a in args) or any(is_jax_value(v) for v in (kwargs or {}).values())


def _is_tracer(x):
    import jax
    return isinstance(x, jax.core.Tracer)


def _spec(x):
    if is_jax_value(x):
        import jax
        import numpy as np
        return jax.ShapeDtypeStruct(tuple(x.shape), np.dtype(x.dtype))
    return x


def _ffi_call():
    import jax
    ffi = getattr(jax, "ffi", None)
    if ffi is None or not hasattr(ffi, "ffi_call"):
        from jax.extend import ffi          # jax < 0.4.38
    return ffi.ffi_call


def jax_call(kernel, args, kwargs=None):
    """``nki.jit``'s entry for jax values: KERNEL is the JitKernel (its ``func``, ``grid`` and options)."""
    opts = getattr(kernel, "options", None) or {}
    return call_jax(kernel.func, getattr(kernel, "grid", ()), args, kwargs,
                    target=opts.get("platform_target") or "trn1")


def call_jax(func, grid, args, kwargs=None, target="trn1"):
    """Run kernel FUNC (the undecorated Python function) on jax values ARGS/KWARGS with GRID."""
    import jax
    import numpy as np
    from neuronxcc.hlo.nki_call import encode_backend_config
    from neuronxcc.nki._trace import trace_kernel
    kwargs = dict(kwargs or {})
    tk = trace_kernel(func, [_spec(a) for a in args], {k: _spec(v) for k, v in kwargs.items()},
                      grid=tuple(grid or ()), target=target)
    bound = inspect.signature(func).bind(*args, **kwargs)
    bound.apply_defaults()
    operands = []
    for name in tk.module.inputs:
        if name not in bound.arguments:
            raise TypeError("nki.jit(mode='jax'): kernel tensor %r is not a parameter of %s"
                            % (name, getattr(func, "__name__", func)))
        operands.append(bound.arguments[name])
    specs = [jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype)) for _, shape, dtype in tk.output_specs]
    outs = tk.module.outputs
    aliases = {tk.module.inputs.index(i): outs.index(o) for o, i in (tk.aliases or {}).items()}
    if any(_is_tracer(x) for x in operands):
        call = _ffi_call()(TARGET, specs, custom_call_api_version=2,
                           legacy_backend_config=encode_backend_config(tk.to_json()),
                           input_output_aliases=aliases or None)
        res = list(call(*operands))
    else:
        from neuronxcc.nki._trace import run_traced
        outs, _ = run_traced(tk, [np.asarray(x) for x in operands], mode="simulation")
        res = [jax.numpy.asarray(r) for r in outs]
    return _returned(tk, res)


def _returned(tk, res):
    """The Python return value: the kernel's returned tensors (one or a tuple), or for an out-argument
    kernel (returns nothing) the parameters it wrote (in jax nothing is mutated: they are the result)."""
    kind, ret_names = tk.returns
    by_name = dict(zip(tk.module.outputs, res))
    if kind == "single":
        return by_name[ret_names[0]]
    if kind == "tuple":
        return tuple(by_name[n] for n in ret_names)
    mutated = [by_name[n] for n in tk.module.outputs if n not in ret_names]
    if not mutated:
        return None
    return mutated[0] if len(mutated) == 1 else tuple(mutated)
