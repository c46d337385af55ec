"""Kernels real callers import at module load (outside any ``try``) that this package does not implement: the
import succeeds, a call fails with NCC_INBY001 naming the kernel and why (never an output). Imports that callers
wrap in ``try`` are left absent instead, so the callers' own fallbacks keep working."""
from neuronxcc.nki import errors

__all__ = ["not_built"]


def not_built(qualname, why):
    """A kernel function that raises errors.NkiNotImplementedError(qualname, why) when called (or traced)."""
    def kernel(*args, **kwargs):
        raise errors.NkiNotImplementedError(qualname, why)
    kernel.__name__ = qualname.rsplit(".", 1)[-1]
    kernel.__qualname__ = kernel.__name__
    kernel.__doc__ = "Not built: %s (%s)." % (qualname, why)
    return kernel
