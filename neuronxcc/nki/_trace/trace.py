"""``trace_kernel``: run a kernel function once under a TraceContext and lower it to BIR.

Tensor parameters (numpy arrays, ``TensorSpec``, anything with ``.shape`` and ``.dtype``,
``nt.tensor[shape, dtype]``) become HBM ``input`` tensors named after the Python parameters;
every other argument is a compile-time constant passed through unchanged. The SPMD grid becomes
nested loops over ``pid<axis>`` around the body.
"""
import base64
import inspect
import json

import numpy as np

from neuronxcc.nki import errors as E
from neuronxcc.nki._trace import dtypes as D
from neuronxcc.nki._trace.buffers import grid_size
from neuronxcc.nki._trace.context import TraceContext
from neuronxcc.nki._trace.lower import lower
from neuronxcc.nki._trace.spmd import wrap_grid
from neuronxcc.nki._trace.tensor import Tensor, whole
from neuronxcc.starfish import birpy

__all__ = ["TensorSpec", "TracedKernel", "trace_kernel", "is_tensor_arg"]


class TensorSpec:
    """A tensor parameter by shape and dtype only."""

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = D.np_dtype(dtype)

    def __repr__(self):
        return "TensorSpec(%s, %s)" % (self.shape, self.dtype)


def is_tensor_arg(v):
    if isinstance(v, (np.ndarray, TensorSpec)):
        return True
    if isinstance(v, (int, float, bool, str, tuple, list, dict, type(None), np.generic)):
        return False
    sh, dt = getattr(v, "shape", None), getattr(v, "dtype", None)
    return sh is not None and dt is not None and not isinstance(v, type)


class TracedKernel:
    """A kernel traced to a self-contained BIR module (see docs in /work/coord/nki-interface.md)."""

    def __init__(self, module, func_name, grid, inputs, outputs, aliases, returns, print_outputs=()):
        self.module = module
        self.func_name = func_name
        self.grid = tuple(grid)
        self.inputs = list(inputs)          # [(name, shape, np dtype)]
        self.output_specs = list(outputs)   # [(name, shape, np dtype)]
        self.aliases = dict(aliases)        # output name -> input name
        self.returns = returns              # ("none"|"single"|"tuple", [output names of the return])
        self.print_outputs = list(print_outputs)

    def to_json(self):
        def spec(s):
            return {"name": s[0], "shape": list(s[1]), "dtype": D.bir_name(s[2])}
        return {"format": "neuronxcc-nki", "version": 1, "func_name": self.func_name, "grid": list(self.grid),
                "inputs": [spec(s) for s in self.inputs], "outputs": [spec(s) for s in self.output_specs],
                "aliases": self.aliases, "returns": self.returns[0], "return_names": list(self.returns[1]),
                "bir": birpy.to_json(self.module)}

    def to_b64(self):
        return base64.b64encode(json.dumps(self.to_json(), sort_keys=True).encode()).decode()

    @staticmethod
    def from_json(obj):
        if not isinstance(obj, dict) or obj.get("format") != "neuronxcc-nki" or obj.get("version") != 1:
            raise E.NkiFormatError("not a neuronxcc NKI kernel (expected format 'neuronxcc-nki' version 1)")
        try:
            m = birpy.from_json(obj["bir"])

            def spec(s):
                return (s["name"], tuple(s["shape"]), D.np_dtype(s["dtype"]))
            return TracedKernel(m, obj["func_name"], obj.get("grid", ()), [spec(s) for s in obj["inputs"]],
                                [spec(s) for s in obj["outputs"]], obj.get("aliases", {}),
                                (obj.get("returns", "tuple"), list(obj.get("return_names", []))))
        except (KeyError, TypeError, ValueError) as e:
            raise E.NkiFormatError("malformed NKI kernel JSON: %s" % e)


def _unwrap(func):
    while hasattr(func, "func") and callable(getattr(func, "func")):
        func = func.func
    return func


def trace_kernel(func, args=(), kwargs=None, grid=(), target="trn1", name=None):
    """Trace FUNC on ARGS (see module doc) -> TracedKernel."""
    func = _unwrap(func)
    kwargs = dict(kwargs or {})
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    grid = tuple(grid_size(g) for g in grid)
    fname = name or getattr(func, "__name__", "kernel")
    ctx = TraceContext(fname, target, grid, tensor_type=Tensor)
    try:
        sig = inspect.signature(func)
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise E.err_invalid_argument("cannot call kernel %s: %s" % (fname, e), location=_def_loc(func))
    bound.apply_defaults()
    call_args = {}
    for pname, v in bound.arguments.items():
        kind = sig.parameters[pname].kind
        if kind == inspect.Parameter.VAR_POSITIONAL:
            call_args[pname] = [_param(ctx, "%s%d" % (pname, i), x) for i, x in enumerate(v)]
            continue
        if kind == inspect.Parameter.VAR_KEYWORD:
            call_args[pname] = {k: _param(ctx, k, x) for k, x in v.items()}
            continue
        call_args[pname] = _param(ctx, pname, v)
    pos, kw = [], {}
    for pname, p in sig.parameters.items():
        if pname not in call_args:
            continue
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            pos.extend(call_args[pname])
        elif p.kind == inspect.Parameter.VAR_KEYWORD:
            kw.update(call_args[pname])
        elif p.kind == inspect.Parameter.KEYWORD_ONLY:
            kw[pname] = call_args[pname]
        else:
            pos.append(call_args[pname])
    for k, g in enumerate(grid):
        ctx.loop_vars["pid%d" % k] = (0, g - 1) if g > 0 else None
    from neuronxcc.nki._trace.rewrite import rewritten
    with ctx:
        ret = rewritten(func)(*pos, **kw)
    if grid:
        wrap_grid(ctx, grid, _def_loc(func))
    if ret is None:
        rets, kind = [], "none"
    elif isinstance(ret, Tensor):
        rets, kind = [ret], "single"
    elif isinstance(ret, (tuple, list)) and all(isinstance(r, Tensor) for r in ret):
        rets, kind = list(ret), "tuple"
    else:
        raise E.err_invalid_argument("a kernel returns HBM tensors (nl.ndarray(..., buffer=nl.shared_hbm)), "
                                     "a tuple of them, or None; got %r" % (type(ret).__name__,),
                                     location=_def_loc(func))
    bufs = []
    rets = [_returned_onchip(ctx, r, func) if r.buf.memory != "HBM" else r for r in rets]
    for r in rets:
        if not r.is_whole():
            raise E.err_invalid_argument("a kernel returns whole tensors, not views ('%s')" % r.buf.name,
                                         location=_def_loc(func))
        bufs.append(r.buf)
    module, aliases = lower(ctx, bufs)
    names = {b.name: b.name for b in bufs}
    for out, inp in aliases.items():
        names[inp] = out
    ret_names = [names.get(b.name, b.name) for b in bufs]
    inputs = [(b.name, b.shape, b.dtype) for b in ctx.params]
    outputs = [(n, module.tensors[n].shape, D.np_dtype(module.tensors[n].dtype)) for n in module.outputs]
    return TracedKernel(module, fname, grid, inputs, outputs, aliases, (kind, ret_names))


def _returned_onchip(ctx, r, func):
    """A returned SBUF/PSUM tensor: its final contents are stored to a new HBM output at the end."""
    from neuronxcc.nki._trace import ops
    with ctx:
        out = whole(ctx.new_buf(r.buf.name + "_out", "HBM", r.shape, r.dtype, 0, "shared"))
        src = r if r.buf.memory == "SBUF" else ops.copy_to_sbuf(r)
        if not src.is_tile():
            raise E.err_unsupported_memory("kernel outputs must be HBM tensors (buffer=nl.shared_hbm); '%s' is in %s"
                                           % (r.buf.name, r.buf.memory.lower()), location=_def_loc(func))
        ops.dma(out, src)
    return out


def _param(ctx, pname, v):
    s = _spec_of(v)
    if s is not None and is_tensor_arg(s):
        b = ctx.new_buf(pname, "HBM", tuple(s.shape), D.np_dtype(s.dtype), 0, "input")
        b.param_index = len(ctx.params)
        ctx.params.append(b)
        return whole(b)
    return v


def _spec_of(v):
    from neuronxcc.nki.typing import TensorType
    if isinstance(v, TensorType):
        return TensorSpec(v.shape, v.dtype)
    return v


def _def_loc(func):
    try:
        code = func.__code__
        return "%s:%d" % (code.co_filename, code.co_firstlineno)
    except AttributeError:
        return "<kernel>"
