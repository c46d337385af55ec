"""if / elif / else on loop iterators and program ids (both branches traced under guards, the loop split
where the guard changes), ``and`` / ``or`` / ``not`` of masks and iterator comparisons, against numpy;
concrete conditions keep Python's semantics; the untraceable forms are refused by name."""
import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.nki import errors as E
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.common.tolerances import assert_close


def rand(*shape, seed=0):
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


def test_if_elif_else_on_an_iterator_splits_the_loop():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(6):
            t = nl.load(a[i])
            if i == 0:
                nl.store(out[i], nl.multiply(t, 2.0))
            elif i < 4 and i != 2:
                nl.store(out[i], nl.multiply(t, 3.0))
            else:
                nl.store(out[i], nl.add(t, 1.0))
        return out
    a = rand(6, 16, 8)
    ref = a + np.float32(1.0)
    ref[0] = a[0] * np.float32(2.0)
    ref[[1, 3]] = a[[1, 3]] * np.float32(3.0)
    tk = nki.jit(k).trace(a)
    loops = [n for n in tk.module.walk() if n.kind == "loop"]
    assert len(loops) < 6                   # runs of equal guards stay loops (i in 4..5)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), ref)


def test_accumulate_with_if_else_on_a_sequential_iterator():
    def k(a):
        out = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray(a.shape[1:], dtype=nl.float32, buffer=nl.sbuf)
        for i in nl.sequential_range(a.shape[0]):
            t = nl.load(a[i])
            if i == 0:
                acc[...] = t
            else:
                acc[...] = nl.maximum(acc, t)
        nl.store(out, acc)
        return out
    a = rand(5, 32, 16, seed=1)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), a.max(axis=0))


def test_or_and_not_of_iterator_comparisons_and_program_ids():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        p = nl.program_id(0)
        for i in nl.affine_range(a.shape[1]):
            t = nl.load(a[p, i])
            if i == 0 or (i >= 3 and not p == 1):
                nl.store(out[p, i], nl.negative(t))
            else:
                nl.store(out[p, i], t)
        return out
    a = rand(2, 5, 8, 4, seed=2)
    ref = a.copy()
    for p in range(2):
        for i in range(5):
            if i == 0 or (i >= 3 and p != 1):
                ref[p, i] = -a[p, i]
    np.testing.assert_array_equal(nki.simulate_kernel(nki.jit(k)[2], a), ref)


def test_nested_loop_guarded_by_the_outer_iterator():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            for j in nl.affine_range(2):
                t = nl.load(a[i, j])
                if i != 1:
                    nl.store(out[i, j], nl.exp(t))
                else:
                    nl.store(out[i, j], t)
        return out
    a = rand(3, 2, 8, 8, seed=3)
    ref = a.copy()
    ref[[0, 2]] = np.exp(a[[0, 2]])
    assert_close(nki.simulate_kernel(k, a), ref, row="compiled")


def test_and_between_masks_is_their_conjunction():
    def k(a):
        out = nl.ndarray((128, 64), dtype=a.dtype, buffer=nl.shared_hbm)
        ix, iy = nl.mgrid[0:128, 0:64]
        nl.store(out, nl.zeros((128, 64), nl.float32))
        t = nl.load(a)
        m = nisa.tensor_scalar(t[ix, iy], np.multiply, 2.0, mask=(ix < 64 and iy < 32))
        nl.store(out[ix, iy], m, mask=(ix < 64 and iy < 32))
        return out
    a = rand(128, 64, seed=4)
    ref = np.zeros_like(a)
    ref[:64, :32] = a[:64, :32] * np.float32(2.0)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), ref)


def test_concrete_conditions_keep_python_semantics():
    def k(a, scale, flag=None):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        t = nl.load(a)
        if flag is not None and flag:
            t = nl.multiply(t, scale)
        elif not scale:
            t = nl.negative(t)
        else:
            t = nl.add(t, scale or 5.0)
        nl.store(out, t)
        return out
    a = rand(8, 8, seed=5)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a, 3.0, True), a * np.float32(3.0))
    np.testing.assert_array_equal(nki.simulate_kernel(k, a, 0.0), -a)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a, 2.0, False), a + np.float32(2.0))


def test_closure_variables_of_a_rewritten_kernel_are_the_callers():
    factor = [2.0]

    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            if i == 1:
                nl.store(out[i], nl.multiply(nl.load(a[i]), factor[0]))
            else:
                nl.store(out[i], nl.load(a[i]))
        return out
    a = rand(2, 4, 4, seed=6)
    factor[0] = 4.0
    ref = a.copy()
    ref[1] *= np.float32(4.0)
    np.testing.assert_array_equal(nki.simulate_kernel(k, a), ref)


def test_a_variable_bound_in_both_branches_and_used_after_is_refused():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(2):
            if i == 0:
                t = nl.load(a[i])
            else:
                t = nl.exp(nl.load(a[i]))
            nl.store(out[i], t)
        return out
    with pytest.raises(E.err_dynamic_control_flow_not_supported, match="'t'") as ei:
        nki.simulate_kernel(k, rand(2, 4, 4))
    assert "test_control_flow.py" in str(ei.value)


def test_break_in_a_branch_and_per_element_conditions_are_refused():
    def k(a):
        for i in nl.affine_range(2):
            if i == 1:
                break
    with pytest.raises(E.err_dynamic_control_flow_not_supported):
        nki.simulate_kernel(k, rand(2, 4))

    def k2(a):
        ix = nl.arange(4)[:, None]
        if ix < 2:
            nl.load(a)
        else:
            nl.load(a)
    with pytest.raises(E.err_control_flow_condition_depending_on_arange):
        nki.simulate_kernel(k2, rand(4, 4))


def test_a_kernel_named_like_a_test_is_not_collected_by_pytest():
    @nki.jit(mode="simulation")
    def test_like(in_tensor):
        return in_tensor
    assert test_like.__test__ is False


@nki.trace
def _sub_branch(out, a, i):
    if i == 0:
        nl.store(out[i], nl.load(a[i]))
    else:
        nl.store(out[i], nl.exp(nl.load(a[i])))


def _plain_branch(out, a, i):
    if i == 0:
        nl.store(out[i], nl.load(a[i]))
    else:
        nl.store(out[i], nl.exp(nl.load(a[i])))


def _plain_outer(out, a, i):
    """No control flow itself: the helper it calls is traced inline too."""
    _plain_branch(out, a, i)


class _Steps:
    def apply(self, dst, t, i):
        if i < 2:
            dst[...] = nl.multiply(t, 2.0)
        else:
            dst[...] = nl.add(t, 1.0)


def test_if_else_in_a_trace_sub_kernel_and_in_plain_helpers():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            _sub_branch(out, a, i)
        return out
    a = rand(3, 4, 4, seed=7)
    ref = np.exp(a)
    ref[0] = a[0]
    assert_close(nki.simulate_kernel(k, a), ref, row="compiled")

    def k2(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            _plain_outer(out, a, i)
        return out
    assert_close(nki.simulate_kernel(k2, a), ref, row="compiled")

    def k3(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        steps = _Steps()
        for i in nl.affine_range(3):
            t = nl.ndarray(a.shape[1:], dtype=a.dtype, buffer=nl.sbuf)
            steps.apply(t, nl.load(a[i]), i)
            nl.store(out[i], t)
        return out
    ref3 = a * 2
    ref3[2] = a[2] + 1
    assert_close(nki.simulate_kernel(k3, a), ref3, row="compiled")


def _plain_shared(t, i):
    if i == 0:
        r = nl.multiply(t, 2.0)
    else:
        r = nl.add(t, 1.0)
    return r


def test_a_plain_helper_value_chosen_by_an_iterator_branch_is_refused_by_name():
    def k(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        for i in nl.affine_range(3):
            nl.store(out[i], _plain_shared(nl.load(a[i]), i))
        return out
    with pytest.raises(E.err_dynamic_control_flow_not_supported, match="'r' assigned in both branches"):
        nki.simulate_kernel(k, rand(3, 4, 4, seed=8))
