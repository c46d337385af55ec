"""How an elementwise kernel lays a flat run of n contiguous elements (a value whose dims all
collapsed into one) on the partitions.

* 128 partitions when 128 divides n, else the largest divisor of n from 64 to 128 (a [260, 300]
  value is 78000 = 125 x 624 elements: one tile step, not the 312 one-partition steps of 250
  elements it used to take);
* else, for a run longer than one tile's free size, a 128-partition head of n - n % 128 elements and
  a one-partition tail (two kernels);
* else one partition (a short run: one tile either way).
"""
from neuronxcc.starfish.penguin.expr import apply_view

PMAX = 128


def flat_rows(n):
    """Partitions a flat run of n elements is spread over (1: none divides it well)."""
    if n <= PMAX:
        return 1
    for d in range(PMAX, PMAX // 2 - 1, -1):
        if n % d == 0:
            return d
    return 1


def head_tail(x, out, n, free):
    """[(x, out)] of the 128-partition head and the tail of the flat run, or None when the run is
    spread by a divisor, is short (<= FREE) or a leaf cannot be sliced."""
    if flat_rows(n) > 1 or n <= free:
        return None
    m = n - n % PMAX
    parts = []
    for lo, hi in ((0, m), (m, n)):
        xs = apply_view(x, lambda v: v.slice((lo,), (hi,), (1,)))
        if xs is None:
            return None
        parts.append((xs, out.slice((lo,), (hi,), (1,))))
    return parts


def spread(x, out, n):
    """(x, out, shape) of the flat run as [rows, n / rows]."""
    rows = flat_rows(n)
    inner = n // rows
    return apply_view(x, lambda v: v.split_axis(0, inner)), out.split_axis(0, inner), (rows, inner)
