# cython: language_level=3
# birsim's bit-exact access-pattern copy (_rawcopy.pyx), for the plans' C calls.
from libc.stdint cimport uint8_t

cdef int copy_raw_ptr(const uint8_t* sp, Py_ssize_t sbase, const Py_ssize_t* sstrides, const Py_ssize_t* snums,
                      uint8_t* dp, Py_ssize_t dbase, const Py_ssize_t* dstrides, const Py_ssize_t* dnums,
                      Py_ssize_t itemsize) noexcept nogil
