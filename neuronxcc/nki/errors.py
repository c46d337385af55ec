"""Errors a kernel author can cause, named as the original's public ``nki.errors`` list.

Every class is a ``neuronxcc.errors.CompilerError`` with an ``NCC_ENKI<nnn>`` code. The
message names the kernel's own source line (``at <file>:<line>``): the tracer finds the
innermost frame outside this package, so a user never gets a traceback into our code.
``NkiNotImplementedError`` marks a public name this reimplementation has not built yet.
"""
import os
import sys

from neuronxcc.errors import CompilerError, NotBuiltYetError

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))

__all__ = ["NkiError", "NkiNotImplementedError", "NkiFormatError", "kernel_frame", "kernel_location", "is_kernel_file", "raise_error"]


def is_kernel_file(filename):
    """True for kernel code: any file outside neuronxcc/nki, and our own kernels under nki/kernels and
    nki/_private_kernels."""
    fn = os.path.abspath(filename)
    return not fn.startswith(_PKG_DIR + os.sep) or any(os.sep + d + os.sep in fn[len(_PKG_DIR):]
                                                        for d in ("kernels", "_private_kernels"))


def kernel_frame():
    """The innermost frame of kernel code (``is_kernel_file``) calling into the tracer, or None."""
    f = sys._getframe(1)
    while f is not None:
        if is_kernel_file(f.f_code.co_filename):
            return f
        f = f.f_back
    return None


def kernel_location():
    """'file:line' of the innermost frame that is not inside neuronxcc/nki (the kernel's line)."""
    f = kernel_frame()
    return "%s:%d" % (f.f_code.co_filename, f.f_lineno) if f is not None else "<unknown>"


class NkiError(CompilerError):
    """Base of the kernel errors. ``location`` is the kernel's file:line."""

    code = "NCC_ENKI000"

    def __init__(self, message, location=None, code=None):
        self.location = location if location is not None else kernel_location()
        super().__init__("%s at %s" % (message, self.location), code)


class NkiNotImplementedError(NotBuiltYetError):
    """A public NKI name whose implementation is not built yet (never a silent wrong result).
    Its code (NCC_INBY001) is NotBuiltYetError's, inherited, so a tool's [NCC_INBY001] line still maps to
    NotBuiltYetError (driver.Job picks the class that defines the code)."""

    def __init__(self, api, why=""):
        loc = kernel_location()
        super().__init__("%s is not implemented by this neuronxcc yet%s (called at %s)"
                         % (api, ": " + why if why else "", loc))
        self.api = api


class NkiFormatError(CompilerError):
    """A serialized kernel (custom-call backend_config) this compiler cannot read."""

    code = "NCC_ENKI099"


_NAMES = [
    "err_1d_arange_not_supported", "err_activation_bias_invalid_type", "err_activation_scale_invalid_type",
    "err_activation_scale_scalar_or_vector", "err_ambiguous_tensor_truth_value", "err_annotation_shape_mismatch",
    "err_bias_tensor_must_be_specified_in_allocation", "err_cannot_assign_to_index",
    "err_cannot_update_immutable_parameter", "err_control_flow_condition_depending_on_arange",
    "err_copy_dynamic_indirect_indices_not_natively_supported", "err_dynamic_control_flow_not_supported",
    "err_exceed_max_supported_dimension", "err_failed_to_infer_tile_from_local_tensor",
    "err_hbm_tensor_with_init_value_not_supported", "err_indirect_indices_are_not_supported_with_nki_api",
    "err_indirect_indices_free_dim", "err_leading_dimension_of_tensor_must_be_partition",
    "err_local_variable_used_out_of_scope", "err_mutable_parameter_not_returned", "err_nested_kernel_with_spmd_grid",
    "err_nki_api_outside_of_nki_kernel", "err_num_partition_exceed_arch_limit", "err_num_partition_mismatch",
    "err_shared_hbm_must_in_kernel_level", "err_size_of_dimension_exceed_arch_limit",
    "err_store_dst_shape_smaller_than_other_shape", "err_tensor_access_out_of_bound",
    "err_tensor_creation_on_scratchpad_with_init_value_not_supported", "err_tensor_output_not_written_to",
    "err_transpose_on_tensor_engine_not_allowed_in_allocated_kernel", "err_unexpected_output_dependencies",
    "err_unsupported_expression_in_mask", "err_unsupported_memory", "err_unsupported_mixing_basic_advanced_tensor_indexing",
    "err_while_loop_requires_unconditional_entry",
    # not in the public list, used for rules the list does not name
    "err_insufficient_rank", "err_unsupported_dtype", "err_invalid_argument", "err_psum_tile_too_large",
    "err_framework_not_installed",
]

_g = globals()
for _i, _n in enumerate(_NAMES):
    _g[_n] = type(_n, (NkiError,), {"code": "NCC_ENKI%03d" % (_i + 1), "__doc__": _n.replace("_", " ")})
    __all__.append(_n)
del _g, _i, _n


def raise_error(name, message):
    """Raise the named err_* class with MESSAGE at the kernel's line."""
    raise globals()[name](message)
