"""neuronxcc.nki._private_kernels.collectives.CollectivesConfig (the rings NxD's parallel_state builds at import
and initialisation) and the ring-attention kernels on a ring of one rank (NxD's call form, grid [bs, heads])
against numpy float64 references; a ring of more ranks is refused as not built (NCC_INBY001)."""
import math

import numpy as np
import pytest

from neuronxcc import nki
from neuronxcc.nki import errors
from neuronxcc.nki._private_kernels.attention import ring_attention_bwd, ring_attention_fwd
from neuronxcc.nki._private_kernels.collectives import CollectivesConfig, ring_size
from neuronxcc.nki.kernels.attention import FlashConfig

from support import nki_attention_refs as R
from neuronxcc.common.tolerances import assert_close


def test_collectives_config_rings():
    cfg = CollectivesConfig(replica_groups=[[0, 2, 4, 6], [1, 3, 5, 7]])
    assert cfg.rank_src_tgt_pairs[4] == [(0, 2), (2, 4), (4, 6), (6, 0)]
    assert cfg.rank_src_tgt_pairs[3] == [(1, 3), (3, 5), (5, 7), (7, 1)]
    assert cfg.rank_position[5] == 2 and cfg.rank_group[7] == [1, 3, 5, 7]
    assert cfg.ranks == list(range(8)) and cfg.num_groups == 2 and cfg.group_size == 4
    assert ring_size(cfg.rank_src_tgt_pairs[0]) == 4
    one = CollectivesConfig(replica_groups=[[3]])
    assert one.rank_src_tgt_pairs[3] == [(3, 3)] and ring_size(one.rank_src_tgt_pairs[3]) == 1
    with pytest.raises(ValueError, match="more than one replica group"):
        CollectivesConfig(replica_groups=[[0, 1], [1, 2]])


def test_ring_attention_one_rank_fwd_bwd_match_numpy():
    rng = np.random.default_rng(7)
    bs, nh, d, s = 1, 2, 32, 256
    q, k, v, dy = (rng.standard_normal((bs, nh, d, s)).astype(np.float32) for _ in range(4))
    seed = np.zeros((1,), np.int32)
    pairs = CollectivesConfig(replica_groups=[[0]]).rank_src_tgt_pairs[0]
    cfg = FlashConfig(should_transpose_v=True, seq_tile_size=1024)
    o, lse = nki.simulate_kernel(ring_attention_fwd[bs, nh], q, k, v, seed, rank_id=0, src_tgt_pairs=pairs,
                                 use_causal_mask=True, mixed_precision=False, dropout_p=0.0, softmax_scale=None,
                                 config=cfg)
    scale = 1.0 / math.sqrt(d)
    eo, e_lse = R.flash_fwd(q, k, v, scale, True, v_transposed=True)
    assert_close(o, eo, row="compiled")
    assert_close(lse, e_lse, row="compiled")
    dq, dk, dv = nki.simulate_kernel(ring_attention_bwd[bs, nh], q, k, v, np.swapaxes(o, -1, -2).copy(), dy, lse,
                                     seed, rank_id=0, src_tgt_pairs=pairs, use_causal_mask=True,
                                     mixed_precision=False, dropout_p=0.0, softmax_scale=scale)
    for got, want in zip((dq, dk, dv), R.flash_bwd(q, k, v, dy, scale, True)):
        assert_close(got, want, row="compiled")


@pytest.mark.parametrize("kernel", ["fwd", "bwd"])
def test_ring_attention_over_two_ranks_is_not_built(kernel):
    x = np.zeros((1, 1, 32, 128), np.float32)
    pairs = CollectivesConfig(replica_groups=[[0, 1]]).rank_src_tgt_pairs[0]
    with pytest.raises(errors.NkiNotImplementedError, match="ring of 2 ranks"):
        if kernel == "fwd":
            nki.simulate_kernel(ring_attention_fwd[1, 1], x, x, x, np.zeros((1,), np.int32), rank_id=0,
                                src_tgt_pairs=pairs)
        else:
            nki.simulate_kernel(ring_attention_bwd[1, 1], x, x, x, x, x, np.zeros((1, 1, 128, 1), np.float32),
                                np.zeros((1,), np.int32), rank_id=0, src_tgt_pairs=pairs)


_CALLER_IMPORTS = """
from neuronxcc.nki._private_kernels.collectives import CollectivesConfig
from neuronxcc.nki._private_kernels.blockwise_mm import BlockShardStrategy, SkipMode
from neuronxcc.nki._private_kernels.blockwise_mm import ExpertAffinityScaleMode
from neuronxcc.nki._private_kernels import ExpertAffinityScaleMode, ActFnType
from neuronxcc.nki._private_kernels.blockwise_mm import blockwise_mm, blockwise_mm_baseline
from neuronxcc.nki._private_kernels.blockwise_mm import blockwise_mm_baseline_shard_hidden
from neuronxcc.nki._private_kernels.blockwise_mm import check_blockwise_mm_kernel_compatibility
from neuronxcc.nki._private_kernels.blockwise_mm_bwd import blockwise_mm_bwd, blockwise_mm_bwd_baseline_shard_hidden
from neuronxcc.nki._private_kernels.attention import ring_attention_bwd, ring_attention_fwd
from neuronxcc.nki._private_kernels.attention import attention_isa_kernel
from neuronxcc.nki._private_kernels.cumsum import cumsum as nki_cumsum
from neuronxcc.nki._private_kernels.prefix_caching_attention import prefix_caching_attention_fwd_isa_kernel
from neuronxcc.nki.kernels.cumsum import cumsum as nki_cumsum
from neuronxcc.nki.kernels.attention import attention_isa_kernel
from neuronxcc.nki.kernels.attention import fused_self_attn_for_SD_small_head_size
from neuronxcc.nki.kernels.attention import FlashConfig
from neuronxcc.nki.kernels import flash_fwd, flash_attn_bwd
from neuronxcc.nki.compiler.backends.neuron.dimensions import VNC
from neuronxcc.nki._pre_prod_kernels import NormType
from neuronxcc.nki._pre_prod_kernels.util.kernel_helpers import get_program_sharding_info
import neuronxcc.nki.typing as nt
K_prior_annotation = nt.tensor[nt.mutable]
"""


def test_import_lines_of_nxd_and_nxdi_succeed():
    """The import statements NxD (parallel_state, moe/blockwise, moe/expert_mlps, kernels/ring_attention_kernel,
    kernels/flash_attn) and NxD-Inference (sampling, model code, modules/attention/attention_base of releases 0.4-0.7:
    prefix caching) run at module load, verbatim."""
    ns = {}
    exec(compile(_CALLER_IMPORTS, "<caller imports>", "exec"), ns)
    assert ns["nki_cumsum"].__name__ == "cumsum" and ns["SkipMode"](False, False).skip_token is False
    assert hasattr(ns["ring_attention_fwd"], "__getitem__") and hasattr(ns["flash_fwd"], "__getitem__")


def test_pre_prod_names_and_program_sharding_info_in_a_grid():
    """_pre_prod_kernels gives NxD-Inference 0.7's load-time names (NormType, get_program_sharding_info; the
    nt.tensor[nt.mutable] annotation its KV-cache kernels use): instance 0 and the last instance of a [2] grid
    write different halves, a kernel without a grid is instance 0 of 1."""
    import neuronxcc.nki.language as nl
    import neuronxcc.nki.typing as nt
    from neuronxcc.nki._pre_prod_kernels import ActFnType, NormType
    from neuronxcc.nki._pre_prod_kernels.util.kernel_helpers import get_program_sharding_info
    from neuronxcc.nki._private_kernels import ActFnType as private_act
    assert ActFnType is private_act and NormType.RMS_NORM_SKIP_GAMMA != NormType.RMS_NORM
    with pytest.raises(ImportError):
        from neuronxcc.nki._pre_prod_kernels import QuantizationType  # noqa: F401  (keeps NxDI's old interface)

    def kern(a, out: nt.tensor[nt.mutable]):
        ndim, n, pid = get_program_sharding_info()
        i, j = nl.mgrid[0:1, 0:4]
        if pid == 0:
            nl.store(out[i, j], value=nl.add(nl.load(a[i, j]), float(n + 10 * ndim)))
        if pid == n - 1:
            nl.store(out[1 + i, j], value=nl.load(a[1 + i, j]))
        return out
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    got = nki.simulate_kernel(nki.jit(kern)[2], a, np.zeros((2, 4), np.float32))
    assert np.array_equal(got, np.stack([a[0] + 12, a[1]]))
    got = nki.simulate_kernel(nki.jit(kern), a, np.zeros((2, 4), np.float32))
    assert np.array_equal(got, np.stack([a[0] + 1, a[1]]))


@pytest.mark.parametrize("module,name", [("blockwise_mm", "blockwise_mm_selective_cp"),
                                         ("blockwise_mm_bwd", "blockwise_mm_bwd_selective_cp"),
                                         ("attention", "attention_isa_kernel_cache"),
                                         ("attention", "backward_attention_isa_kernel")])
def test_unbuilt_kernels_import_and_refuse_clearly(module, name):
    """Names a JAX caller imports at module load exist; calling one (through nki.jit, as the caller does) is one
    NCC_INBY001 line naming the kernel, never an output."""
    import importlib
    kern = getattr(importlib.import_module("neuronxcc.nki._private_kernels." + module), name)
    wrapped = nki.jit(show_compiler_tb=True)(kern)
    x = np.zeros((128, 128), np.float32)
    with pytest.raises(errors.NkiNotImplementedError) as ei:
        nki.simulate_kernel(wrapped, x, x)
    assert name in ei.value.one_line() and "[NCC_INBY001]" in ei.value.one_line()
