#!/usr/bin/env bash
# Run a command as if on an AVX2-only x86 host (no AVX-512, no AMX), on any x86 Linux host with
# AVX2, to show that the test suite does not assume the CPU it was written on:
#
#   sudo bash scripts/simulate_host.sh avx2 bash scripts/test.sh -m "not gpu"
#
# What it changes, for the command and every process it starts:
# - what aotipre reads of the host: /proc/cpuinfo, bind-mounted (in a private mount namespace,
#   `unshare -m`: root only) to a copy without the avx512* and amx* flags;
# - what inductor compiles: TORCHINDUCTOR_CPP_MARCH=haswell (the -march of every C++ compile,
#   instead of -march=native) and ATEN_CPU_CAPABILITY=avx2 (its vector ISA, and ATen's kernels);
# - where the fixtures are built: AOTIPRE_FIXTURE_DIR (default .fixture-cache/simulated-avx2/),
#   apart from the host's own.
# Whatever the command compiles then holds no AVX-512 instruction, as on an AVX2-only machine.
set -euo pipefail
level=${1:?usage: simulate_host.sh avx2 COMMAND...}
shift
[ "$level" = avx2 ] || { echo "simulate_host.sh: only 'avx2' is supported" >&2; exit 2; }
[ "$#" -gt 0 ] || { echo "simulate_host.sh: no command given" >&2; exit 2; }
grep -qw avx2 /proc/cpuinfo || { echo "simulate_host.sh: this host has no AVX2" >&2; exit 2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
fake=$(mktemp "${TMPDIR:-/tmp}/aotipre-cpuinfo.XXXXXX")
trap 'rm -f "$fake"' EXIT
sed -E '/^flags/ s/ (avx512[a-z0-9_]*|amx[a-z0-9_]*)//g' /proc/cpuinfo > "$fake"
export TORCHINDUCTOR_CPP_MARCH=haswell ATEN_CPU_CAPABILITY=avx2
export AOTIPRE_FIXTURE_DIR=${AOTIPRE_FIXTURE_DIR:-$PWD/.fixture-cache/simulated-avx2}
unshare -m -- sh -c 'mount --bind "$0" /proc/cpuinfo && exec "$@"' "$fake" "$@"
