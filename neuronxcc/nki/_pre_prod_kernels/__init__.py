"""``neuronxcc.nki._pre_prod_kernels``: the names NxD-Inference imports from this package at module load without a
fallback (release 0.7: ``models/llama/modeling_llama`` imports ``NormType``, ``modules/kvcache/utils`` imports
``util.kernel_helpers.get_program_sharding_info``), our own definitions. ``ActFnType`` is
``_private_kernels.ActFnType``. Nothing else is provided here on purpose: callers import the pre-production
kernels inside ``try`` blocks and fall back to ``_private_kernels`` (or their own code) when a name is missing,
and ``QuantizationType`` stays absent so NxD-Inference keeps the quantized-kernel interface
``_private_kernels.mlp`` implements."""
import enum

from neuronxcc.nki._private_kernels.blockwise_mm import ActFnType  # noqa: F401

__all__ = ["NormType", "ActFnType"]


class NormType(enum.Enum):
    """The normalisation a fused kernel applies to its input (NxD-Inference's MLP/QKV token-generation calls)."""
    NO_NORM = 0
    RMS_NORM = 1
    LAYER_NORM = 2
    RMS_NORM_SKIP_GAMMA = 3
