"""neuronxcc.nki tracing + birsim against numpy: load/store, loops, masks, grids, matmul accumulation,
the output-argument style, and the trace-time errors (the kernel's line, the original's names)."""
import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.common.tolerances import assert_close
from neuronxcc.nki import errors as E
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl

RNG = np.random.default_rng(7)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(np.float32).astype(dtype)


@nki.jit
def add_kernel(a, b):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(c, nl.load(a) + nl.load(b))
    return c


def test_tensor_add_exact():
    a, b = rand(128, 512), rand(128, 512)
    np.testing.assert_array_equal(nki.simulate_kernel(add_kernel, a, b), a + b)


def test_jit_simulation_mode_and_bf16():
    k = nki.jit(add_kernel.func, mode="simulation")
    a, b = rand(64, 32, dtype=nl.bfloat16), rand(64, 32, dtype=nl.bfloat16)
    out = k(a, b)
    assert out.dtype == nl.bfloat16
    ref = (a.astype(np.float32) + b.astype(np.float32)).astype(nl.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), ref.view(np.uint16))


@nki.jit
def tiled_exp_mul(a, b):
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(a.shape[0] // 128):
        ip, iff = nl.mgrid[0:128, 0:a.shape[1]]
        x = nl.load(a[i * 128 + ip, iff])
        y = nl.load(b[i * 128 + ip, iff])
        nl.store(c[i * 128 + ip, iff], nl.exp(x) * y)
    return c


def test_affine_range_is_one_bir_loop():
    a, b = rand(512, 256), rand(512, 256)
    tk = tiled_exp_mul.trace(a, b)
    loops = [n for n in tk.module.walk() if n.kind == "loop"]
    assert len(loops) == 1 and loops[0].trip_count == 4
    assert_close(nki.simulate_kernel(tiled_exp_mul, a, b), np.exp(a) * b)


@nki.jit
def matmul_acc(lhsT, rhs):
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((M, N), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(K // 128):
        acc += nisa.nc_matmul(nl.load(lhsT[k * 128:(k + 1) * 128, :]), nl.load(rhs[k * 128:(k + 1) * 128, :]))
    nl.store(out, acc)
    return out


def test_psum_accumulation_is_matmul_without_zeroing():
    A, B = rand(512, 128), rand(512, 256)
    tk = matmul_acc.trace(A, B)
    mms = [i for i in tk.module.instructions() if i.opcode == "matmul"]
    assert len(mms) == 1 and mms[0].attrs["psum_zero"] is False
    assert_close(nki.simulate_kernel(matmul_acc, A, B), A.T @ B)


@nki.jit
def masked_store(a):
    out = nl.ndarray((64, 256), dtype=a.dtype, buffer=nl.shared_hbm)
    ip, iff = nl.mgrid[0:128, 0:512]
    nl.store(out[ip, iff], nl.load(a), mask=(ip < 64) & (iff < 256))
    return out


def test_mask_stores_part_of_a_tile():
    a = rand(128, 512)
    np.testing.assert_array_equal(nki.simulate_kernel(masked_store, a), a[:64, :256])


@nki.jit
def ragged(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range((a.shape[0] + 127) // 128):
        ip = nl.arange(128)[:, None]
        iff = nl.arange(a.shape[1])[None, :]
        t = nl.load(a[i * 128 + ip, iff], mask=(i * 128 + ip < a.shape[0]))
        nl.store(out[i * 128 + ip, iff], nl.multiply(t, 2.0), mask=(i * 128 + ip < a.shape[0]))
    return out


def test_mask_on_loop_iterator_splits_the_loop():
    a = rand(300, 64)
    tk = ragged.trace(a)
    loops = [n for n in tk.module.walk() if n.kind == "loop"]
    assert [lp.trip_count for lp in loops] == [2, 1]
    np.testing.assert_array_equal(nki.simulate_kernel(ragged, a), 2 * a)


@nki.jit
def grid_kernel(a):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    i = nl.program_id(0)
    j = nl.program_id(1)
    assert nl.num_programs(1) == 2 and nl.program_ndim() == 2
    t = nl.load(a[i * 64:(i + 1) * 64, j * 32:(j + 1) * 32])
    nl.store(out[i * 64:(i + 1) * 64, j * 32:(j + 1) * 32], t + 1.0 * 1)
    return out


def test_spmd_grid_instances():
    a = rand(256, 64)
    np.testing.assert_array_equal(nki.simulate_kernel(grid_kernel[4, 2], a), a + 1)
    np.testing.assert_array_equal(nki.simulate_kernel(nki.baremetal(grid_kernel)[4, 2], a), a + 1)


@nki.jit
def out_arg(a, out):
    nl.store(out, nl.load(a) * 3.0)


def test_output_argument_is_updated_in_place():
    a = rand(32, 16)
    out = np.zeros_like(a)
    assert nki.simulate_kernel(out_arg, a, out) is None
    np.testing.assert_array_equal(out, a * np.float32(3.0))


@nki.jit
def two_outputs(a):
    x = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    y = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.load(a)
    nl.store(x, nl.negative(t))
    nl.store(y, t)
    return x, y


def test_tuple_return_and_dma_cast():
    a = rand(16, 8)
    x, y = nki.simulate_kernel(two_outputs, a)
    np.testing.assert_array_equal(x, -a)
    np.testing.assert_array_equal(y.view(np.uint16), a.astype(nl.bfloat16).view(np.uint16))


def test_baremetal_goes_through_walrus_and_a_neff(tmp_path):
    a, b = rand(128, 64), rand(128, 64)
    neff = tmp_path / "k.neff"
    k = nki.baremetal(add_kernel.func, save_neff_name=str(neff))
    np.testing.assert_array_equal(k(a, b), a + b)
    assert neff.stat().st_size > 1024


def test_benchmark_reports_simulated_latency():
    a, b = rand(128, 64), rand(128, 64)
    k = nki.benchmark(add_kernel.func, warmup=1, iters=2)
    k(a, b)
    p50 = k.benchmark_result.nc_latency.get_latency_percentile(50)
    assert 0.5 < p50 < 1e4          # microseconds: two DMA loads, an add and a store


# -- trace-time errors -----------------------------------------------------------------------
def _line_of(fn, text):
    import inspect
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(src) if text in ln)


def test_partition_limit_error_names_the_kernel_line():
    def k(a):
        t = nl.zeros((256, 16), nl.float32)   # too many partitions
        return t
    with pytest.raises(E.err_num_partition_exceed_arch_limit) as ei:
        nki.simulate_kernel(k, rand(4, 4))
    assert ei.value.code.startswith("NCC_ENKI")
    assert ei.value.message.endswith("%s:%d" % (__file__, _line_of(k, "too many partitions")))


def test_matmul_limits():
    def k(a, b):
        r = nisa.nc_matmul(nl.load(a), nl.load(b))   # moving free 1024 > 512
        return r
    with pytest.raises(E.err_size_of_dimension_exceed_arch_limit):
        nki.simulate_kernel(k, rand(128, 128), rand(128, 1024))

    def k2(a, b):
        return nisa.nc_matmul(nl.load(a), nl.load(b))
    with pytest.raises(E.err_size_of_dimension_exceed_arch_limit):
        nki.simulate_kernel(k2, rand(128, 256), rand(128, 64))
    with pytest.raises(E.err_num_partition_mismatch):
        nki.simulate_kernel(k2, rand(64, 64), rand(128, 64))


def test_psum_tile_limit():
    def k(a):
        return nl.zeros((128, 1024), nl.float32, buffer=nl.psum)
    with pytest.raises(E.err_psum_tile_too_large):
        nki.simulate_kernel(k, rand(4, 4))


def test_out_of_bound_access_detected_at_lowering():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range((a.shape[1] + 511) // 512):
            tile = nl.mgrid[0:128, 0:512]
            nl.store(out[tile.p, i * 512 + tile.x], value=0.0)
        return out
    with pytest.raises(E.err_tensor_access_out_of_bound):
        nki.simulate_kernel(k, rand(128, 1000))


def test_control_flow_on_arange_and_tensor_truth():
    def k(a):
        i = nl.arange(4)[:, None]
        if i > 2:
            pass
    with pytest.raises(E.err_control_flow_condition_depending_on_arange):
        nki.simulate_kernel(k, rand(4, 4))

    def k2(a):
        if nl.load(a):
            pass
    with pytest.raises(E.err_ambiguous_tensor_truth_value):
        nki.simulate_kernel(k2, rand(4, 4))


def test_mixing_basic_and_advanced_indexing():
    def k(a):
        i = nl.arange(4)[:, None]
        return nl.load(a[i, 0:2])
    with pytest.raises(E.err_unsupported_mixing_basic_advanced_tensor_indexing):
        nki.simulate_kernel(k, rand(4, 4))


def test_api_outside_kernel_and_unimplemented_name():
    with pytest.raises(E.err_nki_api_outside_of_nki_kernel):
        nl.zeros((4, 4), nl.float32)

    def k(a):
        nl.gemm_grid(nl.load(a))
    with pytest.raises(E.NkiNotImplementedError) as ei:
        nki.simulate_kernel(k, rand(4, 16))
    assert "nki.language.gemm_grid" in ei.value.message


def test_traced_kernel_json_round_trip():
    from neuronxcc.nki._trace import TracedKernel
    tk = add_kernel.trace(rand(8, 8), rand(8, 8))
    obj = tk.to_json()
    assert obj["format"] == "neuronxcc-nki" and [i["name"] for i in obj["inputs"]] == ["a", "b"]
    back = TracedKernel.from_json(obj)
    assert back.module.outputs == tk.module.outputs
    with pytest.raises(E.NkiFormatError):
        TracedKernel.from_json({"format": "klir"})


def test_profile_writes_neff_and_perfetto_trace(tmp_path):
    import json
    a, b = rand(128, 64), rand(128, 64)
    k = nki.profile(add_kernel.func, working_directory=str(tmp_path), save_neff_name="k.neff",
                    save_trace_name="k.json")
    np.testing.assert_array_equal(k(a, b), a + b)
    assert (tmp_path / "k.neff").stat().st_size > 1024
    trace = json.loads((tmp_path / "k.json").read_text())
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert any(e.get("ph") == "X" for e in events)
    assert k.benchmark_result.nc_latency.get_latency_percentile(99) > 0
