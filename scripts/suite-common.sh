# Shared by scripts/librdkafka-suite.sh and scripts/kafka-python-suite.sh (sourced, not run):
# waiting for a broker's port, and judging a client suite's failures against the script's
# KNOWN_FAILURES (an associative array: test name -> why it fails against LiteMQ).

# wait_for_port PORT: until 127.0.0.1:PORT accepts a connection, at most 10 s.
wait_for_port() {
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# judge_failures LOG NAME...: each failed test NAME is either in KNOWN_FAILURES (printed with its
# reason) or unexpected; with any unexpected one, KEEP=1 (the caller's EXIT trap keeps the work
# dir) and exit 1.
judge_failures() {
  local log=$1 name unexpected=0
  shift
  for name in "$@"; do
    if [ -n "${KNOWN_FAILURES[$name]:-}" ]; then
      echo "failed as expected: $name - ${KNOWN_FAILURES[$name]}"
    else
      echo "FAILED: $name (see $log)"
      unexpected=1
    fi
  done
  if [ "$unexpected" = 1 ]; then
    KEEP=1
    exit 1
  fi
  echo "no unexpected failure"
}
