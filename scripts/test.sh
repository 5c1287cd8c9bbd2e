#!/usr/bin/env bash
# Install everything (scripts/bootstrap.sh) and run the test suite. Fixture packages are built
# on first use into .fixture-cache/torch-<version>/ and reused after that.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/bootstrap.sh
# One pytest worker per CPU, at most 4 (pytest-xdist; AOTIPRE_TEST_JOBS=1 runs in one process), each
# taking whole test files: a module's fixtures (the packages its tests build) are built once.
jobs=${AOTIPRE_TEST_JOBS:-$(nproc)}
[ "$jobs" -le 4 ] || jobs=4  # each may compile and load packages: a few GB of memory
parallel=()
if [ "$jobs" -gt 1 ]; then
  parallel=(-n "$jobs" --dist loadfile)
fi
set +e
python -m pytest -q -p no:cacheprovider "${parallel[@]}" "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
