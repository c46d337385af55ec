/*
 * ncc_customop.h -- the ABI of the builtin custom-op CPU libraries.
 *
 * The package build compiles every C source in csrc/custom_op into eight shared
 * libraries, neuronxcc/data/custom_op/libbuiltincustomop_cpu{0..7}.so, one per
 * GpSimd CPU, with -DNCC_CPU_ID=i -DNCC_TOTAL_CPUS=8 and -fvisibility=hidden.
 * Only the symbols marked NCC_EXPORT below are visible.
 *
 * Kernels take contiguous row-major buffers of num_rows x row_len elements and
 * process only the rows this CPU owns:
 *     c = ceil(num_rows / total_cpus)
 *     rows [cpu_id * c, min(num_rows, (cpu_id + 1) * c))
 * so running all eight libraries over the same buffers covers every row once.
 * They return 0 on success and a nonzero NCC_CUSTOMOP_E* code on bad
 * arguments (nothing is written then).
 */
#ifndef NCC_CUSTOMOP_H
#define NCC_CUSTOMOP_H

#include <stdint.h>

#ifndef NCC_CPU_ID
#define NCC_CPU_ID 0
#endif
#ifndef NCC_TOTAL_CPUS
#define NCC_TOTAL_CPUS 8
#endif

#define NCC_EXPORT __attribute__((visibility("default")))

/* Version strings recorded in ucode_lib.json (the compiler never invents them). */
#define NCC_CUSTOMOP_UCODE_VERSION "ncc-ulib-ucode-1.0"
#define NCC_CUSTOMOP_ISA_VERSION "ncc-bir-isa-1.0"

#define NCC_CUSTOMOP_OK 0
#define NCC_CUSTOMOP_ENULL 1    /* a required pointer is NULL */
#define NCC_CUSTOMOP_EDIM 2     /* negative num_rows / row_len, or k outside [0, row_len] */
#define NCC_CUSTOMOP_ENOMEM 3   /* scratch allocation failed */
#define NCC_CUSTOMOP_ECONFIG 4  /* library built with an invalid cpu_id / total_cpus */

NCC_EXPORT const char *ncc_customop_ucode_version(void);
NCC_EXPORT const char *ncc_customop_isa_version(void);
NCC_EXPORT int ncc_customop_cpu_id(void);
NCC_EXPORT int ncc_customop_total_cpus(void);

/*
 * Stable sort of each owned row. Order (jnp.sort on XLA): zeros and
 * subnormals of either sign compare equal (denormals-are-zero); every NaN
 * (either sign, any payload) compares equal to every other NaN and greater
 * than +inf. With
 * descending != 0 the order is reversed but ties still keep the lower index
 * first (jnp.argsort(descending=True, stable=True)). dst_idx gets the source
 * column of each output element.
 */
NCC_EXPORT int ncc_sort_f32(const float *src, int64_t num_rows, int64_t row_len,
                            float *dst_vals, int32_t *dst_idx, int32_t descending);

/*
 * The k largest elements of each owned row, largest first, and their columns
 * (jax.lax.top_k). Order: IEEE-754 totalOrder on the bit pattern,
 * -NaN < -inf < ... < -0.0 < +0.0 < ... < +inf < +NaN; equal elements keep the
 * lower index first. dst buffers are num_rows x k.
 */
NCC_EXPORT int ncc_topk_f32(const float *src, int64_t num_rows, int64_t row_len, int64_t k,
                            float *dst_vals, int32_t *dst_idx);

#endif /* NCC_CUSTOMOP_H */
