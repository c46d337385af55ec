"""``neuronxcc.nki.compiler`` (ncc): direct allocation and compiler directives.

``ncc.sbuf.mod_alloc(base_addr=, base_partition=)`` / ``ncc.psum.mod_alloc(base_bank=, base_addr=)``
place a tensor at a fixed address (the memloc is allocated, walrus keeps it); the directives
(``skip_middle_end_transformations``, ``enable_stack_allocator``, ``force_auto_alloc``) are
decorators that only record the request: this compiler has no middle end between tracing and BIR.
"""
import contextlib

from neuronxcc.nki.compiler import psum, sbuf  # noqa: F401

__all__ = ["sbuf", "psum", "allocation_scope", "enable_stack_allocator", "force_auto_alloc", "multi_buffer",
           "no_reorder", "skip_middle_end_transformations"]


@contextlib.contextmanager
def allocation_scope():
    yield


def _directive(name):
    def deco(func=None, **kwargs):
        if func is None:
            return lambda f: deco(f, **kwargs)
        setattr(func, "_nki_" + name, True)
        return func
    deco.__name__ = name
    return deco


enable_stack_allocator = _directive("enable_stack_allocator")
force_auto_alloc = _directive("force_auto_alloc")
skip_middle_end_transformations = _directive("skip_middle_end_transformations")


@contextlib.contextmanager
def multi_buffer(factor=2):
    yield


@contextlib.contextmanager
def no_reorder():
    yield
