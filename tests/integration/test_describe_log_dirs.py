"""DescribeLogDirs (35) on one broker: kafka-python's ``describe_log_dirs`` (the way
``kafka-log-dirs.sh`` and UIs read partition sizes) and the raw wire at v0 and v4."""

from __future__ import annotations

import os
import random

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient
from kafka.structs import TopicPartitionReplica

from litemq.testing.wire import WireClient


def test_describe_log_dirs_reports_each_hosted_partition_size(shared_broker):
    bs = shared_broker.bootstrap_servers
    topic = f"logdirs-{random.randrange(1 << 30)}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
    p = Producer({"bootstrap.servers": bs, "linger.ms": 0})
    for i in range(20):
        p.produce(topic, b"v" * 500, partition=0)
    assert p.flush(30) == 0

    kadmin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        [broker] = kadmin.describe_log_dirs(topic_partitions={topic: [0, 1, 7]})
    finally:
        kadmin.close()
    [log_dir] = broker["log_dirs"]
    assert log_dir["error_code"] == 0
    assert log_dir["log_dir"] == os.path.abspath(shared_broker.data_dir)
    [t] = log_dir["topics"]
    sizes = {p["partition_index"]: p["partition_size"] for p in t["partitions"]}
    on_disk = sum(f.stat().st_size for f in (shared_broker.data_dir / f"{topic}-0").glob("*.log"))
    assert t["name"] == topic and sizes == {0: on_disk, 1: 0}  # partition 7 does not exist: left out
    assert on_disk > 20 * 500
    assert all(p["offset_lag"] == 0 and p["is_future_key"] is False for p in t["partitions"])
    assert 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]

    with WireClient("127.0.0.1", shared_broker.port) as w:
        every = w.request(35, 0, {"topics": None})  # null: every hosted partition
        names = {t.name for t in every.results[0].topics}
        assert topic in names
        assert {p.partition_index for t in every.results[0].topics if t.name == topic for p in t.partitions} == {0, 1}
        none = w.request(35, 4, {"topics": [{"topic": "no-such-topic", "partitions": [0]}]})
        assert none.error_code == 0 and none.results[0].topics == [] and none.results[0].total_bytes > 0


def test_alter_replica_log_dirs_to_the_one_log_dir_is_a_no_op(shared_broker):
    """AlterReplicaLogDirs (34), KIP-113: a broker with one log dir answers a move of a replica it
    hosts into that dir NONE (kafka-python's own suite asks this), another path LOG_DIR_NOT_FOUND,
    and a partition it hosts no replica of REPLICA_NOT_AVAILABLE, as Kafka answers each; the
    replica stays where it is."""
    bs = shared_broker.bootstrap_servers
    topic = f"logdirs-move-{random.randrange(1 << 30)}"
    admin = AdminClient({"bootstrap.servers": bs})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    kadmin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        [broker] = kadmin.describe_log_dirs()
        log_dir, node_id = broker["log_dirs"][0]["log_dir"], broker["broker"]
        here = TopicPartitionReplica(topic, 0, node_id)
        result = kadmin.alter_replica_log_dirs({here: log_dir})
        assert result[here].errno == 0
    finally:
        kadmin.close()

    with WireClient("127.0.0.1", shared_broker.port) as w:
        for version in (1, 2):
            res = w.request(34, version, {"dirs": [
                {"path": log_dir, "topics": [{"name": topic, "partitions": [0, 5]},
                                             {"name": "no-such-topic", "partitions": [0]}]},
                {"path": "/no/such/dir", "topics": [{"name": topic, "partitions": [0]}]}]})
            codes = sorted((r.topic_name, p.partition_index, p.error_code) for r in res.results for p in r.partitions)
            assert codes == sorted([(topic, 0, 0), (topic, 5, 9), ("no-such-topic", 0, 9), (topic, 0, 57)]), version
        # a path no file system takes (a NUL byte; found by test_every_request_answered): no log
        # dir of this broker, answered, and the connection serves on
        res = w.request(34, 0, {"dirs": [{"path": "\x00", "topics": [{"name": topic, "partitions": [0]}]}]})
        assert [(r.topic_name, [p.error_code for p in r.partitions]) for r in res.results] == [(topic, [57])]
        assert w.request(34, 2, {"dirs": []}).results == []
    assert (shared_broker.data_dir / f"{topic}-0").is_dir()
