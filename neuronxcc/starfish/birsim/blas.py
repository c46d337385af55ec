"""Run numpy's BLAS single-threaded while birsim simulates.

birsim's own matmuls do not use BLAS (``_pe``); this is for callers that time
numpy's BLAS beside birsim on tile-sized matmuls (<= 128 x 128 x 512), where
OpenBLAS's thread pool only adds latency, and on a loaded machine its spinning
threads make a single tile matmul take milliseconds. ``single_threaded()`` sets the thread
count of the OpenBLAS that numpy loaded to 1 for the duration and restores
it after; when the library or its symbols cannot be found it does nothing.
"""
import contextlib
import ctypes

__all__ = ["single_threaded", "no_change"]

_API = None


def _find():
    global _API
    if _API is not None:
        return _API
    _API = False
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({line.split()[-1] for line in f if "openblas" in line and line.rstrip().endswith(".so")})
    except OSError:
        return _API
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get, set_ in (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                          ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                          ("openblas_get_num_threads", "openblas_set_num_threads")):
            g, s = getattr(lib, get, None), getattr(lib, set_, None)
            if g is not None and s is not None:
                g.restype = ctypes.c_int
                s.argtypes = [ctypes.c_int]
                _API = (g, s)
                return _API
    return _API


@contextlib.contextmanager
def single_threaded():
    api = _find()
    if not api:
        yield
        return
    get, set_ = api
    old = get()
    set_(1)
    try:
        yield
    finally:
        set_(old)


@contextlib.contextmanager
def no_change():
    """What single_threaded() is for a program that never calls BLAS."""
    yield
