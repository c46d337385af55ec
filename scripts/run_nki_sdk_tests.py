#!/usr/bin/env python3
"""Run a public NKI test suite unchanged against this neuronxcc and print one line per file.

The suite is not part of this repository: point the script at a directory of test files, e.g. the
aws-neuron-sdk 2.26 docs' ``general/nki/test`` (the last release documenting ``neuronxcc.nki``):

    git -C aws-neuron-sdk archive 8a38e733 general/nki/test | tar -x -C /tmp/sdk
    scripts/run_nki_sdk_tests.py /tmp/sdk/general/nki/test

nki-samples' unit tests (the last commit with the legacy reference kernels, 7af4e4d) need the samples'
``src`` on the path and their simulation-only switch:

    git -C nki-samples archive 7af4e4d | tar -x -C /tmp/nki_samples
    scripts/run_nki_sdk_tests.py /tmp/nki_samples/test/unit --path /tmp/nki_samples/src \
        --pytest-arg=--simulation-only

The same unit tests run against this project's own ``neuronxcc.nki.kernels`` (the original ships the samples'
reference kernels under that name) with ``scripts/nki_samples_shim`` in place of the samples' ``src``; the
tests of 97e49c9 (April 2025, the kernels' signatures of neuronx-cc 2.24's time) match them:

    git -C nki-samples archive 97e49c9 test/unit | tar -x -C /tmp/ns
    scripts/run_nki_sdk_tests.py /tmp/ns/test/unit --path scripts/nki_samples_shim --pytest-arg=--simulation-only

Each file runs in its own pytest process (several of them run their tests at import time), with this
checkout first on PYTHONPATH and a 6 GB address-space cap. Nothing is asserted: the table is the result.
"""
import argparse
import glob
import os
import re
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("testdir")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--path", action="append", default=[], help="also put DIR on PYTHONPATH (after this checkout)")
    ap.add_argument("--pytest-arg", action="append", default=[], help="pass ARG to every pytest run")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = [root] + [os.path.abspath(d) for d in args.path]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")]))
    files = sorted(glob.glob(os.path.join(args.testdir, "test_*.py")))
    tot = {"passed": 0, "failed": 0, "error": 0}
    ok_files = 0
    for f in files:
        cmd = ["prlimit", "--as=6000000000", sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               *args.pytest_arg, os.path.basename(f)]
        try:
            r = subprocess.run(cmd, cwd=args.testdir, env=env, capture_output=True, text=True, timeout=args.timeout)
            last = (r.stdout.strip().splitlines() or ["?"])[-1]
        except subprocess.TimeoutExpired:
            last = "timeout"
        counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|error)", last)}
        for k in tot:
            tot[k] += counts.get(k, 0)
        clean = counts.get("passed", 0) and not counts.get("failed") and not counts.get("error")
        ok_files += bool(clean)
        reason = ""
        if not clean:
            err = [ln for ln in r.stdout.splitlines() if ln.startswith("E ")][:1] if last != "timeout" else []
            reason = ("  " + err[0][:110]) if err else ""
        print("%-44s %s%s" % (os.path.basename(f), last, reason))
    print("\n%d of %d files pass; tests: %d passed, %d failed, %d errors" % (ok_files, len(files), tot["passed"],
                                                                           tot["failed"], tot["error"]))


if __name__ == "__main__":
    main()
