"""starfish: the compiler core (tools in bin/, Penguin, BIR, the simulator)."""
