"""Replicas copying a compacted log (``cleanup.policy=compact``) on 3 real broker processes.

Compaction leaves offset gaps in a log; a replica that copies it gets Raft entries whose batch
starts above its log end (``PartitionLogView.entries``: a compaction gap belongs to the batch
after it), which its follower append must take (Kafka ``UnifiedLog.append`` refuses only a
first offset below the log end). Before that, such a replica went offline for good ("cannot
persist Raft entries: follower append at offset 194, log end offset is 3").

- A follower is down while its leader takes 200 records over 3 keys and compacts them; it is
  restarted, catches up (no replica goes offline), is SIGKILLed and restarted again (its log,
  with gaps, is recovered), and then becomes the leader (the preferred replica): every record
  it serves (Fetch, and a confluent-kafka consumer) is the one produced at that offset, the
  latest record of every key is there, its log start, high watermark and ListOffsets answers
  are the old leader's, and the next records produced take the next offsets (no offset lost
  or added over the gaps). (Each replica compacts its own log, so their views may differ in the
  superseded records they still hold, never in a record's offset.)
- A replica added to a compacted topic by a reassignment ({1,2} -> {1,2,3}) copies the log from
  offset 0, whose first records were compacted away; the move completes and the new replica
  serves the records at their offsets.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartition as KafkaTopicPartition

from litemq.protocol.records import decode_batch, iter_batches
from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.wire import WireClient
from tests.cluster.test_cluster_failover import CLIENT

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500",
             "log.retention.check.interval.ms": "300", "log.cleaner.backoff.ms": "300",
             "leader.imbalance.check.interval.ms": "500"}
COMPACTED = {"cleanup.policy": "compact", "internal.segment.bytes": "1000", "min.cleanable.dirty.ratio": "0.01"}
KEYS = 3


def _create(cluster: LocalCluster, topic: str, replicas: list[int]) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas], config=COMPACTED)],
                        operation_timeout=30)[topic].result(timeout=60)
    cluster.wait_leaders(topic, 1)


def _produce(cluster: LocalCluster, topic: str, items: list[tuple[bytes, bytes]]) -> dict[int, tuple[bytes, bytes]]:
    """Produce ``items`` (key, value), one record per batch, acks=all, idempotent; returns the
    acknowledged offset -> (key, value)."""
    acked: dict[int, tuple[bytes, bytes]] = {}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[msg.offset()] = (msg.key(), msg.value())

    p = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 0, "batch.num.messages": 1, "max.in.flight.requests.per.connection": 1, **CLIENT})
    for k, v in items:
        p.produce(topic, v, k, partition=0, on_delivery=on_delivery)
        p.poll(0)
    assert p.flush(60) == 0 and not errors, errors
    return acked


def _fetch(cluster: LocalCluster, node: int, topic: str, offset: int):
    """One Fetch v11 (``replica_id`` -1, so a follower serves it up to its high watermark,
    KIP-392) to broker ``node``: its partition answer."""
    with WireClient("127.0.0.1", cluster.node(node).port, timeout_s=30) as w:
        resp = w.request(1, 11, {
            "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
            "topics": [{"topic": topic, "partitions": [{
                "partition": 0, "current_leader_epoch": -1, "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": 1 << 20}]}]})
    return resp.responses[0].partitions[0]


def _read_replica(cluster: LocalCluster, node: int, topic: str) -> tuple[list[tuple[int, bytes, bytes]], int, int]:
    """Every record of broker ``node``'s replica below its high watermark, read with Fetch from
    offset 0: ([(offset, key, value)], log start offset, high watermark)."""
    part = _fetch(cluster, node, topic, 0)
    assert part.error_code == 0, f"Fetch from broker {node}: error {part.error_code}"
    start, hw = part.log_start_offset, part.high_watermark
    out: list[tuple[int, bytes, bytes]] = []
    offset = 0
    while offset < hw:
        data = memoryview(bytes(part.records or b""))
        nxt = offset
        for pos, h in iter_batches(data):
            assert not h.is_control, "a compacted topic without transactions serves no control batch"
            out += [(r.offset, r.key, r.value) for r in decode_batch(data, pos)[1] if r.offset >= offset]
            nxt = max(nxt, h.base_offset + h.last_offset_delta + 1)
        assert nxt > offset, f"broker {node}: no batch at offset {offset} below the high watermark {hw}"
        offset = nxt
        if offset < hw:
            part = _fetch(cluster, node, topic, offset)
            assert part.error_code == 0, f"Fetch at {offset} from broker {node}: error {part.error_code}"
    return out, start, hw


def _check_view(view: list[tuple[int, bytes, bytes]], produced: dict[int, tuple[bytes, bytes]], what: str) -> None:
    """Every record read is the one produced at its offset, in offset order, and the latest record
    of every key is among them (compaction keeps it)."""
    offsets = [o for o, _, _ in view]
    assert offsets == sorted(set(offsets)), f"{what}: offsets not increasing"
    for o, k, v in view:
        assert produced.get(o) == (k, v), f"{what}: offset {o} holds {(k, v)}, produced {produced.get(o)}"
    latest = {}
    for o in sorted(produced):
        latest[produced[o][0]] = o
    missing = sorted(set(latest.values()) - set(offsets))
    assert not missing, f"{what}: the latest records of their keys at {missing} are missing"


def _status(cluster: LocalCluster, topic: str, exclude=()) -> dict[int, dict]:
    out = {}
    for node, st in cluster.statuses(exclude).items():
        for pt in st["partitions"]:
            if pt["topic"] == topic and pt["partition"] == 0:
                out[node] = pt
    return out


def _caught_up(cluster: LocalCluster, topic: str, node: int, end: int) -> bool:
    pt = _status(cluster, topic).get(node)
    return pt is not None and pt["log_end_offset"] == end and pt["high_watermark"] == end


def _no_replica_offline(cluster: LocalCluster) -> None:
    for node in cluster.node_ids:
        text = (Path(cluster.node(node).data_dir) / "broker.log").read_text(errors="replace")
        bad = [line for line in text.splitlines() if "replica goes offline" in line or "follower append at" in line]
        assert not bad, f"broker {node}: {bad[:3]}"


def _list_offsets(cluster: LocalCluster, node: int, topic: str) -> dict[int, int]:
    """ListOffsets v7 at broker ``node``: timestamp -> offset for EARLIEST (-2), LATEST (-1) and
    timestamp 0 (the first record)."""
    out = {}
    with WireClient("127.0.0.1", cluster.node(node).port, timeout_s=30) as w:
        for ts in (-2, -1, 0):
            r = w.request(2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [{"name": topic, "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": ts}]}]})
            x = r.topics[0].partitions[0]
            assert x.error_code == 0, x
            out[ts] = x.offset
    return out


def _consume_all(cluster: LocalCluster, topic: str, end: int) -> list[tuple[int, bytes, bytes]]:
    """Every record of ``topic``-0 below ``end`` through a confluent-kafka consumer (the leader)."""
    c = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "gap-check",
                  "enable.auto.commit": False, **CLIENT})
    out: list[tuple[int, bytes, bytes]] = []
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        wait_for(lambda: (out.extend((m.offset(), m.key(), m.value()) for m in c.consume(100, 0.5) if not m.error())
                          or (out and out[-1][0] >= end - 1)), 60, f"consumed {topic} up to {end}")
    finally:
        c.close()
    return out


def test_follower_down_while_leader_compacts_catches_up_and_leads(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        topic = "compacted"
        _create(cluster, topic, [1, 2, 3])
        wait_for(lambda: cluster.leader_of(topic, 0) == 1, 30, "the preferred replica 1 leads")
        produced = _produce(cluster, topic, [(b"k%d" % i, b"first-%d" % i) for i in range(KEYS)])
        wait_for(lambda: all(_caught_up(cluster, topic, n, KEYS) for n in (1, 2, 3)), 30, "3 records everywhere")
        cluster.kill(1)  # the victim: down while the others take records and compact
        cluster.wait_leaders(topic, 1, exclude={1})
        leader = cluster.leader_of(topic, 0)
        produced.update(_produce(cluster, topic, [(b"k%d" % (i % KEYS), b"v-%d" % i) for i in range(200)]))
        end = KEYS + 200
        assert sorted(produced) == list(range(end))
        wait_for(lambda: len(_read_replica(cluster, leader, topic)[0]) < end // 2, 60,
                 f"broker {leader} compacted {topic}")
        before, start, hw = _read_replica(cluster, leader, topic)
        assert (start, hw) == (0, end) and before[0][0] > KEYS, "the records after the victim's log end were compacted"
        _check_view(before, produced, f"leader {leader} before")

        cluster.restart(1)
        wait_for(lambda: _caught_up(cluster, topic, 1, end), 60,
                 lambda: f"broker 1 caught up to {end}: {_status(cluster, topic)}")
        _no_replica_offline(cluster)
        _check_view(_read_replica(cluster, 1, topic)[0], produced, "broker 1 caught up")

        cluster.kill(1)  # a crash: its log, with gaps, is recovered at the next start
        cluster.restart(1)
        wait_for(lambda: cluster.leader_of(topic, 0) == 1, 60,
                 lambda: f"broker 1 (preferred) leads again: {_status(cluster, topic)}")
        _no_replica_offline(cluster)
        listed = _list_offsets(cluster, 1, topic)
        after, start, hw = _read_replica(cluster, 1, topic)
        assert (start, hw) == (0, end)
        _check_view(after, produced, "broker 1 leading")
        # (broker 1 compacts its own log meanwhile: its first record may only move up)
        assert listed[-2] == 0 and listed[-1] == end and listed[0] in produced and listed[0] <= after[0][0]
        _check_view(_consume_all(cluster, topic, end), produced, "consumed from broker 1")

        # the next records take the next offsets, on every replica
        more = _produce(cluster, topic, [(b"k%d" % i, b"after-%d" % i) for i in range(KEYS)])
        assert sorted(more) == list(range(end, end + KEYS))
        produced.update(more)
        wait_for(lambda: all(_caught_up(cluster, topic, n, end + KEYS) for n in (1, 2, 3)), 30,
                 lambda: f"every replica at {end + KEYS}: {_status(cluster, topic)}")
        for n in (1, 2, 3):
            _check_view(_read_replica(cluster, n, topic)[0], produced, f"broker {n} at the end")
        _no_replica_offline(cluster)


def test_reassignment_adds_a_replica_to_a_compacted_topic(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        topic = "compacted-move"
        _create(cluster, topic, [1, 2])
        produced = _produce(cluster, topic, [(b"k%d" % (i % KEYS), b"v-%d" % i) for i in range(100)])
        leader = cluster.leader_of(topic, 0)
        wait_for(lambda: _read_replica(cluster, leader, topic)[0][0][0] > 0, 60,
                 f"broker {leader} compacted {topic} from offset 0")
        admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers, request_timeout_ms=30000)
        try:
            admin.alter_partition_reassignments({KafkaTopicPartition(topic, 0): [1, 2, 3]})
            wait_for(lambda: not admin.list_partition_reassignments() and _caught_up(cluster, topic, 3, 100), 60,
                     lambda: f"the move completes: {admin.list_partition_reassignments()}, {_status(cluster, topic)}")
        finally:
            admin.close()
        _no_replica_offline(cluster)
        view, start, hw = _read_replica(cluster, 3, topic)
        assert (start, hw) == (0, 100) and view[0][0] > 0
        _check_view(view, produced, "broker 3")
        assert sorted(_status(cluster, topic)) == [1, 2, 3]
