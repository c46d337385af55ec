# cython: language_level=3, boundscheck=False, wraparound=False
"""birsim's PE kernels: the matmul and the 4-byte transpose.

The matmul: r[i, j] = the fp32 sum over k in order of the fp32 products
s[k, i] * m[k, j] (each product and each sum rounded once: no fused multiply-add), optionally
added to the old r[i, j] (PSUM accumulation: old + sum, one more fp32 add).

This is the one definition of the PE's arithmetic in birsim (``alu.matmul_f``, the Matmul
plan): every size gives the bits of the scalar loop in ``_kernels.small_matmul``, whatever the
layout or the vector width, because the kernel does the same IEEE operations in the same
order per result; only which results are computed side by side changes.

Layout: s[k, i] at s + k * ss + i, m[k, j] at m + k * ms + j, r[i, j] at r + i * rs + j (rows of
unit-stride fp32). Blocking: 32 columns (two 16-float vectors) by 8, 4, 2 or 1 rows, the K loop
innermost with the 8 x 32 partial sums in registers; the 32 columns are first copied into a
K x 32 panel (the WORK argument, K * 32 floats; zero-padded past the last column, whose padding
lanes are computed and not stored), unless the panel is passed over once (fewer than 8 rows).
One clone per vector width (AVX-512, AVX2, baseline), picked at load time; the clones differ in
speed only.

The transpose (``transpose_b32``): d[j, i] = s[i, j] for 4-byte elements, their bits unchanged,
8 x 8 blocks through AVX registers (shuffles only) in 32 x 32 tiles, the edges element by element.
"""
from libc.stdint cimport uint8_t

import numpy as np

cdef extern from *:
    """
    #include <string.h>
    typedef float ncc_v16 __attribute__((vector_size(64)));
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    #define NCC_MM __attribute__((optimize("O3", "fp-contract=off"), target_clones("avx512f", "avx2", "default")))
    #elif defined(__GNUC__) && !defined(__clang__)
    #define NCC_MM __attribute__((optimize("O3", "fp-contract=off")))
    #else
    #define NCC_MM
    #endif
    /* unaligned vector load / store (the rows need only float alignment) */
    #define NCC_LD(v, p) memcpy(&(v), (p), sizeof(ncc_v16))
    #define NCC_ST(p, v) memcpy((p), &(v), sizeof(ncc_v16))

    /* One block of MR rows x 32 columns: s points at s[0, i0], b at the panel's column 0 (row
       stride bs), r at r[i0, j0]; NC <= 32 real columns. */
    #define NCC_MM_BLOCK(MR)                                                                      \\
        {                                                                                       \\
            ncc_v16 acc0[MR], acc1[MR];                                                         \\
            ncc_v16 b0, b1, o0, o1;                                                             \\
            NCC_LD(b0, b); NCC_LD(b1, b + 16);                                                                                          \\
            _Pragma("GCC unroll 8")                                                             \\
            for (int q = 0; q < MR; q++) {                                                      \\
                float a = s[q];                                                                 \\
                acc0[q] = a * b0;                                                               \\
                acc1[q] = a * b1;                                                               \\
            }                                                                                   \\
            for (Py_ssize_t k = 1; k < K; k++) {                                                \\
                const float *bk = b + k * bs, *sk = s + k * ss;                                 \\
                NCC_LD(b0, bk);                                                                 \\
                NCC_LD(b1, bk + 16);                                                            \\
                _Pragma("GCC unroll 8")                                                         \\
                for (int q = 0; q < MR; q++) {                                                  \\
                    float a = sk[q];                                                            \\
                    ncc_v16 p0 = a * b0, p1 = a * b1;                                           \\
                    acc0[q] = acc0[q] + p0;                                                     \\
                    acc1[q] = acc1[q] + p1;                                                     \\
                }                                                                               \\
            }                                                                                   \\
            _Pragma("GCC unroll 8")                                                             \\
            for (int q = 0; q < MR; q++) {                                                      \\
                float *rq = r + q * rs;                                                         \\
                if (NC == 32) {                                                                 \\
                    if (acc) {                                                                  \\
                        NCC_LD(o0, rq); acc0[q] = o0 + acc0[q];                                 \\
                        NCC_LD(o1, rq + 16); acc1[q] = o1 + acc1[q];                                 \\
                    }                                                                           \\
                    NCC_ST(rq, acc0[q]);                                                        \\
                    NCC_ST(rq + 16, acc1[q]);                                                   \\
                } else {                                                                        \\
                    float t[32];                                                                \\
                    NCC_ST(t, acc0[q]);                                                         \\
                    NCC_ST(t + 16, acc1[q]);                                                    \\
                    for (Py_ssize_t c = 0; c < NC; c++)                                         \\
                        rq[c] = acc ? rq[c] + t[c] : t[c];                                      \\
                }                                                                               \\
            }                                                                                   \\
        }

    static NCC_MM void ncc_mm_f32(const float *s0, Py_ssize_t ss, const float *m, Py_ssize_t ms,
                                  float *r0, Py_ssize_t rs, Py_ssize_t K, Py_ssize_t M, Py_ssize_t N,
                                  int acc, float *work) {
        if (M <= 0 || N <= 0)
            return;
        if (K <= 0) {
            for (Py_ssize_t i = 0; i < M; i++)
                for (Py_ssize_t j = 0; j < N; j++)
                    r0[i * rs + j] = acc ? r0[i * rs + j] + 0.0f : 0.0f;
            return;
        }
        for (Py_ssize_t j0 = 0; j0 < N; j0 += 32) {
            Py_ssize_t NC = N - j0 < 32 ? N - j0 : 32;
            const float *b;
            Py_ssize_t bs;
            if (NC == 32 && M < 8) {         /* one pass over the panel: read in place */
                b = m + j0;
                bs = ms;
            } else {        /* packed: rows of m a power of two apart would share a few cache sets */
                for (Py_ssize_t k = 0; k < K; k++) {
                    float *w = work + k * 32;
                    memcpy(w, m + k * ms + j0, NC * sizeof(float));
                    if (NC < 32)
                        memset(w + NC, 0, (32 - NC) * sizeof(float));
                }
                b = work;
                bs = 32;
            }
            Py_ssize_t i0 = 0;
            for (; i0 + 8 <= M; i0 += 8) {
                const float *s = s0 + i0;
                float *r = r0 + i0 * rs + j0;
                NCC_MM_BLOCK(8)
            }
            if (i0 + 4 <= M) {
                const float *s = s0 + i0;
                float *r = r0 + i0 * rs + j0;
                NCC_MM_BLOCK(4)
                i0 += 4;
            }
            if (i0 + 2 <= M) {
                const float *s = s0 + i0;
                float *r = r0 + i0 * rs + j0;
                NCC_MM_BLOCK(2)
                i0 += 2;
            }
            if (i0 < M) {
                const float *s = s0 + i0;
                float *r = r0 + i0 * rs + j0;
                NCC_MM_BLOCK(1)
            }
        }
    }

    /* PE transposes of 4-byte elements: d[j * da + i] = s[i * sa + j] (byte strides sa, da between
       rows), bits moved unchanged; 8 x 8 blocks through AVX registers where the CPU has AVX,
       the rest element by element. */
    #include <stdint.h>
    static void ncc_tr32_scalar(const uint8_t *s, Py_ssize_t sa, uint8_t *d, Py_ssize_t da,
                                Py_ssize_t i0, Py_ssize_t i1, Py_ssize_t j0, Py_ssize_t j1) {
        for (Py_ssize_t i = i0; i < i1; i++)
            for (Py_ssize_t j = j0; j < j1; j++)
                memcpy(d + j * da + i * 4, s + i * sa + j * 4, 4);
    }
    #if defined(__GNUC__) && defined(__x86_64__)
    #include <immintrin.h>
    #define NCC_TR_AVX 1
    __attribute__((target("avx"))) static void ncc_tr32_avx(const uint8_t *s, Py_ssize_t sa, uint8_t *d,
                                                          Py_ssize_t da, Py_ssize_t A, Py_ssize_t B) {
        Py_ssize_t A8 = A & ~(Py_ssize_t)7, B8 = B & ~(Py_ssize_t)7;
        for (Py_ssize_t i0 = 0; i0 < A8; i0 += 32)
            for (Py_ssize_t j0 = 0; j0 < B8; j0 += 32)          /* 32 x 32 tiles stay in L1 */
                for (Py_ssize_t i = i0; i < i0 + 32 && i < A8; i += 8)
                    for (Py_ssize_t j = j0; j < j0 + 32 && j < B8; j += 8) {
                        const uint8_t *p = s + i * sa + j * 4;
                        __m256 r0 = _mm256_loadu_ps((const float *)(p));
                        __m256 r1 = _mm256_loadu_ps((const float *)(p + sa));
                        __m256 r2 = _mm256_loadu_ps((const float *)(p + 2 * sa));
                        __m256 r3 = _mm256_loadu_ps((const float *)(p + 3 * sa));
                        __m256 r4 = _mm256_loadu_ps((const float *)(p + 4 * sa));
                        __m256 r5 = _mm256_loadu_ps((const float *)(p + 5 * sa));
                        __m256 r6 = _mm256_loadu_ps((const float *)(p + 6 * sa));
                        __m256 r7 = _mm256_loadu_ps((const float *)(p + 7 * sa));
                        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
                        __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
                        __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
                        __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
                        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
                        __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
                        __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
                        __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
                        uint8_t *q = d + j * da + i * 4;
                        _mm256_storeu_ps((float *)(q), _mm256_permute2f128_ps(u0, u4, 0x20));
                        _mm256_storeu_ps((float *)(q + da), _mm256_permute2f128_ps(u1, u5, 0x20));
                        _mm256_storeu_ps((float *)(q + 2 * da), _mm256_permute2f128_ps(u2, u6, 0x20));
                        _mm256_storeu_ps((float *)(q + 3 * da), _mm256_permute2f128_ps(u3, u7, 0x20));
                        _mm256_storeu_ps((float *)(q + 4 * da), _mm256_permute2f128_ps(u0, u4, 0x31));
                        _mm256_storeu_ps((float *)(q + 5 * da), _mm256_permute2f128_ps(u1, u5, 0x31));
                        _mm256_storeu_ps((float *)(q + 6 * da), _mm256_permute2f128_ps(u2, u6, 0x31));
                        _mm256_storeu_ps((float *)(q + 7 * da), _mm256_permute2f128_ps(u3, u7, 0x31));
                    }
        ncc_tr32_scalar(s, sa, d, da, 0, A8, B8, B);
        ncc_tr32_scalar(s, sa, d, da, A8, A, 0, B);
    }
    #endif
    static void ncc_tr32(const uint8_t *s, Py_ssize_t sa, uint8_t *d, Py_ssize_t da, Py_ssize_t A, Py_ssize_t B) {
    #ifdef NCC_TR_AVX
        if (A >= 8 && B >= 8 && __builtin_cpu_supports("avx")) {
            ncc_tr32_avx(s, sa, d, da, A, B);
            return;
        }
    #endif
        ncc_tr32_scalar(s, sa, d, da, 0, A, 0, B);
    }
    """
    void _mm_f32 "ncc_mm_f32" (const float* s, Py_ssize_t ss, const float* m, Py_ssize_t ms, float* r,
                               Py_ssize_t rs, Py_ssize_t K, Py_ssize_t M, Py_ssize_t N, int acc,
                               float* work) noexcept nogil
    void _tr32 "ncc_tr32" (const uint8_t* s, Py_ssize_t sa, uint8_t* d, Py_ssize_t da, Py_ssize_t A,
                           Py_ssize_t B) noexcept nogil


cdef void mm_f32(const float* s, Py_ssize_t ss, const float* m, Py_ssize_t ms, float* r, Py_ssize_t rs,
                 Py_ssize_t K, Py_ssize_t M, Py_ssize_t N, bint acc, float* work) noexcept nogil:
    _mm_f32(s, ss, m, ms, r, rs, K, M, N, acc, work)


cdef void transpose_b32(const uint8_t* s, Py_ssize_t sa, uint8_t* d, Py_ssize_t da, Py_ssize_t A,
                        Py_ssize_t B) noexcept nogil:
    _tr32(s, sa, d, da, A, B)


def transpose32(src):
    """The [B, A] transpose of a 2-D array of 4-byte elements, bits unchanged (tests)."""
    src = np.asarray(src)
    if src.ndim != 2 or src.itemsize != 4:
        raise ValueError("transpose32 takes a 2-D array of 4-byte elements")
    src = np.ascontiguousarray(src)
    out = np.empty((src.shape[1], src.shape[0]), src.dtype)
    cdef const uint8_t[::1] sv = src.reshape(-1).view(np.uint8)
    cdef uint8_t[::1] dv = out.reshape(-1).view(np.uint8)
    if src.size:
        _tr32(&sv[0], src.shape[1] * 4, &dv[0], src.shape[0] * 4, src.shape[0], src.shape[1])
    return out


def matmul(s, m):
    """s.T @ m for fp32 s [K, M], m [K, N] (any strides; other dtypes converted to fp32): the PE's
    sum over k in order of the unfused fp32 products (module doc)."""
    s = np.asarray(s, np.float32)
    m = np.asarray(m, np.float32)
    if s.ndim != 2 or m.ndim != 2 or s.shape[0] != m.shape[0]:
        raise ValueError("matmul operands of shapes %s and %s" % (s.shape, m.shape))
    if s.strides[1] != 4:
        s = np.ascontiguousarray(s)
    if m.strides[1] != 4:
        m = np.ascontiguousarray(m)
    if (s.shape[0] > 1 and s.strides[0] % 4) or (m.shape[0] > 1 and m.strides[0] % 4):
        s, m = np.ascontiguousarray(s), np.ascontiguousarray(m)
    cdef Py_ssize_t K = s.shape[0], M = s.shape[1], N = m.shape[1]
    out = np.empty((M, N), np.float32)
    if M == 0 or N == 0:
        return out
    if K == 0:
        out.fill(0)
        return out
    work = np.empty(K * 32, np.float32)
    cdef const float[:, :] sv = s
    cdef const float[:, :] mv = m
    cdef float[:, ::1] rv = out
    cdef float[::1] wv = work
    with nogil:
        _mm_f32(&sv[0, 0], sv.strides[0] // 4, &mv[0, 0], mv.strides[0] // 4, &rv[0, 0], N, K, M, N, 0, &wv[0])
    return out
