"""``cumsum`` as NxD-Inference's sampling code and NxD's HLO helpers call it (our own implementation, the
original's call form)::

    nki_jit()(cumsum)(x, out, axis=1)          # x, out: [rows, n], out-argument style

``out[r, j] = sum(x[r, :j + 1])``. Rows go on partitions 128 at a time (a ragged last block masked), the
row is scanned on the VectorE with ``tensor_tensor_scan`` (``(1 * prev) + x[j]``) in fp32, in chunks of
up to 2048 elements whose running total carries into the next chunk's initial value; the result is cast
to out's dtype. Only the last axis of a 2-D tensor (``axis=1`` or ``-1``), as the original's callers
(which transpose and reshape to that form first) use it.
"""
import numpy as np

import neuronxcc.nki.isa as nisa
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check

__all__ = ["cumsum"]

P = 128
CHUNK = 2048


def cumsum(x, out, axis=1, **kwargs):
    check(len(x.shape) == 2, "cumsum: x must be 2-D [rows, n], got %s" % (tuple(x.shape),))
    check(axis in (1, -1), "cumsum: only the last axis (axis=1) is supported, got axis=%r" % (axis,))
    check(tuple(out.shape) == tuple(x.shape),
          "cumsum: out must have x's shape %s, got %s" % (tuple(x.shape), tuple(out.shape)))
    n, m = x.shape
    c = min(m, CHUNK)
    ip = nl.arange(P)[:, None]
    jf = nl.arange(c)[None, :]
    n_chunks = (m + c - 1) // c
    for i in nl.affine_range((n + P - 1) // P):
        rows = i * P + ip
        ones = nl.full((P, c), 1.0, nl.float32)
        carry = nl.zeros((P, 1), nl.float32)
        for j in nl.sequential_range(n_chunks):
            live = (rows < n) & (j * c + jf < m)
            t = nl.load(x[rows, j * c + jf], mask=live, dtype=nl.float32)
            s = nisa.tensor_tensor_scan(ones, t, carry, np.multiply, np.add, mask=live, dtype=nl.float32)
            if n_chunks > 1:
                carry[...] = nl.copy(s[ip, c - 1 + nl.arange(1)[None, :]], dtype=nl.float32)
            nl.store(out[rows, j * c + jf], value=nl.copy(s, dtype=out.dtype, mask=live), mask=live)
