"""nki.jit on torch tensors (mode="torchxla", or "auto" picking it). torch is not installed here (not a
dependency), so the dispatch is tested with a minimal stand-in module registered as ``torch`` (and
``torch_xla``): CPU tensors are simulated on birsim and come back as torch tensors, out-arguments are
updated in place, XLA-device tensors become one AwsNeuronCustomNativeKernel custom-call whose inline
backend_config is the traced kernel (decoded and run here against numpy). Without torch: one clear error."""
import sys
import types

import ml_dtypes
import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.nki import errors as E
from neuronxcc.nki import language as nl
from neuronxcc.common.tolerances import assert_close


class _DType:
    def __init__(self, name, np_dtype):
        self.name, self.np = name, np.dtype(np_dtype)

    def __str__(self):
        return "torch." + self.name


class _Device:
    def __init__(self, kind):
        self.type = kind


def _fake_torch():
    torch = types.ModuleType("torch")
    dts = {n: _DType(n, d) for n, d in [("float32", np.float32), ("float16", np.float16), ("int16", np.int16),
                                         ("int32", np.int32), ("uint8", np.uint8),
                                         ("bfloat16", ml_dtypes.bfloat16)]}
    by_np = {d.np: d for d in dts.values()}

    class Tensor:
        def __init__(self, arr, device="cpu"):
            self._a = np.asarray(arr)
            self.device = _Device(device)

        shape = property(lambda self: self._a.shape)
        dtype = property(lambda self: by_np[self._a.dtype])

        def detach(self):
            return self

        def cpu(self):
            return Tensor(self._a, "cpu")

        def numpy(self):
            if self._a.dtype == ml_dtypes.bfloat16:
                raise TypeError("Got unsupported ScalarType BFloat16")      # as real torch does
            return self._a

        def view(self, dt):
            return Tensor(self._a.view(dt.np), self.device.type)

        def to(self, device):
            return Tensor(self._a, device.type)

        def copy_(self, other):
            np.copyto(self._a, other._a)
            return self

    torch.Tensor = Tensor
    torch.from_numpy = lambda a: Tensor(a)
    for n, d in dts.items():
        setattr(torch, n, d)
    return torch


@pytest.fixture
def torch(monkeypatch):
    t = _fake_torch()
    monkeypatch.setitem(sys.modules, "torch", t)
    return t


@nki.jit
def _scale_add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.load(a) * 2.0 + nl.load(b))
    return out


@nki.jit(mode="torchxla")
def _into_out(a, out):
    nl.store(out, nl.exp(nl.load(a)))


def _ab(seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((64, 32)).astype(np.float32).astype(dtype) for _ in range(2)]


def test_auto_mode_picks_the_torch_path_and_returns_torch_tensors(torch):
    a, b = _ab()
    r = _scale_add(torch.Tensor(a), torch.Tensor(b))
    assert isinstance(r, torch.Tensor) and r.device.type == "cpu"
    assert_close(r._a, a * 2.0 + b, row="compiled")


def test_bfloat16_tensors_cross_through_an_integer_view(torch):
    a, b = _ab(1, ml_dtypes.bfloat16)
    r = _scale_add(torch.Tensor(a), torch.Tensor(b))
    assert r.dtype is torch.bfloat16
    want = (a.astype(np.float32) * 2.0 + b.astype(np.float32)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(r._a.astype(np.float32), want.astype(np.float32))


def test_out_argument_is_updated_in_place(torch):
    a, _ = _ab(2)
    out = torch.Tensor(np.zeros_like(a))
    assert _into_out(torch.Tensor(a), out) is None
    assert_close(out._a, np.exp(a), row="compiled")


def test_xla_tensors_become_one_custom_call_carrying_the_kernel(torch, monkeypatch):
    from neuronxcc.hlo.nki_call import decode_backend_config
    from neuronxcc.nki._trace.trace import TracedKernel
    import base64
    import json
    calls = []

    def custom_call(inputs, target, shapes, dtypes, side_effect, config, api_version):
        calls.append((target, shapes, dtypes, side_effect))
        decode_backend_config(config)                       # what neuronx-cc compile reads
        tk = TracedKernel.from_json(json.loads(base64.b64decode(config)))
        from neuronxcc.nki._trace.run import run_traced
        outs, _ = run_traced(tk, [x._a for x in inputs])    # stands in for the compiled program
        return [torch.Tensor(o, "xla") for o in outs]

    xla = types.ModuleType("torch_xla")
    xla._XLAC = types.SimpleNamespace(_xla_custom_call=custom_call)
    monkeypatch.setitem(sys.modules, "torch_xla", xla)
    a, b = _ab(3)
    dev = _Device("xla")
    r = nki.jit(_scale_add, mode="torchxla")(torch.Tensor(a).to(dev), torch.Tensor(b).to(dev))
    assert calls == [("AwsNeuronCustomNativeKernel", [[64, 32]], [torch.float32], False)]
    assert r.device.type == "xla"
    assert_close(r._a, a * 2.0 + b, row="compiled")


def test_xla_tensors_without_torch_xla_fail_with_one_line(torch, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_xla", None)
    a, b = _ab(4)
    dev = _Device("xla")
    with pytest.raises(E.err_framework_not_installed, match="torch-xla"):
        nki.jit(_scale_add, mode="torchxla")(torch.Tensor(a).to(dev), torch.Tensor(b).to(dev))


def test_torchxla_without_torch_is_one_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)           # import torch -> ImportError
    a, b = _ab(5)
    with pytest.raises(E.err_framework_not_installed) as ei:
        nki.jit(_scale_add, mode="torchxla")(a, b)
    msg = str(ei.value)
    assert "\n" not in msg and "PyTorch" in msg and ei.value.code.startswith("NCC_ENKI")


def test_auto_mode_with_numpy_never_imports_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    a, b = _ab(6)
    assert_close(_scale_add(a, b), a * 2.0 + b, row="compiled")
