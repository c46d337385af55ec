"""findCustomOpDataDir: where the wheel's builtin custom-op libraries live.

Pure path resolution: ``importlib.resources`` from the ``neuronxcc`` package
root, ``data/custom_op``, materialised to a real directory. No environment
override, no existence check (the Frontend job checks), no version logic.
"""
import importlib.resources
import os


def findCustomOpDataDir():
    data_path = importlib.resources.files("neuronxcc").joinpath("data").joinpath("custom_op")
    with importlib.resources.as_file(data_path) as customOpDataDir:
        return os.path.abspath(str(customOpDataDir))
