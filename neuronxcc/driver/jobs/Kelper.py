"""Kelper (in-process): the NEFF from the backend's BIR.

Loads sg00/walrus.bir.json with ``neuronxcc.starfish.birpy.load`` and calls
``neuronxcc.neff.write_neff(model.neff, module, name=..., fast_loading=...,
io_transposes=<io_transposes.json or None>, durable=False)`` (atomic: temp + rename; not
flushed to disk: the driver publishes model.neff to --output, flushed, only when the whole
pipeline passes).
"""
import json
import os

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


class Kelper(Job):
    def prefetchModules(self, state):
        return ("neuronxcc.starfish.birpy", "neuronxcc.neff.writer")

    def neffName(self, state):
        if state.module_name:
            return state.module_name
        out = state.output or files.NEFF
        return os.path.splitext(os.path.basename(out))[0] or "file"

    def runSingleInput(self, state):

        self.requireFile(files.WALRUS_BIR, "WalrusDriver")
        from neuronxcc.starfish.birpy import load
        from neuronxcc.neff import write_neff
        module = load(files.WALRUS_BIR)
        io_transposes = None
        if os.path.isfile(files.IO_TRANSPOSES):
            with open(files.IO_TRANSPOSES) as f:
                io_transposes = json.load(f)
        # the work dir's NEFF is an intermediate: publishing it at --output is the durable write
        write_neff(files.NEFF, module, name=self.neffName(state),
                   fast_loading=bool(state.args.enable_fast_loading_neuron_binaries),
                   io_transposes=io_transposes, durable=False)
        self.requireFile(files.NEFF, "write_neff")
