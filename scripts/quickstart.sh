#!/usr/bin/env bash
# Quick start: install neuronxcc into .venv, compile the bundled MLP example
# with neuronx-cc exactly as a framework would, run the NEFF on the bundled
# simulator (birsim) and compare its outputs with what JAX computed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${NCC_VENV:-.venv}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q --upgrade "setuptools>=77" wheel "Cython>=3.0" "numpy>=1.24"
"$VENV/bin/python" -m pip install -q --no-build-isolation .
EX=examples/mlp
OUT=build/quickstart
mkdir -p "$OUT"
set -x
"$VENV/bin/neuronx-cc" compile "$EX/model.hlo_module.pb" --framework XLA --target trn1 \
    --output "$OUT/mlp.neff" --logfile "$OUT/log-neuron-cc.txt"
"$VENV/bin/neuronx-cc" neff-info "$OUT/mlp.neff"
"$VENV/bin/birsim" "$OUT/mlp.neff" --inputs "$EX/inputs.npz" --output "$OUT/outputs.npz" --trace "$OUT/trace.json"
"$VENV/bin/python" scripts/check_outputs.py "$OUT/outputs.npz" "$EX/expected.npz"
