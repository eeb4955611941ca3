#!/usr/bin/env bash
# Installs everything LiteMQ needs on a fresh Debian machine with Python 3.11 and Java 17:
# Debian's kcat (a real Kafka client used by the tests) and the Python package with all extras.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
if ! command -v kcat >/dev/null 2>&1; then
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi
python3 -m pip install -q --disable-pip-version-check -e ".[clients,spark,pipeline,test]"
