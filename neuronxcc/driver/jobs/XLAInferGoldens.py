"""XLAInferGoldens / InferGoldens (native): golden outputs with ``xla_infergoldens``.

  xla_infergoldens model.hlo_module.pb --output goldens.npz --size-budget BYTES

The tool runs the HLO reference interpreter on seeded inputs and writes
``input{i}``/``output{i}`` arrays. When the program is over the size budget it
writes nothing, says so and exits 3 (``infergoldens.EXIT_SKIPPED``): that is
not a failure, the walrus ``bir_sim`` check is then skipped. Any other
non-zero exit fails the compile; exit 0 without the file is an error too.

InferGoldens is the framework-neutral name the pipeline uses when the
framework is not XLA; both run the same tool on the staged HLO module.
"""

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job

DEFAULT_GOLDEN_SIZE_BUDGET = 64 * 1024 * 1024  # bytes of inputs + outputs + intermediates
EXIT_SKIPPED = 3    # xla_infergoldens: over the size budget, nothing written (neuronxcc.hlo.infergoldens)


class InferGoldens(Job):
    executableLocation = "xla_infergoldens"
    replayScript = "replay_infergoldens.sh"

    @classmethod
    def RegisterArgs(cls, parser):
        parser.add_hidden("--internal-golden-size-budget", type=int, default=DEFAULT_GOLDEN_SIZE_BUDGET,
                          metavar="BYTES", help="skip goldens (and the bir_sim check) above this many bytes")

    def prefetchModules(self, state):
        # the tool, the interpreter behind it and numpy.random (its seeded inputs)
        return self.forkedToolModules(("neuronxcc.hlo.infergoldens", "neuronxcc.hlo.interpreter", "numpy.random"))

    def runSingleInput(self, state):
        budget = getattr(state.args, "internal_golden_size_budget", DEFAULT_GOLDEN_SIZE_BUDGET)
        cmd = [self.getFullyQualifiedLocation(self.executableLocation), files.MODEL,
               "--output", files.GOLDENS, "--size-budget", str(budget)]
        from neuronxcc.starfish.penguin.autocast import policy
        cast = policy(state.args)
        if cast.matmult:           # the goldens follow the precision the compiled program uses
            cmd += ["--auto-cast", cast.mode, "--auto-cast-type", cast.type_flag]
        rc, out, err = self.shellCommand(cmd, propagate_exit=False)
        if rc == EXIT_SKIPPED:
            self.log("xla_infergoldens wrote no %s: the program is over the golden size budget (%d bytes)"
                     % (files.GOLDENS, budget), level=20)
            return
        if rc != 0:
            self.raiseForExit(rc, (out or "") + "\n" + (err or ""))
        self.requireFile(files.GOLDENS, "xla_infergoldens")


class XLAInferGoldens(InferGoldens):
    replayScript = "replay_xla_infergoldens.sh"
