#!/usr/bin/env bash
# Set-up on a fresh machine with only Python: a virtual environment holding torch and aotipre
# (with its test dependencies). torch is installed explicitly first, pinned, because pip
# resolving a bare "torch" downloads the newest CUDA build (several GB); aotipre's own
# requirement on torch is the optional extra `aotipre[torch]`, so the static gate installs
# without it.
#
# The venv is created WITHOUT --system-site-packages: everything the tests import (pytest,
# hypothesis, click, ...) comes from the venv, so a fresh machine and CI see the same set.
#
#   AOTIPRE_VENV   the venv folder (default .venv)
#   AOTIPRE_TORCH  the torch release to pin (default 2.13.0, the CPU wheel this workplace
#                  provides; CI's other environments use 2.14.1 in .venv-2.14 and 2.15.0 in
#                  .venv-2.15)
#   PYTHON         the interpreter that creates the venv (default python3)
#
# Sourced by scripts/demo.sh, scripts/test.sh and .ci/run; safe to run again (it installs only
# what is missing). It leaves the venv activated.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
VENV=${AOTIPRE_VENV:-.venv}
TORCH=${AOTIPRE_TORCH:-2.13.0}
if [ -x "$VENV/bin/python" ] && grep -qs '^include-system-site-packages = true' "$VENV/pyvenv.cfg"; then
  echo "bootstrap: $VENV was made with --system-site-packages; making it anew" >&2
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
. "$VENV/bin/activate"
# This workplace's pip constraint file caps torch at 2.14.1 only because 2.13.0 and 2.14.1 lie on
# its disk. A newer release (2.15.0: the registry's default wheel, a CUDA 13.2 build whose CUDA
# libraries import on a CPU-only machine; ~5.3 GB installed, ~75 s here) is installed with the
# cap lifted for this venv's installs, or pip would take torch back to 2.14.1 when it installs
# aotipre.
lift=()
if python3 - "$TORCH" <<'PYEOF'; then
import sys
sys.exit(0 if tuple(int(p) for p in sys.argv[1].split(".")[:3]) > (2, 14, 1) else 1)
PYEOF
  lift=(env PIP_CONSTRAINT=/dev/null)
fi
if ! TORCH="$TORCH" python - <<'PYEOF' 2>/dev/null; then
import os, sys, torch
want = os.environ["TORCH"]
sys.exit(0 if torch.__version__.split("+")[0] == want else 1)
PYEOF
  echo "bootstrap: installing torch==$TORCH into $VENV" >&2
  "${lift[@]}" python -m pip install -q "torch==$TORCH"
fi
if [ ! -x "$VENV/bin/aotipre" ] || ! python -c "import typer, tabulate, pytest, xdist, hypothesis, numpy, yaml, google.protobuf, importlib.util as u; assert u.find_spec('tritonclient') and u.find_spec('ray') and u.find_spec('safetensors') and u.find_spec('playwright')" 2>/dev/null; then
  echo "bootstrap: installing aotipre[torch,test] into $VENV" >&2
  # flock: .ci/run builds two venvs at once from this checkout, and an editable install writes
  # aotipre.egg-info here
  "${lift[@]}" flock pyproject.toml python -m pip install -q -e ".[torch,test]"
fi
# A venv kept between checkouts (CI's cached second environment) may hold an editable aotipre
# of another folder, or of one since removed: point it at this one. -I: the checkout itself
# (the working directory, first on a plain `python -c`'s path) must not answer for the venv.
if [ "$(python -I -c 'import aotipre, os; print(os.path.dirname(os.path.dirname(os.path.realpath(aotipre.__file__))))' 2>/dev/null)" != "$(pwd -P)" ]; then
  echo "bootstrap: pointing $VENV's aotipre at $(pwd -P)" >&2
  "${lift[@]}" flock pyproject.toml python -m pip install -q --no-deps -e .
fi
# The HTML report's browser tests (tests/report/test_html_browser.py) drive a headless Chromium
# through playwright: the Debian package, installed when it is missing and apt-get can (as root,
# or through sudo without a password); apt waits for the lock another bootstrap holds.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
  && command -v apt-get >/dev/null 2>&1; then
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo -n)
  apt=("${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -qq -o DPkg::Lock::Timeout=600)
  echo "bootstrap: installing chromium (apt-get) for the HTML report's browser tests" >&2
  if ! { "${apt[@]}" install -y chromium >/dev/null 2>&1 \
    || { "${apt[@]}" update >/dev/null 2>&1 && "${apt[@]}" install -y chromium >/dev/null 2>&1; }; }; then
    echo "bootstrap: could not install chromium; the browser tests will be skipped" >&2
  fi
fi
