"""The walrus passes. Importing this package registers every pass name.

Real passes live in their own modules; the seed names that have nothing to do
in this reimplementation are registered here as no-ops with the reason, which
``walrus_driver --list-passes`` prints.
"""
from neuronxcc.walrus.registry import register_noop

_NOOPS = {
    "lower_ac": "the Penguin codegen already emits access patterns in hardware form "
                "(partition-start and free-dim rules are checked by birverifier)",
    "partitioner": "programs target one NeuronCore; there is nothing to partition",
    "bir_splitter": "the Penguin codegen emits hardware-sized instructions; nothing to split",
    "tensorcopy_accel": "not done: DVE and GpSimd share the SBUF port (v2/v3), so moving copies between "
                        "them gains nothing, and ScalarE copies go through fp32 (not bit-exact)",
    "experimental_loop_shift_left": "not implemented (experimental in the original)",
    "shift_left": "not implemented: pre_sched/post_sched already order each stream",
}

from neuronxcc.walrus.passes import lsa, alloc, sched, metrics, verify, transform, simcheck, rotate  # noqa: F401,E402

for _name, _why in _NOOPS.items():
    register_noop(_name, _why)
