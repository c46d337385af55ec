#!/usr/bin/env bash
# Quick start: install neuronxcc into .venv, compile the bundled MLP example
# with neuronx-cc exactly as a framework would, run the NEFF on the bundled
# simulator (birsim) and compare its outputs with what JAX computed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash ci/install.sh
VENV=${NCC_VENV:-.venv}
EX=examples/mlp
OUT=build/quickstart
mkdir -p "$OUT"
set -x
"$VENV/bin/neuronx-cc" compile "$EX/model.hlo_module.pb" --framework XLA --target trn1 \
    --output "$OUT/mlp.neff" --logfile "$OUT/log-neuron-cc.txt"
"$VENV/bin/neuronx-cc" neff-info "$OUT/mlp.neff"
"$VENV/bin/birsim" "$OUT/mlp.neff" --inputs "$EX/inputs.npz" --output "$OUT/outputs.npz" --trace "$OUT/trace.json"
"$VENV/bin/python" scripts/check_outputs.py "$OUT/outputs.npz" "$EX/expected.npz"
