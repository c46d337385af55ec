#!/usr/bin/env python3
"""The flash-attention forward kernel (neuronxcc.nki.kernels.flash_fwd) simulated on birsim at long
sequences, against numpy computing the same attention (fp32 softmax(q^T k / sqrt(d)) v, the causal
mask where asked) in the same run. Prints, per case: trace time and static BIR instruction count,
simulate_kernel wall time, numpy wall time, their ratio, birsim's simulated device latency, and the
max abs error against numpy (float64).

    python scripts/bench_nki_flash.py [--seq 4096] [--d 128] [--heads 1]
"""
import argparse
import math
import time

import numpy as np


def numpy_attention(q, k, v, causal):
    s = q.T @ k / np.float32(math.sqrt(q.shape[0]))
    if causal:
        s = np.where(np.tri(s.shape[0], s.shape[1], dtype=bool), s, np.float32(-np.inf))
    p = np.exp(s - s.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)) @ v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=1)
    a = ap.parse_args()
    from neuronxcc import nki
    from neuronxcc.nki._trace import trace_kernel
    from neuronxcc.nki.kernels.attention import flash_fwd
    from neuronxcc.starfish.birsim import simulate
    rng = np.random.default_rng(0)
    h, d, s = a.heads, a.d, a.seq
    q, k = (rng.standard_normal((1, h, d, s)).astype(np.float32) for _ in range(2))
    v = rng.standard_normal((1, h, s, d)).astype(np.float32)
    seed = np.zeros((1,), np.int32)
    print("flash_fwd on birsim vs numpy, seq %d, head dim %d, %d head(s), fp32 (mixed_precision=False)" % (s, d, h))
    for causal in (False, True):
        kw = {"use_causal_mask": causal, "mixed_precision": False}
        t0 = time.perf_counter()
        tk = trace_kernel(flash_fwd, [q, k, v, seed], kw, grid=(1, h))
        t1 = time.perf_counter()
        res = simulate(tk.module, [q, k, v, seed])
        t2 = time.perf_counter()
        o = nki.simulate_kernel(flash_fwd[1, h], q, k, v, seed, **kw)[0]
        t3 = time.perf_counter()
        ref = [numpy_attention(q[0, j], k[0, j], v[0, j], causal) for j in range(h)]
        t4 = time.perf_counter()
        err = max(float(np.abs(o[0, j].astype(np.float64) - ref[j]).max()) for j in range(h))
        n = sum(1 for _ in tk.module.instructions())
        print("  causal=%-5s trace %.2fs (%d BIR instructions)  simulate_kernel %.2fs  numpy %.2fs  "
              "ratio %.2fx  simulated device time %.1f us  max |err| %.1e"
              % (causal, t1 - t0, n, t3 - t2, t4 - t3, (t3 - t2) / max(t4 - t3, 1e-9), res.total_s * 1e6, err))


if __name__ == "__main__":
    main()
