"""Frontend (in-process): Penguin IR -> BIR with the Penguin middle-end.

Stages the builtin custom-op libraries first: ``findCustomOpDataDir()``,
"Custom op data directory not found" when it is missing, then each of
``libbuiltincustomop_cpu0..7.so`` that is a file (the names and the is_file
loop are ``neuronxcc.neff.customop``'s, the one place they are spelled). Then
calls

  neuronxcc.starfish.penguin.frontend.run_frontend(
      "penguin.json", "sg00", target=T, custom_op_libs=[...], options=args)

which writes sg00/bir.json.
"""
import os

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


def stageBuiltinCustomOps():
    """Paths of the builtin custom-op libraries present in the package's data dir, in cpu order."""
    from neuronxcc.driver.jobs.support.FindCustomOpData import findCustomOpDataDir
    from neuronxcc.neff.customop import stage_builtin_libraries

    return stage_builtin_libraries(findCustomOpDataDir())


class Frontend(Job):
    def prefetchModules(self, state):
        return ("neuronxcc.starfish.penguin.frontend", "neuronxcc.driver.jobs.support.FindCustomOpData",
                "neuronxcc.neff.customop")

    def runSingleInput(self, state):

        self.requireFile(files.PENGUIN, "HLOToTensorizer")
        from neuronxcc.starfish.penguin.frontend import run_frontend
        libs = stageBuiltinCustomOps()
        self.log("staged %d builtin custom-op librar%s" % (len(libs), "y" if len(libs) == 1 else "ies"))
        os.makedirs(files.SG_DIR, exist_ok=True)
        run_frontend(files.PENGUIN, files.SG_DIR, target=state.args.target, custom_op_libs=libs,
                     options=state.args)
        self.requireFile(files.BIR, "the Penguin frontend")
