#!/usr/bin/env python3
"""Compare two npz files of outputs (output0, output1, ...) within per-dtype tolerances.

    check_outputs.py ACTUAL.npz EXPECTED.npz

Tolerances: exact for integers and bool; float32 rtol 1e-4/atol 1e-5 scaled by
the reference's magnitude; bfloat16 2e-2; float16 2e-3. Exit 0 on a match.
"""
import sys

import numpy as np

TOLERANCES = {"float32": (1e-4, 1e-5), "float64": (1e-6, 1e-8), "float16": (2e-3, 2e-3),
              "bfloat16": (2e-2, 2e-2)}


def compare(actual, expected):
    a = np.asarray(actual)
    e = np.asarray(expected)
    if a.shape != e.shape:
        return False, "shape %s != %s" % (a.shape, e.shape)
    kind = e.dtype.kind
    if kind in "biu":
        bad = int(np.count_nonzero(a != e))
        return bad == 0, "%d elements differ" % bad
    rtol, atol = TOLERANCES.get(str(e.dtype), (1e-4, 1e-5))
    a64 = a.astype(np.float64)
    e64 = e.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(e64)))) if e64.size else 1.0
    err = np.abs(a64 - e64)
    ok = bool(np.all((err <= atol * scale + rtol * np.abs(e64)) | (np.isnan(a64) & np.isnan(e64))))
    return ok, "max abs err %.3g (scale %.3g)" % (float(err.max()) if err.size else 0.0, scale)


def main(argv):
    actual, expected = np.load(argv[0]), np.load(argv[1])
    status = 0
    for key in sorted(expected.files):
        if key not in actual.files:
            print("%s: missing" % key)
            status = 1
            continue
        ok, msg = compare(actual[key], expected[key])
        print("%s: %s (%s)" % (key, "match" if ok else "MISMATCH", msg))
        status |= 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
