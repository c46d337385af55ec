"""Watchpoint (native, debug; only through --pipeline): instrument the BIR with watchpoints.

Runs ``watchpoint_insert``, which is not shipped (as in the original wheel),
so resolving it fails with "Could not find watchpoint_insert".
"""
from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


class Watchpoint(Job):
    executableLocation = "watchpoint_insert"

    def runSingleInput(self, state):
        exe = self.getFullyQualifiedLocation(self.executableLocation)
        self.shellCommand([exe, "--input", files.WALRUS_BIR, "--output", files.WALRUS_BIR])
