# Sourced by scripts/test.sh and scripts/demo.sh after scripts/setup.sh: use the virtualenv
# setup made (./.venv) unless one is active already.
if [ -z "${VIRTUAL_ENV:-}" ] && [ -f .venv/bin/activate ]; then
  # shellcheck disable=SC1091
  . .venv/bin/activate
fi
