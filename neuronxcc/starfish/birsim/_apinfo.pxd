# cython: language_level=3
# Per-access-pattern address resolution of birsim (see _apinfo.pyx).

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
    cdef long long _offset(self, dict env) except? -987654321
    cpdef Py_ssize_t base(self, dict env) except -1
    cpdef tuple region(self, dict env)
    cpdef tuple region_w(self, dict env, bint write)


cpdef list regions_of(list infos, dict env)
