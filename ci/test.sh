#!/usr/bin/env bash
# The project's one test command (README quick start; .ci/run calls it).
# Creates .venv if needed, installs the package with its test extras from
# this checkout (building every Cython module), then runs the whole suite
# against the installed package. Extra arguments go to pytest (paths as
# paths relative to the checkout, e.g. tests/pelican).
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install.sh test
VENV=${NCC_VENV:-.venv}
# Run from an empty directory: a program a test starts without its own cwd
# must import the installed package, never this checkout's sources.
REPO=$(pwd -P)
VENV=$(cd "$VENV" && pwd -P)
RUNDIR=$(mktemp -d "${TMPDIR:-/tmp}/neuronxcc-tests.XXXXXX")
trap 'rm -rf "$RUNDIR"' EXIT
args=()
paths=0
for a in "$@"; do
  if [ -e "$REPO/${a%%::*}" ]; then args+=("$REPO/$a"); paths=1; else args+=("$a"); fi
done
[ "$paths" = 1 ] || args+=("$REPO/tests")
cd "$RUNDIR"
"$VENV/bin/pytest" -c "$REPO/pyproject.toml" --rootdir "$REPO" -q "${args[@]}"
