"""The type of every topic and broker config DescribeConfigs reports (KIP-569).

DescribeConfigs v3+ answers each entry with its ``ConfigType`` (Kafka
``DescribeConfigsResponse.ConfigType``), the type Kafka's ``ConfigDef`` declares for that name
(``LogConfig``/``TopicConfig`` for topic configs, ``KafkaConfig`` and its parts for broker
configs). Admin tools show it and kafka-python's ``describe_configs`` returns it (``'LONG'`` for
``retention.bytes``). A name missing here is answered ``UNKNOWN`` (0), as Kafka answers a name
it has no definition of.
"""

from __future__ import annotations

from enum import IntEnum


class ConfigType(IntEnum):
    """Kafka ``DescribeConfigsResponse.ConfigType`` ids (DescribeConfigs v3+, KIP-569)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSource(IntEnum):
    """Kafka ``DescribeConfigsResponse.ConfigSource`` ids (DescribeConfigs v1+, KIP-226); the
    names are the ones Kafka's tools and Confluent's REST API print."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


def config_source_name(code: int) -> str:
    """The name of ConfigSource ``code`` (``UNKNOWN`` for a code Kafka does not define)."""
    try:
        return ConfigSource(code).name
    except ValueError:
        return ConfigSource.UNKNOWN.name


_B, _S, _I, _L, _D, _LIST, _C = (ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG,
                                 ConfigType.DOUBLE, ConfigType.LIST, ConfigType.CLASS)

TOPIC_CONFIG_TYPES: dict[str, ConfigType] = {
    "cleanup.policy": _LIST,
    "compression.type": _S,
    "compression.gzip.level": _I,
    "compression.lz4.level": _I,
    "compression.zstd.level": _I,
    "delete.retention.ms": _L,
    "file.delete.delay.ms": _L,
    "flush.messages": _L,
    "flush.ms": _L,
    "follower.replication.throttled.replicas": _LIST,
    "index.interval.bytes": _I,
    "internal.segment.bytes": _I,
    "leader.replication.throttled.replicas": _LIST,
    "local.retention.bytes": _L,
    "local.retention.ms": _L,
    "max.compaction.lag.ms": _L,
    "max.message.bytes": _I,
    "message.timestamp.after.max.ms": _L,
    "message.timestamp.before.max.ms": _L,
    "message.timestamp.type": _S,
    "min.cleanable.dirty.ratio": _D,
    "min.compaction.lag.ms": _L,
    "min.insync.replicas": _I,
    "preallocate": _B,
    "remote.log.copy.disable": _B,
    "remote.log.delete.on.disable": _B,
    "remote.storage.enable": _B,
    "retention.bytes": _L,
    "retention.ms": _L,
    "segment.bytes": _I,
    "segment.index.bytes": _I,
    "segment.jitter.ms": _L,
    "segment.ms": _L,
    "unclean.leader.election.enable": _B,
}
"""Topic config name -> its type (Kafka ``LogConfig`` / ``TopicConfig``)."""

BROKER_CONFIG_TYPES: dict[str, ConfigType] = {
    "advertised.listeners": _S,
    "auto.create.topics.enable": _B,
    "broker.id": _I,
    "broker.rack": _S,
    "default.replication.factor": _I,
    "follower.replication.throttled.rate": _L,
    "leader.replication.throttled.rate": _L,
    "listeners": _S,
    "log.cleaner.backoff.ms": _L,
    "log.cleaner.delete.retention.ms": _L,
    "log.cleaner.min.cleanable.ratio": _D,
    "log.cleaner.min.compaction.lag.ms": _L,
    "log.cleanup.policy": _LIST,
    "log.flush.interval.messages": _L,
    "log.flush.interval.ms": _L,
    "log.index.interval.bytes": _I,
    "log.message.timestamp.after.max.ms": _L,
    "log.message.timestamp.before.max.ms": _L,
    "log.message.timestamp.type": _S,
    "log.page.cache.retain.bytes": _L,  # LiteMQ's own (docs/cluster.md)
    "log.retention.bytes": _L,
    "log.retention.check.interval.ms": _L,
    "log.retention.ms": _L,
    "log.roll.ms": _L,
    "log.segment.bytes": _I,
    "max.connections": _I,
    "max.incremental.fetch.session.cache.slots": _I,
    "max.connections.per.ip": _I,
    "max.connections.per.ip.overrides": _S,
    "message.max.bytes": _I,
    "min.insync.replicas": _I,
    "node.id": _I,
    "num.partitions": _I,
    "offsets.topic.num.partitions": _I,
    "replica.lag.time.max.ms": _L,
    "replica.selector.class": _C,
}
"""Broker config name -> its type (Kafka ``KafkaConfig``, ``ServerLogConfigs``, ``ReplicationConfigs``,
``SocketServerConfigs``: ``listeners`` and ``advertised.listeners`` are STRING there)."""


def topic_config_type(name: str) -> int:
    """The ``ConfigType`` id of topic config ``name`` (0, UNKNOWN, for a name not known)."""
    return int(TOPIC_CONFIG_TYPES.get(name, ConfigType.UNKNOWN))


def broker_config_type(name: str) -> int:
    """The ``ConfigType`` id of broker config ``name`` (0, UNKNOWN, for a name not known)."""
    return int(BROKER_CONFIG_TYPES.get(name, ConfigType.UNKNOWN))
