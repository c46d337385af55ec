# cython: language_level=3
from libc.stdint cimport uint8_t

from neuronxcc.starfish.birsim._apinfo cimport APInfo

# The typed execution plans of birsim (see _plans.pyx); declared here so the typed
# interpreter loop (_interp.pyx) runs a plan with a C call, not a Python call.

cdef class Plan:
    # one instruction's execution for the loop variables and registers in ENV
    cdef int run(self, dict env) except -1


# One operand of a typed element-wise plan: its storage pointer, dtype code, strides and counts.
cdef class _Operand:
    cdef APInfo info
    cdef object buf
    cdef uint8_t* p
    cdef int code
    cdef Py_ssize_t strides[6]
    cdef Py_ssize_t nums[6]
    cdef Py_ssize_t lo, hi          # the bytes any element may touch, relative to the base (half-open)
    cdef bint injective             # no two elements share a byte (a sufficient test: strides nest)


# the plans' shared fp32 scratch area (the GIL held: one user at a time)
cdef float* _scratch_for(Py_ssize_t n) except NULL
# X and Y have the same counts: their rows (innermost runs) pair one to one
cdef bint _same_walk(_Operand x, _Operand y) noexcept
# writing OUT (at OB) row by row never changes what a later row of X (at XB) reads
cdef bint _row_safe(_Operand out, Py_ssize_t ob, _Operand x, Py_ssize_t xb) noexcept
