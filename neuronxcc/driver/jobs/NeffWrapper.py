"""NeffWrapper (native, --enable-internal-neff-wrapper): the NEFF wrapped as HLO.

  hlo-neff-wrapper model.hlo_module.pb --neff model.neff --output wrapped_neff.hlo

Runs its own Popen (stdout and stderr merged, text mode). The driver
publishes wrapped_neff.hlo next to --output when the pipeline passes.
"""
import subprocess

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


class NeffWrapper(Job):
    executableLocation = "hlo-neff-wrapper"
    replayScript = "replay_neff_wrapper.sh"

    def runSingleInput(self, state):
        self.requireFile(files.NEFF, "Kelper")
        cmd = [self.getFullyQualifiedLocation(self.executableLocation), files.MODEL,
               "--neff", files.NEFF, "--output", files.WRAPPED_NEFF_HLO]
        self.log("Executing " + self._quote(cmd), level=20)
        self.getReplayCommandLine(cmd)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                universal_newlines=True, shell=False, close_fds=True)
        out, _ = proc.communicate()
        for line in (out or "").splitlines():
            self.logger.debug("[hlo-neff-wrapper] %s", line)
        if proc.returncode != 0:
            self.raiseForExit(proc.returncode, out)
        self.requireFile(files.WRAPPED_NEFF_HLO, "hlo-neff-wrapper")
