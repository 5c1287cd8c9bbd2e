#!/usr/bin/env bash
# Every gpu-marked test on the GPU test machine, in one process (the CUDA fixtures are built
# once), with the machine's facts, for the closing note:
#
#   OUT=/some/dir bash scripts/gpu_tests.sh [PYTEST ARGS / TEST PATHS...]   # default: tests
#
# Wheels that machine lacks (iced-x86) are installed from .whl/ into /tmp/site when present.
# Loading any AOTI package there needs the system libstdc++ preloaded (aotipre doctor's AOT515):
# exported for the whole run, so every test sees a host that loads packages.
# Writes $OUT/gpu_tests.log (host facts, pytest output with -rA). PYTEST_LIMIT_S caps pytest.
set -u
: "${OUT:?set OUT to the folder the results go to}"
PY="${PYTHON:-python3}"
if ls .whl/*.whl >/dev/null 2>&1; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH=".:${PYTHONPATH:-}"
export LD_PRELOAD="${LD_PRELOAD:-/usr/lib/x86_64-linux-gnu/libstdc++.so.6}"
export PYTHONUNBUFFERED=1
LOG="$OUT/gpu_tests.log"
mkdir -p "$OUT"
{
  echo "=== $(date -u +%H:%M:%S) host $(hostname); $(uname -srm)"
  nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  "$PY" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "gpus", torch.cuda.device_count())'
  echo "LD_PRELOAD=$LD_PRELOAD"
} > "$LOG" 2>&1
started=$SECONDS
[ "$#" -gt 0 ] || set -- tests
timeout -k 10 "${PYTEST_LIMIT_S:-540}" "$PY" -m pytest -q -p no:cacheprovider -m gpu -rA \
  --durations=15 "$@" >> "$LOG" 2>&1
echo "=== pytest exit $? after $((SECONDS - started)) s (124: killed at the limit)" >> "$LOG"
grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed|=== pytest" "$LOG" | tail -40
