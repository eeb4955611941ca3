"""A restarted broker replays its metadata log: the history of its replicas must not act on
the partitions it hosts now.

- A partition moved off a broker and back (reassignment [2] -> [3] -> [2]): replaying the
  record that moved it away deleted the replica the broker hosts again, with every
  acknowledged record of a replication-factor-1 partition.
- A topic deleted and created again under the same name: replaying the deletion deleted the
  new topic's replica.

Both after a clean restart (SIGTERM) and after a SIGKILL, every acknowledged record is read
back at its offset (Kafka's brokers act on the metadata image they caught up to, and on topic
ids, never on a replayed past state). A partition directory records its topic's id (Kafka's
``partition.metadata``), so one left from an earlier topic of the same name is not reused.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTopicPartition

from litemq.storage.partition_metadata import read_topic_id, write_topic_id
from litemq.testing.cluster import LocalCluster, wait_for

pytestmark = [pytest.mark.timeout(300)]

OVERRIDES = {"broker.heartbeat.interval.ms": "250", "broker.session.timeout.ms": "2500"}
RECORDS = 300


def _create(admin: AdminClient, topic: str, assignment: list[list[int]]) -> None:
    admin.create_topics([NewTopic(topic, len(assignment), replica_assignment=assignment)],
                        operation_timeout=30)[topic].result(timeout=60)


def _replicas(admin: AdminClient, topic: str) -> list[int] | None:
    md = admin.list_topics(topic, timeout=10).topics.get(topic)
    if md is None or md.error is not None or 0 not in md.partitions:
        return None
    return list(md.partitions[0].replicas)


def _recreated(admin: AdminClient, topic: str, assignment: list[list[int]]) -> bool:
    """Create ``topic`` again once its deletion is done (TOPIC_ALREADY_EXISTS until then)."""
    try:
        _create(admin, topic, assignment)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise
    return True


def _produce(bootstrap: str, topic: str) -> list[int]:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    offsets: list[int] = []
    for i in range(RECORDS):
        p.produce(topic, value=b"%s-%d" % (topic.encode(), i), partition=0,
                  on_delivery=lambda err, m: offsets.append(m.offset()) if err is None else None)
    assert p.flush(60) == 0
    return sorted(offsets)


def _read(bootstrap: str, topic: str) -> list[tuple[int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes]] = []

    def more() -> bool:
        for m in c.consume(100, timeout=1):
            if m.error() is None:
                got.append((m.offset(), m.value()))
        return len(got) >= RECORDS
    try:
        wait_for(more, 30, f"{RECORDS} records of {topic}")
    finally:
        c.close()
    return got


def test_replayed_history_never_deletes_a_replica_hosted_now(tmp_path):
    with LocalCluster(tmp_path, 3, OVERRIDES) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        _create(admin, "back", [[2]])
        _create(admin, "again", [[2]])
        kadmin = KafkaAdminClient(bootstrap_servers=bs, request_timeout_ms=30000)
        for target in ([3], [2]):  # off broker 2 and back
            kadmin.alter_partition_reassignments({KTopicPartition("back", 0): target})
            wait_for(lambda t=target: _replicas(admin, "back") == t and not kadmin.list_partition_reassignments(),
                     60, f"back-0 moved to {target}")
        kadmin.close()
        admin.delete_topics(["again"], operation_timeout=30)["again"].result(timeout=60)
        wait_for(lambda: _recreated(admin, "again", [[2]]), 30, "again created again")
        cluster.wait_leaders("back", 1)
        cluster.wait_leaders("again", 1)
        want = {t: [(o, b"%s-%d" % (t.encode(), o)) for o in range(RECORDS)] for t in ("back", "again")}
        for topic in want:
            assert _produce(bs, topic) == list(range(RECORDS))
        for restart in ("SIGTERM", "SIGKILL"):
            if restart == "SIGKILL":
                cluster.kill(2)
            cluster.restart(2)
            cluster.wait_leaders("back", 1, timeout_s=30)
            cluster.wait_leaders("again", 1, timeout_s=30)
            for topic, records in want.items():
                assert _read(bs, topic) == records, f"{topic} after a {restart} restart of broker 2"
            for topic in want:  # the replica records its topic's id (Kafka's partition.metadata)
                assert read_topic_id(Path(cluster.node(2).data_dir) / f"{topic}-0") is not None

        # A directory that holds an earlier topic of the same name (a deletion this broker never
        # applied) is not taken for the current topic: it is deleted and the replica starts empty.
        cluster.kill(2)
        write_topic_id(Path(cluster.node(2).data_dir) / "again-0", uuid.uuid4())
        cluster.restart(2)
        cluster.wait_leaders("again", 1, timeout_s=30)
        c = Consumer({"bootstrap.servers": bs, "group.id": "marks"})
        try:
            assert wait_for(lambda: c.get_watermark_offsets(TopicPartition("again", 0), timeout=5) == (0, 0), 30,
                            "again-0 empty")
        finally:
            c.close()
        assert "belongs to an earlier topic" in Path(cluster.node(2).log_path).read_text()
