"""Backend (native, experimental; --internal-run-standalone-legacy-compilation).

Runs ``nn_executor`` on the backend BIR under a CPU-time limit through
/bin/bash (``useShell``). The tool is not shipped (as in the original
wheel), so resolving it fails with "Could not find nn_executor".
"""
import shlex

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job

CPU_SECONDS = 24 * 3600


class Backend(Job):
    executableLocation = "nn_executor"

    def runSingleInput(self, state):
        exe = self.getFullyQualifiedLocation(self.executableLocation)
        cmd = "ulimit -t %d && %s --bir %s --tensor_map tensor_map.json --sunda --json backend.json" % (
            CPU_SECONDS, shlex.quote(exe), shlex.quote(files.WALRUS_BIR))
        self.shellCommand(cmd, useShell=True)
