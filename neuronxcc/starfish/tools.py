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

def run_tool(name, argv):
    try:
        modname, fn = TOOLS[name]
    except KeyError:
        sys.stderr.write("[NCC_EARG002] unknown tool %r; known: %s\n" % (name, ", ".join(sorted(TOOLS))))
        return 70
    return getattr(importlib.import_module(modname), fn)(list(argv))


def _entry(name):
    def main():
        _exit(run_tool(name, sys.argv[1:]), (name,))
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
        sys.stderr.write("[NCC_EARG002] usage: python -m neuronxcc.starfish.tools TOOL [ARGS...]\n")
        sys.exit(70)
    sys.argv = [sys.argv[1]] + sys.argv[2:]
    _exit(run_tool(sys.argv[0], sys.argv[1:]))


def _exit(status, names=None):
    """A tool's end: called by the process's top level (its console script, launch.sh's ``-c``,
    ``python -m``), without the interpreter's teardown; else SystemExit (toolshell.exit_script)."""
    from neuronxcc.common.toolshell import exit_script

    exit_script(status, names)


if __name__ == "__main__":
    launcher_main()
