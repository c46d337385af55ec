"""The Frontend job's library entry: Penguin IR file -> sg_dir/bir.json.

``run_frontend(penguin_path, sg_dir, target='trn1', custom_op_libs=(), options=None)``
loads the Penguin graph written by hlo2penguin, lowers it (codegen.py) to
one BIR module with unallocated memlocs, verifies it and writes
``sg_dir/bir.json``. The staged custom-op libraries are recorded in
``module.attrs["custom_op_libs"]`` (Kelper registers them in the NEFF).
Compile errors propagate as ``CompilerError`` subclasses (the driver prints
their one line and exits 70); nothing is written on failure.
"""
import logging
import os

from neuronxcc.common.toolshell import atomic_output
from neuronxcc.starfish import birpy
from neuronxcc.starfish.penguin import ir
from neuronxcc.starfish.penguin.codegen import lower_graph

log = logging.getLogger("neuronxcc.penguin.frontend")


def run_frontend(penguin_path, sg_dir, target="trn1", custom_op_libs=(), options=None):
    graph = ir.load(penguin_path)
    target = target or graph.attrs.get("target") or "trn1"
    module = lower_graph(graph, target, options)
    libs = [str(p) for p in (custom_op_libs or ())]
    if libs and any(n.kind == "inst" and n.opcode == "custom_op" for n in module.walk()):
        module.attrs["custom_op_libs"] = libs
        # loaded once in this process: the bir_sim check (walrus_driver, forked from here) and the
        # NEFF writer find them loaded (neff.customop.preload_libraries)
        from neuronxcc.neff.customop import preload_libraries
        preload_libraries(libs)
    birpy.verify(module, target)
    os.makedirs(sg_dir, exist_ok=True)
    out = os.path.join(sg_dir, "bir.json")
    with atomic_output(out) as tmp:
        birpy.save(module, tmp)
    log.info("Frontend: %d instructions, %d memlocs, %d HBM tensors -> %s", len(module.instructions()),
             len(module.memlocs), len(module.tensors), out)
    return out
