"""Dynamic broker configs on a 3-broker cluster (issue 20): a ``set_broker_configs`` metadata
record applied by every broker's image. The cluster-wide default shows on every broker's
DescribeConfigs and is applied at once (a topic without its own retention loses its segments on
every replica's leader), a per-broker value wins on that broker only, read-only settings are
refused with INVALID_REQUEST, and everything survives a restart of the whole cluster."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from litemq.testing.cluster import LocalCluster, wait_for
from litemq.testing.process import HOST
from litemq.testing.wire import WireClient

pytestmark = pytest.mark.timeout(300)


def _entry(admin: AdminClient, rtype: str, name: str, key: str) -> tuple[str, str]:
    res = ConfigResource(rtype, name)
    e = admin.describe_configs([res])[res].result(30)[key]
    return e.value, ConfigSource(getattr(e.source, "value", e.source)).name


def _set_default(port: int, name: str, value: str | None) -> int:
    """IncrementalAlterConfigs of the cluster-wide default (empty name) sent to the broker on
    ``port`` (librdkafka refuses an empty resource name); the result's error code."""
    with WireClient(HOST, port, timeout_s=30) as w:
        resp = w.request(44, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": name, "config_operation": 0 if value is not None else 1, "value": value}]}],
            "validate_only": False})
    return resp.responses[0].error_code


def _low_high(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, i), timeout=10) for i in range(partitions)]
    finally:
        c.close()


def test_broker_configs_across_a_cluster(tmp_path):
    with LocalCluster(tmp_path, 3, overrides={"log.retention.check.interval.ms": "200"}) as cluster:
        bs = cluster.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("follows", 3, 3, config={"internal.segment.bytes": "1024"})],
                            operation_timeout=15)["follows"].result(30)
        cluster.wait_leaders("follows", 3)
        p = Producer({"bootstrap.servers": bs, "acks": "all", "linger.ms": 0, "batch.num.messages": 1})
        for i in range(90):
            p.produce("follows", value=b"v" * 200, partition=i % 3)
            p.poll(0)
        assert p.flush(30) == 0
        assert _low_high(bs, "follows", 3) == [(0, 30)] * 3

        # the default through broker 2 (forwarded to the metadata leader), seen by every broker
        assert _set_default(cluster.node(2).port, "log.retention.ms", "1000") == KafkaError.NO_ERROR
        for n in cluster.node_ids:
            wait_for(lambda: _entry(admin, "broker", str(n), "log.retention.ms") == (
                "1000", "DYNAMIC_DEFAULT_BROKER_CONFIG"), 15, f"broker {n} does not show the default")
        wait_for(lambda: _low_high(bs, "follows", 3) == [(30, 30)] * 3, 30, "retention by the new default")

        # a per-broker value, on broker 3 only
        res = ConfigResource("broker", "3", incremental_configs=[
            ConfigEntry("log.retention.ms", "3600000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)
        wait_for(lambda: _entry(admin, "broker", "3", "log.retention.ms") == ("3600000", "DYNAMIC_BROKER_CONFIG"),
                 15, "broker 3's own value")
        assert _entry(admin, "broker", "1", "log.retention.ms") == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        # stored in the metadata image of every broker, under its resource name
        res = ConfigResource("broker", "2", incremental_configs=[
            ConfigEntry("follower.replication.throttled.rate", "10485760",
                        incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([res])[res].result(30)

        # read-only: INVALID_REQUEST, nothing stored
        res = ConfigResource("broker", "1", incremental_configs=[
            ConfigEntry("default.replication.factor", "2", incremental_operation=AlterConfigOpType.SET)])
        with pytest.raises(KafkaException) as exc:
            admin.incremental_alter_configs([res])[res].result(30)
        assert exc.value.args[0].code() == KafkaError.INVALID_REQUEST
        assert _set_default(cluster.node(1).port, "num.partitions", "4") == KafkaError.INVALID_REQUEST
        assert _set_default(cluster.node(1).port, "no.such.config", "4") == KafkaError.INVALID_CONFIG

        # the whole cluster restarts: the metadata log gives them back to every broker
        cluster.stop()
        cluster.start()
        admin = AdminClient({"bootstrap.servers": bs})
        wait_for(lambda: _entry(admin, "broker", "3", "log.retention.ms") == ("3600000", "DYNAMIC_BROKER_CONFIG"),
                 30, "broker 3's own value after the restart")
        assert _entry(admin, "broker", "1", "log.retention.ms") == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert _entry(admin, "broker", "2", "follower.replication.throttled.rate") == (
            "10485760", "DYNAMIC_BROKER_CONFIG")
        assert _entry(admin, "broker", "1", "follower.replication.throttled.rate") == (
            str(2**63 - 1), "DEFAULT_CONFIG")
        assert _entry(admin, "broker", "1", "default.replication.factor") == ("1", "DEFAULT_CONFIG")
