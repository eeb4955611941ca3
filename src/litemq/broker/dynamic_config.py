"""Dynamic broker configs (``kafka-configs.sh --entity-type brokers``, KIP-226).

A broker's effective settings are, by precedence (Kafka ``DynamicBrokerConfig``):

1. ``DYNAMIC_BROKER_CONFIG``: set for this broker (resource name = its node id),
2. ``DYNAMIC_DEFAULT_BROKER_CONFIG``: set as the cluster-wide default (resource name ``""``),
3. ``STATIC_BROKER_CONFIG``: from ``--config``/``--override`` at start,
4. ``DEFAULT_CONFIG``: LiteMQ's default.

Dynamic configs are stored in the metadata (a ``set_broker_configs`` record of the metadata log
in a cluster, ``metadata.json`` on a single broker) and applied without a restart. The ones
named in :data:`DYNAMIC_BROKER_CONFIGS` may be altered, with Kafka's names; every other
broker setting is read-only (INVALID_REQUEST ``Cannot update these configs dynamically``, as
Kafka); a name that is no LiteMQ setting at all is INVALID_CONFIG (Kafka stores unknown names
for plugins; LiteMQ has none). A bad value is INVALID_REQUEST, as in Kafka (KAFKA-13609).

Pure rules: no I/O, no asyncio.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from litemq.config import BrokerConfig, is_broker_setting
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.storage.config import LONG_MAX, LogConfig
from litemq.broker.config_types import ConfigSource

DEFAULT_RESOURCE = ""
"""The resource name of the cluster-wide default (``--entity-default``)."""


@dataclass(frozen=True)
class DynamicConfig:
    """One dynamically alterable broker config.

    Attributes:
        topic_config: the topic config it is the broker-wide default of (``retention.ms`` for
            ``log.retention.ms``), or None.
        kafka_default: the value when neither set dynamically nor a :class:`BrokerConfig`
            setting (``None``: it is one, its value comes from there).
        minimum: least value of a config that is no :class:`BrokerConfig` setting and no topic
            config default (the throttles).
    """

    topic_config: str | None = None
    kafka_default: str | None = None
    minimum: int | None = None


DYNAMIC_BROKER_CONFIGS: dict[str, DynamicConfig] = {
    # topic config defaults (Kafka DynamicLogConfig.ReconfigurableConfigs)
    "log.segment.bytes": DynamicConfig("segment.bytes"),
    "log.roll.ms": DynamicConfig("segment.ms"),
    "log.retention.ms": DynamicConfig("retention.ms"),
    "log.retention.bytes": DynamicConfig("retention.bytes"),
    "log.cleanup.policy": DynamicConfig("cleanup.policy"),
    "log.index.interval.bytes": DynamicConfig("index.interval.bytes"),
    "log.flush.interval.messages": DynamicConfig("flush.messages"),
    "log.flush.interval.ms": DynamicConfig("flush.ms"),
    "log.cleaner.delete.retention.ms": DynamicConfig("delete.retention.ms", str(LogConfig().delete_retention_ms)),
    "log.cleaner.min.compaction.lag.ms": DynamicConfig("min.compaction.lag.ms",
                                                       str(LogConfig().min_compaction_lag_ms)),
    "log.cleaner.min.cleanable.ratio": DynamicConfig("min.cleanable.dirty.ratio",
                                                     str(LogConfig().min_cleanable_dirty_ratio)),
    "log.message.timestamp.type": DynamicConfig("message.timestamp.type", LogConfig().message_timestamp_type),
    "log.message.timestamp.before.max.ms": DynamicConfig("message.timestamp.before.max.ms",
                                                         str(LogConfig().message_timestamp_before_max_ms)),
    "log.message.timestamp.after.max.ms": DynamicConfig("message.timestamp.after.max.ms",
                                                        str(LogConfig().message_timestamp_after_max_ms)),
    "message.max.bytes": DynamicConfig("max.message.bytes"),
    "min.insync.replicas": DynamicConfig("min.insync.replicas"),
    # the log cleaner (Kafka LogCleaner.ReconfigurableConfigs) that LiteMQ's cleaner has
    "log.cleaner.backoff.ms": DynamicConfig(),
    # connection limits (Kafka DynamicConnectionQuota), read by server.Connection when a connection is made
    "max.connections": DynamicConfig(),
    "max.connections.per.ip": DynamicConfig(),
    "max.connections.per.ip.overrides": DynamicConfig(),
    # replication throttles (Kafka DynamicReplicationConfig), applied by litemq.cluster.throttle
    "leader.replication.throttled.rate": DynamicConfig(kafka_default=str(LONG_MAX), minimum=0),
    "follower.replication.throttled.rate": DynamicConfig(kafka_default=str(LONG_MAX), minimum=0),
}
"""The broker configs LiteMQ can change without a restart, by Kafka name (a subset of the ones
Kafka marks dynamic: those LiteMQ has)."""

TOPIC_TO_BROKER_CONFIG: dict[str, str] = {d.topic_config: name for name, d in DYNAMIC_BROKER_CONFIGS.items()
                                          if d.topic_config}
"""Topic config name -> the dynamic broker config that is its default (``retention.ms`` ->
``log.retention.ms``), Kafka's ``LogConfig`` synonyms."""


def _is_field(name: str) -> bool:
    return DYNAMIC_BROKER_CONFIGS[name].kafka_default is None and DYNAMIC_BROKER_CONFIGS[name].minimum is None


def check_resource_name(name: str) -> None:
    """A BROKER resource name: ``""`` (the cluster-wide default) or a node id.

    Raises:
        KafkaError(INVALID_REQUEST): anything else (Kafka ``ControllerConfigurationValidator``).
    """
    if name != DEFAULT_RESOURCE and not (name.isdigit() and name.isascii()):
        raise KafkaError("Unable to parse broker name as a base 10 number.", ErrorCode.INVALID_REQUEST)


def validate(name: str, configs: dict[str, str]) -> None:
    """Check a whole new set of dynamic configs of broker resource ``name``.

    Raises:
        KafkaError(INVALID_REQUEST): a bad resource name, a read-only setting (``Cannot update
            these configs dynamically: Set(a, b)``), or a value outside the setting's bounds
            (:data:`litemq.config.SETTING_BOUNDS`, the topic config's rules) or of the wrong type.
        KafkaError(INVALID_CONFIG): a name that is no LiteMQ broker setting.
    """
    check_resource_name(name)
    where = f"Invalid config value for resource ConfigResource(type=BROKER, name='{name}'): "
    unknown = sorted(k for k in configs if k not in DYNAMIC_BROKER_CONFIGS and not is_broker_setting(k))
    if unknown:
        raise KafkaError(f"Unknown broker config name(s): {', '.join(unknown)}", ErrorCode.INVALID_CONFIG)
    static = sorted(k for k in configs if k not in DYNAMIC_BROKER_CONFIGS)
    if static:
        raise KafkaError(f"{where}Cannot update these configs dynamically: Set({', '.join(static)})",
                         ErrorCode.INVALID_REQUEST)
    probe = BrokerConfig()
    for key, value in configs.items():
        spec = DYNAMIC_BROKER_CONFIGS[key]
        try:
            if _is_field(key):
                probe.apply({key: value})  # type and SETTING_BOUNDS, naming the key
            if spec.topic_config and spec.topic_config != "min.insync.replicas":
                LogConfig.from_kafka_configs({spec.topic_config: value})
            if spec.minimum is not None and int(value) < spec.minimum:
                raise ValueError(f"invalid value {value} for configuration {key}: value must be at least "
                                 f"{spec.minimum}")
        except ValueError as exc:
            raise KafkaError(f"{where}{exc}", ErrorCode.INVALID_REQUEST) from None


def layers(all_configs: dict[str, dict[str, str]], node_id: int) -> tuple[dict[str, str], dict[str, str]]:
    """(this broker's own dynamic configs, the cluster-wide default ones) out of the stored
    ``resource name -> configs``."""
    return dict(all_configs.get(str(node_id), {})), dict(all_configs.get(DEFAULT_RESOURCE, {}))


def effective(static: BrokerConfig, per_broker: dict[str, str], default: dict[str, str]) -> BrokerConfig:
    """A copy of ``static`` with the dynamic values that are :class:`BrokerConfig` settings
    applied (the default first, then this broker's own). Stored values were validated; one that
    no longer is (a bound tightened by an upgrade) is skipped."""
    cfg = copy.copy(static)
    for layer in (default, per_broker):
        for key, value in layer.items():
            if key in DYNAMIC_BROKER_CONFIGS and _is_field(key):
                try:
                    cfg.apply({key: value})
                except ValueError:
                    pass
    return cfg


def apply_to(target: BrokerConfig, source: BrokerConfig) -> None:
    """Copy the value of every dynamic :class:`BrokerConfig` setting from ``source`` into
    ``target`` (in place: the broker's config object is shared by its components)."""
    for key in DYNAMIC_BROKER_CONFIGS:
        if _is_field(key):
            attr = key.replace(".", "_")
            setattr(target, attr, getattr(source, attr))


def log_config_defaults(cfg: BrokerConfig, per_broker: dict[str, str], default: dict[str, str]) -> dict[str, str]:
    """Topic config name -> broker-wide default: ``cfg.log_config_defaults()`` (``cfg`` the
    effective config) plus the dynamic values of topic-config defaults that are no
    :class:`BrokerConfig` setting (``log.cleaner.delete.retention.ms``, ...)."""
    out = cfg.log_config_defaults()
    for layer in (default, per_broker):
        for key, value in layer.items():
            spec = DYNAMIC_BROKER_CONFIGS.get(key)
            if spec is not None and spec.topic_config and not _is_field(key):
                out[spec.topic_config] = value
    return out


def source_of(key: str, static: BrokerConfig, per_broker: dict[str, str], default: dict[str, str]) -> int:
    """Where the effective value of broker config ``key`` comes from (a ConfigSource id)."""
    if key in per_broker:
        return ConfigSource.DYNAMIC_BROKER_CONFIG
    if key in default:
        return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    attr = key.replace(".", "_")
    if hasattr(static, attr) and given_at_start(static, attr):
        return ConfigSource.STATIC_BROKER_CONFIG
    return ConfigSource.DEFAULT_CONFIG


def given_at_start(static: BrokerConfig, *attrs: str) -> bool:
    """True when any of the :class:`BrokerConfig` attributes ``attrs`` differs from LiteMQ's
    default in ``static`` (the settings as given at start): a STATIC_BROKER_CONFIG."""
    return any(getattr(static, a) != getattr(_STOCK, a) for a in attrs)


def value_of(key: str, cfg: BrokerConfig, per_broker: dict[str, str], default: dict[str, str]) -> str | None:
    """The effective value of broker config ``key`` as a string (``cfg`` the effective config);
    None for an unset optional setting (``log.flush.interval.ms``)."""
    if key in per_broker:
        return per_broker[key]
    if key in default:
        return default[key]
    spec = DYNAMIC_BROKER_CONFIGS.get(key)
    if spec is not None and not _is_field(key):
        return spec.kafka_default
    value = getattr(cfg, key.replace(".", "_"))
    if value is None:
        return None
    return str(value).lower() if isinstance(value, bool) else str(value)


def synonyms(key: str, static: BrokerConfig, per_broker: dict[str, str], default: dict[str, str]) -> list[dict]:
    """DescribeConfigs ``synonyms`` of broker config ``key``: every layer that has a value, by
    precedence (Kafka ``DescribeConfigsResponse.ConfigSynonym``)."""
    out = []
    if key in per_broker:
        out.append({"name": key, "value": per_broker[key], "source": ConfigSource.DYNAMIC_BROKER_CONFIG})
    if key in default:
        out.append({"name": key, "value": default[key], "source": ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG})
    if source_of(key, static, {}, {}) == ConfigSource.STATIC_BROKER_CONFIG:
        out.append({"name": key, "value": value_of(key, static, {}, {}), "source": ConfigSource.STATIC_BROKER_CONFIG})
    stock = value_of(key, _STOCK, {}, {})
    if stock is not None:
        out.append({"name": key, "value": stock, "source": ConfigSource.DEFAULT_CONFIG})
    return out


_STOCK = BrokerConfig()
"""LiteMQ's defaults (what DEFAULT_CONFIG reports)."""


def stock_value(key: str) -> str | None:
    """Broker config ``key``'s own default as a string (None: unset by default, or unknown)."""
    try:
        return value_of(key, _STOCK, {}, {})
    except AttributeError:  # not a setting LiteMQ has
        return None
