#!/usr/bin/env bash
# Crash triage on the GPU test machine (issue 4): the gpu-marked tests of tests/triage, whose two
# cases run at once, and their evidence, for the closing note.
#
#   OUT=/some/dir bash scripts/gpu_triage.sh          # repo root as cwd, aotipre importable
#   OUT=/some/dir bash scripts/gpu_triage.sh bench    # the benchmark only (about 6-8 min on a GPU)
#   OUT=/some/dir bash scripts/gpu_triage.sh perf     # the gpu tests of the perf measurements
#
# Cases (tests/triage/test_triage_gpu.py), both from the CPU fixtures recompiled for CUDA:
# - device_assert: TokenModel (both.pt2) with id 600 in a 500-row embedding, through the CLI with
#   --artifacts: a Triton device-side assert; the asynchronous error may blame cuBLAS in
#   aoti_torch_cuda_mm_out (AOT802 when it does);
# - illegal_memory_access: EmbeddingOnly (embedding_oob.pt2) compiled with
#   assert_indirect_indexing=False, id 1e12: a real illegal memory access, with --sanitizer
#   (compute-sanitizer memcheck) and a repro bundle.
# Writes under $OUT (8 files, no folders): gpu_triage.log (host facts, pytest output, the CLI's
# log, timings), device_assert.json/.txt, illegal_memory_access.json/.txt, bundle.tar.gz (the
# repro bundle without the packages and inputs), ima-sanitizer.*.log (memcheck's own log);
# `bench` writes bench_gpu.json and its log. PYTEST_LIMIT_S (default 420) caps the tests.
# Loading any AOTI package on that machine needs the system libstdc++ preloaded: exported here
# (aotipre would otherwise find it itself, after one crashed load per model: AOT515).
set -u
: "${OUT:?set OUT to the folder the results go to}"
PY="${PYTHON:-python3}"
export LD_PRELOAD="${LD_PRELOAD:-/usr/lib/x86_64-linux-gnu/libstdc++.so.6}"
WORK="${TMPDIR:-/tmp}/aotipre-gpu-triage"
export AOTIPRE_EVIDENCE_DIR="$WORK/evidence"
export AOTIPRE_TRIAGE_CACHE="$WORK/cache"
LOG="$OUT/gpu_triage.log"
mkdir -p "$OUT" "$WORK"
rm -rf "$AOTIPRE_EVIDENCE_DIR"

stamp() { date -u +%H:%M:%S; }

{
  echo "=== $(stamp) host $(hostname); $(uname -srm)"
  "$PY" --version
  command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,compute_cap,driver_version --format=csv,noheader
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
  echo "LD_PRELOAD=$LD_PRELOAD"
  echo "compute-sanitizer: $(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || echo 'not found')"
} > "$LOG" 2>&1

if [ "${1:-}" = "perf" ]; then
  started=$SECONDS
  echo "=== $(stamp) pytest -m gpu tests/runner/test_worker_perf.py" >> "$LOG"
  timeout -k 10 "${PYTEST_LIMIT_S:-420}" "$PY" -m pytest -q -p no:cacheprovider -m gpu \
    tests/runner/test_worker_perf.py -rA --durations=5 >> "$LOG" 2>&1
  echo "=== $(stamp) pytest exit $? after $((SECONDS - started)) s" >> "$LOG"
  tail -40 "$LOG"
  exit 0
fi

if [ "${1:-}" = "bench" ]; then
  started=$SECONDS
  echo "=== $(stamp) bench --device cuda" >> "$LOG"
  timeout -k 10 570 "$PY" scripts/bench_triage.py --device cuda --json "$OUT/bench_gpu.json" >> "$LOG" 2>&1
  echo "=== $(stamp) bench exit $? after $((SECONDS - started)) s (124: killed at 570 s)" >> "$LOG"
  tail -40 "$LOG"
  exit 0
fi

started=$SECONDS
echo "=== $(stamp) pytest -m gpu tests/triage/test_triage_gpu.py" >> "$LOG"
limit=${PYTEST_LIMIT_S:-420}
timeout -k 10 "$limit" "$PY" -m pytest -q -p no:cacheprovider -m gpu tests/triage/test_triage_gpu.py \
  -rA --durations=5 >> "$LOG" 2>&1
rc=$?
echo "=== $(stamp) pytest exit $rc after $((SECONDS - started)) s (124: killed at $limit s)" >> "$LOG"

for name in device_assert.json device_assert.txt illegal_memory_access.json illegal_memory_access.txt; do
  [ -f "$AOTIPRE_EVIDENCE_DIR/$name" ] && cp "$AOTIPRE_EVIDENCE_DIR/$name" "$OUT/"
done
if [ -f "$AOTIPRE_EVIDENCE_DIR/device_assert.cli.log" ]; then
  { echo "=== the CLI run of device_assert"; cat "$AOTIPRE_EVIDENCE_DIR/device_assert.cli.log"; } >> "$LOG"
fi
for log in "$AOTIPRE_EVIDENCE_DIR"/bundle-ima/*/steps/sanitizer.*.log; do
  [ -f "$log" ] && cp "$log" "$OUT/ima-$(basename "$log")"
done
if [ -d "$AOTIPRE_EVIDENCE_DIR/bundle" ]; then
  tar -C "$AOTIPRE_EVIDENCE_DIR" --exclude='*.pt2' --exclude='*.pt' --exclude='work' \
    -czf "$OUT/bundle.tar.gz" bundle
fi
ls -la "$OUT" >> "$LOG"
tail -60 "$LOG"
