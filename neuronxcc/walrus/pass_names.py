"""The walrus pass table: names (the seeds' spelling), gates, options, analyses.

Owns: the one declaration of every walrus pass, in the canonical pipeline
order: its description; its *gate* (when the default pipeline of
``neuronx-cc compile`` includes it: an opt-level range, compile flags that
must be on or off, the allocator it belongs to); the *options* it reads from
``PassContext.options`` with their defaults (the context refuses any other
key); the cached *analyses* it reads and those it keeps valid when it changes
the module (the runner drops the others); and the one check of pass names.

Readers: ``WalrusDriver.walrusPassesFor`` (the default pipeline for a compile,
``default_pipeline``), the registry (``registry.register`` refuses a pass not
in the table; ``PassContext`` takes its option defaults from here; the
runner invalidates analyses from ``preserves``), ``walrus_driver
--list-passes``.

Kept free of imports from the rest of walrus: the driver reads it at start-up.
"""
from neuronxcc import errors


class PassSpec:
    __slots__ = ("name", "description", "min_opt", "flags_on", "flags_off", "allocator", "verifier",
                 "options", "needs", "preserves")

    def __init__(self, name, description, min_opt=0, flags_on=(), flags_off=(), allocator=None,
                 verifier=False, options=None, needs=(), preserves=()):
        self.name, self.description = name, description
        self.min_opt = min_opt            # in the default pipeline from this -O level
        self.flags_on = tuple(flags_on)   # compile flags (argparse dests) that must be set
        self.flags_off = tuple(flags_off)  # ... that must not be set
        self.allocator = allocator        # 'coloring' | 'linear-scan': only with that allocator
        self.verifier = verifier          # dropped by --internal-backend-options=--enable-verifier=false
        self.options = dict(options or {})  # PassContext.options keys it reads -> default
        self.needs = tuple(needs)         # cached analyses it reads (PassContext.analysis)
        self.preserves = tuple(preserves)  # cached analyses still valid after it changed the module

    def gated_in(self, opt, flags, allocator, verifier):
        """Whether the default pipeline at -O``opt`` with ``flags`` (set of set flag dests) runs it."""
        return (opt >= self.min_opt and all(f in flags for f in self.flags_on)
                and not any(f in flags for f in self.flags_off)
                and (self.allocator is None or self.allocator == allocator)
                and (verifier or not self.verifier))


LOOP_LSA = "internal_experimental_loop_lsa"
SHIFT_LEFT = "internal_enable_shift_left"
NO_BIR_SIM = "internal_disable_bir_sim"
SIM_OPTIONS = {"sim_budget_instructions": 200_000,   # bir_sim: skip above this many dynamic instructions
               "sim_budget_bytes": 64 << 20}         # bir_sim: skip when I/O tensors exceed this many bytes
ALLOC_OPTIONS = {"allocator_spill": True, "partition_packing": True, "pipeline_intervals": True,
                 "reuse_distance": True}
SYNC = ("sync_deps",)
# The passes that re-derive the waits (``deps.synchronize``): they keep the dependences of the
# instrumented program and store its dependence graph when it is the graph of their result
# (``depgraph.store``; ``depgraph.analysis`` checks the instruction sequence before using it).
SYNC_GRAPH = SYNC + ("deps",)

PIPELINE = (
    PassSpec("lsa", "loop-structure analysis: loop nests, trip counts, induction variables",
             flags_off=(LOOP_LSA,), needs=("lsa",)),
    PassSpec("experimental_loop_lsa", "experimental loop-aware lsa", flags_on=(LOOP_LSA,), needs=("lsa",)),
    PassSpec("unroll", "unroll loops below a trip-count/size threshold", min_opt=2,
             # default 1: only degenerate loops go, so the instruction count never depends on tensor
             # sizes (a loop of 2 tiles at one size is a loop of 32 at another)
             options={"unroll_max_trip": 1, "unroll_max_instructions": 64}),
    PassSpec("lower_ac", "lower access patterns to hardware form (partition starts, free-dim limits)"),
    PassSpec("bir_splitter", "split oversized instructions into hardware-sized pieces"),
    PassSpec("partitioner", "split work across partitions/engines"),
    PassSpec("tensorcopy_accel", "move tensor copies to the cheapest engine", min_opt=2),
    # vn_splitter prices every instruction (are the transfers the program's bound?) and keeps the
    # prices ("costs") for pre_sched: it changes offsets only, and no price reads an offset
    PassSpec("vn_splitter", "split value numbers whose live ranges can be separated", min_opt=2,
             options={"rotate_copies": 2}, needs=("lsa", "costs"), preserves=("costs",)),
    PassSpec("pre_sched", "list scheduling across engines before allocation", min_opt=1,
             options={"sched_force": False}, needs=("lsa", "deps", "costs")),
    PassSpec("coloring", "interference-graph construction over on-chip values", allocator="coloring",
             needs=("lsa", "interference")),
    PassSpec("coloring_allocator", "SBUF/PSUM allocation by interference-graph coloring", allocator="coloring",
             options=ALLOC_OPTIONS, needs=("interference",)),
    PassSpec("linear_scan_allocator", "SBUF/PSUM allocation by linear scan", allocator="linear-scan",
             options=ALLOC_OPTIONS),
    PassSpec("dma_optimization", "coalesce and merge DMA transfers", min_opt=1, needs=SYNC_GRAPH),
    PassSpec("anti_dependency_analyzer", "dependence analysis over address ranges (RAW/WAR/WAW) into semaphores",
             needs=SYNC_GRAPH, preserves=SYNC_GRAPH),
    PassSpec("post_sched", "list scheduling across engines after allocation", min_opt=1,
             options={"sched_force": False}, needs=("lsa",) + SYNC_GRAPH, preserves=SYNC_GRAPH),
    PassSpec("shift_left", "hoist instructions earlier in their engine stream", flags_on=(SHIFT_LEFT,),
             flags_off=(LOOP_LSA,)),
    PassSpec("experimental_loop_shift_left", "experimental loop shift-left", flags_on=(SHIFT_LEFT, LOOP_LSA)),
    PassSpec("dep_reduction", "transitive reduction of semaphore waits", min_opt=1, needs=SYNC_GRAPH,
             preserves=SYNC_GRAPH),
    PassSpec("print_metrics", "instruction counts, SBUF/PSUM peak, estimated time", needs=("lsa", "deps")),
    PassSpec("birverifier", "verify the BIR module", verifier=True),
    PassSpec("bir_sim", "run birsim on the golden inputs and compare with the goldens", flags_off=(NO_BIR_SIM,),
             options=SIM_OPTIONS, needs=("lsa",)),
)

SPECS = {s.name: s for s in PIPELINE}
# the compile flags (argparse dests) the gates read
GATE_FLAGS = tuple(sorted({f for s in PIPELINE for f in s.flags_on + s.flags_off}))
# name -> one-line description, canonical order
PASS_NAMES = {s.name: s.description for s in PIPELINE}
# options of the runner itself
RUNNER_OPTIONS = {"verify_between_passes": False}


def default_options():
    """Every option key a PassContext accepts, with its default."""
    out = dict(RUNNER_OPTIONS)
    for s in PIPELINE:
        for k, v in s.options.items():
            if k in out and out[k] != v:
                raise AssertionError("walrus option %r declared with two defaults" % k)
            out[k] = v
    return out


def check_names(names, where="--walrus-passes"):
    """``names`` unchanged when every one is in the table, else the one error for unknown names."""
    bad = [n for n in names if n not in SPECS]
    if bad:
        raise errors.InvalidArgumentError(
            "%s: unknown walrus pass%s %s (`walrus_driver --list-passes` lists the %d known passes)"
            % (where, "es" if len(bad) > 1 else "", ", ".join(bad), len(SPECS)), code="NCC_EARG010")
    return list(names)


def default_pipeline(opt, flags=(), allocator=None, verifier=True):
    """The default pass list at -O``opt``: the table's order, each pass's gate.

    ``flags``: compile flags that are set (argparse dests); ``allocator``: 'coloring' or
    'linear-scan' (default: coloring from -O2); ``verifier``: birverifier kept."""
    flags = set(flags)
    allocator = allocator or ("coloring" if opt >= 2 else "linear-scan")
    return [s.name for s in PIPELINE if s.gated_in(opt, flags, allocator, verifier)]


def bir_sim_skip(passes, goldens=True, executed=None, io_bytes=None, options=None):
    """The one decision whether the bir_sim check runs: None when it runs, else why not.

    ``passes``: the walrus pass list (the table's gate, ``--internal-disable-bir-sim`` and the
    BIRSim job already applied) -> 'disabled' without bir_sim; ``goldens``: whether goldens
    exist (the goldens job writes none over its budget) -> 'no goldens'; ``executed`` /
    ``io_bytes``: the program's dynamic instruction count and I/O bytes, checked against the
    ``sim_budget_*`` options -> the budget it exceeds. Arguments left None are not yet known
    (the driver asks before the program exists, walrus once it does)."""
    if "bir_sim" not in passes:
        return "disabled"
    if not goldens:
        return "no goldens"
    opts = dict(SIM_OPTIONS, **(options or {}))
    bi, bb = opts["sim_budget_instructions"], opts["sim_budget_bytes"]
    if executed is not None and executed > bi:
        return "%d executed instructions > budget %d" % (executed, bi)
    if io_bytes is not None and io_bytes > bb:
        return "%d bytes of I/O tensors > budget %d" % (io_bytes, bb)
    return None
