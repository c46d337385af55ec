# Typed core of the SBUF/PSUM allocators (see _alloc.pyx).
ctypedef long long i64

# One occupied rectangle seen while placing a value: partitions [plo, phi)
# x bytes [blo, bhi).
cdef struct Rect:
    i64 plo
    i64 phi
    i64 blo
    i64 bhi

cdef i64 place_one(Rect* occ, i64 nocc, bint occ_sorted, i64 size, i64 nparts,
                   i64 capacity, i64 align, i64 bank_bytes, i64 num_partitions,
                   i64 pin_zero, i64* out_pstart) noexcept nogil
