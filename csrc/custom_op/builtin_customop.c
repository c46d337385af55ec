/*
 * builtin_customop.c -- the builtin GpSimd custom-op kernels: row sort and
 * row top-k on float32, plus the version/identity queries (ncc_customop.h).
 *
 * Both kernels reduce each float to an unsigned 32-bit key whose unsigned
 * order is the wanted float order, pair it with its column, and order the
 * pairs by (key, column). The column tie-break makes the order total, so the
 * results are stable by construction. Sort is a bottom-up merge sort per row;
 * top-k keeps a bounded min-heap of the k best pairs (O(n log k)) and sorts
 * those at the end.
 */
#include <stdlib.h>
#include <string.h>

#include "ncc_customop.h"

typedef struct {
    uint32_t key;
    int32_t idx;
} ncc_pair;

const char *ncc_customop_ucode_version(void) { return NCC_CUSTOMOP_UCODE_VERSION; }
const char *ncc_customop_isa_version(void) { return NCC_CUSTOMOP_ISA_VERSION; }
int ncc_customop_cpu_id(void) { return NCC_CPU_ID; }
int ncc_customop_total_cpus(void) { return NCC_TOTAL_CPUS; }

static uint32_t float_bits(float f) {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* IEEE-754 totalOrder as an unsigned key: negatives flipped, positives offset. */
static uint32_t total_order_key(uint32_t b) {
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/* jnp.sort order: all NaNs equal and above +inf; zeros and subnormals of
 * either sign all equal (XLA compares with denormals-are-zero). */
static uint32_t sort_key(float f) {
    uint32_t b = float_bits(f);
    if ((b & 0x7f800000u) == 0x7f800000u && (b & 0x007fffffu) != 0)
        return 0xffffffffu;
    if ((b & 0x7f800000u) == 0)
        b = 0;
    return total_order_key(b);
}

/* a before b in ascending (key, idx) order */
static int pair_less(const ncc_pair *a, const ncc_pair *b) {
    return a->key < b->key || (a->key == b->key && a->idx < b->idx);
}

/* Stable bottom-up merge sort of n pairs; tmp holds n pairs. Returns the sorted buffer. */
static ncc_pair *merge_sort(ncc_pair *a, ncc_pair *tmp, int64_t n) {
    ncc_pair *src = a, *dst = tmp;
    for (int64_t width = 1; width < n; width *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * width) {
            int64_t mid = lo + width < n ? lo + width : n;
            int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
            int64_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi)
                dst[o++] = pair_less(&src[j], &src[i]) ? src[j++] : src[i++];
            while (i < mid)
                dst[o++] = src[i++];
            while (j < hi)
                dst[o++] = src[j++];
        }
        ncc_pair *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* The rows [*lo, *hi) this CPU owns; 0 or an error code. */
static int owned_rows(int64_t num_rows, int64_t *lo, int64_t *hi) {
    if (NCC_TOTAL_CPUS <= 0 || NCC_CPU_ID < 0 || NCC_CPU_ID >= NCC_TOTAL_CPUS)
        return NCC_CUSTOMOP_ECONFIG;
    int64_t chunk = (num_rows + NCC_TOTAL_CPUS - 1) / NCC_TOTAL_CPUS;
    int64_t start = (int64_t)NCC_CPU_ID * chunk;
    int64_t stop = start + chunk;
    if (start > num_rows)
        start = num_rows;
    if (stop > num_rows)
        stop = num_rows;
    *lo = start;
    *hi = stop;
    return NCC_CUSTOMOP_OK;
}

int ncc_sort_f32(const float *src, int64_t num_rows, int64_t row_len,
                 float *dst_vals, int32_t *dst_idx, int32_t descending) {
    if (num_rows < 0 || row_len < 0 || row_len > INT32_MAX)
        return NCC_CUSTOMOP_EDIM;
    if (num_rows > 0 && row_len > 0 && (!src || !dst_vals || !dst_idx))
        return NCC_CUSTOMOP_ENULL;
    int64_t lo, hi;
    int rc = owned_rows(num_rows, &lo, &hi);
    if (rc)
        return rc;
    if (lo >= hi || row_len == 0)
        return NCC_CUSTOMOP_OK;
    ncc_pair *buf = (ncc_pair *)malloc(2 * (size_t)row_len * sizeof(ncc_pair));
    if (!buf)
        return NCC_CUSTOMOP_ENOMEM;
    for (int64_t r = lo; r < hi; ++r) {
        const float *row = src + r * row_len;
        for (int64_t c = 0; c < row_len; ++c) {
            uint32_t k = sort_key(row[c]);
            buf[c].key = descending ? ~k : k;   /* reversed key order, columns still ascending */
            buf[c].idx = (int32_t)c;
        }
        ncc_pair *sorted = merge_sort(buf, buf + row_len, row_len);
        float *ov = dst_vals + r * row_len;
        int32_t *oi = dst_idx + r * row_len;
        for (int64_t c = 0; c < row_len; ++c) {
            ov[c] = row[sorted[c].idx];
            oi[c] = sorted[c].idx;
        }
    }
    free(buf);
    return NCC_CUSTOMOP_OK;
}

/* heap of the k best pairs kept so far; "better" = larger key, then smaller column.
 * The root is the worst kept pair. Keys here are inverted (~key) so that
 * pair_less(a, b) reads "a is better than b". */
static void heap_sift_down(ncc_pair *h, int64_t n, int64_t i) {
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, worst = i;
        if (l < n && pair_less(&h[worst], &h[l]))
            worst = l;
        if (r < n && pair_less(&h[worst], &h[r]))
            worst = r;
        if (worst == i)
            return;
        ncc_pair t = h[i];
        h[i] = h[worst];
        h[worst] = t;
        i = worst;
    }
}

int ncc_topk_f32(const float *src, int64_t num_rows, int64_t row_len, int64_t k,
                 float *dst_vals, int32_t *dst_idx) {
    if (num_rows < 0 || row_len < 0 || row_len > INT32_MAX || k < 0 || k > row_len)
        return NCC_CUSTOMOP_EDIM;
    if (num_rows > 0 && k > 0 && (!src || !dst_vals || !dst_idx))
        return NCC_CUSTOMOP_ENULL;
    int64_t lo, hi;
    int rc = owned_rows(num_rows, &lo, &hi);
    if (rc)
        return rc;
    if (lo >= hi || k == 0)
        return NCC_CUSTOMOP_OK;
    ncc_pair *heap = (ncc_pair *)malloc(2 * (size_t)k * sizeof(ncc_pair));
    if (!heap)
        return NCC_CUSTOMOP_ENOMEM;
    for (int64_t r = lo; r < hi; ++r) {
        const float *row = src + r * row_len;
        for (int64_t c = 0; c < k; ++c) {
            heap[c].key = ~total_order_key(float_bits(row[c]));
            heap[c].idx = (int32_t)c;
        }
        for (int64_t i = k / 2 - 1; i >= 0; --i)
            heap_sift_down(heap, k, i);
        for (int64_t c = k; c < row_len; ++c) {
            ncc_pair p = {~total_order_key(float_bits(row[c])), (int32_t)c};
            if (pair_less(&p, &heap[0])) {
                heap[0] = p;
                heap_sift_down(heap, k, 0);
            }
        }
        ncc_pair *sorted = merge_sort(heap, heap + k, k);
        float *ov = dst_vals + r * k;
        int32_t *oi = dst_idx + r * k;
        for (int64_t c = 0; c < k; ++c) {
            ov[c] = row[sorted[c].idx];
            oi[c] = sorted[c].idx;
        }
    }
    free(heap);
    return NCC_CUSTOMOP_OK;
}
