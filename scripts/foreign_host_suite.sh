#!/usr/bin/env bash
# The CPU test suite on a host that has torch but no network and no aotipre installed (the GPU
# test machine: torch 2.11, Python 3.12, a Xeon with AMX): what a new user's machine with
# another CPU and another torch makes of the suite.
#
#   bash scripts/foreign_host_suite.sh OUT PART/PARTS [pytest args...]
#
# Wheels of the pure dependencies that host lacks lie in .whl/ (iced_x86, tritonclient,
# protobuf; `pip download --only-binary=:all: --python-version 3.12 ...`); they are installed
# into a private folder put on PYTHONPATH (absolute: tests run workers from other folders). The
# fixtures are built by that host's torch. Test files are split into PARTS groups by a stable
# round robin over their sorted paths, so that one call's time limit holds one part; each
# test's outcome is written to OUT/part-PART.log as it finishes (-rA, -v), so a run cut by a
# time limit still names every test it ran.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=$1
part=${2%/*}
parts=${2#*/}
shift 2
site=/tmp/aotipre-site
python3 -m pip install -q --no-deps --no-index --target "$site" .whl/*.whl 2>&1 | tail -n 3 || true
export PYTHONPATH="$site:$PWD"
python3 scripts/build_fixtures.py > /dev/null
mapfile -t files < <(find tests -name 'test_*.py' | sort | awk -v p="$part" -v n="$parts" '(NR - 1) % n == p - 1')
jobs=$(( $(nproc) > 12 ? 12 : $(nproc) ))
python3 -m pytest -p no:cacheprovider -n "$jobs" --dist loadfile -v -rfE -m "not gpu" \
  "${files[@]}" "$@" > "$out/part-$part.log" 2>&1 || echo "pytest exit $?" >> "$out/part-$part.log"
tail -n 30 "$out/part-$part.log"
