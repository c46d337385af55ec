#!/usr/bin/env python3
"""NKI on birsim: how long a traced flash-attention forward takes to simulate, against numpy doing
the same math (fp32 softmax(q.T k * scale) v per head) in the same run on the same machine.

For each case: trace time, BIR instructions (static) and executed, birsim wall time, birsim's
simulated device latency, numpy wall time, the ratio birsim / numpy, and the max error of the
simulated output against the numpy result (so a fast wrong simulation cannot pass unnoticed).

    scripts/bench_nki.py [--seq 4096] [--d 128] [--heads 1] [--repeat 3]
"""
import argparse
import time

import numpy as np


def numpy_attention(q, k, v, causal, scale):
    out = np.empty((q.shape[0], q.shape[1], q.shape[3], q.shape[2]), np.float32)
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            s = (q[b, h].T @ k[b, h]) * np.float32(scale)
            if causal:
                s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            out[b, h] = (s / s.sum(axis=1, keepdims=True)) @ v[b, h]
    return out


def best(fn, repeat):
    ts = []
    r = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = fn()
        ts.append(time.perf_counter() - t0)
    return min(ts), r


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--d", type=int, default=128)
    ap.add_argument("--heads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    from neuronxcc.nki._trace.run import run_traced
    from neuronxcc.nki.kernels import flash_fwd
    rng = np.random.default_rng(0)
    S, d, H = args.seq, args.d, args.heads
    q = rng.standard_normal((1, H, d, S)).astype(np.float32)
    k = rng.standard_normal((1, H, d, S)).astype(np.float32)
    v = rng.standard_normal((1, H, S, d)).astype(np.float32)
    seed = np.zeros((1,), np.int32)
    print("flash_fwd seq %d, head dim %d, %d head(s), fp32 inputs (bf16 TensorE operands)" % (S, d, H))
    print("%-8s %9s %8s %10s %10s %12s %10s %8s %9s" % ("case", "trace s", "instrs", "executed", "birsim s",
                                                         "device us", "numpy s", "ratio", "max err"))
    for causal in (False, True):
        t0 = time.perf_counter()
        tk = flash_fwd[1, H].trace(q, k, v, seed, use_causal_mask=causal)
        t_trace = time.perf_counter() - t0
        t_sim, (outs, res) = best(lambda: run_traced(tk, [q, k, v, seed], "simulation"), args.repeat)
        t_np, ref = best(lambda: numpy_attention(q, k, v, causal, d ** -0.5), args.repeat)
        err = float(np.max(np.abs(outs[0].astype(np.float32) - ref)))
        print("%-8s %9.3f %8d %10d %10.3f %12.1f %10.3f %8.1f %9.2e" % (
            "causal" if causal else "full", t_trace, len(tk.module.instructions()), res.instructions, t_sim,
            res.total_s * 1e6, t_np, t_sim / t_np, err))


if __name__ == "__main__":
    main()
