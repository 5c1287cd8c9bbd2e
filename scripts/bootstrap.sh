#!/usr/bin/env bash
# Set-up on a fresh machine with only Python: a virtual environment (.venv) holding torch and
# aotipre. torch is installed explicitly first, pinned to 2.13.0 (the CPU wheel this workplace
# provides), because pip resolving a bare "torch" downloads the newest CUDA build (several GB).
# Sourced by scripts/demo.sh and scripts/test.sh; safe to run again (it installs only what is missing).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "bootstrap: creating .venv" >&2
  "$PY" -m venv --system-site-packages .venv
fi
# shellcheck disable=SC1091
. .venv/bin/activate
if ! python - <<'PYEOF' 2>/dev/null
import sys, torch
v = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
sys.exit(0 if (2, 11) <= v <= (2, 13) else 1)
PYEOF
then
  echo "bootstrap: installing torch==2.13.0" >&2
  python -m pip install -q "torch==2.13.0"
fi
if [ ! -x .venv/bin/aotipre ] || ! python -c "import typer, tabulate, pytest, hypothesis" 2>/dev/null; then
  echo "bootstrap: installing aotipre and its test dependencies" >&2
  python -m pip install -q -e ".[test]"
fi
