"""The trace context being traced on this thread (one kernel at a time per thread).

Owns the thread-local slot ``context.TraceContext`` enters and leaves, and the two readers every
tracer module uses: ``current_or_none()`` and ``current()`` (outside a kernel: the NKI error).
Imports nothing of the tracer, so index, tensor and ops read it without importing ``context``.
"""
import threading

from neuronxcc.nki import errors as E

_TLS = threading.local()


def set_current(ctx):
    _TLS.ctx = ctx


def current_or_none():
    return getattr(_TLS, "ctx", None)


def current():
    ctx = getattr(_TLS, "ctx", None)
    if ctx is None:
        raise E.err_nki_api_outside_of_nki_kernel(
            "Calling NKI API outside of NKI kernels is not supported (decorate the kernel with nki.jit)")
    return ctx
