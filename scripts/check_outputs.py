#!/usr/bin/env python3
"""Compare two npz files of outputs (output0, output1, ...) within per-dtype tolerances.

    check_outputs.py ACTUAL.npz EXPECTED.npz

The tolerances are the package's one table (``neuronxcc.common.tolerances``):
exact for integers and bool, scaled rtol/atol per float dtype. Exit 0 on a
match.
"""
import sys

import numpy as np

from neuronxcc.common.tolerances import mismatch


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    actual, expected = np.load(argv[0]), np.load(argv[1])
    status = 0
    for key in sorted(expected.files):
        if key not in actual.files:
            print("%s: missing" % key)
            status = 1
            continue
        why = mismatch(actual[key], expected[key])
        err = ""
        if not why and expected[key].dtype.kind == "f" and expected[key].size:
            err = " (max abs err %.3g)" % float(np.max(np.abs(actual[key].astype(np.float64)
                                                               - expected[key].astype(np.float64))))
        print("%s: %s%s" % (key, "MISMATCH: " + why if why else "match", err))
        status |= 1 if why else 0
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
