"""findCustomOpDataDir: where the wheel's builtin custom-op libraries live.

The original's name for ``neuronxcc.neff.customop.custom_op_data_dir`` (the one
lookup): ``data/custom_op`` under the ``neuronxcc`` package root, materialised
to a real directory. No environment override, no existence check (the
Frontend job checks), no version logic.
"""
from neuronxcc.neff.customop import custom_op_data_dir


def findCustomOpDataDir():
    return custom_op_data_dir()
