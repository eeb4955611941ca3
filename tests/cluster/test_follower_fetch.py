"""Follower fetching (KIP-392) and broker racks on 3 real broker processes in racks a, b, c.

``replica.selector.class`` is a per-broker setting read by a partition's leader: brokers 2 and 3
run Kafka's RackAwareReplicaSelector, broker 1 none, so a partition led by 2 sends consumers of
another rack to their rack's follower, one led by 1 serves every consumer itself.

- Every broker registers its ``broker.rack``: Metadata, DescribeCluster, the ``status`` RPC
  (``litemq cluster status``), the REST API and DescribeConfigs (read-only) show it.
- On the wire: the leader answers Fetch v11+ of a consumer in another rack at once with no
  records and ``preferred_read_replica`` = the follower of that rack (-1 for a consumer in its
  own rack, without a rack or in a rack with no replica, and before v11); a follower serves
  Fetch v11+ up to its high watermark (the last stable offset with read_committed, under an
  open transaction) and long-polls for more, answers Fetch v10 and ListOffsets
  NOT_LEADER_OR_FOLLOWER and an offset past its log end OFFSET_OUT_OF_RANGE.
- librdkafka with ``client.rack``: the follower of its rack serves every record (its bytes-out
  metric counts them, the leader's stays 0), each read once in order, also while a producer
  writes; with the leader's selector unset the leader serves and the follower sends nothing;
  ``litemq consume --rack`` reads from its rack's follower too.
- The serving follower SIGKILLed under an acks=all idempotent load: the consumer goes back to
  the leader and reads every acknowledged record once, in order.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from litemq.config import RACK_AWARE_REPLICA_SELECTOR
from litemq.protocol.errors import ErrorCode
from litemq.protocol.records import decode_records
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient
from tests.cluster.test_cluster_failover import CLIENT, Load, check_no_acked_loss, wait_replicas_caught_up
from tests.observability.helpers import get_json, scrape

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

RACKS = {1: "a", 2: "b", 3: "c"}
OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "leader.imbalance.check.interval.ms": "500"}
NODE_OVERRIDES = {1: {"broker.rack": "a"},
                  2: {"broker.rack": "b", "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR},
                  3: {"broker.rack": "c", "replica.selector.class": RACK_AWARE_REPLICA_SELECTOR}}
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with LocalCluster(tmp_path_factory.mktemp("follower-fetch"), 3, overrides=OVERRIDES,
                      node_overrides=NODE_OVERRIDES, http=True) as c:
        yield c


def _create(cluster: LocalCluster, name: str, replicas: list[int]) -> None:
    """Topic ``name``, one partition on ``replicas`` (the first leads), once its leader is the first."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, replica_assignment=[replicas])], operation_timeout=30)[name].result(60)
    wait_for(lambda: cluster.leaders().get((name, 0), {}).get("leader_id") == replicas[0], 30,
             f"broker {replicas[0]} leads {name}-0")


def _produce(cluster: LocalCluster, topic: str, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, **CLIENT})
    for v in values:
        p.produce(topic, v, partition=0)
    assert p.flush(60) == 0


def _replica(cluster: LocalCluster, node: int, topic: str) -> dict:
    """``topic``-0 as broker ``node``'s status reports its replica."""
    return next(p for p in cluster.status(node)["partitions"] if p["topic"] == topic and p["partition"] == 0)


def _wait_high_watermark(cluster: LocalCluster, node: int, topic: str, hw: int) -> None:
    wait_for(lambda: _replica(cluster, node, topic)["high_watermark"] == hw, 20,
             lambda: f"broker {node}'s replica of {topic}-0 at high watermark {hw}: {_replica(cluster, node, topic)}")


def _fetch_body(topic: str, offset: int, rack: str = "", max_wait_ms: int = 0, isolation_level: int = 0) -> dict:
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 1 << 20,
            "isolation_level": isolation_level, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                 "partition_max_bytes": 1 << 20}]}],
            "forgotten_topics_data": [], "rack_id": rack}


def _fetch(cluster: LocalCluster, node: int, topic: str, offset: int, rack: str = "", version: int = 11,
           max_wait_ms: int = 0, isolation_level: int = 0):
    """One Fetch to broker ``node``: its partition entry."""
    with WireClient("127.0.0.1", cluster.node(node).port, timeout_s=60) as c:
        resp = c.request(1, version, _fetch_body(topic, offset, rack, max_wait_ms, isolation_level))
    return resp.responses[0].partitions[0]


def _values(part, start: int = 0) -> list[bytes]:
    """The values of the records at offsets >= ``start`` (a fetch returns whole batches)."""
    if not part.records:
        return []
    return [r.value for r in decode_records(part.records, skip_control=True) if r.offset >= start]


def _bytes_out(cluster: LocalCluster, node: int, topic: str) -> float:
    return scrape(cluster.http_url(node)).get1(BYTES_OUT, topic=topic) or 0.0


# ---------------------------------------------------------------------------- racks
def test_brokers_register_their_racks(cluster):
    def racks_everywhere():
        for node in cluster.node_ids:
            with WireClient("127.0.0.1", cluster.node(node).port) as c:
                md = c.request(3, 12, {"topics": [], "allow_auto_topic_creation": False,
                                       "include_topic_authorized_operations": False})
                dc = c.request(60, 0, {"include_cluster_authorized_operations": False})
            if {b.node_id: b.rack for b in md.brokers} != RACKS or {b.broker_id: b.rack for b in dc.brokers} != RACKS:
                return False
            if {b["node_id"]: b["rack"] for b in cluster.status(node)["brokers"]} != RACKS:
                return False
        return True

    wait_for(racks_everywhere, 20, "Metadata, DescribeCluster and status of every broker show racks a, b, c")
    url = f"{cluster.http_url(1)}/v3/clusters/{cluster.status(1)['cluster_id']}/brokers"  # the REST API
    assert {b["broker_id"]: b["rack"] for b in get_json(url)["data"]} == RACKS
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for node, want_selector in ((1, None), (3, RACK_AWARE_REPLICA_SELECTOR)):  # read-only broker configs
        res = ConfigResource("broker", str(node))
        entries = admin.describe_configs([res])[res].result(30)
        assert (entries["broker.rack"].value, entries["broker.rack"].is_read_only) == (RACKS[node], True)
        assert entries["replica.selector.class"].value == want_selector


# ---------------------------------------------------------------------------- on the wire
def test_leader_names_the_follower_in_the_consumers_rack(cluster):
    topic = "ff-wire"
    _create(cluster, topic, [2, 3, 1])  # leader 2 (rack b, selector on), followers 3 (c) and 1 (a)
    _produce(cluster, topic, [b"v%d" % i for i in range(50)])
    for node in (3, 1):
        _wait_high_watermark(cluster, node, topic, 50)
    wait_replicas_caught_up(cluster, topic, 1)

    started = time.monotonic()
    part = _fetch(cluster, 2, topic, 0, rack="c", max_wait_ms=20_000)
    assert time.monotonic() - started < 10, "a fetch sent to its preferred read replica is answered at once"
    assert (part.error_code, part.preferred_read_replica, _values(part), part.high_watermark) == (0, 3, [], 50)
    assert _fetch(cluster, 2, topic, 0, rack="a").preferred_read_replica == 1  # a follower without a selector
    for rack in ("b", "", "no-such-rack"):  # the leader's rack, no rack, a rack without a replica
        part = _fetch(cluster, 2, topic, 0, rack=rack)
        assert (part.error_code, part.preferred_read_replica, len(_values(part))) == (0, -1, 50), rack
    part = _fetch(cluster, 2, topic, 0, version=10)  # before KIP-392: no client rack, leader only
    assert (part.error_code, len(_values(part))) == (0, 50)

    for node in (3, 1):  # followers serve v11+ whatever their own selector
        part = _fetch(cluster, node, topic, 0, rack=RACKS[node])
        assert (part.error_code, part.preferred_read_replica, part.high_watermark) == (0, -1, 50)
        assert _values(part) == [b"v%d" % i for i in range(50)]
        part = _fetch(cluster, node, topic, 20, rack="b")
        assert _values(part, 20) == [b"v%d" % i for i in range(20, 50)]
    assert _fetch(cluster, 3, topic, 0, version=10).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (_fetch(cluster, 3, topic, 50).error_code, _values(_fetch(cluster, 3, topic, 50))) == (0, [])
    part = _fetch(cluster, 3, topic, 51)
    assert (part.error_code, part.high_watermark) == (ErrorCode.OFFSET_OUT_OF_RANGE, 50)

    with WireClient("127.0.0.1", cluster.node(3).port) as c:  # ListOffsets stays leader-only
        lo = c.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]})
    assert lo.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_follower_long_poll_wakes_at_its_high_watermark(cluster):
    topic = "ff-poll"
    _create(cluster, topic, [2, 3, 1])
    _produce(cluster, topic, [b"first"])
    _wait_high_watermark(cluster, 3, topic, 1)
    result = {}

    def poll():
        result["part"] = _fetch(cluster, 3, topic, 1, rack="c", max_wait_ms=20_000)
        result["at"] = time.monotonic()

    t = threading.Thread(target=poll, daemon=True)
    t.start()
    time.sleep(0.5)
    assert "part" not in result, "nothing past the follower's high watermark yet: the fetch waits"
    produced_at = time.monotonic()
    _produce(cluster, topic, [b"second"])
    t.join(30)
    assert _values(result["part"]) == [b"second"] and result["part"].high_watermark == 2
    assert result["at"] - produced_at < 15, "woken by the follower's high watermark, not by max_wait_ms"


def test_follower_read_committed_stops_at_the_last_stable_offset(cluster):
    topic = "ff-txn"
    _create(cluster, topic, [2, 3, 1])
    _produce(cluster, topic, [b"plain%d" % i for i in range(3)])
    txn = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": "ff-txn-1", **CLIENT})
    txn.init_transactions(60)
    txn.begin_transaction()
    for i in range(4):
        txn.produce(topic, b"txn%d" % i, partition=0)
    assert txn.flush(60) == 0
    _wait_high_watermark(cluster, 3, topic, 7)
    part = _fetch(cluster, 3, topic, 0, rack="c", isolation_level=1)
    assert (part.error_code, part.high_watermark, part.last_stable_offset) == (0, 7, 3)
    assert _values(part) == [b"plain0", b"plain1", b"plain2"]
    assert len(_values(_fetch(cluster, 3, topic, 0, rack="c"))) == 7  # read_uncommitted: up to the high watermark
    txn.commit_transaction(60)
    _wait_high_watermark(cluster, 3, topic, 8)  # the COMMIT marker
    wait_for(lambda: _fetch(cluster, 3, topic, 0, isolation_level=1).last_stable_offset == 8, 20,
             "the follower's last stable offset passes the committed transaction")
    assert _values(_fetch(cluster, 3, topic, 0, isolation_level=1)) == \
        [b"plain0", b"plain1", b"plain2", b"txn0", b"txn1", b"txn2", b"txn3"]


# ---------------------------------------------------------------------------- librdkafka
def _consume(cluster: LocalCluster, topic: str, rack: str, until: int, timeout_s: float = 60.0,
             stop: threading.Event | None = None, out: list | None = None) -> list[tuple[int, bytes]]:
    """(offset, value) of ``topic``-0 from the beginning, read by librdkafka with ``client.rack``
    = ``rack``, until ``until`` records were read (or ``stop`` is set and nothing came for 2 s)."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"ff-{topic}-{rack}",
                         "client.rack": rack, "enable.auto.commit": False, "fetch.wait.max.ms": 100,
                         "topic.metadata.refresh.interval.ms": 1000, **CLIENT})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    read = out if out is not None else []
    deadline = time.monotonic() + timeout_s
    idle_since = time.monotonic()
    try:
        while time.monotonic() < deadline and len(read) < until:
            msgs = consumer.consume(1000, 0.5)
            for m in msgs:
                assert m.error() is None, m.error()
                read.append((m.offset(), m.value()))
            if msgs:
                idle_since = time.monotonic()
            elif stop is not None and stop.is_set() and time.monotonic() - idle_since > 2.0:
                break
    finally:
        consumer.close()
    return read


def test_librdkafka_fetches_from_the_follower_in_its_rack(cluster):
    topic = "ff-rdkafka"
    _create(cluster, topic, [2, 3, 1])
    first = [b"rec-%05d" % i for i in range(2000)]
    _produce(cluster, topic, first)
    wait_replicas_caught_up(cluster, topic, 1)
    _wait_high_watermark(cluster, 3, topic, len(first))

    read = _consume(cluster, topic, "c", len(first))
    assert read == list(enumerate(first)), "every record once, in order"
    served = _bytes_out(cluster, 3, topic)
    assert served >= sum(map(len, first)), f"the follower in rack c served the records ({served} bytes out)"
    assert _bytes_out(cluster, 2, topic) == 0, "the leader sent no record: it named the follower at once"
    assert _bytes_out(cluster, 1, topic) == 0

    # while a producer writes: still once each, in order, from the follower
    more = [b"live-%05d" % i for i in range(1500)]
    writer = threading.Thread(target=_produce, args=(cluster, topic, more), daemon=True)
    writer.start()
    read = _consume(cluster, topic, "c", len(first) + len(more), timeout_s=120)
    writer.join(60)
    assert read == list(enumerate(first + more))
    assert _bytes_out(cluster, 3, topic) >= served + sum(map(len, more))


def test_selector_unset_on_the_leader_serves_every_consumer_itself(cluster):
    topic = "ff-leader-only"
    _create(cluster, topic, [1, 2, 3])  # broker 1 runs no replica.selector.class
    values = [b"only-%04d" % i for i in range(500)]
    _produce(cluster, topic, values)
    wait_replicas_caught_up(cluster, topic, 1)
    for rack in ("b", "c"):
        part = _fetch(cluster, 1, topic, 0, rack=rack)
        assert (part.error_code, part.preferred_read_replica, len(_values(part))) == (0, -1, 500)
    assert _consume(cluster, topic, "b", len(values)) == list(enumerate(values))
    assert _bytes_out(cluster, 1, topic) >= 2 * sum(map(len, values))  # the two wire fetches and librdkafka
    assert _bytes_out(cluster, 2, topic) == 0 and _bytes_out(cluster, 3, topic) == 0


def test_cli_consume_with_a_rack_reads_from_that_racks_follower(cluster):
    topic = "ff-cli"
    _create(cluster, topic, [2, 3, 1])
    values = [b"cli-%03d" % i for i in range(100)]
    _produce(cluster, topic, values)
    wait_replicas_caught_up(cluster, topic, 1)
    _wait_high_watermark(cluster, 3, topic, len(values))
    r = subprocess.run([sys.executable, "-m", "litemq.cli", "consume", topic, "--from-beginning", "-n", "100",
                        "--rack", "c", "--timeout", "30", "-b", cluster.bootstrap_servers],
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == values
    assert _bytes_out(cluster, 3, topic) > 0 and _bytes_out(cluster, 2, topic) == 0


def test_consumer_falls_back_to_the_leader_when_its_follower_is_killed(cluster):
    """Last in this module: it kills broker 3 (and restarts it at the end)."""
    topic = "ff-kill"
    _create(cluster, topic, [2, 3, 1])
    load = Load(cluster.bootstrap_servers, topic, 1, rate=300).start()
    stop = threading.Event()
    read: list[tuple[int, bytes]] = []
    reader = threading.Thread(target=_consume, daemon=True,
                              kwargs={"cluster": cluster, "topic": topic, "rack": "c", "until": 10**9,
                                      "timeout_s": 240, "stop": stop, "out": read})
    reader.start()
    try:
        load.wait_progress(200, what="before the kill")
        wait_for(lambda: len(read) >= 200, 30, lambda: f"the consumer reads ({len(read)} records so far)")
        wait_for(lambda: _bytes_out(cluster, 3, topic) > 0, 20, "broker 3 (rack c) serves the consumer")
        cluster.kill(3)
        at_kill = len(read)
        load.wait_progress(300, timeout_s=60, what="after SIGKILL of the serving follower")
        wait_for(lambda: len(read) >= at_kill + 300, 60,
                 lambda: f"the consumer goes on through the leader ({len(read) - at_kill} records since the kill)")
        assert _bytes_out(cluster, 2, topic) > 0, "the leader served the consumer after the kill"
    finally:
        load.stop()
        stop.set()
        reader.join(120)
        cluster.restart(3)
    offsets = [o for o, _ in read]
    assert offsets == list(range(len(read))), "every record read once, in order, across the fallback"
    got = {0: [(o, int(v.decode().split(":")[1])) for o, v in read]}
    check_no_acked_loss(load, got)
