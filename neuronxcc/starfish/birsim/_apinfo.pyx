# cython: language_level=3, boundscheck=False, wraparound=False
"""Per-access-pattern run-time address resolution for birsim (typed: it runs for
every operand of every simulated instruction).

An ``APInfo`` holds what is static about one AccessPattern in one machine
state (target storage, element size, byte strides, extent) and computes, for
the current values of loop variables and registers, the base byte address of
the access after checking every element it touches is inside the target.
Affine offsets (the common case) evaluate as ``const + sum(coeff * env[var])``
without touching pelican; other offsets fall back to ``Expr.eval``.
"""
from libc.stdint cimport int64_t

from sys import intern

from neuronxcc.errors import BirSimError

cdef enum:
    ENV_VARS = 32       # variables an env-evaluated expression may use


cpdef object compile_env_expr(object expr):
    try:
        # interned, as the interpreter's loop variables and register names are: env lookups
        # then find the key by identity, without comparing the strings
        names = tuple([intern(v) for v in sorted(expr.free_vars())])
        if len(names) > ENV_VARS:
            return None
        return CompiledExpr(expr, names)
    except (TypeError, ValueError):
        return None


cdef long long eval_env(CompiledExpr ce, dict env) except? -987654321:
    cdef int64_t vals[ENV_VARS]
    cdef Py_ssize_t k
    cdef tuple names = ce.var_order
    for k in range(ce.nvars):
        v = env.get(names[k])
        if v is None:
            return ce.expr.eval(env)
        vals[k] = v
    return ce.eval_ptr(vals)


cdef class APInfo:
    # attributes and cpdef signatures: _apinfo.pxd (the typed plans cimport it)

    def __init__(self, tgt, dtype, code, itemsize, strides, nums, shape, npdt, vstrides, static_base,
                 ext_lo, ext_hi, const_off, coeffs, expr, row0, row1, byte0, target_name):
        self.tgt = tgt
        self.dtype = dtype
        self.code = code
        self.itemsize = itemsize
        self.strides = strides
        self.nums = nums
        self.shape = shape
        self.npdt = npdt
        self.vstrides = vstrides
        self.static_base = static_base
        self.ext_lo = ext_lo
        self.ext_hi = ext_hi
        self.const_off = const_off
        self.limit = tgt.nbytes
        self.expr = expr
        self.target_name = target_name
        n = 1
        for k in nums:
            n *= k
        self.n = n
        self.rview = None
        self.wview = None
        self.fixed_region = None
        self.has_fixed = False
        self.fixed = 0
        self.row0 = row0
        self.row1 = row1
        self.byte0 = byte0
        self.key = id(tgt.buf)
        names = []
        self.ncoef = 0
        if coeffs is not None:
            if len(coeffs) > 8:
                # too many variables for the fast path: evaluate through pelican
                self.expr = expr
            else:
                for v, c in coeffs:
                    names.append(intern(v))        # see compile_env_expr
                    self.coeffs[self.ncoef] = c
                    self.ncoef += 1
        self.names = tuple(names)
        self.cexpr = None
        self.nevals = 0
        self.ring = None
        self.ring_acc = None

    cdef long long _offset(self, dict env) except? -987654321:
        cdef long long off = self.const_off
        cdef int k
        if self.expr is not None:
            try:
                if self.cexpr is not None:
                    return eval_env(<CompiledExpr>self.cexpr, env)
                self.nevals += 1
                if self.nevals == COMPILE_AFTER:        # evaluated repeatedly (in a loop): compile it
                    self.cexpr = compile_env_expr(self.expr)
                return self.expr.eval(env)
            except (KeyError, ValueError) as e:
                raise BirSimError("offset %s of %s cannot be evaluated: %s" % (self.expr, self.target_name, e))
        for k in range(self.ncoef):
            v = env.get(self.names[k])
            if v is None:
                raise BirSimError("offset of %s uses '%s', which has no value here (not a loop variable or "
                                  "loaded register)" % (self.target_name, self.names[k]))
            off += self.coeffs[k] * <long long>v
        return off

    cpdef Py_ssize_t base(self, dict env) except -1:
        """Base byte of the access for ENV; BirSimError when any element is outside the target."""
        if self.has_fixed:
            return self.fixed
        cdef long long off = self._offset(env)
        cdef long long lo = off + self.ext_lo
        cdef long long hi = off + self.ext_hi
        if lo < 0 or (hi + 1) * self.itemsize > self.limit:
            raise BirSimError("access to %s reaches elements %d..%d (%d bytes per partition; offset %d)" % (
                self.target_name, lo, hi, self.limit, off))
        cdef Py_ssize_t b = self.static_base + off * self.itemsize
        if self.expr is None and self.ncoef == 0:
            self.has_fixed = True
            self.fixed = b
        return b

    cpdef tuple region(self, dict env):
        """(storage key, row lo, row hi, byte lo, byte hi), half-open, physical."""
        if self.fixed_region is not None:
            return self.fixed_region
        cdef Py_ssize_t b = self.base(env)
        cdef long long off = (b - self.static_base) // self.itemsize
        reg = (self.key, self.row0, self.row1, self.byte0 + (off + self.ext_lo) * self.itemsize,
               self.byte0 + (off + self.ext_hi + 1) * self.itemsize)
        if self.has_fixed:
            self.fixed_region = reg
        return reg

    cpdef tuple region_w(self, dict env, bint write):
        """region(env) + (write,) -- the timeline's access record."""
        cdef tuple r = self.region(env)
        return r + (write,)


    cdef int fill_region(self, dict env, bint write, Region* out, AccessTracker acc) except -1:
        """region_w(env, write) as a Region struct of tracker ACC (no tuple built)."""
        cdef Py_ssize_t b
        cdef long long off
        cdef tuple fr = self.fixed_region
        if self.ring_acc is not acc:
            self.ring = acc.ring_for(self.key)
            self.ring_acc = acc
        cdef object ring = self.ring
        out.ring = <void*>ring
        out.r0 = self.row0
        out.r1 = self.row1
        out.write = 1 if write else 0
        if fr is not None:
            out.b0 = fr[3]
            out.b1 = fr[4]
            return 0
        b = self.base(env)
        off = (b - self.static_base) // self.itemsize
        out.b0 = self.byte0 + (off + self.ext_lo) * self.itemsize
        out.b1 = self.byte0 + (off + self.ext_hi + 1) * self.itemsize
        if self.has_fixed:
            self.fixed_region = (self.key, self.row0, self.row1, out.b0, out.b1)
        return 0


cpdef list regions_of(list infos, dict env):
    """[info.region_w(env, write) for (info, write) in INFOS] -- one executed instruction's
    access records for the timeline."""
    cdef list out = []
    cdef tuple iw
    for iw in infos:
        out.append((<APInfo>iw[0]).region_w(env, iw[1]))
    return out
