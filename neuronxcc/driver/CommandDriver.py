"""Placeholder: replaced by the driver work (issue 2)."""
import sys


def main():
    from neuronxcc.version import __version__
    if "--version" in sys.argv or "-V" in sys.argv:
        print("NeuronX Compiler version %s" % __version__)
        return 0
    sys.stderr.write("[INTERNAL_ERROR] [NCC_INBY001] the driver is not built yet\n")
    return 70
