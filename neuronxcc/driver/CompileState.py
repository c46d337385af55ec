"""CompileState: what one compile's jobs share, and the work-dir file names.

The file names are the contract of docs/INTERFACES.md section 1; jobs use
these constants, never their own spellings. Paths are relative to the work
directory, which is the cwd while the pipeline runs.
"""
import os

MODEL = "model.hlo_module.pb"          # CompileCommand: the input, as HloModuleProto bytes
PENGUIN = "penguin.json"               # HLOToTensorizer (hlo2penguin)
GOLDENS = "goldens.npz"                # XLAInferGoldens (absent when over the size budget)
SG_DIR = "sg00"
BIR = os.path.join(SG_DIR, "bir.json")                 # Frontend
IO_TRANSPOSES = "io_transposes.json"                   # StaticIOTranspose
WALRUS_BIR = os.path.join(SG_DIR, "walrus.bir.json")   # WalrusDriver
METRICS = os.path.join(SG_DIR, "metrics.json")         # walrus print_metrics
NEFF = "model.neff"                    # Kelper; published to --output when the pipeline passes
WRAPPED_NEFF_HLO = "wrapped_neff.hlo"  # NeffWrapper; published next to --output
SNAPSHOT = "snapshot.tar.gz"           # SaveTemps


class CompileState:
    """One compile: the parsed args, the command, the work dir and the paths outside it."""

    def __init__(self, args, command=None, workdir=None, launch_dir=None, output=None):
        self.args = args
        self.command = command
        self.workdir = workdir
        self.launch_dir = launch_dir or os.getcwd()
        self.output = output                 # absolute --output
        self.input_path = None               # absolute path of the user's input
        self.module_name = None              # HLO module name when the HLO layer read it
        self.keep_workdir = False            # SaveTemps sets it
        self.argv_split = None               # Arguments.SplitArgv of the compile argv

    def path(self, rel):
        return os.path.join(self.workdir, rel) if self.workdir else rel

    @property
    def walrus_passes(self):
        return list(getattr(self.command, "walrus_passes", None) or [])
