#!/usr/bin/env bash
# Installs (scripts/setup.sh) and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/activate.sh
# Two pytest-xdist workers: one runs the heavy tests (Spark, clusters, faults, client groups) in turn,
# the other the rest (tests/conftest.py groups them); LITEMQ_TEST_WORKERS=0 runs in one process.
exec python3 -m pytest -q -p no:cacheprovider -n "${LITEMQ_TEST_WORKERS:-2}" --dist loadgroup "$@"
