"""Custom ops in birsim: call the staged GpSimd libraries through ctypes.

The builtin libraries (``libbuiltincustomop_cpu{0..7}.so``, ABI in
csrc/custom_op/ncc_customop.h, bound by ``neuronxcc.neff.customop``) each
process the rows (= partitions) their CPU owns; birsim calls all eight on the
same buffers so every row is covered. ``run_module`` uses the package's
libraries (``neuronxcc/data/custom_op``) unless given a directory;
``run_neff`` uses the libraries staged inside the NEFF.
"""
from neuronxcc.errors import BirSimError

__all__ = ["load_libraries", "run_custom_op"]


def load_libraries(directory=None, paths=None):
    """Load the builtin libraries (a list of neff.customop.CustomOpLibrary)."""
    from neuronxcc.neff import customop as co

    if paths is None:
        directory = directory or co.custom_op_data_dir()
        paths = co.builtin_library_paths(directory)
    if not paths:
        raise BirSimError("no custom-op libraries found in %s" % directory)
    return [co.CustomOpLibrary(p) for p in paths]


def run_custom_op(libs, attrs, x):
    """(values float32, indices int32) of attrs['function'] over rows of x [P, N]."""
    from neuronxcc.neff import customop as co

    if callable(libs):
        libs = libs()
    fn = attrs.get("function")
    if fn == "sort_f32":
        return co.sort_rows(libs, x, bool(attrs.get("descending")))
    if fn == "topk_f32":
        return co.topk_rows(libs, x, int(attrs["k"]))
    raise BirSimError("unknown custom-op function %r" % (fn,))


