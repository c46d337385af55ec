"""The one table of walrus pass names (the seeds' spelling).

``CompileCommand.collectWalrusPipeline`` accumulates names from this table into
``walrus_passes``; ``walrus_driver --walrus-passes`` resolves the same names in
its pass registry (``neuronxcc.walrus.registry``). Order here is the canonical
pipeline order the seed lists.
"""

# name -> one-line description
PASS_NAMES = {
    "lsa": "loop-structure analysis: loop nests, trip counts, induction variables",
    "coloring": "interference-graph construction over on-chip values",
    "unroll": "unroll loops below a trip-count/size threshold",
    "lower_ac": "lower access patterns to hardware form (partition starts, free-dim limits)",
    "pre_sched": "list scheduling across engines before allocation",
    "partitioner": "split work across partitions/engines",
    "bir_splitter": "split oversized instructions into hardware-sized pieces",
    "coloring_allocator": "SBUF/PSUM allocation by interference-graph coloring",
    "linear_scan_allocator": "SBUF/PSUM allocation by linear scan",
    "dma_optimization": "coalesce and merge DMA transfers",
    "anti_dependency_analyzer": "dependence analysis over address ranges (RAW/WAR/WAW) into semaphores",
    "vn_splitter": "split value numbers whose live ranges can be separated",
    "post_sched": "list scheduling across engines after allocation",
    "tensorcopy_accel": "move tensor copies to the cheapest engine",
    "dep_reduction": "transitive reduction of semaphore waits",
    "print_metrics": "instruction counts, SBUF/PSUM peak, estimated time",
    "birverifier": "verify the BIR module",
    "bir_sim": "run birsim on the golden inputs and compare with the goldens",
    # experimental alternatives selected by flags
    "experimental_loop_lsa": "experimental loop-aware lsa",
    "experimental_loop_shift_left": "experimental loop shift-left",
    "shift_left": "hoist instructions earlier in their engine stream",
}

EXPERIMENTAL = ("experimental_loop_lsa", "experimental_loop_shift_left", "shift_left")
