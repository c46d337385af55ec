"""Placing live values in SBUF / PSUM: the typed allocators' driver.

Owns: ``memory_params`` (capacity per partition, alignment, bank bytes of a memory on a target)
and ``place`` (offsets and partition starts for a list of live values by graph colouring or the
linear scan, ``_alloc``), shared by the allocation passes and vn_splitter's fit check.
"""
import logging

import numpy as np

from neuronxcc import errors
from neuronxcc.walrus import _alloc

log = logging.getLogger("neuronxcc.walrus")

MAX_INTERFERENCE_EDGES = 20_000_000   # ~320 MB of CSR; beyond it coloring falls back to linear scan
MAX_GHOSTS = 32   # freed placements the reuse-distance placement remembers (older ones count as idle)
REUSE_ROUNDS = 8  # reuse-distance placements tried before the lowest-offset one stands


def memory_params(target, memory):
    """(capacity bytes per partition, align, bank bytes) for SBUF / PSUM."""
    if memory == "PSUM":
        return target.psum_partition_bytes, 4, target.psum_bank_bytes
    return target.sbuf_usable_bytes, 4, 0


def arrays(vals, pack):
    """The (start, end, size, nparts, pinned) int64 arrays of ``vals`` the typed allocators read."""
    start = np.array([v.start for v in vals], np.int64)
    end = np.array([v.end for v in vals], np.int64)
    size = np.array([v.size for v in vals], np.int64)
    nparts = np.array([v.nparts for v in vals], np.int64)
    pin = np.array([1 if (v.pe or not pack) else 0 for v in vals], np.int64)
    return start, end, size, nparts, pin


def color_orders(start, size, nparts, pin, num_partitions):
    """The colouring orders ``place`` tries (it keeps the lowest peak): largest first by bytes x
    partitions; by start (interval-graph order); largest first by bytes x the partition quarters
    a value blocks (all four for one pinned to partition 0 or over half the partitions), which
    places the values that need every quarter before the narrow ones that could fill any."""
    quarters = np.where((nparts > num_partitions // 2) | (pin == 1), 4, (nparts + 31) // 32)
    return (np.lexsort((start, -(size * nparts))), np.lexsort((-(size * nparts), start)),
            np.lexsort((start, -(size * quarters))))


def place(vals, method, target, memory, pack=True, graph=None, ready=None, info=None):
    """Run the typed allocator. Returns (offsets, pstarts, failed index or -1).

    ``ready`` ({name: position}, the position where each value's producer has its own inputs):
    once placed, the values are placed again within the peak just reached, each in the bytes
    whose last use is furthest in the past (``reuse_placement``); the peak never grows. ``info``
    (a dict) gets ``reuse_distance_moved``: how many values that moved, None when it did not fit."""
    cap, align, bank = memory_params(target, memory)
    n = len(vals)
    off = np.zeros(n, np.int64)
    ps = np.zeros(n, np.int64)
    if n == 0:
        return off, ps, -1
    start, end, size, nparts, pin = arrays(vals, pack)
    for i, v in enumerate(vals):
        if v.nparts > target.num_partitions:
            raise errors.OutOfMemoryError("%s '%s' needs %d partitions; the target has %d"
                                          % (memory, v.name, v.nparts, target.num_partitions))
    if method == "coloring" and graph is None and \
            _alloc.interference_edge_count(start, end) > MAX_INTERFERENCE_EDGES:
        log.info("coloring_allocator: %s interference graph over %d edges; using the linear scan",
                 memory, MAX_INTERFERENCE_EDGES)
        method = "linear_scan"
    if method == "coloring":
        if graph is None:
            graph = _alloc.interference_graph(start, end)
        indptr, ind = graph
        best = None
        for order in color_orders(start, size, nparts, pin, target.num_partitions):
            o2 = np.zeros(n, np.int64)
            p2 = np.zeros(n, np.int64)
            f = _alloc.color_allocate(indptr, ind, order.astype(np.int64), size, nparts, pin, cap, align, bank,
                                      target.num_partitions, o2, p2)
            peak = int((o2 + size).max()) if f < 0 else None
            if best is None or (peak is not None and (best[3] is None or peak < best[3])):
                best = (o2, p2, f, peak)
        off, ps, failed = best[0], best[1], best[2]
    else:
        failed = _alloc.linear_scan_allocate(start, end, size, nparts, pin, cap, align, bank,
                                             target.num_partitions, off, ps)
    if ready is not None and failed < 0:
        r = np.array([ready.get(v.name, -1) for v in vals], np.int64)
        got = reuse_placement(start, end, size, nparts, pin, r, int((off + size).max()), align, bank,
                              target.num_partitions)
        if got is not None:
            off, ps = got[0], got[1]
        if info is not None:
            info["reuse_distance_moved"] = None if got is None else got[2]
    return off, ps, int(failed)


def reuse_placement(start, end, size, nparts, pin, ready, capacity, align, bank, num_partitions):
    """(offsets, pstarts, values moved off their lowest offset) of a placement within
    ``capacity`` where each value sits in the bytes idle longest
    (``_alloc.reuse_distance_allocate``), or None when none fits.

    Moving values off their lowest offset can fragment memory so that a later value no longer
    fits under the peak; then the moved values live where it failed keep their lowest offset in
    the next round (at most ``REUSE_ROUNDS`` rounds)."""
    n = len(start)
    prefer = np.ones(n, np.int64)
    off = np.zeros(n, np.int64)
    ps = np.zeros(n, np.int64)
    moved = np.zeros(n, np.int64)
    for _ in range(REUSE_ROUNDS):
        f = _alloc.reuse_distance_allocate(start, end, size, nparts, pin, ready, prefer, capacity, align, bank,
                                           num_partitions, MAX_GHOSTS, off, ps, moved)
        if f < 0:
            log.info("reuse-distance placement: %d of %d values moved off their lowest offset (round %d)",
                     int(moved.sum()), n, _ + 1)
            return off, ps, int(moved.sum())
        live = (moved == 1) & (start <= start[f]) & (end >= start[f])
        if not live.any():
            live = (moved == 1) & (start <= start[f])
            if not live.any():
                return None
        prefer[live] = 0
    log.info("reuse-distance placement: no fit within %d B after %d rounds", capacity, REUSE_ROUNDS)
    return None
