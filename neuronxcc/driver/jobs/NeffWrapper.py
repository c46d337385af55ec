"""NeffWrapper (native, --enable-internal-neff-wrapper): the NEFF wrapped as HLO.

  hlo-neff-wrapper model.hlo_module.pb --neff model.neff --output wrapped_neff.hlo

Runs its own Popen (``Job.runMergedOutput``: stdout and stderr merged, text mode). The driver
publishes wrapped_neff.hlo next to --output when the pipeline passes.
"""
from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


class NeffWrapper(Job):
    executableLocation = "hlo-neff-wrapper"
    replayScript = "replay_neff_wrapper.sh"

    def runSingleInput(self, state):
        self.requireFile(files.NEFF, "Kelper")
        cmd = [self.getFullyQualifiedLocation(self.executableLocation), files.MODEL,
               "--neff", files.NEFF, "--output", files.WRAPPED_NEFF_HLO]
        self.runMergedOutput(cmd, "hlo-neff-wrapper")
        self.requireFile(files.WRAPPED_NEFF_HLO, "hlo-neff-wrapper")
