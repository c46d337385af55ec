# cython: language_level=3, boundscheck=False, wraparound=False
"""Typed execution plans of birsim for the instructions that only move bytes
(same-dtype dma_copy, tensor_copy on DVE/POOL): the operands' storage
pointers, strides and counts are taken once; each execution resolves the two
base addresses (bounds-checked by ``APInfo.base``) and runs the copy kernel.
Semantics: ``Executor.op_dma_copy`` / ``op_tensor_copy`` (a bit-exact copy,
elements paired in row-major order, overlap-safe)."""
from libc.stdint cimport uint8_t

from neuronxcc.starfish.birsim._apinfo cimport APInfo
from neuronxcc.starfish.birsim._kernels cimport copy_raw_ptr


cdef class RawCopy:
    cdef APInfo src, dst
    cdef object sbuf, dbuf                  # keep the storage alive
    cdef const uint8_t* sp
    cdef uint8_t* dp
    cdef Py_ssize_t sstr[6]
    cdef Py_ssize_t snum[6]
    cdef Py_ssize_t dstr[6]
    cdef Py_ssize_t dnum[6]
    cdef Py_ssize_t isz

    def __init__(self, APInfo src, APInfo dst):
        cdef uint8_t[::1] sv = src.tgt.buf
        cdef uint8_t[::1] dv = dst.tgt.buf
        cdef int k
        if src.n != dst.n or src.itemsize != dst.itemsize:
            raise ValueError("RawCopy needs equal element counts and sizes")
        self.src = src
        self.dst = dst
        self.sbuf = src.tgt.buf
        self.dbuf = dst.tgt.buf
        self.sp = &sv[0]
        self.dp = &dv[0]
        for k in range(6):
            self.sstr[k] = src.strides[k]
            self.snum[k] = src.nums[k]
            self.dstr[k] = dst.strides[k]
            self.dnum[k] = dst.nums[k]
        self.isz = src.itemsize

    def __call__(self, dict env):
        cdef Py_ssize_t sb = self.src.base(env)
        cdef Py_ssize_t db = self.dst.base(env)
        cdef int r
        with nogil:
            r = copy_raw_ptr(self.sp, sb, self.sstr, self.snum, self.dp, db, self.dstr, self.dnum, self.isz)
        if r < 0:
            raise MemoryError()
