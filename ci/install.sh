#!/usr/bin/env bash
# Install this checkout into a virtual environment (created if missing).
#   bash ci/install.sh [EXTRAS]      e.g. bash ci/install.sh test
# Environment: PYTHON (default python3), NCC_VENV (default .venv).
# The build dependencies go in first so the package builds without
# isolation (every Cython module, in parallel).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${NCC_VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q --upgrade "setuptools>=77" wheel "Cython>=3.0" "numpy>=1.24"
"$VENV/bin/python" -m pip install -q --no-build-isolation ".${1:+[$1]}"
