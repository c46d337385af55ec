"""Vision kernels of ``neuronxcc.nki.kernels`` (signatures and tensor layouts of the original's public kernels;
our own implementations).

``resize_nearest_fixed_dma_kernel[b](data_tensor, out_shape)``: data [b, in_h, in_w, c] (NHWC) resized to
out_shape (b, out_h, out_w, c) by nearest neighbour, ``out[n, i, j] = data[n, floor(i * in_h / out_h),
floor(j * in_w / out_w)]`` (the scale products in fp32, as the original's reference computes them). The
source pixel of each output pixel is a compile-time table (an HBM constant); 128 output pixels at a time
gather their rows of c channels by one indirect DMA and store them contiguously.

``select_and_scatter_kernel(operand_tensor, source_tensor)``: the gradient of a 3x3 / stride 2 / padding 1 max
pool, operand [n, c, h, w], source [n, c, src_h, src_w] (src = (h + 2 - 3) // 2 + 1): every source element is
added to out at the position its window selects in operand, the window's maximum (on equal values the first
window position in row-major order, as the original kernel picks the smallest window index and its public test's
argmax golden does; padding is never selected), out [n, c, h, w] starts at zero. Rows (n, c) go 128 per tile on partitions; the padded operand lives in SBUF, the nine window offsets are
strided views of it; the selection and the scatter-add run on the VectorE in fp32.
"""
import numpy as np

from neuronxcc import nki
import neuronxcc.nki.language as nl
from neuronxcc.nki._private_kernels.flash_core import check

__all__ = ["resize_nearest_fixed_dma_kernel", "select_and_scatter_kernel"]

P = 128
_LOW = -3.0e38          # the padding of the max pool: below any value, never selected


@nki.jit
def resize_nearest_fixed_dma_kernel(data_tensor, out_shape):
    """Nearest-neighbour resize (NHWC): see the module doc."""
    in_b, in_h, in_w, in_c = data_tensor.shape
    out_b, out_h, out_w, out_c = (int(x) for x in out_shape)
    check(in_b == out_b, "resize_nearest_fixed_dma_kernel: input and output batch must be equal")
    check(in_c == out_c, "resize_nearest_fixed_dma_kernel: input and output channels must be equal")
    out = nl.ndarray((out_b, out_h, out_w, out_c), dtype=data_tensor.dtype, buffer=nl.shared_hbm)
    h_map = np.floor(np.arange(out_h, dtype=np.float32) * np.float32(in_h / out_h)).astype(np.int64)
    w_map = np.floor(np.arange(out_w, dtype=np.float32) * np.float32(in_w / out_w)).astype(np.int64)
    src = (np.minimum(h_map, in_h - 1)[:, None] * in_w + np.minimum(w_map, in_w - 1)[None, :]).reshape(-1, 1)
    n_out = out_h * out_w
    table = nl.shared_constant(src.astype(np.int32), dtype=nl.int32)
    data = data_tensor.reshape((in_b, in_h * in_w, in_c))
    dst = out.reshape((out_b, n_out, out_c))
    ip, jf, j1 = nl.arange(P)[:, None], nl.arange(in_c)[None, :], nl.arange(1)[None, :]

    def batch(b):
        for t in nl.affine_range((n_out + P - 1) // P):
            rows = t * P + ip
            live = rows < n_out
            idx = nl.load(table[rows, j1], mask=live)
            pix = nl.load(data[b][idx[ip, 0], jf], mask=live)
            nl.store(dst[b, rows, jf], value=pix, mask=live)
    if nl.program_ndim() >= 1 and nl.num_programs(0) == in_b:
        batch(nl.program_id(0))
    else:
        for b in nl.affine_range(in_b):
            batch(b)
    return out


@nki.jit
def select_and_scatter_kernel(operand_tensor, source_tensor):
    """Max-pool (3x3, stride 2, padding 1) gradient scatter: see the module doc."""
    N, C, H, W = operand_tensor.shape
    sn, sc, sh, sw = source_tensor.shape
    check(N == sn and C == sc, "select_and_scatter_kernel: operand and source must agree on n and c")
    check((H + 2 - 3) // 2 + 1 == sh and (W + 2 - 3) // 2 + 1 == sw,
          "select_and_scatter_kernel: source must be [%d, %d, %d, %d] for a 3x3 / 2 window with padding 1, got %s"
          % (N, C, (H - 1) // 2 + 1, (W - 1) // 2 + 1, tuple(source_tensor.shape)))
    out = nl.ndarray((N, C, H, W), dtype=operand_tensor.dtype, buffer=nl.shared_hbm)
    rows_n = N * C
    op = operand_tensor.reshape((rows_n, H, W))
    src_v = source_tensor.reshape((rows_n, sh, sw))
    dst = out.reshape((rows_n, H, W))
    ip = nl.arange(P)[:, None, None]
    ih, iw = nl.arange(H)[None, :, None], nl.arange(W)[None, None, :]
    oh, ow = nl.arange(sh)[None, :, None], nl.arange(sw)[None, None, :]
    offsets = [(kh, kw) for kh in range(3) for kw in range(3)]
    for t in nl.affine_range((rows_n + P - 1) // P):
        rows = t * P + ip
        live = rows < rows_n
        pad = nl.full((P, H + 2, W + 2), _LOW, nl.float32)
        pad[ip, 1 + ih, 1 + iw] = nl.load(op[rows, ih, iw], mask=live, dtype=nl.float32)
        src = nl.load(src_v[rows, oh, ow], mask=live, dtype=nl.float32)
        cands = [nl.copy(pad[ip, kh + 2 * oh, kw + 2 * ow], dtype=nl.float32) for kh, kw in offsets]
        m = cands[0]
        for c in cands[1:]:
            m = nl.maximum(m, c, dtype=nl.float32)
        rem = nl.full((P, sh, sw), 1.0, nl.float32)          # 1 while the window has not selected yet
        acc = nl.zeros((P, H + 2, W + 2), nl.float32)
        for (kh, kw), c in zip(offsets, cands):             # the first maximum in row-major order wins
            sel = nl.multiply(nl.equal(c, m, dtype=nl.float32), rem, dtype=nl.float32)
            rem = nl.subtract(rem, sel, dtype=nl.float32)
            win = acc[ip, kh + 2 * oh, kw + 2 * ow]
            acc[ip, kh + 2 * oh, kw + 2 * ow] = nl.add(win, nl.multiply(sel, src, dtype=nl.float32),
                                                       dtype=nl.float32)
        nl.store(dst[rows, ih, iw], value=nl.copy(acc[ip, 1 + ih, 1 + iw], dtype=out.dtype), mask=live)
    return out
