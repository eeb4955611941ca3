#!/usr/bin/env bash
# librdkafka's own test suite (its tests/0xxx broker tests) against LiteMQ: a 3-broker cluster
# (the default) or one broker (--single). Not part of scripts/test.sh: building librdkafka takes
# 1-4 minutes (once) and a run 5 (--quick) to 8 minutes. Results and the known differences:
# docs/librdkafka-suite.md.
#
#   bash scripts/librdkafka-suite.sh [--single] [--quick] [--tests 0012,0081] [--keep]
#                                    [--group-protocol consumer]
#
# It downloads librdkafka's source (LIBRDKAFKA_VERSION, default 2.0.2: Debian bookworm's, from
# deb.debian.org; LIBRDKAFKA_SRC_URL overrides the address), builds the library and the suite's
# test-runner into .cache/ (once), starts the brokers with the suite's "default" scenario
# (auto-created topics with 4 partitions and replication factor 3; an ACL authorizer that allows
# everyone) and runs every test that needs a broker (-L) except sockem's (-E) and the ones
# librdkafka marks as known issues (-K), two at a time. Tests that run Kafka's kafka-topics.sh
# and kafka-acls.sh ($KAFKA_PATH/bin) get scripts/kafka-tools/bin's, which do the same through
# litemq's CLI. It exits 1 if a test fails that is not in KNOWN_FAILURES below, with the reason
# each of those fails against LiteMQ.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
# shellcheck source=scripts/suite-common.sh
. scripts/suite-common.sh

SINGLE=0 QUICK=0 TESTS_ARG="" KEEP=0 GROUP_PROTOCOL=""
while [ $# -gt 0 ]; do
  case "$1" in
    --single) SINGLE=1 ;;
    --quick) QUICK=1 ;;
    --tests) TESTS_ARG="$2"; shift ;;
    --keep) KEEP=1 ;;
    # the suite's consumers use this group.protocol (TEST_CONSUMER_GROUP_PROTOCOL: "consumer" is
    # KIP-848's; librdkafka 2.4 or later, LIBRDKAFKA_VERSION=2.8.0); default: its own, classic
    --group-protocol) GROUP_PROTOCOL="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "unknown option: $1" >&2; exit 2 ;;
  esac
  shift
done

# Tests that fail against LiteMQ for a reason outside LiteMQ's broker (the suite's harness) or
# because LiteMQ answers as Kafka 4 does where librdkafka 2.0.2's test expects an older Kafka.
declare -A KNOWN_FAILURES=(
  [0052_msg_timestamps]="its 0.9.0.0 cases turn ApiVersions off (api.version.request=false, broker.version.fallback=0.9.0.0) and produce message format v0 with Produce v1, which Kafka 4 removed (KIP-724, KIP-896): refused (UNSUPPORTED_FOR_MESSAGE_FORMAT); its 0.10.1.0 cases (CreateTime, LogAppendTime) pass"
  [0077_compaction]="creates its topic with segment.bytes=10000, below Kafka 4's minimum of 1 MiB (INVALID_CONFIG), through kafka-topics.sh"
  [0092_mixed_msgver]="sets message.format.version, a topic config Kafka 4 removed (INVALID_CONFIG)"
  [0129_fetch_aborted_msgs]="creates a topic with segment.bytes=20000, below Kafka 4's minimum of 1 MiB (INVALID_CONFIG)"
  [0055_producer_latency]="may fail: it counts librdkafka's own broker-thread wake-ups (10..1000 expected for its linger.ms=0 case), which depend on the client's scheduling; one broker gave 8 in one run, with every latency in range (0.35-0.44 ms)"
  ["<MAIN>"]="the runner's exit check: the failed tests above left their clients' threads running"
)
case "${LIBRDKAFKA_VERSION:-2.0.2}" in
  2.0.*) ;;
  *) KNOWN_FAILURES[0001_multiobj]="may fail (librdkafka 2.8): a client's rd_kafka_destroy() takes 1 s, above the test's 999 ms: its debug log shows 'Terminating instance', then 'Destroy internal' 1 s later, with no request in flight - its main thread noticed the termination only at its next 1 s wake-up; 2.0.2 passes"
     KNOWN_FAILURES[0084_destroy_flags]="may fail (librdkafka 2.8): rd_kafka_destroy_flags() takes 1 s where the test allows 200 ms, the same 1 s wake-up as 0001_multiobj's"
     KNOWN_FAILURES[0086_purge_remote]="may fail (librdkafka 2.8): it purges right after its first ProduceRequest's response and expects the second request in flight; the client had not sent it yet (its messages 'Purged in queue'), which depends on the client's thread scheduling" ;;
esac
if [ "$SINGLE" = 1 ]; then
  KNOWN_FAILURES[0103_transactions]="asks for replication factor 3 explicitly, more than the 1 broker (INVALID_REPLICATION_FACTOR)"
  KNOWN_FAILURES[0081_admin]="AlterConfigs of the broker config sasl.kerberos.min.time.before.relogin: LiteMQ has no Kerberos (GSSAPI) and refuses its configs (INVALID_CONFIG), where Kafka stores every broker config it knows"
else
  KNOWN_FAILURES[0081_admin]="CreateTopics with timeout_ms=0: Kafka 4's controller expires the request (REQUEST_TIMED_OUT, nothing created), which librdkafka reports as success; the test expects ZooKeeper-era Kafka, which created the topics and validated their configs first"
fi

VERSION=${LIBRDKAFKA_VERSION:-2.0.2}
URL=${LIBRDKAFKA_SRC_URL:-http://deb.debian.org/debian/pool/main/libr/librdkafka/librdkafka_${VERSION}.orig.tar.gz}
CACHE="$ROOT/.cache/librdkafka-$VERSION"
RUNNER="$CACHE/tests/test-runner"

if [ ! -d .venv ] && [ -z "${VIRTUAL_ENV:-}" ]; then
  bash scripts/setup.sh
fi
. scripts/activate.sh

if [ ! -x "$RUNNER" ]; then
  echo "building librdkafka $VERSION and its test-runner in $CACHE (1-4 min) ..."
  mkdir -p "$ROOT/.cache"
  rm -rf "$CACHE"
  tmp=$(mktemp -d)
  curl -fsSL -o "$tmp/src.tgz" "$URL"
  tar xzf "$tmp/src.tgz" -C "$tmp"
  mv "$tmp/librdkafka-$VERSION" "$CACHE"
  rm -rf "$tmp"
  (cd "$CACHE" \
    && ./configure --disable-ssl --disable-gssapi --disable-zstd --disable-curl --disable-sasl --disable-lz4-ext \
         > "$CACHE/build-configure.txt" 2>&1 \
    && make -j2 libs > "$CACHE/build-make.txt" 2>&1 \
    && make -C tests build > "$CACHE/build-tests.txt" 2>&1) \
    || { echo "build failed; see $CACHE/build-*.txt" >&2; exit 1; }
fi

WORK=$(mktemp -d -t librdkafka-suite-XXXXXX)
RF=3
[ "$SINGLE" = 1 ] && RF=1
BROKER_OPTS=(-o num.partitions=4 -o "default.replication.factor=$RF"
             -o authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
             -o allow.everyone.if.no.acl.found=true
             # The suite produces records stamped in 1970 (0059_bsearch and others); Kafka's time
             # retention deletes them at its next check (every 5 min), which makes a test fail
             # whenever a check falls inside it. One check an hour keeps a run deterministic.
             -o log.retention.check.interval.ms=3600000)
BASE_PORT=${LIBRDKAFKA_SUITE_PORT:-29092}
trap stop_brokers EXIT

if [ "$SINGLE" = 1 ]; then
  litemq serve --data-dir "$WORK/single" --listen "127.0.0.1:$BASE_PORT" "${BROKER_OPTS[@]}" \
    > "$WORK/broker.log" 2>&1 &
  SINGLE_PID=$!
  wait_for_port "$BASE_PORT" || true  # a broker that never listens: the tests fail, its log is kept
  BOOTSTRAP="127.0.0.1:$BASE_PORT"
  TARGET="one broker"
else
  litemq cluster start -n 3 --base-port "$BASE_PORT" --http-base-port "$((BASE_PORT + 200))" \
    --data-dir "$WORK/cluster" "${BROKER_OPTS[@]}" > "$WORK/cluster-start.out"
  BOOTSTRAP="127.0.0.1:$BASE_PORT,127.0.0.1:$((BASE_PORT + 1)),127.0.0.1:$((BASE_PORT + 2))"
  TARGET="a 3-broker cluster"
fi
printf 'metadata.broker.list=%s\ntest.timeout.multiplier=3\n' "$BOOTSTRAP" > "$WORK/test.conf"

args=(-L -E -K -p2)
SKIP=""
if [ "$QUICK" = 1 ]; then
  args+=(-Q)
else
  # Full mode only (--quick leaves this sub-test out): librdkafka 2.0's consumer destroy hangs
  # for good after a subscribed topic is deleted (a toppar reference leaked since 2.0.0:
  # confluentinc/librdkafka#4362, #4486), so 0113's h_delete_topic times out - against Kafka
  # too - and the test-runner stops there without running the tests after it.
  SKIP=0113_cooperative_rebalance
fi
if [ "$GROUP_PROTOCOL" = consumer ]; then
  # Its consumer subscribes to a topic it may not describe (a deny ACL) and waits for an
  # assignment; the ConsumerGroupHeartbeat is answered TOPIC_AUTHORIZATION_FAILED, as by Kafka 4
  # (docs/consumer-groups.md), and librdkafka 2.8 retries it until the test's timeout, which
  # stops the test-runner and every test after it.
  SKIP="${SKIP:+$SKIP,}0109_auto_create_topics"
fi
echo "librdkafka $VERSION test suite against $TARGET ($BOOTSTRAP)${GROUP_PROTOCOL:+, group.protocol=$GROUP_PROTOCOL}: test-runner ${args[*]}${TESTS_ARG:+, TESTS=$TESTS_ARG}${SKIP:+, TESTS_SKIP=$SKIP}"
# set only when given: the harness takes an empty value for a protocol name
if [ -n "$GROUP_PROTOCOL" ]; then export TEST_CONSUMER_GROUP_PROTOCOL="$GROUP_PROTOCOL"; fi
set +e
(cd "$CACHE/tests" && RDKAFKA_TEST_CONF="$WORK/test.conf" TEST_KAFKA_VERSION=3.6.0 \
   KAFKA_PATH="$ROOT/scripts/kafka-tools" BROKERS="$BOOTSTRAP" \
   LD_LIBRARY_PATH="$CACHE/src:$CACHE/src-cpp" TESTS="$TESTS_ARG" TESTS_SKIP="$SKIP" ./test-runner "${args[@]}") \
  > "$WORK/suite.log" 2>&1
set -e

# Outcomes from each test's own lines: the summary table at the end can miss rows when it is
# printed while another test's output interleaves or the runner aborts.
log=$(sed 's/\x1b\[[0-9;]*m//g' "$WORK/suite.log")
passed=$( (grep -a -o -E 'Test [0-9]{4}_[A-Za-z0-9_.-]+ PASSED' <<< "$log" || true) | sort -u | wc -l)
skipped=$( (grep -a -o -E '^\[[0-9]{4}_[A-Za-z0-9_.-]+ */ +[0-9.]+s\] WARN: SKIPPING TEST' <<< "$log" || true) \
          | awk '{print $1}' | sort -u | wc -l)
failed=$( (grep -a -o -E '^### Test "[^" (]+' <<< "$log" || true) | sed 's/^### Test "//' | sort -u)
if [ "$passed" = 0 ] && [ -z "$failed" ]; then
  echo "no test outcome in the suite's log:" >&2
  tail -20 "$WORK/suite.log" >&2
  KEEP=1
  exit 1
fi
echo "passed $passed, skipped $skipped (local-only, sockem, known librdkafka issues, a broker version or TESTS_SKIP)"
# shellcheck disable=SC2086
judge_failures "$WORK/suite.log" $failed
