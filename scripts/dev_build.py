#!/usr/bin/env python3
"""Developer build: compile the Cython hot paths (and custom-op libraries) in place.

    python scripts/dev_build.py                      # everything
    python scripts/dev_build.py neuronxcc.pelican    # only modules under a prefix

Each prefix set gets its own build-temp directory so that several builds can
run at once in one checkout. The driver stays plain Python in a checkout; the
installed package (pip install .) compiles it.
"""
import hashlib
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv):
    prefixes = [a for a in argv if not a.startswith("-")]
    tag = hashlib.md5(",".join(prefixes).encode()).hexdigest()[:8]
    env = dict(os.environ, NCC_BUILD_ONLY=",".join(prefixes))
    cmd = [sys.executable, "setup.py", "-q", "build_ext", "--inplace",
           "--build-temp", os.path.join("build", "dev-" + tag)]
    return subprocess.call(cmd, cwd=HERE, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
