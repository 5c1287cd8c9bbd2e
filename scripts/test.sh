#!/usr/bin/env bash
# Install everything (scripts/bootstrap.sh) and run the test suite. Fixture packages are built
# on first use into .fixture-cache/torch-<version>/ and reused after that.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/bootstrap.sh
set +e
python -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit "$rc"
