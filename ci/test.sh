#!/usr/bin/env bash
# The project's one test command (README quick start; .ci/run calls it).
# Creates .venv if needed, installs the package with its test extras from
# this checkout (building every Cython module), then runs the whole suite
# against the installed package.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${NCC_VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q --upgrade "setuptools>=77" wheel "Cython>=3.0" "numpy>=1.24"
"$VENV/bin/python" -m pip install -q --no-build-isolation ".[test]"
exec "$VENV/bin/pytest" -q "$@"
