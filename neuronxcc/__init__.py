"""neuronxcc: an open reimplementation of the AWS Neuron compiler (neuronx-cc).

It lowers XLA HLO through the original's job pipeline to a NEFF whose
instruction streams target an open model of one NeuronCore (the BIR machine)
and ships the simulator (``neuronxcc.starfish.birsim``) that runs those NEFFs
on a CPU. NEFFs written here do not run on Neuron hardware.
"""
from neuronxcc.version import __version__

__all__ = ["__version__"]
