"""Dynamic broker configs on one broker (``kafka-configs.sh --entity-type brokers``, issue 20):
DescribeConfigs / IncrementalAlterConfigs / AlterConfigs on BROKER resources, per broker
(name = node id, through confluent-kafka's AdminClient) and the cluster-wide default (empty name,
through ``litemq config --broker-defaults``: librdkafka refuses an empty resource name), applied
without a restart (a topic without its own retention loses its segments to the new default),
persisted in the data dir, read-only settings refused with Kafka's error codes."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic

from litemq.testing.cluster import wait_for
from litemq.testing.process import HOST, BrokerProcess
from litemq.testing.wire import WireClient

pytestmark = pytest.mark.timeout(180)

FAST_RETENTION_CHECK = {"log.retention.check.interval.ms": "200"}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litemq.cli", *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def _alter(admin: AdminClient, broker: str, **ops) -> None:
    """IncrementalAlterConfigs on broker resource ``broker``: ``name=value`` sets, ``name=None`` deletes
    (names with ``_`` for ``.``)."""
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET if v is not None
                           else AlterConfigOpType.DELETE) for k, v in ops.items()]
    res = ConfigResource("broker", broker, incremental_configs=entries)
    admin.incremental_alter_configs([res])[res].result(30)


def _alter_error(admin: AdminClient, broker: str, name: str, value: str) -> tuple[int, str]:
    res = ConfigResource("broker", broker, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as exc:
        admin.incremental_alter_configs([res])[res].result(30)
    err = exc.value.args[0]
    return err.code(), err.str()


def _describe(admin: AdminClient, rtype: str, name: str) -> dict:
    res = ConfigResource(rtype, name)
    return admin.describe_configs([res])[res].result(30)


def _entry(admin: AdminClient, rtype: str, name: str, key: str) -> tuple[str, str]:
    e = _describe(admin, rtype, name)[key]
    return e.value, ConfigSource(getattr(e.source, "value", e.source)).name


def _fill(bootstrap: str, topic: str, n: int = 60) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.num.messages": 1})
    for i in range(n):
        p.produce(topic, value=b"v" * 200, key=str(i).encode())
        p.poll(0)
    assert p.flush(30) == 0


def _watermarks(bootstrap: str, topic: str, partitions: int = 1) -> list[tuple[int, int]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "wm"})
    try:
        return [c.get_watermark_offsets(TopicPartition(topic, i), timeout=10) for i in range(partitions)]
    finally:
        c.close()


def test_broker_configs_on_a_single_broker(tmp_path):
    data = tmp_path / "data"
    broker = BrokerProcess(data, overrides=FAST_RETENTION_CHECK).start()
    try:
        bs = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": bs})
        admin.create_topics([NewTopic("follows", 1, 1, config={"internal.segment.bytes": "1024"}),
                             NewTopic("own", 1, 1, config={"internal.segment.bytes": "1024", "retention.ms": "-1"})],
                            operation_timeout=15)
        for t in ("follows", "own"):
            wait_for(lambda: t in admin.list_topics(timeout=10).topics, 15, f"topic {t}")
            _fill(bs, t)
        assert _watermarks(bs, "follows") == [(0, 60)]
        assert _entry(admin, "broker", "1", "log.retention.ms") == ("604800000", "DEFAULT_CONFIG")
        assert _entry(admin, "topic", "follows", "retention.ms") == ("604800000", "DEFAULT_CONFIG")

        # the cluster-wide default (empty resource name), with litemq config --broker-defaults
        r = _cli("config", "alter", "--broker-defaults", "--set", "log.retention.ms=1000", "-b", bs)
        assert r.returncode == 0, r.stderr
        r = _cli("config", "describe", "--broker-defaults", "-b", bs)
        assert r.returncode == 0 and "log.retention.ms" in r.stdout and "DYNAMIC_DEFAULT_BROKER_CONFIG" in r.stdout
        assert _entry(admin, "broker", "1", "log.retention.ms") == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert _entry(admin, "topic", "follows", "retention.ms") == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        assert _entry(admin, "topic", "own", "retention.ms") == ("-1", "DYNAMIC_TOPIC_CONFIG")
        # applied without a restart: every segment of the topic without its own retention goes
        wait_for(lambda: _watermarks(bs, "follows") == [(60, 60)], 30, "retention by the new default")
        assert _watermarks(bs, "own") == [(0, 60)]  # its own retention.ms=-1 wins

        # a per-broker value wins over the default
        _alter(admin, "1", log_retention_ms="3600000")
        assert _entry(admin, "broker", "1", "log.retention.ms") == ("3600000", "DYNAMIC_BROKER_CONFIG")
        assert _entry(admin, "topic", "follows", "retention.ms") == ("3600000", "DYNAMIC_BROKER_CONFIG")
        _fill(bs, "follows", 10)
        time.sleep(1.5)  # > the default's 1 s, but the broker's own hour applies
        assert _watermarks(bs, "follows") == [(60, 70)]
        with WireClient(HOST, broker.port) as w:  # (confluent-kafka keys synonyms by name: one left)
            resp = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "1",
                                                    "configuration_keys": ["log.retention.ms"]}],
                                     "include_synonyms": True, "include_documentation": False})
            [entry] = resp.results[0].configs
            assert [(s.value, s.source) for s in entry.synonyms] == [
                ("3600000", ConfigSource.DYNAMIC_BROKER_CONFIG.value),
                ("1000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value),
                ("604800000", ConfigSource.DEFAULT_CONFIG.value)]

        # Kafka's errors: read-only -> INVALID_REQUEST, unknown -> INVALID_CONFIG, bad value -> INVALID_REQUEST
        code, text = _alter_error(admin, "1", "num.partitions", "3")
        assert code == KafkaError.INVALID_REQUEST and "Cannot update these configs dynamically" in text
        assert _alter_error(admin, "1", "no.such.config", "3")[0] == KafkaError.INVALID_CONFIG
        code, text = _alter_error(admin, "1", "log.segment.bytes", "1048575")  # Kafka 4: at least 1 MiB
        assert code == KafkaError.INVALID_REQUEST and "value must be at least 1048576" in text
        assert _entry(admin, "broker", "1", "num.partitions") == ("1", "DEFAULT_CONFIG")
        assert _describe(admin, "broker", "1")["num.partitions"].is_read_only
        r = _cli("config", "alter", "--broker", "1", "--set", "num.partitions=3", "-b", bs)
        assert r.returncode == 1 and "Cannot update these configs dynamically: Set(num.partitions)" in r.stderr

        # DescribeConfigs of another broker's id: INVALID_REQUEST, as Kafka (wire: the client
        # would send it to broker 2, which does not exist)
        with WireClient(HOST, broker.port) as w:
            resp = w.request(32, 4, {"resources": [{"resource_type": 4, "resource_name": "2",
                                                    "configuration_keys": None}],
                                     "include_synonyms": False, "include_documentation": False})
            assert resp.results[0].error_code == KafkaError.INVALID_REQUEST
            # AlterConfigs (not incremental) replaces the resource's whole set
            resp = w.request(33, 2, {"resources": [{"resource_type": 4, "resource_name": "1", "configs": [
                {"name": "log.cleaner.backoff.ms", "value": "500"}]}], "validate_only": False})
            assert resp.responses[0].error_code == 0
        assert _entry(admin, "broker", "1", "log.cleaner.backoff.ms") == ("500", "DYNAMIC_BROKER_CONFIG")
        assert _entry(admin, "broker", "1", "log.retention.ms") == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")

        # persisted in the data dir: a restart keeps them, and applies them at once
        assert broker.stop() == 0
        broker.start()
        admin = AdminClient({"bootstrap.servers": bs})
        assert _entry(admin, "broker", "1", "log.cleaner.backoff.ms") == ("500", "DYNAMIC_BROKER_CONFIG")
        assert _entry(admin, "broker", "1", "log.retention.ms") == ("1000", "DYNAMIC_DEFAULT_BROKER_CONFIG")
        wait_for(lambda: _watermarks(bs, "follows") == [(70, 70)], 30, "retention by the default after a restart")
        _alter(admin, "1", log_cleaner_backoff_ms=None)
        assert _entry(admin, "broker", "1", "log.cleaner.backoff.ms") == ("15000", "DEFAULT_CONFIG")
    finally:
        broker.stop()
