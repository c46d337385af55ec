# cython: language_level=3
# Per-access-pattern address resolution of birsim (see _apinfo.pyx).

from neuronxcc.pelican._compiled cimport CompiledExpr
from neuronxcc.starfish.birsim._tracker cimport AccessTracker, Region


cdef class APInfo:
    # Python-visible static data (used by the state for views and kernels)
    cdef public object tgt, strides, nums, shape, npdt, vstrides, rview, wview, dtype, expr, target_name
    cdef public int code
    cdef public Py_ssize_t itemsize, n, static_base
    cdef public long long ext_lo, ext_hi, const_off, limit
    cdef public bint has_fixed
    cdef public Py_ssize_t fixed
    cdef public object fixed_region
    cdef tuple names
    cdef long long[8] coeffs
    cdef int ncoef
    cdef long long row0, row1, byte0
    cdef object key
    cdef object cexpr               # CompiledExpr of a non-affine offset (or None)
    cdef int nevals                 # evaluations through pelican so far (compiled after a few)
    cdef object ring, ring_acc      # the access ring of this storage in tracker ring_acc
    cdef long long _offset(self, dict env) except? -987654321
    cpdef Py_ssize_t base(self, dict env) except -1
    cpdef tuple region(self, dict env)
    cpdef tuple region_w(self, dict env, bint write)
    cdef int fill_region(self, dict env, bint write, Region* out, AccessTracker acc) except -1


cpdef list regions_of(list infos, dict env)
# An expression evaluated from the loop variables and registers in ENV without pelican's
# interpreter: compile_env_expr(expr) (None when it cannot be compiled), eval_env(ce, env)
# (a variable missing from ENV: expr.eval(env), which raises as pelican does).
cpdef object compile_env_expr(object expr)
cdef enum:
    COMPILE_AFTER = 3   # evaluations of an expression through pelican before it is compiled
cdef long long eval_env(CompiledExpr ce, dict env) except? -987654321
