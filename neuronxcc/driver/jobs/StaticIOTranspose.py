"""StaticIOTranspose (in-process): io_transposes.json from sg00/bir.json.

Calls ``neuronxcc.starfish.penguin.io_transpose.write_io_transposes(bir, out)``.
"""
from neuronxcc.driver import CompileState as files
from neuronxcc.driver.Job import Job


class StaticIOTranspose(Job):
    def runSingleInput(self, state):

        self.requireFile(files.BIR, "Frontend")
        from neuronxcc.starfish.penguin.io_transpose import write_io_transposes
        write_io_transposes(files.BIR, files.IO_TRANSPOSES)
        self.requireFile(files.IO_TRANSPOSES, "write_io_transposes")
