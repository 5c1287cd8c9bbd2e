#!/usr/bin/env bash
# `aotipre doctor --device cpu --device cuda` on the GPU test machine, once plain and once with the
# system libstdc++ preloaded (the known workaround there), for the closing note.
#
#   OUT=/some/dir bash scripts/gpu_doctor.sh      # repo root as cwd, aotipre importable
#
# Writes three files under $OUT: doctor.log (both tables, progress lines with timings, exit codes),
# doctor-plain.json and doctor-preload.json. Both runs share one compile cache, so the canary
# compiles once per device (in the first run, the preloaded one: the CUDA canary's compile alone
# took 48 s on an H100, a whole cold run about 3 minutes). Hard limits keep it under 9 minutes.
set -u
: "${OUT:?set OUT to the folder the results go to}"
PY="${PYTHON:-python3}"
LIB="${LIBSTDCXX:-/usr/lib/x86_64-linux-gnu/libstdc++.so.6}"
CACHE="${AOTIPRE_DOCTOR_CACHE:-${TMPDIR:-/tmp}/aotipre-gpu-doctor-cache}"
LOG="$OUT/doctor.log"
mkdir -p "$OUT"
: > "$LOG"

stamp() { date -u +%H:%M:%S; }

run() {  # run NAME LIMIT_S [VAR=VALUE ...]
  local name=$1 limit=$2
  shift 2
  local started=$SECONDS
  echo "=== $(stamp) $name: ${*:-(plain environment)}" >> "$LOG"
  env "$@" timeout -k 10 "$limit" "$PY" -m aotipre doctor --device cpu --device cuda \
    --cache-dir "$CACHE" --progress --report "json:$OUT/doctor-$name.json" >> "$LOG" 2>&1
  local rc=$?
  echo "=== $(stamp) $name: exit $rc after $((SECONDS - started)) s (124: killed at ${limit} s)" >> "$LOG"
}

{
  echo "host $(hostname); $(uname -srm)"
  "$PY" --version
  command -v g++ >/dev/null && g++ --version | head -1
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  echo "preload candidate: $LIB"
} >> "$LOG" 2>&1

run preload "${PRELOAD_LIMIT_S:-300}" "LD_PRELOAD=$LIB"
run plain "${PLAIN_LIMIT_S:-220}"
cat "$LOG"
