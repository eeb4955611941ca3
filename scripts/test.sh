#!/usr/bin/env bash
# Installs (scripts/setup.sh) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/activate.sh
exec python3 -m pytest -q -p no:cacheprovider "$@"
