"""Standalone walrus tools over the same libraries as walrus_driver.

    coloring_allocator_with_loop IN.json --output OUT.json [--target trn1] [--linear-scan] [--no-spill]
        allocate SBUF/PSUM of a BIR module with its loops kept (lsa, coloring,
        coloring_allocator) and print the peak figures
    full_unroll IN.json --output OUT.json
        unroll every Loop (While/If stay)

Both read and write BIR JSON; any error (bad flags, a missing or corrupt input)
is one ``[NCC_...] <tool>: ...`` line on stderr and exit 70.
"""
from neuronxcc.common.toolshell import ToolParser, run_main
from neuronxcc.walrus.cli import get_target

COLORING = "coloring_allocator_with_loop"
FULL_UNROLL = "full_unroll"


def _coloring(argv):
    from neuronxcc.walrus.bir import load_module, save_module
    from neuronxcc.walrus.registry import PassContext, run_passes
    p = ToolParser(prog=COLORING, description="Allocate SBUF/PSUM of a BIR module, loops kept.")
    p.add_argument("input")
    p.add_argument("--output", required=True)
    p.add_argument("--target", default="trn1")
    p.add_argument("--linear-scan", action="store_true", help="use the linear-scan allocator")
    p.add_argument("--no-spill", action="store_true")
    a = p.parse_args(argv)
    ctx = PassContext(get_target(a.target, COLORING), options={"allocator_spill": not a.no_spill})
    m = load_module(a.input)
    passes = ["lsa", "linear_scan_allocator"] if a.linear_scan else ["lsa", "coloring", "coloring_allocator"]
    run_passes(m, passes, ctx)
    save_module(m, a.output)
    for method, st in ctx.metrics.get("allocation", {}).items():
        for mem in ("SBUF", "PSUM"):
            s = st.get(mem)
            if s:
                print("%s %s: %d values, peak %d bytes/partition (max-live lower bound %d)"
                      % (method, mem, s["values"], s["peak_bytes_per_partition"], s["max_live_lower_bound"]))
        if st.get("spilled"):
            print("spilled to HBM: %s" % ", ".join(st["spilled"]))
    return 0


def _full_unroll(argv):
    from neuronxcc.walrus.bir import load_module, save_module
    from neuronxcc.walrus.passes.transform import full_unroll
    p = ToolParser(prog=FULL_UNROLL, description="Unroll every loop of a BIR module.")
    p.add_argument("input")
    p.add_argument("--output", required=True)
    a = p.parse_args(argv)
    m = load_module(a.input)
    n = full_unroll(m)
    save_module(m, a.output)
    print("unrolled %d loops; %d instructions" % (n, len(m.instructions())))
    return 0


def coloring_allocator_with_loop_main(argv=None):
    return run_main(COLORING, _coloring, argv)


def full_unroll_main(argv=None):
    return run_main(FULL_UNROLL, _full_unroll, argv)
