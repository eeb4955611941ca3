"""Kafka 4's topic configs that LiteMQ lacked until librdkafka's own tests set them
(``file.delete.delay.ms`` and ``max.compaction.lag.ms`` in its 0077_compaction): every topic
config of Kafka 4's ``LogConfig`` is now accepted, validated with Kafka's rules and messages, and
described with its default, with real clients on a real broker.

What each one does in LiteMQ (``storage/config.py``, ``broker/topic_configs.py``):
``segment.jitter.ms`` and ``max.compaction.lag.ms`` (KIP-354) change when segments roll and logs
are compacted (their storage tests are in ``tests/storage``); ``compression.*.level`` (KIP-390)
is the level the broker recompresses with (tested here); ``file.delete.delay.ms`` and
``preallocate`` are accepted and reported with nothing to apply; the tiered-storage configs
(KIP-405) take their defaults only, as on a Kafka broker without tiered storage.
"""

from __future__ import annotations

import random
import zlib

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from litemq.protocol.records import COMPRESSION_GZIP, decode_batch, iter_batches
from litemq.testing.wire import WireClient

KAFKA4_TOPIC_CONFIGS = {
    # name -> Kafka 4's default (LogConfig.CONFIG; min.insync.replicas is the broker's, 1 here)
    "cleanup.policy": "delete", "compression.gzip.level": "-1", "compression.lz4.level": "9",
    "compression.type": "producer", "compression.zstd.level": "3", "delete.retention.ms": "86400000",
    "file.delete.delay.ms": "60000", "flush.ms": "9223372036854775807",
    "flush.messages": "1",  # Kafka's is 9223372036854775807: LiteMQ's durable default fsyncs every append
    "follower.replication.throttled.replicas": "",
    "index.interval.bytes": "4096", "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2", "local.retention.ms": "-2", "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588", "message.timestamp.after.max.ms": "3600000",
    "message.timestamp.before.max.ms": "9223372036854775807", "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0", "min.insync.replicas": "1",
    "preallocate": "false", "remote.log.copy.disable": "false", "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false", "retention.bytes": "-1", "retention.ms": "604800000",
    "segment.bytes": "1073741824", "segment.index.bytes": "10485760", "segment.jitter.ms": "0",
    "segment.ms": "604800000", "unclean.leader.election.enable": "false",
}


def _name(prefix: str) -> str:
    return f"{prefix}-{random.randrange(1 << 30)}"


def _create(admin: AdminClient, name: str, configs: dict[str, str]) -> None:
    admin.create_topics([NewTopic(name, 1, 1, config=configs)])[name].result(timeout=30)


def _describe(admin: AdminClient, name: str) -> dict[str, str]:
    res = ConfigResource("topic", name)
    return {k: e.value for k, e in admin.describe_configs([res])[res].result(timeout=30).items()}


def test_every_kafka4_topic_config_is_described_with_its_default(shared_broker):
    """DescribeConfigs of a topic lists exactly Kafka 4's topic configs, each with Kafka's default
    but ``flush.messages``, whose default is LiteMQ's durable one (see storage/config.py)."""
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    topic = _name("k4-defaults")
    _create(admin, topic, {})
    assert _describe(admin, topic) == KAFKA4_TOPIC_CONFIGS


def test_librdkafka_compaction_test_configs_are_accepted(shared_broker):
    """The configs librdkafka's 0077_compaction creates its topic with (its segment.bytes=10000 is
    below Kafka 4's 1 MiB floor, so 1 MiB here), then the rest of Kafka 4's new ones, set and
    described back; a config that is not Kafka's is still refused."""
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    topic = _name("k4-compact")
    configs = {"cleanup.policy": "compact", "segment.ms": "10000", "segment.bytes": "1048576",
               "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "86400",
               "file.delete.delay.ms": "10000", "max.compaction.lag.ms": "100", "segment.jitter.ms": "5000",
               "preallocate": "true", "compression.zstd.level": "-5", "compression.lz4.level": "17",
               "compression.gzip.level": "9", "local.retention.ms": "-1", "local.retention.bytes": "1000",
               "remote.log.copy.disable": "true", "remote.log.delete.on.disable": "true",
               "remote.storage.enable": "false"}
    _create(admin, topic, configs)
    described = _describe(admin, topic)
    assert {k: described[k] for k in configs} == configs

    alter = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("max.compaction.lag.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("preallocate", "false", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([alter])[alter].result(timeout=30)
    described = _describe(admin, topic)
    assert (described["max.compaction.lag.ms"], described["preallocate"]) == ("60000", "false")

    bad = _name("k4-unknown")
    with pytest.raises(Exception) as exc:
        _create(admin, bad, {"no.such.config": "1"})
    assert exc.value.args[0].code() == KafkaError.INVALID_CONFIG


@pytest.mark.parametrize("configs,message", [
    ({"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"),
    ({"compression.gzip.level": "0"}, "[1,...,9] or -1"),
    ({"compression.gzip.level": "10"}, "[1,...,9] or -1"),
    ({"compression.lz4.level": "18"}, "[1,...,17]"),
    ({"compression.zstd.level": "23"}, "[-131072,...,22]"),
    ({"compression.zstd.level": "high"}, "Not a number"),
    ({"local.retention.ms": "-3"}, "at least -2"),
    ({"remote.log.copy.disable": "yes"}, "either true or false"),
    ({"preallocate": "1"}, "must be true or false"),
    ({"segment.jitter.ms": "-1"}, ">= 0"),
    ({"max.compaction.lag.ms": "0"}, ">= 1"),
    ({"file.delete.delay.ms": "-1"}, ">= 0"),
    ({"min.compaction.lag.ms": "1000", "max.compaction.lag.ms": "10"},
     "conflict topic config setting min.compaction.lag.ms (1000) > max.compaction.lag.ms (10)"),
])
def test_bad_values_are_refused_with_kafkas_reason(shared_broker, configs, message):
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap_servers})
    topic = _name("k4-bad")
    with pytest.raises(Exception) as exc:
        _create(admin, topic, configs)
    err = exc.value.args[0]
    assert err.code() == KafkaError.INVALID_CONFIG and message in err.str(), err.str()
    assert topic not in admin.list_topics(timeout=10).topics


def test_compression_level_is_the_brokers_recompression_level(shared_broker):
    """KIP-390: with ``compression.type=gzip`` the broker recompresses an uncompressed batch at the
    topic's ``compression.gzip.level``: level 1 and level 9 store different bytes, each exactly
    what zlib makes of the same records at that level; a changed level applies to the next
    batch."""
    bs = shared_broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bs})
    topic = _name("k4-level")
    _create(admin, topic, {"compression.type": "gzip", "compression.gzip.level": "1"})
    value = b"".join(b"%d line of a log %d " % (i, i * i) for i in range(400))

    def produce_one() -> None:
        p = Producer({"bootstrap.servers": bs, "acks": "all", "compression.type": "none", "linger.ms": 0})
        p.produce(topic, key=b"k", value=value)
        assert p.flush(30) == 0

    produce_one()
    alter = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("compression.gzip.level", "9", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([alter])[alter].result(timeout=30)
    produce_one()

    with WireClient("127.0.0.1", shared_broker.port) as c:
        resp = c.request(1, 11, {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 24,
                                 "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
                                 "forgotten_topics_data": [], "topics": [{"topic": topic, "partitions": [
                                     {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                      "log_start_offset": -1, "partition_max_bytes": 1 << 24}]}]})
    stored = bytes(resp.responses[0].partitions[0].records)
    batches = list(iter_batches(stored))
    assert [h.compression for _, h in batches] == [COMPRESSION_GZIP, COMPRESSION_GZIP]
    payload_sizes = [h.size - 61 for _, h in batches]  # batch bytes after the 61-byte header
    records_bytes = [len(_uncompressed_records(stored, pos)) for pos, _ in batches]
    assert records_bytes[0] == records_bytes[1]
    for (pos, h), level, size in zip(batches, (1, 9), payload_sizes):
        assert [r.value for r in decode_batch(stored, pos)[1]] == [value]
        c = zlib.compressobj(level, zlib.DEFLATED, 31)
        raw = _uncompressed_records(stored, pos)
        assert size == len(c.compress(raw) + c.flush()), level
    assert payload_sizes[0] != payload_sizes[1]


def _uncompressed_records(stored: bytes, pos: int) -> bytes:
    """The records section of the gzip batch at ``pos``, decompressed."""
    _, h = next(iter_batches(stored[pos:]))
    return zlib.decompress(stored[pos + 61:pos + h.size], 31)
