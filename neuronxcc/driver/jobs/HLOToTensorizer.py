"""HLOToTensorizer (native): HLO -> Penguin IR with ``hlo2penguin``.

  hlo2penguin model.hlo_module.pb --output penguin.json --target T
              [--options '<--internal-hlo2tensorizer-options>']

Runs its own Popen (stdout and stderr merged, text mode) and streams the
tool's output into the log.
"""
import subprocess

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


class HLOToTensorizer(Job):
    executableLocation = "hlo2penguin"
    replayScript = "replay_hlo2penguin.sh"

    def command(self, state):
        args = state.args
        cmd = [self.getFullyQualifiedLocation(self.executableLocation), files.MODEL,
               "--output", files.PENGUIN, "--target", args.target]
        opts = (args.internal_hlo2tensorizer_options or "").strip()
        if opts:
            cmd += ["--options", opts]
        return cmd

    def runSingleInput(self, state):
        cmd = self.command(state)
        self.log("Executing " + self._quote(cmd), level=20)
        self.getReplayCommandLine(cmd)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                universal_newlines=True, shell=False, close_fds=True)
        lines = []
        for line in proc.stdout:
            lines.append(line)
            self.logger.debug("[hlo2penguin] %s", line.rstrip("\n"))
        proc.wait()
        if proc.returncode != 0:
            self.raiseForExit(proc.returncode, "".join(lines))
        self.requireFile(files.PENGUIN, "hlo2penguin")
