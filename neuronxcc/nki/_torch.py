"""``nki.jit`` on PyTorch tensors: ``mode="torchxla"``, or ``mode="auto"`` with a torch tensor argument.

torch is not a dependency: it is imported only when a torch tensor is seen or ``mode="torchxla"`` is
asked for, and without it the call fails with one ``err_framework_not_installed`` line. The kernel is
traced on the tensors' shapes and dtypes exactly as for numpy or jax (every other argument is a
compile-time constant); then, by the device the tensors live on:

* an XLA device (torch-xla's lazy tensors, ``t.device.type == "xla"``): the kernel becomes one
  ``AwsNeuronCustomNativeKernel`` custom-call in the lazy graph (``torch_xla._XLAC._xla_custom_call``)
  carrying the same inline backend_config as the jax path, which ``neuronx-cc compile`` splices;
  torch-xla places it inside a ``call``ed computation, which the splice handles;
* anything else (CPU tensors): the kernel is simulated on birsim, as jax does on concrete arrays,
  and the results come back as torch tensors.

Returned tensors are the kernel's return value; a parameter the kernel writes (the legacy
``out``-argument style NxD uses) is updated in place with ``Tensor.copy_``, as torch callers expect.
bfloat16 / float8 tensors cross to numpy through a same-width integer view (numpy has no such
dtypes; ml_dtypes supplies them on our side).
"""
import sys

import numpy as np

from neuronxcc.nki import errors as E

__all__ = ["is_torch_value", "has_torch_args", "torch_call", "require_torch"]

# torch dtype name -> (numpy dtype, integer view dtype torch can convert or None)
_DTYPES = {
    "float32": (np.float32, None), "float64": (np.float64, None), "float16": (np.float16, None),
    "int8": (np.int8, None), "int16": (np.int16, None), "int32": (np.int32, None), "int64": (np.int64, None),
    "uint8": (np.uint8, None), "bool": (np.bool_, None),
    "bfloat16": ("bfloat16", "int16"), "float8_e4m3fn": ("float8_e4m3fn", "uint8"),
    "float8_e5m2": ("float8_e5m2", "uint8"),
}
# numpy dtype name of a traced output -> torch dtype name (NKI's float8_e4m3 is torch's e4m3fn storage)
_TORCH_OF = {"float32": "float32", "float64": "float64", "float16": "float16", "int8": "int8", "int16": "int16",
             "int32": "int32", "int64": "int64", "uint8": "uint8", "bool": "bool", "bfloat16": "bfloat16",
             "float8_e4m3fn": "float8_e4m3fn", "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}


def is_torch_value(x):
    """True for a torch.Tensor (or subclass) without importing torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    cls = getattr(torch, "Tensor", None)
    return isinstance(cls, type) and isinstance(x, cls)


def has_torch_args(args, kwargs):
    return any(is_torch_value(a) for a in args) or any(is_torch_value(v) for v in (kwargs or {}).values())


def require_torch(why="nki.jit(mode='torchxla')"):
    try:
        import torch
    except ImportError:
        raise E.err_framework_not_installed(
            "%s needs PyTorch (and torch-xla for XLA devices), which is not installed here; call the kernel "
            "with numpy arrays (simulation) or jax arrays instead" % why, location="<call>") from None
    return torch


def _dtype_name(t):
    return str(t.dtype).rsplit(".", 1)[-1]


def _np_dtype(t):
    name = _dtype_name(t)
    if name not in _DTYPES:
        raise E.err_unsupported_dtype("torch dtype %s has no NKI equivalent" % t.dtype, location="<call>")
    np_dt, _ = _DTYPES[name]
    if isinstance(np_dt, str):
        import ml_dtypes
        return np.dtype(getattr(ml_dtypes, np_dt))
    return np.dtype(np_dt)


def to_numpy(t):
    """A CPU copy of torch tensor T as numpy (bf16/fp8 through an integer view)."""
    torch = sys.modules["torch"]
    view = _DTYPES.get(_dtype_name(t), (None, None))[1]
    x = t.detach().cpu()
    if view is not None:
        return x.view(getattr(torch, view)).numpy().view(_np_dtype(t)).copy()
    return np.array(x.numpy(), copy=True)


def from_numpy(a, like=None):
    """numpy array A as a torch tensor (on LIKE's device when given)."""
    torch = sys.modules["torch"]
    a = np.ascontiguousarray(a)
    if a.dtype.name == "float8_e4m3":          # NKI's IEEE-style e4m3: torch only has e4m3fn
        import ml_dtypes
        a = a.astype(ml_dtypes.float8_e4m3fn)
    name = a.dtype.name
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        ints = a.view(np.int16 if a.dtype.itemsize == 2 else np.uint8)
        t = torch.from_numpy(ints.copy()).view(getattr(torch, name))
    else:
        t = torch.from_numpy(a.copy())
    if like is not None and getattr(like, "device", None) is not None and _device_type(like) != "cpu":
        t = t.to(like.device)
    return t


def _device_type(t):
    dev = getattr(t, "device", None)
    return getattr(dev, "type", str(dev) if dev is not None else "cpu")


def _spec(x):
    if is_torch_value(x):
        from neuronxcc.nki._trace.trace import TensorSpec
        return TensorSpec(tuple(int(s) for s in x.shape), _np_dtype(x))
    return x


def torch_call(kernel, args, kwargs=None):
    """``nki.jit``'s entry for torch tensors: KERNEL is the JitKernel (its ``func``, ``grid``, options)."""
    import inspect
    require_torch()
    from neuronxcc.nki._trace import trace_kernel
    kwargs = dict(kwargs or {})
    opts = getattr(kernel, "options", None) or {}
    target = opts.get("platform_target") or "trn1"
    func = kernel.func
    tk = trace_kernel(func, [_spec(a) for a in args], {k: _spec(v) for k, v in kwargs.items()},
                      grid=tuple(getattr(kernel, "grid", ()) or ()), target=target)
    bound = inspect.signature(func).bind(*args, **kwargs)
    bound.apply_defaults()
    operands = [bound.arguments[name] for name, _, _ in tk.inputs]
    if any(_device_type(t) == "xla" for t in operands if is_torch_value(t)):
        res = _xla_custom_call(tk, operands)
    else:
        from neuronxcc.nki._trace.run import run_traced
        outs, _ = run_traced(tk, [to_numpy(t) if is_torch_value(t) else np.asarray(t) for t in operands],
                             mode="simulation", target=target)
        like = next((t for t in operands if is_torch_value(t)), None)
        res = [from_numpy(o, like) for o in outs]
    return _returned(tk, res, operands)


def _xla_custom_call(tk, operands):
    """The kernel as one custom-call node of torch-xla's lazy graph (same backend_config as jax)."""
    try:
        import torch_xla
    except ImportError:
        raise E.err_framework_not_installed("tensors on an XLA device need torch-xla, which is not installed",
                                            location="<call>") from None
    torch = sys.modules["torch"]
    from neuronxcc.hlo.nki_call import encode_backend_config
    from neuronxcc.nki._framework import TARGET
    shapes = [list(shape) for _, shape, _ in tk.output_specs]
    dtypes = [getattr(torch, _TORCH_OF[np.dtype(dt).name]) for _, _, dt in tk.output_specs]
    res = torch_xla._XLAC._xla_custom_call(list(operands), TARGET, shapes, dtypes, False,
                                           encode_backend_config(tk.to_json()), 0)
    return list(res)


def _returned(tk, res, operands):
    """The Python return value; parameters the kernel wrote are updated in place (``copy_``)."""
    by_name = dict(zip(tk.module.outputs, res))
    names = [n for n, _, _ in tk.inputs]
    for out_name, in_name in (tk.aliases or {}).items():
        t = operands[names.index(in_name)]
        if is_torch_value(t):
            t.copy_(by_name[out_name])
    kind, ret_names = tk.returns
    if kind == "none":
        return None
    if kind == "single":
        return by_name[ret_names[0]]
    return tuple(by_name[n] for n in ret_names)
