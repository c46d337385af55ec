# cython: language_level=3
# The typed execution plans of birsim (see _plans.pyx); declared here so the typed
# interpreter loop (_interp.pyx) runs a plan with a C call, not a Python call.

cdef class Plan:
    # one instruction's execution for the loop variables and registers in ENV
    cdef int run(self, dict env) except -1
