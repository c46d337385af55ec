# Declarations of the pelican expression type (see _expr.pyx for the contract).
# Other Cython modules cimport these to read expression trees without Python
# attribute lookups (e.g. _compiled.pyx lowers a tree to a flat program).
from cpython.number cimport PyNumber_Index
from cpython.ref cimport PyObject
from libc.stdint cimport int64_t, uint64_t

from neuronxcc.pelican._interval cimport Bnd

# Node kinds. The numeric order is also the first key of the canonical
# total order on expressions (constants < variables < sums < // < % < min < max).
cdef enum:
    K_CONST = 0      # val = the integer
    K_VAR = 1        # name = the variable (loop variable or register); val = hash(name)
    K_ADD = 2        # val = constant term; ch = atoms (>= 1); cf = their nonzero coefficients
    K_FLOORDIV = 3   # ch = [dividend]; val = divisor (>= 2)
    K_MOD = 4        # ch = [dividend]; val = modulus (>= 2)
    K_MIN = 5        # ch = sorted, deduplicated operands (>= 2)
    K_MAX = 6        # ch = sorted, deduplicated operands (>= 2)


cdef enum:
    SM_MAX = 8       # substitutions held in a SubsMap's arrays (more: the dict itself)


cdef struct SubsMap:
    # a substitution {name: Expr} for subs_rec: names compared by hash, then identity/equality
    Py_ssize_t n
    uint64_t mask            # OR of the names' variable bits (see Expr.vmask)
    Py_hash_t h[SM_MAX]
    PyObject* k[SM_MAX]      # names (borrowed from the caller's dict)
    PyObject* v[SM_MAX]      # replacements (owned)
    PyObject* big            # the dict itself when it holds more than SM_MAX names


cdef class Expr:
    cdef readonly int kind
    cdef int64_t val        # see the node kinds above
    cdef readonly str name  # K_VAR only (None otherwise)
    cdef PyObject** ch      # children, owned references (K_ADD: atoms in canonical order)
    cdef Py_ssize_t n       # number of children
    cdef int64_t* cf        # K_ADD only: n coefficients (in the same block as ch)
    cdef Py_hash_t hsh      # structural hash, computed at construction
    cdef Bnd ib             # intrinsic bounds (variables unbounded), used by the rules
    cdef uint64_t vmask     # OR of 1 << (hash(name) & 63) over the variables (a filter)


# the node makers (mk_const, mk_var, expr_eq, expr_cmp) and the rewrite rules (add_scaled, mul_const,
# floordiv_const, mod_const, minmax ...) are declared in _canon.pxd
cdef Expr var_c(str name)          # validated, interned variable
cdef Expr subs_dict(Expr e, dict mapping)   # {name: int | Expr}, canonical result


cdef inline int64_t to_i64(object x) except? -1:
    # an int (or index-able) or a constant Expr as int64; a non-constant Expr is a ValueError
    if isinstance(x, Expr):
        if (<Expr>x).kind != K_CONST:
            raise ValueError("pelican: expected an integer constant, got %s" % x)
        return (<Expr>x).val
    return <int64_t>PyNumber_Index(x)
