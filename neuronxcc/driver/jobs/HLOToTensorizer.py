"""HLOToTensorizer (native): HLO -> Penguin IR with ``hlo2penguin``.

  hlo2penguin model.hlo_module.pb --output penguin.json --target T
              [--options '<--internal-hlo2tensorizer-options>']

Runs its own Popen (``Job.runMergedOutput``: stdout and stderr merged, text
mode) and streams the tool's output into the log.
"""
from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


class HLOToTensorizer(Job):
    executableLocation = "hlo2penguin"
    replayScript = "replay_hlo2penguin.sh"

    def prefetchModules(self, state):
        return self.forkedToolModules(("neuronxcc.starfish.penguin.hlo2penguin",))

    def command(self, state):
        args = state.args
        cmd = [self.getFullyQualifiedLocation(self.executableLocation), files.MODEL,
               "--output", files.PENGUIN, "--target", args.target]
        opts = (args.internal_hlo2tensorizer_options or "").strip()
        if opts:
            cmd += ["--options", opts]
        return cmd

    def runSingleInput(self, state):
        self.runMergedOutput(self.command(state), "hlo2penguin")
        self.requireFile(files.PENGUIN, "hlo2penguin")
