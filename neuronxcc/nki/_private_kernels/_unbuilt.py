"""Names of the original's private kernels that framework code imports at module load but this package
does not implement yet: importing them works (so the importing model code loads), calling one raises
``NkiNotImplementedError`` ([NCC_INBY001]) naming it. Never a silent result."""
from neuronxcc.nki import errors


def unbuilt(module, name):
    def kernel(*args, **kwargs):
        raise errors.NkiNotImplementedError("neuronxcc.nki._private_kernels.%s.%s" % (module, name),
                                            "this private kernel is not implemented in the open neuronxcc")
    kernel.__name__ = kernel.__qualname__ = name
    kernel.__doc__ = "Not implemented yet: calling it raises NkiNotImplementedError."
    kernel.__module__ = "neuronxcc.nki._private_kernels." + module
    return kernel
