# cython: boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The max-live lower bound of the SBUF/PSUM allocators (``max_live_lower_bound``).

No allocation that obeys the placement rules of ``_alloc`` (partition starts at multiples of 32
by size, values the PE reads at partition 0, a PSUM value of at most one bank inside one bank)
can reach a lower peak bytes per partition than this bound; the allocation passes and the
benchmarks report the peak against it. The bank term is exact while few values are live (a
bounded branch-and-bound packing, ``_pack_light``); beyond its node budget it is Martello and
Toth's L2 bin-packing bound and the subset-sum terms, which are weaker but still sound.

Python validates; this module assumes valid, contiguous int64 inputs.
"""
import numpy as np
cimport numpy as cnp
from libc.stdlib cimport malloc, free, qsort

ctypedef long long i64

cnp.import_array()

cdef enum:
    MAX_BANK_ITEMS = 64      # the packing terms: evaluated while at most this many values count
    MAX_PACK_NODES = 20000   # search nodes per exact bank packing before the weaker terms stand


cdef int _cmp_i64_desc(const void* a, const void* b) noexcept nogil:
    cdef i64 x = (<i64*>a)[0]
    cdef i64 y = (<i64*>b)[0]
    return -1 if x > y else (1 if x < y else 0)


cdef i64 _stack_bound(i64* items, i64 k, i64 m) noexcept nogil:
    """A lower bound on the tallest of ``m`` stacks holding the ``k`` items: of the m*j + 1
    largest, some stack holds j + 1, at least the j + 1 smallest of them. Sorts ``items``
    (descending)."""
    cdef i64 j, i, t, best = 0
    qsort(items, k, sizeof(i64), _cmp_i64_desc)
    j = 1
    while m * j + 1 <= k:
        t = 0
        for i in range(m * j - j, m * j + 1):
            t += items[i]
        if t > best:
            best = t
        j += 1
    return best




cdef struct Pack:
    i64* items       # descending
    i64* suffix      # suffix[i] = sum of items[i:]
    i64* load        # the heavy banks' loads
    i64 k
    i64 nb           # banks: nb - 1 heavy ones and the light one
    i64 bank
    i64 light        # the light bank's load
    i64 best         # the lightest light bank of a complete packing found (bank + 1: none yet)
    i64 floor        # no packing has a lighter light bank: the search stops on reaching it
    i64 budget       # nodes left; < 0 when the search stopped before finishing


cdef void _pack_dfs(Pack* p, i64 i, i64 heavy) noexcept nogil:
    """Place items[i:] (``heavy``: the heavy banks' total load so far)."""
    cdef i64 x, b, c
    cdef bint dup
    if p.best <= p.floor:
        return
    p.budget -= 1
    if p.budget < 0:
        return
    if i == p.k:
        if p.light < p.best:
            p.best = p.light
        return
    # what is left must fit the heavy banks' room and what the light bank may still take
    if p.suffix[i] > (p.nb - 1) * p.bank - heavy + (p.best - 1 - p.light):
        return
    x = p.items[i]
    for b in range(p.nb - 1):
        if p.load[b] + x > p.bank:
            continue
        dup = False
        for c in range(b):
            if p.load[c] == p.load[b]:   # the same state as putting it in bank c
                dup = True
                break
        if dup:
            continue
        p.load[b] += x
        _pack_dfs(p, i + 1, heavy + x)
        p.load[b] -= x
        if p.best <= p.floor or p.budget < 0:
            return
    if p.light + x < p.best and p.light + x <= p.bank:
        p.light += x
        _pack_dfs(p, i + 1, heavy)
        p.light -= x


cdef i64 _pack_light(i64* items, i64 k, i64 nb, i64 bank, i64 floor, i64* suffix, i64* load,
                     i64* budget) noexcept nogil:
    """The lightest load the last of ``nb`` banks can have when the ``k`` items (descending, each
    at most one bank) are packed into them, by branch and bound, stopping at ``floor`` (a known
    lower bound); bank + 1 when they do not fit. ``budget``: nodes left, < 0 on return when the
    search did not finish (the result then proves nothing)."""
    cdef Pack p
    cdef i64 i
    suffix[k] = 0
    for i in range(k - 1, -1, -1):
        suffix[i] = suffix[i + 1] + items[i]
    for i in range(nb):
        load[i] = 0
    p.items, p.suffix, p.load, p.k, p.nb, p.bank = items, suffix, load, k, nb, bank
    p.light, p.best, p.floor, p.budget = 0, bank + 1, floor, budget[0]
    _pack_dfs(&p, 0, 0)
    budget[0] = p.budget
    return p.best


cdef i64 _light_floor(i64* items, i64 k, i64 nb, i64 total, i64 m, i64 bank) noexcept nogil:
    """A lower bound on the last bank's load when the items (descending) take ``nb`` banks: the
    smallest item, total - (nb - 1) * M (M: the most one bank holds), and the smallest of the
    largest items no two of which fit one bank, when there are ``nb`` of them."""
    cdef i64 s = items[k - 1], n1 = 1
    if total - (nb - 1) * m > s:
        s = total - (nb - 1) * m
    while n1 < k and items[n1] + items[n1 - 1] > bank:
        n1 += 1
    if n1 == nb and items[n1 - 1] > s:
        s = items[n1 - 1]
    return s

cdef i64 _bank_bound(i64* items, i64 k, i64 full, i64 bank, i64 stop, unsigned long long* reach,
                     i64* scratch) noexcept nogil:
    """A lower bound on the peak offset of ``full`` whole banks plus the ``k`` items (each at
    most one bank, each inside one bank; ``reach``: scratch of bank // 64 + 1 words, ``scratch``:
    of 2 * k + 2 words).

    Putting the lightest bank last, the peak is (full + N - 1) banks plus that bank's load, N the
    banks the items take. N >= Martello and Toth's L2 bound for bin packing and >= total / M,
    where M is the largest sum of items one bank can hold (a subset sum, by a bitset); the last
    load >= ``_light_floor``. Then the exact packing (``_pack_light``) raises N while N banks
    cannot hold the items and finds the lightest last bank; when its node budget runs out the
    figures proved so far stand. Not searched when first fit decreasing already packs the items
    no higher than ``stop`` (the bound cannot matter) or as low as the cheap terms. Sorts
    ``items`` (descending)."""
    cdef i64 i, j, a, n1, n2, s2, s3, need, best = 0, total = 0, m, q, r, w, nf, upper, light, lo
    cdef i64 half = bank // 2, nw = bank // 64 + 1, budget = MAX_PACK_NODES
    cdef unsigned long long val
    if k == 0:
        return full * bank
    qsort(items, k, sizeof(i64), _cmp_i64_desc)
    # alpha = 0, then every distinct item size <= half a bank
    a = 0
    j = k
    while True:
        n1 = n2 = s2 = s3 = 0
        for i in range(k):
            if items[i] > bank - a:
                n1 += 1
            elif items[i] > half:
                n2 += 1
                s2 += items[i]
            elif items[i] >= a:
                s3 += items[i]
        need = s3 - (n2 * bank - s2)
        need = n1 + n2 + ((need + bank - 1) // bank if need > 0 else 0)
        if need > best:
            best = need
        while j > 0 and (items[j - 1] <= a or items[j - 1] > half):
            if items[j - 1] > half:
                j = 0
                break
            j -= 1
        if j == 0:
            break
        a = items[j - 1]
    # M: the largest subset sum <= bank (bit c of reach: some subset sums to c)
    for w in range(nw):
        reach[w] = 0
    reach[0] = 1
    for i in range(k):
        total += items[i]
        q = items[i] // 64
        r = items[i] % 64
        w = nw - 1
        while w >= q:
            val = reach[w - q] << r
            if r and w - q - 1 >= 0:
                val |= reach[w - q - 1] >> (64 - r)
            reach[w] |= val
            w -= 1
    m = 0
    for i in range(bank, 0, -1):
        if (reach[i // 64] >> (i % 64)) & 1:
            m = i
            break
    if m > 0 and (total + m - 1) // m > best:
        best = (total + m - 1) // m
    lo = _light_floor(items, k, best, total, m, bank)
    # first fit decreasing: a packing, so the exact peak is at most its peak
    nf = 0
    for i in range(k):
        j = 0
        while j < nf and scratch[j] + items[i] > bank:
            j += 1
        if j == nf:
            scratch[nf] = 0
            nf += 1
        scratch[j] += items[i]
    light = scratch[0]
    for j in range(nf):
        if scratch[j] < light:
            light = scratch[j]
    upper = (full + nf - 1) * bank + light
    if upper <= stop or upper == (full + best - 1) * bank + lo:
        return (full + best - 1) * bank + lo
    while best <= nf:
        light = _pack_light(items, k, best, bank, lo, scratch, scratch + k + 1, &budget)
        if budget < 0:
            break                       # unfinished: N and the floor proved so far stand
        if light <= bank:
            return (full + best - 1) * bank + light
        best += 1                       # N banks cannot hold them
        lo = _light_floor(items, k, best, total, m, bank)
    return (full + best - 1) * bank + lo


def max_live_lower_bound(const i64[::1] start, const i64[::1] end, const i64[::1] size,
                         const i64[::1] nparts, i64 num_partitions, pin_zero=None, i64 bank_bytes=0):
    """A lower bound on the peak bytes per partition of any allocation that obeys
    the same placement rules (partition starts at multiples of 32 by size; values
    in ``pin_zero`` and values over half the partitions start at partition 0; with
    ``bank_bytes``, a value of at most one bank lies inside one bank and a larger one
    starts on a bank boundary).

    At every position t, with q(v) = ceil(nparts/32) quarters taken by v:
      * the quarters hold sum size*q between them: >= ceil(sum size*q / nq);
      * every value starting at partition 0 for sure shares quarter 0: >= their sum;
      * on four quarters, the values in all four plus the tallest of four stacks holding
        the unpinned values of at most 32 partitions (``_stack_bound``, while at most
        ``MAX_BANK_ITEMS`` of these are live);
      * banked: those values are a bin packing of partition 0's banks (a larger value
        is whole banks plus a remainder inside one): ``_bank_bound`` (evaluated while at
        most ``MAX_BANK_ITEMS`` of them are live; over that only the other terms count);
    and no allocation is below the largest value.
    """
    cdef Py_ssize_t n = start.shape[0], i, v
    cdef i64 nq = (num_partitions + 31) // 32
    ev_pos = np.concatenate([np.asarray(start), np.asarray(end) + 1])
    ev_kind = np.concatenate([np.zeros(n, np.int64), np.ones(n, np.int64)])  # 0 = start
    ev_val = np.concatenate([np.arange(n), np.arange(n)]).astype(np.int64)
    order = np.lexsort((-ev_kind, ev_pos))  # ends (kind 1) before starts at the same position
    cdef cnp.int64_t[::1] o = order.astype(np.int64)
    cdef cnp.int64_t[::1] kind = ev_kind
    cdef cnp.int64_t[::1] val = ev_val
    cdef cnp.int64_t[::1] pin = (np.zeros(n, np.int64) if pin_zero is None
                                 else np.ascontiguousarray(pin_zero, dtype=np.int64))
    cdef i64 area = 0, zero = 0, best = 0, cur, q, sgn, nlive = 0, k, full, j, u, nfree = 0, every = 0
    cdef i64* live = NULL
    cdef i64* where = NULL
    cdef i64* items = <i64*>malloc((MAX_BANK_ITEMS + 1) * sizeof(i64))
    cdef unsigned long long* reach = NULL
    cdef i64* scratch = NULL
    cdef i64* free1 = <i64*>malloc((n + 1) * sizeof(i64))     # live one-quarter values, any quarter
    cdef i64* where1 = <i64*>malloc((n + 1) * sizeof(i64))
    for v in range(n):
        if size[v] > best:
            best = size[v]
    if bank_bytes > 0:
        live = <i64*>malloc((n + 1) * sizeof(i64))
        where = <i64*>malloc((n + 1) * sizeof(i64))
        reach = <unsigned long long*>malloc((bank_bytes // 64 + 1) * sizeof(unsigned long long))
        scratch = <i64*>malloc((2 * MAX_BANK_ITEMS + 4) * sizeof(i64))
    try:
        for i in range(2 * n):
            v = val[o[i]]
            sgn = 1 if kind[o[i]] == 0 else -1
            q = (nparts[v] + 31) // 32
            area += sgn * size[v] * q
            cur = 0
            if nq == 4 and (q == 4 or (q == 1 and not pin[v])):
                # the quarters as four stacks: values over 96 partitions sit in all four, each
                # unpinned value of at most 32 partitions in one of them
                if q == 4:
                    every += sgn * size[v]
                elif sgn > 0:
                    where1[v] = nfree
                    free1[nfree] = v
                    nfree += 1
                else:
                    nfree -= 1
                    u = free1[nfree]
                    free1[where1[v]] = u
                    where1[u] = where1[v]
                if sgn > 0 and 4 < nfree <= MAX_BANK_ITEMS:
                    for j in range(nfree):
                        items[j] = size[free1[j]]
                    cur = every + _stack_bound(items, nfree, 4)
            if nparts[v] > num_partitions // 2 or pin[v]:
                zero += sgn * size[v]
                if bank_bytes > 0:
                    if sgn > 0:
                        where[v] = nlive
                        live[nlive] = v
                        nlive += 1
                        if nlive <= MAX_BANK_ITEMS:
                            k = full = 0
                            for j in range(nlive):
                                u = live[j]
                                full += size[u] // bank_bytes if size[u] > bank_bytes else 0
                                if size[u] <= bank_bytes:
                                    items[k] = size[u]
                                    k += 1
                                elif size[u] % bank_bytes:
                                    items[k] = size[u] % bank_bytes
                                    k += 1
                            j = _bank_bound(items, k, full, bank_bytes, cur if cur > best else best, reach, scratch)
                            if j > cur:
                                cur = j
                    else:
                        nlive -= 1
                        u = live[nlive]
                        live[where[v]] = u
                        where[u] = where[v]
            if (area + nq - 1) // nq > cur:
                cur = (area + nq - 1) // nq
            if zero > cur:
                cur = zero
            if cur > best:
                best = cur
    finally:
        free(live)
        free(where)
        free(items)
        free(reach)
        free(scratch)
        free(free1)
        free(where1)
    return best
