"""NKI kernels as framework custom-calls: ``nki.jit`` on jax arrays (``mode="jax"``, or ``mode="auto"``
with a jax argument; ``jax_call``) and the legacy producer API ``nki.FrameworkKernel`` (below).

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


class FrameworkKernel:
    """The legacy producer API of kernel custom-calls for framework integrations (``nki.FrameworkKernel``).

    A framework subclasses it and implements ``translate_to_neuron_dtype(dtype)`` (framework dtype ->
    numpy dtype), ``is_framework_tensor(t)`` and ``map_framework_tensor(t)`` (-> ``(shape, dtype)``);
    ``dump_config(*args, **kwargs)`` then traces the kernel on the tensors' shapes and dtypes (everything
    else is a compile-time constant) and returns ``(backend_config, input_names, output_names)`` for one
    ``AwsNeuronCustomNativeKernel`` custom-call. As in the original, the call's operands are the tensor
    parameters the kernel reads, in signature order (``input_names``), and its result the tensors it
    returns followed by the parameters it writes (``output_names``): a parameter the kernel only writes
    (pass-by-reference ``out``) is a result, not an operand; one it reads and writes is both, and its
    result aliases the operand. numpy arrays are tensors too. ``kernel[grid]`` sets the SPMD grid."""

    def __init__(self, func_name=None, func=None, grid=(), **kwargs):
        if func is None:
            raise TypeError("FrameworkKernel needs func=")
        while callable(getattr(func, "func", None)):        # an nki.jit / baremetal wrapper
            func = func.func
        self.func = func
        self.func_name = func_name or getattr(self.func, "__name__", "kernel")
        self.grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        self.options = dict(kwargs)

    # -- hooks a framework implements -------------------------------------------------------
    def translate_to_neuron_dtype(self, dtype):
        import numpy as np
        return np.dtype(dtype)

    def is_framework_tensor(self, t):
        return False

    def map_framework_tensor(self, t):
        return tuple(t.shape), t.dtype

    # -------------------------------------------------------------------------------------------
    def __getitem__(self, grid):
        k = type(self).__new__(type(self))
        k.__dict__.update(self.__dict__)
        k.grid = tuple(grid) if isinstance(grid, (tuple, list)) else (grid,)
        return k

    def _spec(self, v):
        import numpy as np
        from neuronxcc.nki._trace.trace import TensorSpec
        if self.is_framework_tensor(v):
            shape, dtype = self.map_framework_tensor(v)
            return TensorSpec(tuple(shape), self.translate_to_neuron_dtype(dtype))
        if isinstance(v, np.ndarray):
            return TensorSpec(tuple(v.shape), v.dtype)
        return v

    def trace(self, *args, **kwargs):
        from neuronxcc.nki._trace import trace_kernel
        return trace_kernel(self.func, [self._spec(a) for a in args], {k: self._spec(v) for k, v in kwargs.items()},
                            grid=self.grid, target=self.options.get("platform_target") or "trn1",
                            name=self.func_name)

    def dump_config(self, *args, **kwargs):
        """(backend_config, input_names, output_names) of the custom-call for this call's arguments."""
        from neuronxcc.hlo.nki_call import encode_backend_config
        doc = write_only_parameters_as_results(self.trace(*args, **kwargs).to_json())
        return (encode_backend_config(doc), [s["name"] for s in doc["inputs"]],
                [s["name"] for s in doc["outputs"]])


def write_only_parameters_as_results(doc):
    """A traced kernel's JSON (``TracedKernel.to_json()``) with every mutated parameter the kernel never
    reads (neither the parameter nor its output tensor is any instruction's source) removed from its
    inputs: its output stands alone (the tracer's initial copy into it dropped)."""
    from neuronxcc.starfish import birpy
    m = birpy.from_json(doc["bir"])
    aliases = dict(doc.get("aliases") or {})
    for out, inp in list(aliases.items()):
        init = []
        readers = []
        for node in m.walk():
            if node.kind != "inst":
                continue
            srcs = [ap.target for ap in node.srcs]
            if srcs == [inp] and node.opcode == "dma_copy" and [ap.target for ap in node.dsts] == [out] and not init:
                init.append(node)            # the tracer's copy of the parameter into its output
            elif inp in srcs or out in srcs:
                readers.append(node)         # the kernel reads the parameter's value (conservatively: any read)
        if readers:
            continue
        for node in init:
            _remove(m.body, node)
        del m.tensors[inp]
        m.inputs.remove(inp)
        del aliases[out]
    doc = dict(doc)
    doc["inputs"] = [s for s in doc["inputs"] if s["name"] in m.inputs]
    doc["aliases"] = aliases
    doc["bir"] = birpy.to_json(m)
    return doc


def _remove(body, node):
    for k, n in enumerate(body):
        if n is node:
            del body[k]
            return True
        for sub in ((n.then_body, n.else_body) if n.kind == "if" else (getattr(n, "body", None),)):
            if sub is not None and _remove(sub, node):
                return True
    return False
