# cython: language_level=3, boundscheck=False, wraparound=False
"""birsim's scan kernel (Executor.op_tensor_tensor_scan): per partition, in order,
out[p, i] = op1(op0(d0[p, i], out[p, i - 1]), d1[p, i]) in fp32 from out[p, -1] = init[p]."""

cdef inline float _scan_op(int op, float a, float b) noexcept nogil:
    if op == 0:
        return a + b
    if op == 1:
        return a - b
    if op == 2:
        return a * b
    if op == 3:
        return a if a > b else b
    if op == 4:
        return a if a < b else b
    return b


SCAN_OPS = {"add": 0, "subtract": 1, "mult": 2, "max": 3, "min": 4, "bypass": 5}


def scan_f32(const float[:, ::1] d0, const float[:, ::1] d1, const float[::1] init, int op0, int op1,
             float[:, ::1] out):
    """out[p, i] = op1(op0(d0[p, i], out[p, i-1]), d1[p, i]), out[p, -1] = init[p] (fp32, in order)."""
    cdef Py_ssize_t p, i, P = d0.shape[0], N = d0.shape[1]
    cdef float prev
    with nogil:
        for p in range(P):
            prev = init[p]
            for i in range(N):
                prev = _scan_op(op1, _scan_op(op0, d0[p, i], prev), d1[p, i])
                out[p, i] = prev
