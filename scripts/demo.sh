#!/usr/bin/env bash
# Installs (scripts/setup.sh) and runs the main job: the log pipeline on an embedded broker
# with the bundled real Apache access log plus any log files or directories given.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/activate.sh
exec litemq demo "$@"
