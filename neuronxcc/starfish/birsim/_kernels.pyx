# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""birsim's typed kernels: strided element loops with dtype conversion.

What it owns: reading an access pattern's elements out of flat byte storage
into a contiguous fp32 (or int64) buffer and writing them back with the cast the
machine does on output (raw, bit-exact copies: ``_rawcopy``). No Python objects in the
loops (``cython -a`` shows the loop bodies white).

Casts on output (float32 -> narrower): round-to-nearest-even; overflow gives
inf where the format has one (bf16, fp16, fp8 e4m3 [Neuron FP8_EXP4], e5m2)
and NaN for e4m3fn, as ml_dtypes does. Float -> integer: truncate toward zero,
saturate to the type's range, NaN -> 0. Integer -> narrower integer: wrap
(two's complement). bool: nonzero -> 1.

Invariant: callers (birsim.machine) have bounds-checked every address; the
kernels trust them.
"""
import numpy as np
import ml_dtypes

from libc.string cimport memcpy
from libc.math cimport isnan
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stddef cimport size_t

cdef float _F8E4M3[256]
cdef float _F8E5M2[256]
cdef float _F8E4M3FN[256]
cdef float _F16[65536]


def _init_tables():
    cdef int i
    codes = np.arange(256, dtype=np.uint8)
    a = codes.view(ml_dtypes.float8_e4m3).astype(np.float32)
    b = codes.view(ml_dtypes.float8_e5m2).astype(np.float32)
    c = codes.view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    for i in range(256):
        _F8E4M3[i] = a[i]
        _F8E5M2[i] = b[i]
        _F8E4M3FN[i] = c[i]
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    cdef float[::1] hv = h
    for i in range(65536):
        _F16[i] = hv[i]


_init_tables()


cdef inline uint32_t _fbits(float f) noexcept nogil:
    cdef uint32_t u
    memcpy(&u, &f, 4)
    return u


cdef inline float _bitsf(uint32_t u) noexcept nogil:
    cdef float f
    memcpy(&f, &u, 4)
    return f


cdef inline uint16_t _enc_bf16(float f) noexcept nogil:
    cdef uint32_t u = _fbits(f)
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return <uint16_t>(((u >> 16) & 0x8000) | 0x7FC0)
    u = u + 0x7FFF + ((u >> 16) & 1)
    return <uint16_t>(u >> 16)


cdef inline uint32_t _enc_tf32(float f) noexcept nogil:
    """RNE to tf32 (1-8-10): the low 13 mantissa bits cleared; NaN -> the quiet NaN of its sign
    (common.dtypes.round_tf32 is the numpy twin)."""
    cdef uint32_t u = _fbits(f)
    if (u & 0x7FFFFFFF) > 0x7F800000:
        return (u & (<uint32_t>1 << 31)) | 0x7FC00000
    u = u + 0xFFF + ((u >> 13) & 1)
    return u & ~(<uint32_t>0x1FFF)


cdef inline uint32_t _enc_mini(float f, int ebits, int mbits, int bias, bint no_inf, uint32_t nan_mag) noexcept nogil:
    """RNE encode into a sign/ebits/mbits minifloat (fp16, fp8)."""
    cdef uint32_t u = _fbits(f)
    cdef uint32_t sign = (u >> 31) << (ebits + mbits)
    cdef uint32_t a = u & 0x7FFFFFFF
    cdef uint32_t inf_mag = ((1u << ebits) - 1) << mbits
    cdef uint32_t max_mag = (inf_mag | ((1u << mbits) - 1)) - 1 if no_inf else inf_mag - 1
    cdef int e, shift, emin
    cdef uint64_t full, q, rem, half
    if a > 0x7F800000:
        return sign | nan_mag
    if a == 0x7F800000:
        return sign | (nan_mag if no_inf else inf_mag)
    if (a >> 23) == 0:
        return sign          # fp32 zero / subnormal: far below every minifloat's range
    e = <int>(a >> 23) - 127
    emin = 1 - bias
    if e >= emin:
        full = (<uint64_t>(e + bias) << 23) | (a & 0x7FFFFF)
        shift = 23 - mbits
    else:
        full = (a & 0x7FFFFF) | 0x800000
        shift = 23 - mbits + (emin - e)
        if shift > 40:
            return sign
    q = full >> shift
    rem = full & ((<uint64_t>1 << shift) - 1)
    half = <uint64_t>1 << (shift - 1)
    if rem > half or (rem == half and (q & 1)):
        q += 1
    if q > max_mag:
        return sign | (nan_mag if no_inf else inf_mag)
    return sign | <uint32_t>q


cdef float decode_f32(int code, const uint8_t* p) noexcept nogil:
    cdef float f
    cdef uint16_t h
    cdef uint32_t u
    cdef double d
    cdef int64_t l
    cdef uint64_t ul
    if code == C_F32 or code == C_TF32:
        memcpy(&f, p, 4)
        return f
    if code == C_BF16:
        memcpy(&h, p, 2)
        return _bitsf((<uint32_t>h) << 16)
    if code == C_F16:
        memcpy(&h, p, 2)
        return _F16[h]
    if code == C_F8E4M3:
        return _F8E4M3[p[0]]
    if code == C_F8E5M2:
        return _F8E5M2[p[0]]
    if code == C_F8E4M3FN:
        return _F8E4M3FN[p[0]]
    if code == C_I8:
        return <float>(<int8_t>p[0])
    if code == C_U8 or code == C_BOOL:
        return <float>p[0]
    if code == C_I16:
        memcpy(&h, p, 2)
        return <float>(<int16_t>h)
    if code == C_U16:
        memcpy(&h, p, 2)
        return <float>h
    if code == C_I32:
        memcpy(&u, p, 4)
        return <float>(<int32_t>u)
    if code == C_U32:
        memcpy(&u, p, 4)
        return <float>u
    if code == C_I64:
        memcpy(&l, p, 8)
        return <float>l
    if code == C_U64:
        memcpy(&ul, p, 8)
        return <float>ul
    if code == C_F64:
        memcpy(&d, p, 8)
        return <float>d
    return 0.0


cdef inline int64_t _f2i(double v, double lo, double hi) noexcept nogil:
    if isnan(v):
        return 0
    if v <= lo:
        return <int64_t>lo
    if v >= hi:
        return <int64_t>hi
    return <int64_t>v


cdef void encode_f32(int code, float v, uint8_t* p) noexcept nogil:
    cdef uint16_t h
    cdef uint32_t u
    cdef int32_t i
    cdef int64_t l
    cdef uint64_t ul
    cdef double d
    if code == C_F32:
        memcpy(p, &v, 4)
    elif code == C_BF16:
        h = _enc_bf16(v)
        memcpy(p, &h, 2)
    elif code == C_F16:
        h = <uint16_t>_enc_mini(v, 5, 10, 15, False, 0x7E00)
        memcpy(p, &h, 2)
    elif code == C_F8E4M3:
        p[0] = <uint8_t>_enc_mini(v, 4, 3, 7, False, 0x7C)
    elif code == C_F8E5M2:
        p[0] = <uint8_t>_enc_mini(v, 5, 2, 15, False, 0x7E)
    elif code == C_F8E4M3FN:
        p[0] = <uint8_t>_enc_mini(v, 4, 3, 7, True, 0x7F)
    elif code == C_TF32:
        u = _enc_tf32(v)
        memcpy(p, &u, 4)
    elif code == C_I8:
        p[0] = <uint8_t>(<int8_t>_f2i(v, -128.0, 127.0))
    elif code == C_U8:
        p[0] = <uint8_t>_f2i(v, 0.0, 255.0)
    elif code == C_BOOL:
        p[0] = 1 if (v != 0.0 and not isnan(v)) else 0
    elif code == C_I16:
        h = <uint16_t>(<int16_t>_f2i(v, -32768.0, 32767.0))
        memcpy(p, &h, 2)
    elif code == C_U16:
        h = <uint16_t>_f2i(v, 0.0, 65535.0)
        memcpy(p, &h, 2)
    elif code == C_I32:
        i = <int32_t>_f2i(v, -2147483648.0, 2147483647.0)
        memcpy(p, &i, 4)
    elif code == C_U32:
        u = <uint32_t>_f2i(v, 0.0, 4294967295.0)
        memcpy(p, &u, 4)
    elif code == C_I64:
        l = _f2i(v, -9223372036854775808.0, 9223372036854774784.0)
        memcpy(p, &l, 8)
    elif code == C_U64:
        ul = <uint64_t>_f2i(v, 0.0, 9223372036854774784.0)
        memcpy(p, &ul, 8)
    elif code == C_F64:
        d = v
        memcpy(p, &d, 8)


cdef int64_t decode_i64(int code, const uint8_t* p) noexcept nogil:
    cdef uint16_t h
    cdef uint32_t u
    cdef int64_t l
    if code == C_I8:
        return <int8_t>p[0]
    if code == C_U8 or code == C_BOOL:
        return p[0]
    if code == C_I16:
        memcpy(&h, p, 2)
        return <int16_t>h
    if code == C_U16:
        memcpy(&h, p, 2)
        return h
    if code == C_I32:
        memcpy(&u, p, 4)
        return <int32_t>u
    if code == C_U32:
        memcpy(&u, p, 4)
        return u
    if code == C_I64 or code == C_U64:
        memcpy(&l, p, 8)
        return l
    return _f2i(decode_f32(code, p), -9223372036854775808.0, 9223372036854774784.0)


cdef void encode_i64(int code, int64_t v, uint8_t* p) noexcept nogil:
    cdef uint16_t h
    cdef uint32_t u
    if code == C_I8 or code == C_U8:
        p[0] = <uint8_t>v
    elif code == C_BOOL:
        p[0] = 1 if v != 0 else 0
    elif code == C_I16 or code == C_U16:
        h = <uint16_t>v
        memcpy(p, &h, 2)
    elif code == C_I32 or code == C_U32:
        u = <uint32_t>v
        memcpy(p, &u, 4)
    elif code == C_I64 or code == C_U64:
        memcpy(p, &v, 8)
    else:
        encode_f32(code, <float>v, p)


# -- runs: one innermost dimension, the dtype switch hoisted out of the loop --

cdef extern from *:
    """
    /* Dense bf16 <-> fp32 runs in plain C: restrict pointers and O3 let GCC
       vectorise them (Cython cannot spell restrict). */
    #include <stdint.h>
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    /* one clone per vector width, picked at load time (ifunc); integer work, the same bits */
    #define NCC_HOT __attribute__((optimize("O3"), target_clones("avx512f", "avx2", "default")))
    #elif defined(__GNUC__) && !defined(__clang__)
    #define NCC_HOT __attribute__((optimize("O3")))
    #else
    #define NCC_HOT
    #endif
    static NCC_HOT void ncc_read_bf16_dense(const uint16_t *__restrict q, Py_ssize_t n, uint32_t *__restrict out) {
        for (Py_ssize_t i = 0; i < n; i++) out[i] = ((uint32_t)q[i]) << 16;
    }
    static NCC_HOT void ncc_write_bf16_dense(const uint32_t *__restrict u, Py_ssize_t n, uint16_t *__restrict q) {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint32_t x = u[i];
            uint32_t r = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
            uint32_t nanv = (x >> 16) | 0x40u;
            q[i] = (uint16_t)(((x & 0x7FFFFFFFu) > 0x7F800000u) ? nanv : r);
        }
    }
    /* Dense 32-bit integer <-> int64 runs (sign- or zero-extended; stored by truncation). */
    static NCC_HOT void ncc_read_i32_dense(const int32_t *__restrict q, Py_ssize_t n, int64_t *__restrict out) {
        for (Py_ssize_t i = 0; i < n; i++) out[i] = q[i];
    }
    static NCC_HOT void ncc_read_u32_dense(const uint32_t *__restrict q, Py_ssize_t n, int64_t *__restrict out) {
        for (Py_ssize_t i = 0; i < n; i++) out[i] = q[i];
    }
    static NCC_HOT void ncc_write_32_dense(const int64_t *__restrict s, Py_ssize_t n, uint32_t *__restrict q) {
        for (Py_ssize_t i = 0; i < n; i++) q[i] = (uint32_t)s[i];
    }
    """
    void _read_bf16_dense "ncc_read_bf16_dense" (const uint16_t* q, Py_ssize_t n, uint32_t* out) noexcept nogil
    void _write_bf16_dense "ncc_write_bf16_dense" (const uint32_t* u, Py_ssize_t n, uint16_t* q) noexcept nogil
    void _read_i32_dense "ncc_read_i32_dense" (const int32_t* q, Py_ssize_t n, int64_t* out) noexcept nogil
    void _read_u32_dense "ncc_read_u32_dense" (const uint32_t* q, Py_ssize_t n, int64_t* out) noexcept nogil
    void _write_32_dense "ncc_write_32_dense" (const int64_t* s, Py_ssize_t n, uint32_t* q) noexcept nogil


cdef extern from *:
    """
    /* Integer <-> fp32 / int64 runs, the dtype hoisted out of the element loop: the element rules'
       C conversions (to fp32: round to nearest even; from fp32: truncate, saturate, NaN -> 0; to
       bool: nonzero and not NaN). STRIDE in bytes; dense aligned runs vectorise. Codes: _kernels.pxd. */
    #include <stdint.h>
    #include <string.h>
    #define NCC_DENSE(T, p, s) ((s) == (Py_ssize_t)sizeof(T) && ((uintptr_t)(p)) % sizeof(T) == 0)
    #define NCC_RUN(T, p, s, n, BODY) if (NCC_DENSE(T, p, s)) { const T *q_ = (const T *)(p); \
        for (Py_ssize_t i = 0; i < (n); i++) { T v = q_[i]; BODY; } } else { for (Py_ssize_t i = 0; i < (n); i++) { \
        T v; memcpy(&v, (p) + i * (s), sizeof(T)); BODY; } } return 1;
    #define NCC_WRUN(T, p, s, n, E) if (NCC_DENSE(T, p, s)) { T *q_ = (T *)(p); for (Py_ssize_t i = 0; i < (n); i++) \
        q_[i] = (T)(E); } else { for (Py_ssize_t i = 0; i < (n); i++) { T v_ = (T)(E); memcpy((p) + i * (s), &v_, sizeof(T)); } } return 1;
    static inline int64_t ncc_f2i(double v, double lo, double hi) {
        return v != v ? 0 : v <= lo ? (int64_t)lo : v >= hi ? (int64_t)hi : (int64_t)v; }
    static NCC_HOT int ncc_dec_int_f32(int code, const uint8_t *p, Py_ssize_t s, Py_ssize_t n, float *__restrict out) {
        switch (code) { case 10: NCC_RUN(int8_t, p, s, n, out[i] = (float)v) case 11: case 16: NCC_RUN(uint8_t, p, s, n,
        out[i] = (float)v) case 12: NCC_RUN(int16_t, p, s, n, out[i] = (float)v) case 13: NCC_RUN(uint16_t, p, s, n,
        out[i] = (float)v) case 14: NCC_RUN(int32_t, p, s, n, out[i] = (float)v) case 15: NCC_RUN(uint32_t, p, s, n,
        out[i] = (float)v) default: return 0; } }
    static NCC_HOT int ncc_enc_f32_int(int code, const float *__restrict x, uint8_t *p, Py_ssize_t s, Py_ssize_t n) {
        switch (code) { case 10: NCC_WRUN(int8_t, p, s, n, ncc_f2i(x[i], -128.0, 127.0))
        case 11: NCC_WRUN(uint8_t, p, s, n, ncc_f2i(x[i], 0.0, 255.0))
        case 16: NCC_WRUN(uint8_t, p, s, n, (x[i] != 0.0f && x[i] == x[i]) ? 1 : 0)
        case 12: NCC_WRUN(int16_t, p, s, n, ncc_f2i(x[i], -32768.0, 32767.0))
        case 13: NCC_WRUN(uint16_t, p, s, n, ncc_f2i(x[i], 0.0, 65535.0))
        case 14: NCC_WRUN(int32_t, p, s, n, ncc_f2i(x[i], -2147483648.0, 2147483647.0))
        case 15: NCC_WRUN(uint32_t, p, s, n, ncc_f2i(x[i], 0.0, 4294967295.0)) default: return 0; } }
    static NCC_HOT int ncc_dec_int_i64(int code, const uint8_t *p, Py_ssize_t s, Py_ssize_t n, int64_t *__restrict out) {
        switch (code) { case 10: NCC_RUN(int8_t, p, s, n, out[i] = v) case 11: case 16: NCC_RUN(uint8_t, p, s, n, out[i] = v)
        case 12: NCC_RUN(int16_t, p, s, n, out[i] = v) case 13: NCC_RUN(uint16_t, p, s, n, out[i] = v) default: return 0; } }
    static NCC_HOT int ncc_enc_i64_int(int code, const int64_t *__restrict x, uint8_t *p, Py_ssize_t s, Py_ssize_t n) {
        switch (code) { case 10: case 11: NCC_WRUN(uint8_t, p, s, n, (uint8_t)x[i]) case 16: NCC_WRUN(uint8_t, p, s, n,
        x[i] != 0 ? 1 : 0) case 12: case 13: NCC_WRUN(uint16_t, p, s, n, (uint16_t)x[i]) default: return 0; } }
    """
    int _dec_int_f32 "ncc_dec_int_f32" (int code, const uint8_t* p, Py_ssize_t stride, Py_ssize_t n, float* out) noexcept nogil
    int _enc_f32_int "ncc_enc_f32_int" (int code, const float* src, uint8_t* p, Py_ssize_t stride, Py_ssize_t n) noexcept nogil
    int _dec_int_i64 "ncc_dec_int_i64" (int code, const uint8_t* p, Py_ssize_t stride, Py_ssize_t n, int64_t* out) noexcept nogil
    int _enc_i64_int "ncc_enc_i64_int" (int code, const int64_t* src, uint8_t* p, Py_ssize_t stride, Py_ssize_t n) noexcept nogil


cdef void read_run_f32(int code, const uint8_t* p, Py_ssize_t stride, Py_ssize_t n, float* out) noexcept nogil:
    cdef Py_ssize_t i
    cdef uint16_t h
    if code == C_F32:
        if stride == 4:
            memcpy(out, p, n * 4)
        else:
            for i in range(n):
                memcpy(&out[i], p + i * stride, 4)
    elif code == C_BF16:
        if stride == 2 and (<size_t>p) % 2 == 0:
            _read_bf16_dense(<const uint16_t*>p, n, <uint32_t*>out)
        else:
            for i in range(n):
                memcpy(&h, p + i * stride, 2)
                out[i] = _bitsf((<uint32_t>h) << 16)
    elif not _dec_int_f32(code, p, stride, n, out):
        for i in range(n):
            out[i] = decode_f32(code, p + i * stride)


cdef void _read_run_i64(int code, const uint8_t* p, Py_ssize_t stride, Py_ssize_t n, int64_t* out) noexcept nogil:
    """n elements at p, stride bytes apart, as int64 (decode_i64 with the common dtypes hoisted)."""
    cdef Py_ssize_t i
    cdef int32_t v32
    cdef uint32_t u32
    if code == C_I32:
        if stride == 4 and (<size_t>p) % 4 == 0:
            _read_i32_dense(<const int32_t*>p, n, out)
            return
        for i in range(n):
            memcpy(&v32, p + i * stride, 4)
            out[i] = v32
    elif code == C_U32:
        if stride == 4 and (<size_t>p) % 4 == 0:
            _read_u32_dense(<const uint32_t*>p, n, out)
            return
        for i in range(n):
            memcpy(&u32, p + i * stride, 4)
            out[i] = u32
    elif not _dec_int_i64(code, p, stride, n, out):
        for i in range(n):
            out[i] = decode_i64(code, p + i * stride)


cdef void _write_run_i64(int code, const int64_t* src, uint8_t* p, Py_ssize_t stride, Py_ssize_t n) noexcept nogil:
    """src[i] into n elements at p (encode_i64 with the common dtypes hoisted)."""
    cdef Py_ssize_t i
    cdef uint32_t u32
    if code == C_I32 or code == C_U32:
        if stride == 4 and (<size_t>p) % 4 == 0 and (<const uint8_t*>(src + n) <= p or <const uint8_t*>src >= p + 4 * n):
            _write_32_dense(src, n, <uint32_t*>p)        # (the restrict loop needs disjoint sides)
            return
        for i in range(n):
            u32 = <uint32_t>src[i]
            memcpy(p + i * stride, &u32, 4)
    elif not _enc_i64_int(code, src, p, stride, n):
        for i in range(n):
            encode_i64(code, src[i], p + i * stride)


cdef void write_run_f32(int code, const float* src, uint8_t* p, Py_ssize_t stride, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    cdef uint16_t h
    if code == C_F32:
        if stride == 4:
            memcpy(p, src, n * 4)
        else:
            for i in range(n):
                memcpy(p + i * stride, &src[i], 4)
    elif code == C_BF16:
        if stride == 2 and (<size_t>p) % 2 == 0:
            _write_bf16_dense(<const uint32_t*>src, n, <uint16_t*>p)
        else:
            for i in range(n):
                h = _enc_bf16(src[i])
                memcpy(p + i * stride, &h, 2)
    elif not _enc_f32_int(code, src, p, stride, n):
        for i in range(n):
            encode_f32(code, src[i], p + i * stride)


def read_f32(const uint8_t[::1] buf, int code, Py_ssize_t base, const Py_ssize_t[::1] strides,
             const Py_ssize_t[::1] nums, float[::1] out):
    """out[j] = element j (row-major over nums) of the AP, converted to fp32."""
    with nogil:
        read_f32_ptr(&buf[0], code, base, &strides[0], &nums[0], &out[0] if out.shape[0] else NULL)


def write_f32(const float[::1] src, uint8_t[::1] buf, int code, Py_ssize_t base, const Py_ssize_t[::1] strides,
              const Py_ssize_t[::1] nums):
    """Element j of the AP = cast(src[j]) (RNE / saturating, see module doc)."""
    with nogil:
        write_f32_ptr(&src[0] if src.shape[0] else NULL, &buf[0], code, base, &strides[0], &nums[0])


def read_i64(const uint8_t[::1] buf, int code, Py_ssize_t base, const Py_ssize_t[::1] strides,
             const Py_ssize_t[::1] nums, int64_t[::1] out):
    """out[j] = element j as int64 (ints extended, floats truncated toward zero)."""
    with nogil:
        read_i64_ptr(&buf[0], code, base, &strides[0], &nums[0], &out[0] if out.shape[0] else NULL)


def write_i64(const int64_t[::1] src, uint8_t[::1] buf, int code, Py_ssize_t base, const Py_ssize_t[::1] strides,
              const Py_ssize_t[::1] nums):
    """Element j = src[j] wrapped to an integer dtype (or rounded to a float dtype)."""
    with nogil:
        write_i64_ptr(&src[0] if src.shape[0] else NULL, &buf[0], code, base, &strides[0], &nums[0])


def cast_f32(const float[::1] src, int code, uint8_t[::1] out):
    """Encode contiguous fp32 values into dtype CODE (for tests and DMA casts)."""
    cdef Py_ssize_t i, n = src.shape[0], w
    w = 1 if code in (C_F8E4M3, C_F8E5M2, C_F8E4M3FN, C_I8, C_U8, C_BOOL) else \
        2 if code in (C_BF16, C_F16, C_I16, C_U16) else 8 if code in (C_I64, C_U64, C_F64) else 4
    with nogil:
        for i in range(n):
            encode_f32(code, src[i], &out[i * w])


# -- scans: birsim._scan (tensor_tensor_scan's kernel), re-exported here for its callers --
from neuronxcc.starfish.birsim._scan import SCAN_OPS, scan_f32  # noqa: E402,F401


# -- the element walks: one row iterator (Rows, _kernels.pxd) and a run function each --

cdef void read_f32_ptr(const uint8_t* p0, int code, Py_ssize_t base, const Py_ssize_t* strides,
                       const Py_ssize_t* nums, float* out) noexcept nogil:
    """out[j] = element j (row-major over nums) of the AP, as fp32."""
    cdef Rows r
    cdef Py_ssize_t j = 0, n5 = nums[5], s5 = strides[5]
    rows_init(&r, base, strides, nums)
    while rows_next(&r):
        read_run_f32(code, p0 + r.off, s5, n5, out + j)
        j += n5


cdef void write_f32_ptr(const float* src, uint8_t* p0, int code, Py_ssize_t base, const Py_ssize_t* strides,
                        const Py_ssize_t* nums) noexcept nogil:
    """Element j of the AP = cast(src[j])."""
    cdef Rows r
    cdef Py_ssize_t j = 0, n5 = nums[5], s5 = strides[5]
    rows_init(&r, base, strides, nums)
    while rows_next(&r):
        write_run_f32(code, src + j, p0 + r.off, s5, n5)
        j += n5


cdef void read_i64_ptr(const uint8_t* p0, int code, Py_ssize_t base, const Py_ssize_t* strides,
                       const Py_ssize_t* nums, int64_t* out) noexcept nogil:
    """out[j] = element j as int64."""
    cdef Rows r
    cdef Py_ssize_t j = 0, n5 = nums[5], s5 = strides[5]
    rows_init(&r, base, strides, nums)
    while rows_next(&r):
        _read_run_i64(code, p0 + r.off, s5, n5, out + j)
        j += n5


cdef void write_i64_ptr(const int64_t* src, uint8_t* p0, int code, Py_ssize_t base, const Py_ssize_t* strides,
                        const Py_ssize_t* nums) noexcept nogil:
    """Element j = src[j] wrapped to the dtype."""
    cdef Rows r
    cdef Py_ssize_t j = 0, n5 = nums[5], s5 = strides[5]
    rows_init(&r, base, strides, nums)
    while rows_next(&r):
        _write_run_i64(code, src + j, p0 + r.off, s5, n5)
        j += n5


# The dtype codes of _kernels.pxd by BIR name: birsim checks them against the element-type
# registry (neuronxcc.common.dtypes) when it imports these kernels.
DTYPE_CODES = {"float32": C_F32, "bfloat16": C_BF16, "float16": C_F16, "float8_e4m3": C_F8E4M3,
               "float8_e5m2": C_F8E5M2, "float8_e4m3fn": C_F8E4M3FN, "tfloat32": C_TF32, "int8": C_I8, "uint8": C_U8,
               "int16": C_I16, "uint16": C_U16, "int32": C_I32, "uint32": C_U32, "bool": C_BOOL,
               "int64": C_I64, "uint64": C_U64, "float64": C_F64}


# -- small matmuls -----------------------------------------------------------------

# At most this many multiply-adds (K * M * N) take the typed loop; larger matmuls go to BLAS.
SMALL_MATMUL = 4096

cdef extern from *:
    """
    /* r[i, j] = sum over k in order of s[k, i] * m[k, j]: fp32 products and fp32 sums, never
       fused (a fused multiply-add would round once instead of twice). */
    #if defined(__clang__)
    #define NCC_NO_CONTRACT
    #elif defined(__GNUC__)
    #define NCC_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
    #else
    #define NCC_NO_CONTRACT
    #endif
    static NCC_NO_CONTRACT void ncc_mm_small(const float *s, Py_ssize_t ss0, Py_ssize_t ss1,
                                             const float *m, Py_ssize_t ms0, Py_ssize_t ms1,
                                             float *r, Py_ssize_t K, Py_ssize_t M, Py_ssize_t N) {
    #if defined(__clang__)
    #pragma clang fp contract(off)
    #endif
        for (Py_ssize_t i = 0; i < M; i++)
            for (Py_ssize_t j = 0; j < N; j++) {
                volatile float p = s[i * ss1] * m[j * ms1];
                float acc = p;
                for (Py_ssize_t k = 1; k < K; k++) {
                    p = s[k * ss0 + i * ss1] * m[k * ms0 + j * ms1];
                    acc = acc + p;
                }
                r[i * N + j] = acc;
            }
    }
    """
    void _mm_small "ncc_mm_small" (const float* s, Py_ssize_t ss0, Py_ssize_t ss1, const float* m, Py_ssize_t ms0,
                                   Py_ssize_t ms1, float* r, Py_ssize_t K, Py_ssize_t M, Py_ssize_t N) noexcept nogil


cdef void mm_small(const float* s, const float* m, float* r, Py_ssize_t K, Py_ssize_t M, Py_ssize_t N) noexcept nogil:
    """r[M, N] = s[K, M].T @ m[K, N], all row-major contiguous (see small_matmul)."""
    _mm_small(s, M, 1, m, N, 1, r, K, M, N)


def small_matmul(const float[:, :] s, const float[:, :] m):
    """s.T @ m for fp32 s [K, M], m [K, N] (any strides): each result the fp32 sum over k in order of
    the fp32 products s[k, i] * m[k, j], none fused. birsim's PE matmul for at most SMALL_MATMUL
    multiply-adds (birsim.alu.matmul_f)."""
    cdef Py_ssize_t K = s.shape[0], M = s.shape[1], N = m.shape[1]
    if m.shape[0] != K:
        raise ValueError("matmul operands have %d and %d rows" % (K, m.shape[0]))
    out = np.empty((M, N), np.float32)
    cdef float[:, ::1] r = out
    if M == 0 or N == 0:
        return out
    if K == 0:
        out.fill(0)
        return out
    with nogil:
        _mm_small(&s[0, 0], s.strides[0] // 4, s.strides[1] // 4, &m[0, 0], m.strides[0] // 4, m.strides[1] // 4,
                  &r[0, 0], K, M, N)
    return out
