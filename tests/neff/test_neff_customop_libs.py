"""The eight builtin custom-op libraries, loaded through ctypes, against JAX.

Sort follows jnp.sort / jnp.argsort(stable=True) (NaNs of either sign last,
zeros and subnormals of either sign equal, as XLA compares with
denormals-are-zero); descending follows jnp.argsort(descending=True, stable=True).
Top-k follows jax.lax.top_k (IEEE totalOrder: -NaN lowest, +NaN highest,
-0.0 < +0.0; ties keep the lower index). Indices compare exactly; values are
compared bit for bit.
"""
import ctypes
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import neuronxcc
from neuronxcc.errors import CustomOpError
from neuronxcc.neff import customop
from neuronxcc.neff.customop import CustomOpLibrary, ModuleArtifactInfo

DATA_DIR = os.path.join(os.path.dirname(neuronxcc.__file__), "data", "custom_op")


@pytest.fixture(scope="module")
def libs():
    paths = customop.builtin_library_paths(DATA_DIR)
    assert [os.path.basename(p) for p in paths] == list(customop.builtin_libnames), \
        "build the libraries: scripts/dev_build.py neuronxcc.data.custom_op"
    return [CustomOpLibrary(p) for p in paths]


def _bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


def _rows(rng, shape, nan=True):
    x = rng.integers(-4, 5, size=shape).astype(np.float32)          # many ties
    x += (rng.random(shape) < 0.3) * rng.standard_normal(shape).astype(np.float32)
    if nan:
        m = rng.random(shape)
        x[m < 0.05] = np.nan
        x[(m >= 0.05) & (m < 0.08)] = -np.nan
        x[(m >= 0.08) & (m < 0.11)] = -0.0
        x[(m >= 0.11) & (m < 0.13)] = np.inf
        x[(m >= 0.13) & (m < 0.15)] = -np.inf
    return x


def test_each_library_reports_its_identity(libs):
    for i, lib in enumerate(libs):
        assert (lib.cpu_id, lib.total_cpus) == (i, 8)
        assert lib.ucode_version and lib.isa_version
        assert lib.has_function("sort_f32") and lib.has_function("topk_f32")


def test_only_the_abi_is_exported(libs):
    raw = ctypes.CDLL(libs[0].path)
    for hidden in ("merge_sort", "sort_key", "heap_sift_down", "owned_rows"):
        assert not hasattr(raw, hidden)


@pytest.mark.parametrize("shape", [(1, 1), (3, 17), (8, 64), (13, 37), (2, 5, 9), (20, 1), (0, 4)])
def test_sort_matches_jax(libs, shape):
    x = _rows(np.random.default_rng(sum(shape)), shape)
    v, i = customop.sort_rows(libs, x)
    assert np.array_equal(i, np.asarray(jnp.argsort(x, axis=-1, stable=True)))
    assert np.array_equal(_bits(v), _bits(np.take_along_axis(x, i.astype(np.int64), -1)))
    assert np.array_equal(v, np.asarray(jnp.sort(x, axis=-1)), equal_nan=True)
    vd, idd = customop.sort_rows(libs, x, descending=True)
    assert np.array_equal(idd, np.asarray(jnp.argsort(x, axis=-1, stable=True, descending=True)))
    assert np.array_equal(_bits(vd), _bits(np.take_along_axis(x, idd.astype(np.int64), -1)))


@pytest.mark.parametrize("shape,k", [((3, 17), 1), ((3, 17), 5), ((13, 37), 37), ((9, 64), 8),
                                     ((2, 3, 10), 4), ((5, 6), 0), ((17, 1), 1)])
def test_topk_matches_jax(libs, shape, k):
    x = _rows(np.random.default_rng(k + sum(shape)), shape)
    v, i = customop.topk_rows(libs, x, k)
    jv, ji = jax.lax.top_k(x, k)
    assert np.array_equal(i, np.asarray(ji))
    assert np.array_equal(_bits(v), _bits(np.asarray(jv)))


def test_rows_are_split_between_cpus(libs):
    x = _rows(np.random.default_rng(1), (11, 6), nan=False)   # c = ceil(11/8) = 2: cpus 0..5 own rows
    v = np.full(x.shape, -7.0, np.float32)
    idx = np.full(x.shape, -1, np.int32)
    assert libs[2].sort_f32(x, v, idx) == 0
    touched = sorted(set(np.nonzero(idx[:, 0] >= 0)[0].tolist()))
    assert touched == [4, 5]
    v[:] = -7.0
    idx[:] = -1
    assert libs[6].sort_f32(x, v, idx) == 0 and (idx == -1).all()   # cpu 6 owns no row here
    with pytest.raises(CustomOpError, match="every cpu"):
        customop.sort_rows(libs[:7], x)


def test_bad_arguments_return_nonzero(libs):
    lib = libs[0]._lib
    x = np.zeros((2, 4), np.float32)
    v = np.zeros((2, 4), np.float32)
    i = np.zeros((2, 4), np.int32)
    assert lib.ncc_sort_f32(x.ctypes.data, -1, 4, v.ctypes.data, i.ctypes.data, 0) != 0
    assert lib.ncc_sort_f32(None, 2, 4, v.ctypes.data, i.ctypes.data, 0) != 0
    assert lib.ncc_topk_f32(x.ctypes.data, 2, 4, 5, v.ctypes.data, i.ctypes.data) != 0
    assert lib.ncc_topk_f32(x.ctypes.data, 2, 4, -1, v.ctypes.data, i.ctypes.data) != 0
    assert lib.ncc_topk_f32(x.ctypes.data, 2, 4, 2, None, i.ctypes.data) != 0


def test_recorded_versions_are_what_the_libraries_report(libs):
    info = ModuleArtifactInfo()
    customop.register_builtin_custom_op_libs(info, [lib.path for lib in libs])
    for lib in libs:
        raw = ctypes.CDLL(lib.path)
        raw.ncc_customop_ucode_version.restype = ctypes.c_char_p
        raw.ncc_customop_isa_version.restype = ctypes.c_char_p
        rec = info.customOpLibs[os.path.basename(lib.path)]
        assert rec.ulib_to_ucode_version == raw.ncc_customop_ucode_version().decode()
        assert rec.ulib_to_isa_version == raw.ncc_customop_isa_version().decode()
        assert (rec.cpu_id, rec.total_cpus, rec.is_builtin) == (raw.ncc_customop_cpu_id(), 8, True)
        assert rec.source_path == lib.path


from hypothesis import given, settings, strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(bits=hnp.arrays(np.uint32, st.tuples(st.integers(1, 12), st.integers(1, 24))),
       kfrac=st.floats(0, 1), descending=st.booleans())
def test_any_bit_patterns_match_jax(libs, bits, kfrac, descending):
    """Every float32 bit pattern (all NaN payloads, subnormals, signed zeros)."""
    x = bits.view(np.float32)
    _v, i = customop.sort_rows(libs, x, descending=descending)
    assert np.array_equal(i, np.asarray(jnp.argsort(x, axis=-1, stable=True, descending=descending)))
    k = int(round(kfrac * x.shape[1]))
    v, i = customop.topk_rows(libs, x, k)
    jv, ji = jax.lax.top_k(x, k)
    assert np.array_equal(i, np.asarray(ji))
    assert np.array_equal(_bits(v), _bits(np.asarray(jv)))


_PRELOAD_PROBE = r"""
import sys
from neuronxcc.neff import customop
paths = customop.builtin_library_paths(sys.argv[1])
def mapped():
    with open("/proc/self/maps") as f:
        maps = f.read()
    return {p for p in paths if p in maps}
assert not mapped()
customop.preload_libraries(paths + [sys.argv[1] + "/no_such_library.so"])
assert mapped() == set(paths), mapped()
customop.preload_libraries(paths)            # a second call loads nothing again
assert len(customop._PRELOADED) == len(paths)
print("ok")
"""


def test_preload_maps_the_builtin_libraries_once_and_skips_unloadable_paths():
    """preload_libraries (the compile driver's, before it forks walrus_driver) leaves every builtin
    library mapped in the process, once; a path that cannot load is left for CustomOpLibrary."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _PRELOAD_PROBE, DATA_DIR], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
