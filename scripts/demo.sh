#!/usr/bin/env bash
# Install everything (scripts/bootstrap.sh), build a demo package and check it with aotipre.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
. scripts/bootstrap.sh
exec python scripts/demo.py "$@"
