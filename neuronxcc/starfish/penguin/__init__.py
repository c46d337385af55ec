"""Penguin: the tensor-level middle-end between HLO and BIR.

Modules:
  ir           the Penguin IR (Graph / Op / Value) and its JSON file format
  hlo2penguin  HLO -> Penguin (the HLOToTensorizer tool main)
  views        strided views: shape ops as access patterns
  expr         lazy elementwise expressions (fusion)
  emit         BIR emission: names, unallocated memlocs, tiled loop nests
  tiles        one tile of a fused expression -> ACT/DVE/POOL instructions
  kernels      the tiled kernels (elementwise, reduce, matmul with fused epilogues, concat, pad)
  rows         row fusion: last-axis reductions computed inside their consumer's tiles
  indexing     registers: dynamic-slice/update-slice, gather, scatter
  control      while / conditional as BIR While / If
  windows      reduce-window, cumulative scans, convolution, sort / top-k (custom ops)
  codegen      graph walker: what is materialised where, one kernel per value
  frontend     run_frontend(penguin.json, sg_dir) -> sg_dir/bir.json (the Frontend job)
  io_transpose write_io_transposes(bir.json, io_transposes.json) (StaticIOTranspose)
"""
