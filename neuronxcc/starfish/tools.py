"""Entry points of the starfish tools (the executables in starfish/bin/).

Each tool is a thin ``main(argv) -> int`` in a library module, like LLVM's
``opt``/``llc``; this table maps tool names to those mains. The same table
feeds the console scripts (``<tool>_main``), the launchers in starfish/bin
(``python -m neuronxcc.starfish.tools TOOL ...``) and the tests.
"""
import importlib
import sys

# tool name -> (module, function). The function takes argv (without argv[0])
# and returns an exit status.
TOOLS = {
    "hlo2penguin": ("neuronxcc.starfish.penguin.hlo2penguin", "main"),
    "xla_infergoldens": ("neuronxcc.hlo.infergoldens", "main"),
    "hlo-opt": ("neuronxcc.hlo.opt", "main"),
    "hlo-neff-wrapper": ("neuronxcc.hlo.neff_wrapper", "main"),
    "snapshot-unpack": ("neuronxcc.driver.jobs.support.Snapshot", "unpack_main"),
    "walrus_bugpoint_driver": ("neuronxcc.walrus.bugpoint", "main"),
    "coloring_allocator_with_loop": ("neuronxcc.walrus.standalone", "coloring_allocator_with_loop_main"),
    "full_unroll": ("neuronxcc.walrus.standalone", "full_unroll_main"),
    "walrus_driver": ("neuronxcc.walrus.driver", "main"),
    "birsim": ("neuronxcc.starfish.birsim.tool", "main"),
}

# Tools of the inventory that this package does not ship (the Backend and
# Watchpoint jobs name them; resolving them fails with "Could not find").
NOT_SHIPPED = ("nn_executor", "kgraph2dot", "watchpoint_insert")


def run_tool(name, argv):
    try:
        modname, fn = TOOLS[name]
    except KeyError:
        sys.stderr.write("unknown tool %r; known: %s\n" % (name, ", ".join(sorted(TOOLS))))
        return 2
    try:
        mod = importlib.import_module(modname)
    except ModuleNotFoundError as e:
        if e.name and (modname == e.name or modname.startswith(e.name + ".")):
            sys.stderr.write("[INTERNAL_ERROR] [NCC_INBY001] %s: %s is not built yet\n" % (name, modname))
            return 70
        raise
    return getattr(mod, fn)(list(argv))


def _entry(name):
    def main():
        sys.exit(run_tool(name, sys.argv[1:]))
    main.__name__ = name.replace("-", "_") + "_main"
    return main


hlo2penguin_main = _entry("hlo2penguin")
xla_infergoldens_main = _entry("xla_infergoldens")
hlo_opt_main = _entry("hlo-opt")
hlo_neff_wrapper_main = _entry("hlo-neff-wrapper")
snapshot_unpack_main = _entry("snapshot-unpack")
walrus_bugpoint_driver_main = _entry("walrus_bugpoint_driver")
coloring_allocator_with_loop_main = _entry("coloring_allocator_with_loop")
full_unroll_main = _entry("full_unroll")
walrus_driver_main = _entry("walrus_driver")
birsim_main = _entry("birsim")


def launcher_main():
    """``starfish/launch.sh`` and ``python -m neuronxcc.starfish.tools``: argv is [prog, TOOL, ARGS...]."""
    if len(sys.argv) < 2:
        sys.stderr.write("usage: python -m neuronxcc.starfish.tools TOOL [ARGS...]\n")
        sys.exit(2)
    sys.argv = [sys.argv[1]] + sys.argv[2:]
    sys.exit(run_tool(sys.argv[0], sys.argv[1:]))


if __name__ == "__main__":
    launcher_main()
