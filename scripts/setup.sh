#!/usr/bin/env bash
# Installs everything LiteMQ needs on a fresh Debian machine with Python 3.11 and Java 17:
# Debian's kcat (a real Kafka client used by the tests), Debian's chromium (the web console's
# tests drive it headless) and the Python package with all extras.
#
# Where the Python package goes: into the active virtualenv when run inside one; otherwise into
# ./.venv, created here (stock Debian refuses pip installs into the system Python:
# "externally-managed-environment", PEP 668). The venv sees the interpreter's own site-packages
# (--system-site-packages), so packages already installed there are reused, not downloaded again.
# Activate it afterwards with:  . .venv/bin/activate   (scripts/test.sh and scripts/demo.sh do).
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
if [ "$(id -u)" != "0" ] && command -v sudo >/dev/null; then SUDO="sudo"; fi
apt_install() {
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  apt_install "${missing[@]}"
fi
PYTHON=python3
if [ -z "${VIRTUAL_ENV:-}" ] && ! python3 -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  if [ ! -x .venv/bin/python ]; then
    # Debian splits venv's pip bootstrap into the python3-venv package
    python3 -c 'import ensurepip' 2>/dev/null || apt_install python3-venv
    echo "setup: creating the virtualenv .venv (activate it with: . .venv/bin/activate)" >&2
    python3 -m venv --system-site-packages .venv
  fi
  PYTHON=.venv/bin/python
fi
"$PYTHON" -m pip install -q --disable-pip-version-check -e ".[clients,spark,pipeline,test]"
