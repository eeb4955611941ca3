"""Topic administration: CreateTopics (19), DeleteTopics (20), CreatePartitions (37),
DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44), DeleteRecords (21),
DescribeLogDirs (35).

Sources: the Kafka message schemas of those APIs (KIP-4 admin, KIP-133 describe/alter configs,
KIP-195 create partitions, KIP-107 delete records, KIP-339 incremental alter configs,
KIP-516 topic ids in DeleteTopics v6).

Authorization (Kafka ``KafkaApis``/``AuthHelper``): CreateTopics needs CREATE on the cluster or
on the topic (and DESCRIBE_CONFIGS on it to see its configs); DeleteTopics and DeleteRecords
DELETE on the topic; CreatePartitions ALTER on the topic; DescribeConfigs DESCRIBE_CONFIGS and
(Incremental)AlterConfigs ALTER_CONFIGS on the topic, group, or the cluster for a broker
resource; DescribeLogDirs DESCRIBE on the cluster. Refusals are
TOPIC_/GROUP_/CLUSTER_AUTHORIZATION_FAILED per entry (DescribeLogDirs: for the whole request).
"""

from __future__ import annotations

import asyncio
import logging
import os
from types import SimpleNamespace

from litemq import limits
from litemq.security.acl_operations import AclOperation, ResourceType
from litemq.broker import dynamic_config
from litemq.broker.authz import authorize, authorized_names
from litemq.broker.config_types import ConfigSource, ConfigType, broker_config_type, topic_config_type
from litemq.broker.handlers.security_admin import metadata_change
from litemq.broker.topic_configs import BROKER_TOPIC_CONFIGS
from litemq.coordinator.group_configs import GROUP_CONFIG_DEFS, default_value, normalized, validate_group_configs
from litemq.cluster.image import manual_partition_assignments, manual_topic_assignments
from litemq.cluster.metadata import validate_partition_count
from litemq.protocol.errors import ErrorCode, KafkaError
from litemq.security.client_metrics import INTERVAL_MS, MATCH, METRICS
from litemq.security.client_quotas import CONTROLLER_MUTATION_RATE
from litemq.storage.config import INTERNAL_TOPIC_CONFIGS, LONG_MAX, LogConfig

log = logging.getLogger(__name__)

TOPIC_RESOURCE, BROKER_RESOURCE, BROKER_LOGGER_RESOURCE, CLIENT_METRICS_RESOURCE, GROUP_RESOURCE = 2, 4, 8, 16, 32
"""Kafka ``ConfigResource.Type`` ids (CLIENT_METRICS: KIP-714, GROUP: KIP-848). LiteMQ keeps no
broker logger configs: after authorization those answer INVALID_REQUEST."""
_CLIENT_METRICS_CONFIG_TYPES = {METRICS: 7, INTERVAL_MS: 3, MATCH: 7}  # DescribeConfigs v3+ ConfigType: LIST, INT

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_STOCK_TOPIC_CONFIGS = dict(LogConfig().to_kafka_configs())
"""Topic configs' own defaults (Kafka's ``LogConfig`` defaults, no broker setting applied)."""
_UNSET_FLUSH_CONFIGS = {"flush.messages": "1", "flush.ms": str(LONG_MAX)}
"""What DescribeConfigs shows for the flush policy nobody set: LiteMQ's durable default fsyncs
every append before acks=all is answered, which is ``flush.messages=1`` with no time-based flush
(Kafka's stock default is ``Long.MAX_VALUE`` for both: no fsync of its own)."""


class MutationQuota:
    """KIP-599 ``controller_mutation_rate`` for one CreateTopics, CreatePartitions or DeleteTopics
    request (Kafka ``ControllerMutationQuotaManager``): strict from the versions KIP-599 added
    (CreateTopics v6, CreatePartitions v3, DeleteTopics v5) - once the caller's bucket is below
    zero, each further topic is refused with THROTTLING_QUOTA_EXCEEDED - permissive before (the
    partitions are counted, nothing is refused). The response carries the throttle time and the
    connection is muted for it. Nothing happens while the cluster has no client quota."""

    def __init__(self, ctx, strict_since_version: int) -> None:
        runtime = ctx.runtime
        self.on = bool(runtime.metadata.client_quotas.entities)
        self.quotas = runtime.client_quotas
        self.user = ctx.connection.principal.name
        self.client_id = ctx.client_id or ""
        self.strict = ctx.version >= strict_since_version
        self.connection = ctx.connection

    def check(self) -> None:
        """Raises KafkaError(THROTTLING_QUOTA_EXCEEDED) when a strict request has no credit left."""
        if self.on and self.strict and self.quotas.mutations_exhausted(self.user, self.client_id):
            raise KafkaError("The throttling quota has been exceeded.", ErrorCode.THROTTLING_QUOTA_EXCEEDED)

    def record(self, partitions: int) -> None:
        if self.on:
            self.quotas.record_mutations(self.user, self.client_id, partitions)

    def throttle_ms(self) -> int:
        """The response's throttle time; the connection is muted for it."""
        if not self.on:
            return 0
        ms = self.quotas.mutation_throttle_ms(self.user, self.client_id)
        throttle = getattr(self.connection, "throttle", None)  # not the HTTP layer's caller
        if ms > 0 and throttle is not None:
            throttle(ms, CONTROLLER_MUTATION_RATE)
        return ms


DUPLICATE_TOPIC_NAME, DUPLICATE_TOPIC_ID = "Duplicate topic name.", "Duplicate topic id."
"""Kafka's answer (INVALID_REQUEST) to a name or id that more than one entry of a CreateTopics,
CreatePartitions or DeleteTopics request carries: one result for it, and it is not acted on."""


def _repeated(keys) -> set:
    """The keys that occur more than once in ``keys``."""
    seen, repeated = set(), set()
    for k in keys:
        (repeated if k in seen else seen).add(k)
    return repeated


def _first_of_each(items, key, repeated: set, duplicate_result):
    """``items`` in order, but each key of ``repeated`` once, as ``(item, duplicate_result(item))``
    (``(item, None)`` for the rest): a repeated key is answered once, at its first place."""
    answered = set()
    for item in items:
        k = key(item)
        if k in repeated:
            if k not in answered:
                answered.add(k)
                yield item, duplicate_result(item)
        else:
            yield item, None


async def handle_create_topics(ctx, req) -> dict:
    runtime = ctx.runtime
    deadline = runtime.loop.time() + req.timeout_ms / 1000  # for the whole request (a cluster waits for it)
    out = []
    names = [t.name for t in req.topics]
    creatable = set(names) if authorize(ctx, AclOperation.CREATE, ResourceType.CLUSTER) else authorized_names(
        ctx, AclOperation.CREATE, ResourceType.TOPIC, names)
    config_visible = authorized_names(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, creatable)
    quota = MutationQuota(ctx, strict_since_version=6)
    for t, duplicate in _first_of_each(req.topics, lambda t: t.name, _repeated(names), lambda t: {
            "name": t.name, "topic_id": None, "error_code": ErrorCode.INVALID_REQUEST,
            "error_message": DUPLICATE_TOPIC_NAME, "num_partitions": -1, "replication_factor": -1, "configs": None}):
        if duplicate is not None:
            out.append(duplicate)
            continue
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        entry = {"name": t.name, "topic_id": None, "error_code": ErrorCode.NONE, "error_message": None,
                 "num_partitions": -1, "replication_factor": -1, "configs": None}
        if t.name not in creatable:
            entry.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                         error_message="Authorization failed.")
            out.append(entry)
            continue
        try:
            manual = [(a.partition_index, list(a.broker_ids)) for a in t.assignments or ()]
            if manual and t.replication_factor != -1:
                raise KafkaError("A manual partition assignment was specified, but replication factor was not "
                                 "set to -1.", ErrorCode.INVALID_REQUEST)
            if manual and t.num_partitions != -1:
                raise KafkaError("A manual partition assignment was specified, but numPartitions was not set to -1.",
                                 ErrorCode.INVALID_REQUEST)
            if req.validate_only:
                runtime.validate_topic_configs(configs)
                if t.name in runtime.metadata.topics:
                    raise KafkaError(f"topic {t.name!r} already exists", ErrorCode.TOPIC_ALREADY_EXISTS)
                if manual:
                    replicas = manual_topic_assignments(manual, runtime.registered_broker_ids(),
                                                        runtime.registered_broker_ids())
                    entry.update(num_partitions=len(replicas), replication_factor=len(replicas[0]))
                else:
                    entry.update(num_partitions=t.num_partitions if t.num_partitions > 0
                                 else runtime.config.num_partitions,
                                 replication_factor=t.replication_factor if t.replication_factor > 0
                                 else runtime.config.default_replication_factor)
                entry["configs"] = _created_topic_configs(runtime, configs)
                if t.name not in config_visible:
                    entry.update(configs=None, topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            else:
                quota.check()
                info = await runtime.create_topic_async(t.name, t.num_partitions, t.replication_factor, configs,
                                                        assignments=manual or None,
                                                        timeout_s=deadline - runtime.loop.time())
                quota.record(info.num_partitions)
                rf = len(info.assignments[0]) if info.assignments else 1
                entry.update(topic_id=info.topic_id, num_partitions=info.num_partitions, replication_factor=rf,
                             configs=_created_topic_configs(runtime, info.configs))
                if t.name not in config_visible:
                    entry.update(configs=None, topic_config_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                                 num_partitions=-1, replication_factor=-1)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=str(exc))
        out.append(entry)
    return {"throttle_time_ms": quota.throttle_ms(), "topics": out}


def _created_topic_configs(runtime, configs: dict[str, str]) -> list[dict]:
    """CreateTopics v5+ ``configs`` of a topic created (or, with validate_only, that would be)
    with ``configs``: every config in effect with its source, as DescribeConfigs gives it (Kafka
    fills them from the same describe; Java's ``CreateTopicsResult.config()`` reads them)."""
    created = SimpleNamespace(configs=configs)  # all _topic_config_entries reads of a topic
    return [{"name": e["name"], "value": e["value"], "read_only": e["read_only"],
             "config_source": e["config_source"], "is_sensitive": e["is_sensitive"]}
            for e in _topic_config_entries(runtime, created, None, False)]


async def handle_delete_topics(ctx, req) -> dict:
    runtime = ctx.runtime
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    deadline = runtime.loop.time() + req.timeout_ms / 1000  # for the whole request (a cluster waits for it)
    out = []
    quota = MutationQuota(ctx, strict_since_version=5)
    repeated = _repeated(("name", n) if n is not None else ("id", i) for n, i in wanted)
    for (name, topic_id), duplicate in _first_of_each(
            wanted, lambda w: ("name", w[0]) if w[0] is not None else ("id", w[1]), repeated,
            lambda w: {"name": w[0], "topic_id": w[1], "error_code": ErrorCode.INVALID_REQUEST,
                       "error_message": DUPLICATE_TOPIC_NAME if w[0] is not None else DUPLICATE_TOPIC_ID}):
        if duplicate is not None:
            out.append(duplicate)
            continue
        entry = {"name": name, "topic_id": topic_id, "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if name is None:
                info = runtime.metadata.topic_by_id(topic_id)
                if info is None or not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, info.name):
                    raise KafkaError("unknown topic id", ErrorCode.UNKNOWN_TOPIC_ID)
                name = entry["name"] = info.name
            if not authorize(ctx, AclOperation.DELETE, ResourceType.TOPIC, name):
                raise KafkaError("Authorization failed.", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if not runtime.config.delete_topic_enable:
                raise KafkaError("delete.topic.enable is false", ErrorCode.TOPIC_DELETION_DISABLED)
            info = runtime.metadata.topics.get(name)
            if info is not None and info.internal:
                raise KafkaError("cannot delete an internal topic", ErrorCode.INVALID_REQUEST)
            quota.check()
            info = await runtime.delete_topic_async(name, timeout_s=deadline - runtime.loop.time())
            quota.record(info.num_partitions)
            entry["topic_id"] = info.topic_id
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=str(exc))
        out.append(entry)
    return {"throttle_time_ms": quota.throttle_ms(), "responses": out}


async def handle_create_partitions(ctx, req) -> dict:
    runtime = ctx.runtime
    deadline = runtime.loop.time() + req.timeout_ms / 1000  # for the whole request (a cluster waits for it)
    out = []
    quota = MutationQuota(ctx, strict_since_version=3)
    for t, duplicate in _first_of_each(req.topics, lambda t: t.name, _repeated(t.name for t in req.topics),
                                       lambda t: {"name": t.name, "error_code": ErrorCode.INVALID_REQUEST,
                                                  "error_message": DUPLICATE_TOPIC_NAME}):
        if duplicate is not None:
            out.append(duplicate)
            continue
        entry = {"name": t.name, "error_code": ErrorCode.NONE, "error_message": None}
        try:
            if not authorize(ctx, AclOperation.ALTER, ResourceType.TOPIC, t.name):
                raise KafkaError("Authorization failed.", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            info = runtime.metadata.topics.get(t.name)
            if info is None:
                raise KafkaError(f"unknown topic {t.name!r}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            if t.count <= info.num_partitions:
                raise KafkaError(f"topic has {info.num_partitions} partitions; the count can only grow",
                                 ErrorCode.INVALID_PARTITIONS)
            validate_partition_count(t.count)
            manual = [list(a.broker_ids) for a in t.assignments] if t.assignments is not None else None
            if req.validate_only:
                if manual is not None:
                    rf = len(info.assignments[0]) if info.assignments else 1
                    manual_partition_assignments(manual, info.num_partitions, t.count, rf,
                                                 runtime.registered_broker_ids(), runtime.registered_broker_ids())
            else:
                quota.check()
                before = info.num_partitions  # a single broker's TopicInfo grows in place
                await runtime.add_partitions_async(t.name, t.count, manual, timeout_s=deadline - runtime.loop.time())
                quota.record(t.count - before)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=str(exc))
        out.append(entry)
    return {"throttle_time_ms": quota.throttle_ms(), "results": out}


def _topic_config_entries(runtime, info, keys, synonyms: bool) -> list[dict]:
    """DescribeConfigs entries of a topic: its own value (DYNAMIC_TOPIC_CONFIG), else the
    broker-wide default with the source of the broker config it comes from (Kafka: the topic
    config's synonym ``log.retention.ms`` set for this broker, as the cluster default, in the
    broker's configuration, or LiteMQ's default)."""
    defaults = dict(runtime.default_log_config.to_kafka_configs())
    defaults.update(BROKER_TOPIC_CONFIGS)
    defaults.update({k: v for k, v in _UNSET_FLUSH_CONFIGS.items() if k not in defaults})
    defaults["min.insync.replicas"] = str(runtime.config.min_insync_replicas)
    per_broker, default = runtime.dynamic_config_layers()
    static = runtime.static_config
    entries = []
    for name in sorted(defaults.keys() | (INTERNAL_TOPIC_CONFIGS & info.configs.keys())):  # internal: only when set
        if keys is not None and name not in keys:
            continue
        dynamic = name in info.configs
        value = info.configs[name] if dynamic else defaults[name]
        broker_name = dynamic_config.TOPIC_TO_BROKER_CONFIG.get(name)
        broker_source = ConfigSource.DEFAULT_CONFIG if broker_name is None else dynamic_config.source_of(
            broker_name, static, per_broker, default)
        found = []
        if synonyms:
            if dynamic:
                found.append({"name": name, "value": value, "source": ConfigSource.DYNAMIC_TOPIC_CONFIG})
            if broker_name is not None:
                found += dynamic_config.synonyms(broker_name, static, per_broker, default)
        entries.append({"name": name, "value": value, "read_only": False, "is_default": not dynamic
                        and broker_source == ConfigSource.DEFAULT_CONFIG, "config_source": ConfigSource.DYNAMIC_TOPIC_CONFIG if dynamic
                        else broker_source, "is_sensitive": False, "synonyms": found,
                        "config_type": topic_config_type(name), "documentation": None})
    return entries


_READ_ONLY_BROKER_CONFIGS = ("num.partitions", "default.replication.factor", "auto.create.topics.enable",
                             "offsets.topic.num.partitions", "log.retention.check.interval.ms", "node.id",
                             "broker.id", "broker.rack", "replica.selector.class",
                             "replica.lag.time.max.ms", "log.page.cache.retain.bytes")
"""Read-only broker settings DescribeConfigs reports besides every dynamic one."""


def _broker_config_entries(runtime, resource: str, keys, synonyms: bool) -> list[dict]:
    """DescribeConfigs entries of a BROKER resource (Kafka ``ConfigHelper.describeConfigs``):
    this broker (``resource`` = its node id): the read-only settings and every dynamic one with
    its effective value and source; the cluster-wide default (``""``): the dynamic defaults
    set (DYNAMIC_DEFAULT_BROKER_CONFIG) only.

    Raises:
        KafkaError(INVALID_REQUEST): another broker's id (Kafka answers only for itself).
    """
    per_broker, default = runtime.dynamic_config_layers()
    static, cfg = runtime.static_config, runtime.config
    if resource == dynamic_config.DEFAULT_RESOURCE:
        return [{"name": k, "value": v, "read_only": False, "is_default": False,
                 "config_source": ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, "is_sensitive": False,
                 "synonyms": [{"name": k, "value": v, "source": ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG}]
                 if synonyms else [], "config_type": broker_config_type(k), "documentation": None}
                for k, v in sorted(default.items()) if keys is None or k in keys]
    if resource != str(cfg.node_id):
        raise KafkaError(f"Unexpected broker id, expected {cfg.node_id} or empty string, but received {resource}",
                         ErrorCode.INVALID_REQUEST)
    entries = []
    for name in sorted({*_READ_ONLY_BROKER_CONFIGS, *dynamic_config.DYNAMIC_BROKER_CONFIGS}):
        if keys is not None and name not in keys:
            continue
        read_only = name not in dynamic_config.DYNAMIC_BROKER_CONFIGS
        key = "node.id" if name == "broker.id" else name
        source = dynamic_config.source_of(key, static, per_broker, default)
        entries.append({"name": name, "value": dynamic_config.value_of(key, cfg, per_broker, default),
                        "read_only": read_only, "is_default": source == ConfigSource.DEFAULT_CONFIG, "config_source": source,
                        "is_sensitive": False,
                        "synonyms": [dict(s, name=name) for s in dynamic_config.synonyms(key, static, per_broker, default)]
                        if synonyms else [],  # broker.id's are its own (Kafka copies node.id to broker.id)
                        "config_type": broker_config_type(name), "documentation": None})
    entries += [e for e in _listener_entries(runtime, synonyms) if keys is None or e["name"] in keys]
    entries.sort(key=lambda e: e["name"])
    return entries


def _listener_entries(runtime, synonyms: bool) -> list[dict]:
    """The read-only ``listeners`` and ``advertised.listeners`` entries of this broker: the
    effective endpoints (``NAME://host:port``, bound ports filled in). STATIC_BROKER_CONFIG when
    set at start (``listeners``/``--listen``, ``advertised.listeners``/``--advertise``), else
    DEFAULT_CONFIG (Kafka: ``listeners`` defaults to ``PLAINTEXT://:9092``, and
    ``advertised.listeners`` to the listeners)."""
    static = runtime.static_config
    bound = ",".join(f"{s.name}://{s.host}:{runtime.ports.get(s.name, s.port)}" for s in runtime.listeners)
    advertised = ",".join(f"{name}://{host}:{port}" for name, (host, port) in runtime.advertised_endpoints().items())
    listeners_set = dynamic_config.given_at_start(static, "listeners", "listen_host", "listen_port")
    advertised_set = dynamic_config.given_at_start(static, "advertised_listeners", "advertised_host", "advertised_port")
    out = []
    for name, value, is_set in (("listeners", bound, listeners_set), ("advertised.listeners", advertised, advertised_set)):
        source = ConfigSource.STATIC_BROKER_CONFIG if is_set else ConfigSource.DEFAULT_CONFIG
        out.append({"name": name, "value": value, "read_only": True, "is_default": not is_set,
                    "config_source": source, "is_sensitive": False,
                    "synonyms": [{"name": name, "value": value, "source": source}] if synonyms else [],
                    "config_type": broker_config_type(name), "documentation": None})
    return out


async def _group_config_entries(runtime, group_id: str, keys, documentation: bool) -> list[dict]:
    """DescribeConfigs entries of a GROUP resource (any group id, known or not, as Kafka): every
    Kafka 4.1 group config (:data:`~litemq.coordinator.group_configs.GROUP_CONFIG_DEFS`), its
    override (GROUP_CONFIG) or the broker's setting (DEFAULT_CONFIG), asked of the group's
    coordinator.

    Raises:
        KafkaError: the coordinator could not be asked (COORDINATOR_NOT_AVAILABLE, ...).
    """
    err, overrides = await runtime.coordinator.group_config_overrides(group_id)
    if err:
        raise KafkaError(f"the coordinator of group {group_id} could not be asked", err)
    out = []
    for name, d in sorted(GROUP_CONFIG_DEFS.items()):
        if keys is not None and name not in keys:
            continue
        dynamic = name in overrides
        out.append({"name": name, "value": overrides[name] if dynamic else default_value(name, runtime.config),
                    "read_only": False, "is_default": not dynamic,
                    "config_source": ConfigSource.GROUP_CONFIG if dynamic else ConfigSource.DEFAULT_CONFIG, "is_sensitive": False,
                    "synonyms": [], "config_type": d.config_type, "documentation": d.doc if documentation else None})
    return out


async def _alter_group_configs(runtime, r, incremental: bool, validate_only: bool) -> None:
    """AlterConfigs/IncrementalAlterConfigs of a GROUP resource (``kafka-configs.sh
    --entity-type groups``): Kafka's checks (:func:`~litemq.coordinator.group_configs.validate_group_configs`),
    then the new override set is stored by the group's coordinator.

    Raises:
        KafkaError: INVALID_REQUEST (no group name), INVALID_CONFIG (unknown name, bad value,
            APPEND/SUBTRACT), the coordinator's error.
    """
    if not r.resource_name:
        raise KafkaError("Group name must not be empty", ErrorCode.INVALID_REQUEST)
    for c in r.configs:
        if c.name not in GROUP_CONFIG_DEFS:
            raise KafkaError(f"Unknown group config name: {c.name}", ErrorCode.INVALID_CONFIG)
    current = {}
    if incremental:
        err, current = await runtime.coordinator.group_config_overrides(r.resource_name)
        if err:
            raise KafkaError(f"the coordinator of group {r.resource_name} could not be asked", err)
    new = _altered(current, r.configs, incremental, lambda _name: ConfigType.INT)  # no group config is a LIST
    validate_group_configs(new, runtime.config)
    if validate_only:
        return
    err = await runtime.coordinator.put_group_configs(r.resource_name, normalized(new))
    if err:
        raise KafkaError(f"the coordinator of group {r.resource_name} did not store the configs", err)


def _client_metrics_entries(runtime, name: str, keys) -> list[dict]:
    """DescribeConfigs entries of a CLIENT_METRICS resource (KIP-714): the configs set on
    subscription ``name`` (CLIENT_METRICS_CONFIG), none for an unknown one (as Kafka).

    Raises:
        KafkaError(INVALID_REQUEST): an empty name.
    """
    if not name:
        raise KafkaError("Client metrics subscription name must not be empty", ErrorCode.INVALID_REQUEST)
    configs = runtime.metadata.client_metrics.subscriptions.get(name, {})
    return [{"name": k, "value": v, "read_only": False, "is_default": False, "config_source": ConfigSource.CLIENT_METRICS_CONFIG,
             "is_sensitive": False, "synonyms": [], "config_type": _CLIENT_METRICS_CONFIG_TYPES.get(k, 0),
             "documentation": None}
            for k, v in sorted(configs.items()) if keys is None or k in keys]


async def _alter_client_metrics(runtime, r, incremental: bool, validate_only: bool) -> None:
    """AlterConfigs/IncrementalAlterConfigs of a CLIENT_METRICS resource
    (``kafka-client-metrics.sh``): the subscription's new config set, checked as Kafka's
    ``ClientMetricsConfigs.validate`` does, stored in the cluster metadata (all configs
    deleted: the subscription is gone).

    Raises:
        KafkaError: INVALID_REQUEST / INVALID_CONFIG (see :mod:`litemq.security.client_metrics`),
            or the metadata change's error.
    """
    current = runtime.metadata.client_metrics.subscriptions.get(r.resource_name, {}) if incremental else {}
    new = _altered(current, r.configs, incremental, lambda name: _CLIENT_METRICS_CONFIG_TYPES.get(name, 0))
    await metadata_change(runtime, "alter_client_metrics", name=r.resource_name, configs=new,
                          validate_only=validate_only)


_CONFIG_RESOURCE_ACL = {
    TOPIC_RESOURCE: (ResourceType.TOPIC, ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    BROKER_RESOURCE: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    BROKER_LOGGER_RESOURCE: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    CLIENT_METRICS_RESOURCE: (ResourceType.CLUSTER, ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
    GROUP_RESOURCE: (ResourceType.GROUP, ErrorCode.GROUP_AUTHORIZATION_FAILED),
}
"""ConfigResource type -> (ACL resource type checked, error code when refused); broker, broker
logger and client metrics resources are checked on the cluster (Kafka ``KafkaApis``/``ConfigHelper``)."""


def _config_access_error(ctx, operation: AclOperation, resource_type: int, resource_name: str) -> int:
    """NONE, or the *_AUTHORIZATION_FAILED code when ``operation`` on the config resource is refused
    (a broker resource is checked on the cluster, as Kafka does)."""
    acl = _CONFIG_RESOURCE_ACL.get(resource_type)
    if acl is None:
        return ErrorCode.NONE  # unsupported type: answered INVALID_REQUEST by the caller
    rtype, code = acl
    name = resource_name if rtype != ResourceType.CLUSTER else None
    allowed = authorize(ctx, operation, rtype) if name is None else authorize(ctx, operation, rtype, name)
    return ErrorCode.NONE if allowed else code


async def handle_describe_configs(ctx, req) -> dict:
    runtime = ctx.runtime
    results = []
    for r in req.resources:
        keys = set(r.configuration_keys) if r.configuration_keys else None  # null or empty: all (as Kafka)
        entry = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name, "configs": []}
        denied = _config_access_error(ctx, AclOperation.DESCRIBE_CONFIGS, r.resource_type, r.resource_name)
        if denied:
            entry.update(error_code=denied, error_message="Authorization failed.")
        elif r.resource_type == TOPIC_RESOURCE:
            info = runtime.metadata.topics.get(r.resource_name)
            if info is None:
                entry.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, error_message="unknown topic")
            else:
                entry["configs"] = _topic_config_entries(runtime, info, keys, req.include_synonyms)
        elif r.resource_type == BROKER_RESOURCE:
            try:
                entry["configs"] = _broker_config_entries(runtime, r.resource_name or "", keys, req.include_synonyms)
            except KafkaError as exc:
                entry.update(error_code=exc.code, error_message=str(exc))
        elif r.resource_type == CLIENT_METRICS_RESOURCE:
            try:
                entry["configs"] = _client_metrics_entries(runtime, r.resource_name, keys)
            except KafkaError as exc:
                entry.update(error_code=exc.code, error_message=str(exc))
        elif r.resource_type == GROUP_RESOURCE:
            if not r.resource_name:
                entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message="Group name must not be empty")
            else:
                try:
                    entry["configs"] = await _group_config_entries(runtime, r.resource_name, keys,
                                                                   ctx.version >= 3 and req.include_documentation)
                except KafkaError as exc:
                    entry.update(error_code=exc.code, error_message=str(exc))
        else:
            entry.update(error_code=ErrorCode.INVALID_REQUEST,
                         error_message=f"Unsupported resource type: {r.resource_type}")
        results.append(entry)
    return {"throttle_time_ms": 0, "results": results}


def _altered(current: dict[str, str], configs, incremental: bool, config_type, default_of=lambda _name: None
             ) -> dict[str, str]:
    """The new config set of a resource: ``current`` with the request's entries applied (SET,
    DELETE, APPEND, SUBTRACT for IncrementalAlterConfigs; AlterConfigs replaces the whole set,
    so its caller passes an empty ``current``). ``config_type(name)`` is the config's
    :class:`~litemq.broker.config_types.ConfigType`; APPEND/SUBTRACT on a config the resource
    does not set start from ``default_of(name)`` (Kafka's ``getParts``: the config's default).

    Raises:
        KafkaError(INVALID_REQUEST): an unknown operation.
        KafkaError(INVALID_CONFIG): APPEND or SUBTRACT on a config whose type is not LIST (Kafka's
            ``ConfigurationControlManager``, with its message).
    """
    new = dict(current)
    for c in configs:
        op = c.config_operation if incremental else SET
        if op in (APPEND, SUBTRACT) and config_type(c.name) != ConfigType.LIST:
            raise KafkaError(f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key {c.name} because its type "
                             f"is not LIST.", ErrorCode.INVALID_CONFIG)
        if op == SET:
            if c.value is None:
                new.pop(c.name, None)
            else:
                new[c.name] = c.value
        elif op == DELETE:
            new.pop(c.name, None)
        elif op in (APPEND, SUBTRACT):
            base = new[c.name] if c.name in new else (default_of(c.name) or "")
            items = [x.strip() for x in base.split(",") if x.strip()]  # Kafka's LIST parsing
            vals = [x.strip() for x in (c.value or "").split(",") if x.strip()]
            items = items + [x for x in vals if x not in items] if op == APPEND else [x for x in items if x not in vals]
            new[c.name] = ",".join(items)
        else:
            raise KafkaError(f"unknown config operation {op}", ErrorCode.INVALID_REQUEST)
    return new


async def _alter(ctx, req, incremental: bool) -> dict:
    runtime = ctx.runtime
    out = []
    for r in req.resources:
        entry = {"error_code": ErrorCode.NONE, "error_message": None, "resource_type": r.resource_type,
                 "resource_name": r.resource_name}
        try:
            denied = _config_access_error(ctx, AclOperation.ALTER_CONFIGS, r.resource_type, r.resource_name)
            if denied:
                raise KafkaError("Authorization failed.", denied)
            if r.resource_type == GROUP_RESOURCE:
                await _alter_group_configs(runtime, r, incremental, req.validate_only)
                out.append(entry)
                continue
            if r.resource_type == CLIENT_METRICS_RESOURCE:
                await _alter_client_metrics(runtime, r, incremental, req.validate_only)
                out.append(entry)
                continue
            if r.resource_type == BROKER_RESOURCE:
                # kafka-configs.sh --entity-type brokers (--entity-name N | --entity-default)
                resource = r.resource_name or dynamic_config.DEFAULT_RESOURCE
                dynamic_config.check_resource_name(resource)
                current = runtime.metadata.broker_configs.get(resource, {})
                new = _altered(current if incremental else {}, r.configs, incremental, broker_config_type,
                               dynamic_config.stock_value)
                runtime.validate_broker_configs(resource, new)
                if not req.validate_only:
                    await runtime.set_broker_configs_async(resource, new)
                out.append(entry)
                continue
            if r.resource_type != TOPIC_RESOURCE:
                raise KafkaError("only topic, broker, client metrics and group configs can be altered",
                                 ErrorCode.INVALID_REQUEST)
            info = runtime.metadata.topics.get(r.resource_name)
            if info is None:
                raise KafkaError("unknown topic", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            new = _altered(info.configs if incremental else {}, r.configs, incremental, topic_config_type,
                           _STOCK_TOPIC_CONFIGS.get)
            runtime.validate_topic_configs(new)
            if not req.validate_only:
                await runtime.set_topic_configs_async(r.resource_name, new)
        except KafkaError as exc:
            entry.update(error_code=exc.code, error_message=str(exc))
        out.append(entry)
    return {"throttle_time_ms": 0, "responses": out}


async def handle_alter_configs(ctx, req) -> dict:
    return await _alter(ctx, req, incremental=False)


async def handle_incremental_alter_configs(ctx, req) -> dict:
    return await _alter(ctx, req, incremental=True)


async def handle_delete_records(ctx, req) -> dict:
    """DeleteRecords v0-2 (KIP-107; Kafka ``ReplicaManager.deleteRecords`` and
    ``DelayedDeleteRecords``): DELETE on the topic (else TOPIC_AUTHORIZATION_FAILED). For each
    partition the leader moves its log start offset up to ``offset`` (Kafka offsets; -1: the
    high watermark), then the answer waits until the partition's low watermark - the lowest log
    start offset of the leader and its followers on live brokers (Kafka's
    ``Partition.lowWatermarkIfLeader``) - reached it, so an acknowledged deletion survives the
    leader's failure. ``low_watermark`` is that lowest log start (Kafka offsets). Errors per
    partition: POLICY_VIOLATION (``cleanup.policy`` without ``delete``), OFFSET_OUT_OF_RANGE
    (``offset`` < 0 or above the high watermark), NOT_LEADER_OR_FOLLOWER (not, or no longer,
    the leader), REQUEST_TIMED_OUT when the followers did not follow within ``timeout_ms``
    (at most ``limits.DELETE_RECORDS_MAX_TIMEOUT_MS``; the deletion stays on the leader and
    reaches them later; ``low_watermark`` is then the one at the deletion, as Kafka's). A single
    broker (no followers) answers at once."""
    runtime = ctx.runtime
    topics = []
    waiting = []  # (entry, partition, future, offset): answers that wait for the followers' log starts
    deletable = authorized_names(ctx, AclOperation.DELETE, ResourceType.TOPIC, (t.name for t in req.topics))
    for t in req.topics:
        parts = []
        for dp in t.partitions:
            entry = {"partition_index": dp.partition_index, "low_watermark": -1, "error_code": ErrorCode.NONE}
            p, err = runtime.leader_partition(t.name, dp.partition_index)
            if t.name not in deletable:
                entry["error_code"] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif err:
                entry["error_code"] = err
            else:
                hw = p.kafka_high_watermark  # the request and the answer are in Kafka offsets
                offset = hw if dp.offset == -1 else dp.offset
                if not p.log.config.delete:  # Kafka's Partition.deleteRecordsOnLeader
                    entry["error_code"] = ErrorCode.POLICY_VIOLATION
                elif offset < 0 or offset > hw:
                    entry["error_code"] = ErrorCode.OFFSET_OUT_OF_RANGE
                else:
                    try:
                        required = min(p.log_offset(offset), p.high_watermark)
                        p.log.delete_records_before(required)
                        p.truncate_after_delete_records()
                        fut = p.low_watermark_waiter(required)
                        if fut.done():
                            _answer_delete_records(entry, p, fut, offset)
                        else:
                            entry["low_watermark"] = _kafka_low_watermark(p, p.low_watermark, 0)
                            entry["error_code"] = ErrorCode.REQUEST_TIMED_OUT  # unless answered in time
                            waiting.append((entry, p, fut, offset))
                    except KafkaError as exc:
                        entry["error_code"] = exc.code
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    if waiting:
        futures = [w[2] for w in waiting]
        timeout_s = min(max(req.timeout_ms, 0), limits.DELETE_RECORDS_MAX_TIMEOUT_MS) / 1000
        try:
            if timeout_s > 0:
                await asyncio.wait(futures, timeout=timeout_s)
            for entry, p, fut, offset in waiting:
                if fut.done():
                    _answer_delete_records(entry, p, fut, offset)
        finally:
            for fut in futures:
                if not fut.done():
                    fut.cancel()
    return {"throttle_time_ms": 0, "topics": topics}


def _kafka_low_watermark(p, low: int, floor: int) -> int:
    """The Kafka offset of low watermark ``low`` (log offsets; -1: a follower not heard from
    yet), at least ``floor``. A follower's log start below the leader's translates with the
    leader's count of internal offsets below its own log start (what lies between is gone on
    the leader): never above the true Kafka offset, so the floor (the deleted offset, which the
    low watermark reached) keeps the answer exact there."""
    return -1 if low < 0 else max(p.kafka_offset(low), floor)


def _answer_delete_records(entry: dict, p, fut: asyncio.Future, offset: int) -> None:
    """A DeleteRecords partition entry from its completed low-watermark future: the low
    watermark (Kafka offsets; it reached ``offset``, the deleted one) and NONE, or the error
    the future failed with (low watermark -1)."""
    exc = fut.exception()
    if exc is None:
        entry["low_watermark"] = _kafka_low_watermark(p, fut.result(), offset)
        entry["error_code"] = ErrorCode.NONE
    else:
        entry["low_watermark"] = -1
        entry["error_code"] = exc.code if isinstance(exc, KafkaError) else ErrorCode.UNKNOWN_SERVER_ERROR


async def handle_elect_leaders(ctx, req) -> dict:
    """ElectLeaders v0-2 (KIP-460; Kafka ``KafkaApis.handleElectLeaders``): ALTER on the cluster
    (else CLUSTER_AUTHORIZATION_FAILED for the request and every partition). PREFERRED (0): each
    partition's leader hands leadership to its preferred replica (Raft leadership transfer),
    answered once it leads or ``timeout_ms`` passed; ELECTION_NOT_NEEDED when it already leads
    (always on a single broker). UNCLEAN (1): Raft elects only replicas holding every committed
    record, so there is no unclean election: ELECTION_NOT_NEEDED while a leader exists,
    ELIGIBLE_LEADERS_NOT_AVAILABLE otherwise (Kafka's answers for those states). ``topic_partitions``
    null means every partition of every topic, internal ones (``__consumer_offsets``) included, and
    the answer leaves out the partitions that answer ELECTION_NOT_NEEDED (a row per topic stays,
    its partition list possibly empty), as Kafka's ``ReplicationControlManager.electLeaders``: "we
    do not return partitions which already have the desired leader"."""
    runtime = ctx.runtime
    v = ctx.version
    election_type = req.election_type if v >= 1 else 0
    meta = runtime.metadata
    every_partition = req.topic_partitions is None
    if every_partition:
        wanted = [(name, list(range(info.num_partitions))) for name, info in meta.topics.items()]
    else:
        wanted = [(t.topic, list(t.partitions)) for t in req.topic_partitions]
    allowed = authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER)
    timeout_s = min(max(req.timeout_ms, 0), limits.ELECT_LEADERS_MAX_TIMEOUT_MS) / 1000

    async def one(topic: str, index: int) -> tuple[int, str | None]:
        info = meta.topics.get(topic)
        if info is None or not 0 <= index < info.num_partitions:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None
        cluster = runtime.cluster
        if cluster is None:  # one broker: it is every partition's only, preferred, replica
            return ErrorCode.ELECTION_NOT_NEEDED, None
        leader, _ = cluster.leader_of(topic, index)
        if election_type == 1:
            return (ErrorCode.ELECTION_NOT_NEEDED, None) if leader >= 0 else (
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, "no replica can be elected")
        if election_type != 0:
            return ErrorCode.INVALID_REQUEST, f"unknown election type {election_type}"
        if leader < 0:
            return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "the partition has no leader"
        if leader == cluster.node_id:
            return await cluster.elect_preferred(topic, index, timeout_s)
        try:
            res = await cluster.transport.rpc(leader, {"op": "elect_preferred", "topic": topic, "partition": index,
                                                       "timeout_ms": int(timeout_s * 1000)}, timeout_s + 1)
        except (ConnectionError, asyncio.TimeoutError):
            return ErrorCode.REQUEST_TIMED_OUT, f"leader {leader} did not answer"
        return res.get("error", ErrorCode.UNKNOWN_SERVER_ERROR), res.get("message")

    results = []
    for topic, indexes in wanted:
        if not allowed:
            codes = [(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)] * len(indexes)
        else:
            codes = await asyncio.gather(*(one(topic, i) for i in indexes))
        results.append({"topic": topic, "partition_result": [
            {"partition_id": i, "error_code": int(code), "error_message": msg} for i, (code, msg) in zip(indexes, codes)
            if not (every_partition and code == ErrorCode.ELECTION_NOT_NEEDED)]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE if allowed else ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            "replica_election_results": results}


def handle_describe_log_dirs(ctx, req) -> dict:
    """DescribeLogDirs (35) v0-4 (Kafka ``KafkaApis.handleDescribeLogDirsRequest`` and
    ``ReplicaManager.describeLogDirs``): the broker's one log directory (its data dir, absolute)
    with the replicas it hosts among those asked (``topics`` null = all): each one's size in
    bytes (its segments), its offset lag ``max(0, high watermark - log end offset)`` in Kafka
    offsets, never a future log (one log dir: AlterReplicaLogDirs has nothing to move); v4 adds the volume's total
    and usable bytes (``statvfs``). Needs DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
    (the top-level error, v3+) and no directory, as Kafka answers."""
    if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "results": []}
    runtime = ctx.runtime
    wanted = None if req.topics is None else {(t.topic, i) for t in req.topics for i in t.partitions}
    by_topic: dict[str, list[dict]] = {}
    for (topic, index), p in sorted(runtime.replicas.partitions.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        lag = max(0, p.kafka_high_watermark - p.kafka_log_end_offset)
        by_topic.setdefault(topic, []).append({"partition_index": index, "partition_size": p.log.size_bytes,
                                               "offset_lag": lag, "is_future_key": False})
    log_dir = os.path.abspath(runtime.config.data_dir)
    result = {"error_code": ErrorCode.NONE, "log_dir": log_dir, "total_bytes": -1, "usable_bytes": -1,
              "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}
    try:
        st = os.statvfs(log_dir)
        result["total_bytes"], result["usable_bytes"] = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError as exc:  # the directory went away: Kafka reports the dir offline
        log.warning("DescribeLogDirs: cannot stat %s: %s", log_dir, exc)
        result.update(error_code=ErrorCode.KAFKA_STORAGE_ERROR, topics=[])
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": [result]}


def handle_alter_replica_log_dirs(ctx, req) -> dict:
    """AlterReplicaLogDirs (34) v0-2 (Kafka ``KafkaApis.handleAlterReplicaLogDirsRequest`` and
    ``ReplicaManager.alterReplicaLogDirs``, KIP-113): move replicas between this broker's log
    dirs. A LiteMQ broker has one log dir (its data dir), so every move there is already done:
    per partition NONE when this broker hosts a replica of it and the path is its log dir (as
    Kafka answers a move to the dir a replica is in), LOG_DIR_NOT_FOUND for a path that is no log
    dir of this broker, REPLICA_NOT_AVAILABLE for a partition it hosts no replica of (Kafka's
    answer to NotLeaderOrFollower there, an unknown topic included). Needs ALTER on the cluster,
    else CLUSTER_AUTHORIZATION_FAILED for every partition."""
    runtime = ctx.runtime
    allowed = authorize(ctx, AclOperation.ALTER, ResourceType.CLUSTER)
    log_dir = os.path.realpath(runtime.config.data_dir)
    by_topic: dict[str, list[dict]] = {}
    for d in req.dirs:
        try:
            here = os.path.realpath(d.path) == log_dir
        except (ValueError, OSError):  # not a path at all (a NUL byte): no log dir of ours
            here = False
        for t in d.topics:
            for index in t.partitions:
                if not allowed:
                    code = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
                elif not here:
                    code = ErrorCode.LOG_DIR_NOT_FOUND
                elif (t.name, index) not in runtime.replicas.partitions:
                    code = ErrorCode.REPLICA_NOT_AVAILABLE
                else:
                    code = ErrorCode.NONE
                by_topic.setdefault(t.name, []).append({"partition_index": index, "error_code": int(code)})
    return {"throttle_time_ms": 0,
            "results": [{"topic_name": name, "partitions": ps} for name, ps in by_topic.items()]}


def register(runtime) -> None:
    runtime.register(35, handle_describe_log_dirs)
    runtime.register(34, handle_alter_replica_log_dirs)
    if runtime.cluster is not None:  # group configs live with the group's coordinator
        runtime.cluster.rpc_ops["group_configs"] = lambda peer_id, req: runtime.coordinator.serve_group_configs_rpc(req)
    runtime.register(43, handle_elect_leaders)
    runtime.register(19, handle_create_topics)
    runtime.register(20, handle_delete_topics)
    runtime.register(37, handle_create_partitions)
    runtime.register(32, handle_describe_configs)
    runtime.register(33, handle_alter_configs)
    runtime.register(44, handle_incremental_alter_configs)
    runtime.register(21, handle_delete_records)
