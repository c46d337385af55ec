#!/bin/sh
# Shared launcher behind every executable in starfish/bin/.
# Usage: launch.sh TOOL [ARGS...]
# Works from an installed package whose environment is not activated and with
# a minimal PATH: it runs the Python of the prefix the package is installed in
# (<prefix>/lib/pythonX.Y/site-packages/neuronxcc/...) or a checkout's .venv,
# else python3 on PATH,
# with the package's parent directory first on sys.path.
tool=$1
shift
starfish=$(cd -- "$(dirname -- "$0")" && pwd -P)
pkgparent=$(dirname -- "$(dirname -- "$starfish")")
prefix=$(dirname -- "$(dirname -- "$(dirname -- "$pkgparent")")")
case "$pkgparent" in
  */site-packages|*/dist-packages) own="$prefix/bin/python3 $prefix/bin/python" ;;
  *) own="$pkgparent/.venv/bin/python3" ;;  # a source checkout with its dev venv
esac
py=
for cand in $own "$(command -v python3 2>/dev/null)" /usr/bin/python3; do
  if [ -n "$cand" ] && [ -x "$cand" ]; then py=$cand; break; fi
done
if [ -z "$py" ]; then
  echo "$tool: cannot find a Python interpreter for $pkgparent" >&2
  exit 70
fi
# Not "python -m": that would put the cwd first on sys.path, and a cwd that
# holds a neuronxcc source tree would shadow the installed package.
exec "$py" -c 'import sys; sys.path[0] = sys.argv.pop(1); from neuronxcc.starfish.tools import launcher_main; launcher_main()' \
    "$pkgparent" "$tool" "$@"
