# Shared by scripts/librdkafka-suite.sh and scripts/kafka-python-suite.sh (sourced, not run):
# stopping the brokers, waiting for a broker's port, and judging a client suite's failures against the script's
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

# stop_brokers: the EXIT trap of a suite script. Stops the one broker it started (SINGLE_PID) or
# else its cluster in $WORK/cluster, then removes $WORK unless KEEP=1.
stop_brokers() {
  if [ -n "${SINGLE_PID:-}" ]; then
    kill "$SINGLE_PID" 2>/dev/null && wait "$SINGLE_PID" 2>/dev/null || true
  else
    litemq cluster stop --data-dir "$WORK/cluster" > /dev/null 2>&1 || true
  fi
  if [ "$KEEP" = 1 ]; then echo "broker data, logs and the suite's log kept in $WORK"; else rm -rf "$WORK"; fi
}
