"""Regressions found by running nki-samples' unit tests unchanged (each reduced to the construct that failed),
against numpy:

* adaptive_avg_pool2d gave NaN on every partition past the pooling window's height: a mask on free axes only
  (``(i_h < H) & (i_w < W)``) of a reduction was applied by axis position to the reduction's lower-rank result,
  masking its partition axis.
* rmsnorm_qkv gave NaN: ``psum_tile += nc_matmul(...)`` into an ``nl.ndarray`` PSUM tensor (nothing wrote it
  before) accumulated onto the uninitialised PSUM contents instead of starting from zero.
* flash_attn_bwd was refused: a PSUM tile (an nc_transpose result, a score tile) passed straight to nc_matmul /
  affine_select.
* allocated_SD_attention failed on ``ncc.psum.alloc(functools.partial(f, bank_map=...))``: the allocation function
  was called positionally.
"""
import numpy as np

from neuronxcc import nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.common.tolerances import mismatch


def _check(actual, expected):
    msg = mismatch(actual, expected.astype(np.float32), row="compiled")
    assert not msg, msg


@nki.jit
def _window_sums(x):
    """Per-partition sums of a 2x3 window at (1, 2) of x [P, H, W], through a blocked SBUF buffer and a reduction
    masked on the free axes only."""
    P, H, W = x.shape
    out = nl.ndarray((P, 1), nl.float32, buffer=nl.shared_hbm)
    buf = nl.zeros((1, nl.par_dim(P), 2, 3), nl.float32, buffer=nl.sbuf)
    i_h = nl.arange(2)[None, :, None] + 1
    i_w = nl.arange(3)[None, None, :] + 2
    nisa.dma_copy(src=x[0:P, 1:3, 2:5], dst=buf[0, :, 0:2, 0:3], mask=(i_h < H) & (i_w < W))
    s = nl.sum(buf[0, :, 0:2, 0:3], axis=[-2, -1], mask=(i_h < H) & (i_w < W))
    nl.store(out, s)
    return out


def test_reduction_masked_on_free_axes_keeps_every_partition():
    x = np.random.default_rng(0).standard_normal((16, 4, 6)).astype(np.float32)
    out = nki.simulate_kernel(_window_sums, x)
    assert not np.isnan(out).any()
    _check(out, x[:, 1:3, 2:5].sum(axis=(1, 2))[:, None])


@nki.jit
def _acc_ndarray(a, b):
    out = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((64, 32), nl.float32, buffer=nl.psum)
    for m in nl.affine_range(a.shape[0] // 128):
        acc += nisa.nc_matmul(nl.load(a[m * 128:(m + 1) * 128, :]), nl.load(b[m * 128:(m + 1) * 128, :]))
    nl.store(out, nl.copy(acc))
    return out


@nki.jit
def _acc_allocated(a, b):
    out = nl.ndarray((2, 64, 32), nl.float32, buffer=nl.shared_hbm)
    for r in nl.affine_range(2):                       # a fresh accumulation per outer iteration
        acc = nl.ndarray((1, nl.par_dim(64), 32), nl.float32,
                         buffer=ncc.psum.mod_alloc(base_bank=7, num_bank_tiles=(1,)))
        for m in nl.affine_range(a.shape[0] // 128):
            acc[0] += nisa.nc_matmul(nl.load(a[m * 128:(m + 1) * 128, :]), nl.load(b[m * 128:(m + 1) * 128, :]))
        nl.store(out[r], nl.copy(acc[0]))
    return out


def test_psum_ndarray_accumulation_starts_from_zero():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((256, 64)).astype(np.float32)
    b = rng.standard_normal((256, 32)).astype(np.float32)
    ref = a.astype(np.float64).T @ b
    _check(nki.simulate_kernel(_acc_ndarray, a, b), ref)
    _check(nki.simulate_kernel(_acc_allocated, a, b), np.stack([ref, ref]))


@nki.jit
def _psum_operands(x, y):
    """causal-masked x @ y = (x^T)^T y, with the transpose and the scores left in PSUM."""
    out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
    xt = nisa.nc_transpose(nl.load(x))                 # x^T in PSUM
    s = nisa.nc_matmul(xt, nl.load(y))                 # stationary read from PSUM: x @ y, in PSUM
    ip, jf = nl.arange(128)[:, None], nl.arange(128)[None, :]
    sel = nisa.affine_select(pred=(ip >= jf), on_true_tile=s, on_false_value=-5.0, dtype=nl.float32)
    nl.store(out, sel)
    return out


def test_psum_tiles_as_matmul_and_affine_select_operands():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((128, 128)).astype(np.float32)
    y = rng.standard_normal((128, 128)).astype(np.float32)
    out = nki.simulate_kernel(_psum_operands, x, y)
    ref = x.astype(np.float64) @ y
    ref = np.where(np.tril(np.ones((128, 128), bool)), ref, -5.0)
    _check(out, ref)


@nki.jit
def _alloc_by_partial(a, b):
    import functools

    def psum_addr(bank_map, idx, pdim_size, fdim_size):
        return (bank_map[idx], 0, 0)
    out = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((1, nl.par_dim(64), 32), nl.float32,
                     buffer=ncc.psum.alloc(functools.partial(psum_addr, bank_map={(0,): 3})))
    acc[0] = nisa.nc_matmul(nl.load(a), nl.load(b))
    nl.store(out, nl.copy(acc[0]))
    return out


def test_allocation_function_bound_by_keyword_partial():
    """allocated_SD_attention passes ncc.psum.alloc(functools.partial(f, bank_map=...)): the allocation function is
    called with idx / pdim_size / fdim_size by keyword (positionally, idx would collide with bank_map)."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = rng.standard_normal((128, 32)).astype(np.float32)
    _check(nki.simulate_kernel(_alloc_by_partial, a, b), a.astype(np.float64).T @ b)
