"""The walrus passes, listed: ``PASSES`` (the pass classes) and ``NOOPS`` (seed names that have
nothing to do in this reimplementation, with the reason ``walrus_driver --list-passes`` prints).

Importing this package registers nothing: the registry (``neuronxcc.walrus.registry``) reads
these two lists once, the first time a pass is asked for.
"""
from neuronxcc.walrus.passes import alloc, lsa, metrics, rotate, sched, simcheck, transform, verify

PASSES = (lsa.LoopStructureAnalysis, lsa.ExperimentalLoopLSA, lsa.AntiDependencyAnalyzer, lsa.DepReduction,
          transform.Unroll, transform.DmaOptimization, rotate.VnSplitter, sched.PreSched, sched.PostSched,
          alloc.Coloring, alloc.ColoringAllocator, alloc.LinearScanAllocator, verify.BirVerifier,
          simcheck.BirSim, metrics.PrintMetrics)

NOOPS = {
    "lower_ac": "the Penguin codegen already emits access patterns in hardware form "
                "(partition-start and free-dim rules are checked by birverifier)",
    "partitioner": "programs target one NeuronCore; there is nothing to partition",
    "bir_splitter": "the Penguin codegen emits hardware-sized instructions; nothing to split",
    "tensorcopy_accel": "not done: DVE and GpSimd share the SBUF port (v2/v3), so moving copies between "
                        "them gains nothing, and ScalarE copies go through fp32 (not bit-exact)",
    "experimental_loop_shift_left": "not implemented (experimental in the original)",
    "shift_left": "not implemented: pre_sched/post_sched already order each stream",
}
