"""Keep numpy's BLAS on one thread while the interpreter runs.

The interpreter runs beside other jobs and tests (CI has two cores). A
multi-threaded BLAS on an oversubscribed machine spends its time spinning:
measured on the corpus under load, a 300x300 matmul took ~170 ms with two
OpenBLAS threads and ~2 ms with one. So evaluation asks OpenBLAS for one
thread for the calling thread only (``openblas_set_num_threads_local``,
which returns the previous value; restored afterwards). With a numpy whose
BLAS lacks that entry point this is a no-op.
"""
import contextlib
import ctypes
import glob
import os

_SETTER = []


def _setter():
    if _SETTER:
        return _SETTER[0]
    fn = None
    try:
        import numpy
        libdir = os.path.join(os.path.dirname(os.path.dirname(numpy.__file__)), "numpy.libs")
        for path in sorted(glob.glob(os.path.join(libdir, "*openblas*"))):
            lib = ctypes.CDLL(path)
            f = getattr(lib, "openblas_set_num_threads_local", None)
            if f is not None:
                f.argtypes = [ctypes.c_int]
                f.restype = ctypes.c_int
                fn = f
                break
    except OSError:
        fn = None
    _SETTER.append(fn)
    return fn


@contextlib.contextmanager
def single_threaded_blas():
    f = _setter()
    if f is None:
        yield
        return
    prev = f(1)
    try:
        yield
    finally:
        f(prev if prev > 0 else 0)
