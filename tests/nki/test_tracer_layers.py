"""The tracer under nki.language / nki.isa: every value a kernel sees is an ``nki.tensor`` (fresh tiles
come from the tracer, not from the API layer), and the Tensor operators are the nl functions of the
same meaning (the same traced program)."""
import json

import numpy as np

from neuronxcc import nki
from neuronxcc.nki._trace import elementwise, trace_kernel
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.starfish import birpy


def _strip(x):
    """The program without names (they carry the kernel's name and line)."""
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in ("name", "func_name")}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    return x


def _bir(kernel, *args):
    return json.dumps(_strip(birpy.to_json(trace_kernel(kernel, args).module)), sort_keys=True, default=str)


def test_every_value_a_kernel_sees_is_an_nki_tensor():
    seen = {}

    def kernel(a, idx):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        seen["param"] = a
        x = nl.load(a)
        seen.update(load=x, view=x[:, 0:4], add=x + 1.0, neg=-x, T=x[:, 0:128].T, astype=x.astype(np.float16),
                    exp=nl.exp(x), zeros=nl.zeros((128, 4), np.float32), iota=nisa.iota(nl.arange(128)[:, None],
                                                                                         np.int32),
                    act=nisa.activation(np.exp, x), mm=nisa.nc_matmul(x[:, 0:128], x), sum=nl.sum(x, axis=1),
                    gathered=nl.load(a[nl.load(idx), :]))
        nl.store(out, x)
        return out

    trace_kernel(kernel, (np.zeros((128, 256), np.float32), np.zeros((128, 1), np.int32)))
    assert {k: type(v).__name__ for k, v in seen.items() if not isinstance(v, nki.tensor)} == {}


def test_operators_trace_as_the_nl_functions():
    def by_operator(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        nl.store(out, ((x + y) * 2.0 - abs(y)) / (y > x))
        return out

    def by_function(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        nl.store(out, nl.divide(nl.subtract(nl.multiply(nl.add(x, y), 2.0), nl.abs(y)), nl.greater(y, x)))
        return out

    args = (np.zeros((128, 64), np.float32), np.zeros((128, 64), np.float32))
    assert _bir(by_operator, *args) == _bir(by_function, *args)
    assert nl.add is elementwise.add and nl.abs is elementwise.abs
