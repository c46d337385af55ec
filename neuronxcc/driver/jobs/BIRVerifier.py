"""BIRVerifier (native): walrus_driver in verify-only mode on the backend's output.

Not in the default pipeline (the walrus ``birverifier`` pass covers it);
reachable by name through ``--pipeline``:

  walrus_driver --input sg00/walrus.bir.json --output sg00/verified.bir.json
                --walrus-passes birverifier --target T
"""
import os

from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job

VERIFIED = os.path.join(files.SG_DIR, "verified.bir.json")


class BIRVerifier(Job):
    executableLocation = "walrus_driver"
    replayScript = "replay_birverifier.sh"

    def runSingleInput(self, state):
        src = files.WALRUS_BIR if os.path.isfile(files.WALRUS_BIR) else files.BIR
        self.requireFile(src, "Frontend or WalrusDriver")
        self.shellCommand([self.getFullyQualifiedLocation(self.executableLocation),
                           "--input", src, "--output", VERIFIED,
                           "--walrus-passes", "birverifier", "--target", state.args.target])
