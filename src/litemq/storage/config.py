"""Per-partition log settings (Kafka topic configs), with units in their names.

``LogConfig`` mirrors the subset of Kafka's topic-level configs that the storage layer honours
(source: Kafka ``org.apache.kafka.storage.internals.log.LogConfig`` and
``org.apache.kafka.common.config.TopicConfig``). Field names are the Kafka names in snake_case
with the unit appended where Kafka's name carries one (``segment.ms`` -> ``segment_ms``).

Deviation from Kafka, on purpose: ``flush.messages`` defaults to *unset* (``None``), which in
LiteMQ means "durable": an ``acks=all`` produce is answered only after an fsync covering it
(the broker calls :meth:`PartitionLog.flush`). Kafka's default is ``Long.MAX_VALUE`` (never
fsync explicitly); set ``flush.messages=9223372036854775807`` to get Kafka's behaviour.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from litemq.limits import MIN_SEGMENT_BYTES

GIB = 1024 * 1024 * 1024
MIB = 1024 * 1024
DAY_MS = 24 * 60 * 60 * 1000
LONG_MAX = 2**63 - 1

CLEANUP_POLICIES = ("delete", "compact", "compact,delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Settings of one partition log. Immutable; replace with :func:`dataclasses.replace`.

    Sizes are bytes, times are milliseconds. ``-1`` means "unlimited" where Kafka says so
    (``retention_ms``, ``retention_bytes``).
    """

    segment_bytes: int = GIB
    """``segment.bytes``: roll the active segment before it would exceed this size (at least
    :data:`litemq.limits.MIN_SEGMENT_BYTES` when set, as in Kafka 4; a smaller value an earlier
    LiteMQ stored keeps working)."""
    internal_segment_bytes: int | None = None
    """``internal.segment.bytes`` (Kafka 4's internal topic config, ``LogConfig.defineInternal``):
    when set, the segment size instead of ``segment_bytes``, with no 1 MiB floor (tests use small
    segments with it, as Kafka's own do); listed by DescribeConfigs only when a topic sets it."""
    segment_ms: int = 7 * DAY_MS
    """``segment.ms``: roll when the active segment's first batch is older than this."""
    segment_jitter_ms: int = 0
    """``segment.jitter.ms``: each new segment rolls up to this much earlier than ``segment.ms``
    (a random amount below ``min(segment.jitter.ms, segment.ms)``, drawn when the segment is
    created, as in Kafka), so partitions created together do not all roll at once."""
    segment_index_bytes: int = 10 * MIB
    """``segment.index.bytes``: capacity of each ``.index`` file (8 B/entry; ``.timeindex`` 12 B)."""
    index_interval_bytes: int = 4096
    """``index.interval.bytes``: log bytes between two offset-index entries."""
    retention_ms: int = 7 * DAY_MS
    """``retention.ms``: delete segments whose largest timestamp is older; -1 = forever."""
    retention_bytes: int = -1
    """``retention.bytes``: delete oldest segments while the log is larger; -1 = unlimited."""
    cleanup_policy: str = "delete"
    """``cleanup.policy``: ``delete``, ``compact`` or ``compact,delete``."""
    delete_retention_ms: int = DAY_MS
    """``delete.retention.ms``: how long tombstones survive compaction."""
    min_compaction_lag_ms: int = 0
    """``min.compaction.lag.ms``: records younger than this are not compacted."""
    max_compaction_lag_ms: int = LONG_MAX
    """``max.compaction.lag.ms`` (KIP-354): on a compacted topic, a record stays uncompacted at
    most about this long: the active segment rolls when it is this old, and a log whose oldest
    dirty segment's first batch is older is compacted whatever its dirty ratio."""
    file_delete_delay_ms: int = 60_000
    """``file.delete.delay.ms``: accepted and reported. Kafka renames a deleted segment's files and
    removes them this much later so reads in flight can finish; LiteMQ unlinks them at once, and a
    read in flight keeps its open file (see :mod:`litemq.storage.segment`), so there is nothing to
    wait for."""
    preallocate: bool = False
    """``preallocate``: accepted and reported, not applied: LiteMQ does not preallocate segment
    files (measured without gain: ``docs/benchmarks-cluster.md``, twelfth round), so a segment
    file's size is always its data's."""
    min_cleanable_dirty_ratio: float = 0.5
    """``min.cleanable.dirty.ratio``: compact when dirty bytes / cleanable bytes reach this."""
    flush_messages: int | None = None
    """``flush.messages``: fsync after this many messages; ``None`` = durable (see module doc)."""
    flush_ms: int | None = None
    """``flush.ms``: fsync when the oldest unflushed append is this old; ``None`` = unset."""
    max_message_bytes: int = 1048588
    """``max.message.bytes``: largest record batch accepted (bytes, header included)."""
    message_timestamp_type: str = "CreateTime"
    """``message.timestamp.type``: ``CreateTime`` or ``LogAppendTime``."""
    message_timestamp_before_max_ms: int = LONG_MAX
    """``message.timestamp.before.max.ms`` (KIP-937): with CreateTime, a produced record whose
    timestamp is more than this before the broker's clock is refused (INVALID_TIMESTAMP)."""
    message_timestamp_after_max_ms: int = 3_600_000
    """``message.timestamp.after.max.ms`` (KIP-937; Kafka 4's default of one hour, KIP-1030): with
    CreateTime, a produced record whose timestamp is more than this after the broker's clock is
    refused (INVALID_TIMESTAMP)."""

    def __post_init__(self) -> None:
        _check(self.segment_bytes >= 14, "segment.bytes", self.segment_bytes, ">= 14")
        _check(self.internal_segment_bytes is None or self.internal_segment_bytes >= 14, "internal.segment.bytes",
               self.internal_segment_bytes, ">= 14")
        _check(self.segment_ms >= 1, "segment.ms", self.segment_ms, ">= 1")
        _check(self.segment_jitter_ms >= 0, "segment.jitter.ms", self.segment_jitter_ms, ">= 0")
        _check(self.max_compaction_lag_ms >= 1, "max.compaction.lag.ms", self.max_compaction_lag_ms, ">= 1")
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:  # Kafka LogConfig.validateValues
            raise ValueError(f"conflict topic config setting min.compaction.lag.ms ({self.min_compaction_lag_ms}) "
                             f"> max.compaction.lag.ms ({self.max_compaction_lag_ms})")
        _check(self.file_delete_delay_ms >= 0, "file.delete.delay.ms", self.file_delete_delay_ms, ">= 0")
        _check(self.segment_index_bytes >= 8 * 4, "segment.index.bytes", self.segment_index_bytes, ">= 32")
        _check(self.index_interval_bytes >= 0, "index.interval.bytes", self.index_interval_bytes, ">= 0")
        _check(self.retention_ms >= -1, "retention.ms", self.retention_ms, ">= -1")
        _check(self.retention_bytes >= -1, "retention.bytes", self.retention_bytes, ">= -1")
        _check(self.cleanup_policy in CLEANUP_POLICIES, "cleanup.policy", self.cleanup_policy,
               "one of " + ", ".join(CLEANUP_POLICIES))
        _check(self.delete_retention_ms >= 0, "delete.retention.ms", self.delete_retention_ms, ">= 0")
        _check(self.min_compaction_lag_ms >= 0, "min.compaction.lag.ms", self.min_compaction_lag_ms, ">= 0")
        _check(0.0 <= self.min_cleanable_dirty_ratio <= 1.0, "min.cleanable.dirty.ratio",
               self.min_cleanable_dirty_ratio, "in [0, 1]")
        _check(self.flush_messages is None or self.flush_messages >= 1, "flush.messages",
               self.flush_messages, ">= 1")
        _check(self.flush_ms is None or self.flush_ms >= 0, "flush.ms", self.flush_ms, ">= 0")
        _check(self.max_message_bytes >= 0, "max.message.bytes", self.max_message_bytes, ">= 0")
        _check(self.message_timestamp_type in TIMESTAMP_TYPES, "message.timestamp.type",
               self.message_timestamp_type, "CreateTime or LogAppendTime")
        _check(self.message_timestamp_before_max_ms >= 0, "message.timestamp.before.max.ms",
               self.message_timestamp_before_max_ms, ">= 0")
        _check(self.message_timestamp_after_max_ms >= 0, "message.timestamp.after.max.ms",
               self.message_timestamp_after_max_ms, ">= 0")

    # --- derived ---
    @property
    def segment_size_bytes(self) -> int:
        """The segment size in effect: ``internal.segment.bytes`` if set, else ``segment.bytes``
        (Kafka ``LogConfig.segmentSize()``)."""
        return self.segment_bytes if self.internal_segment_bytes is None else self.internal_segment_bytes

    @property
    def max_segment_ms(self) -> int:
        """The age at which the active segment rolls: ``segment.ms``, or ``max.compaction.lag.ms``
        when smaller on a compacted topic (Kafka ``LogConfig.maxSegmentMs``)."""
        if self.compact:
            return min(self.segment_ms, self.max_compaction_lag_ms)
        return self.segment_ms

    def random_segment_jitter_ms(self, draw: Callable[[int], int]) -> int:
        """A new segment's roll jitter (Kafka ``LogConfig.randomSegmentJitter``): 0 without
        ``segment.jitter.ms``, else ``draw(n)`` (a random int in ``[0, n)``) with
        ``n = min(segment.jitter.ms, segment.ms)``."""
        if self.segment_jitter_ms == 0:
            return 0
        return draw(min(self.segment_jitter_ms, self.segment_ms))

    @property
    def compact(self) -> bool:
        """True when ``cleanup.policy`` contains ``compact`` (records must have keys)."""
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """True when ``cleanup.policy`` contains ``delete`` (time/size retention applies)."""
        return "delete" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def durable(self) -> bool:
        """True when acks=all must wait for an fsync (``flush.messages`` unset or 1)."""
        return self.flush_messages is None or self.flush_messages <= 1

    # --- Kafka names ---
    @classmethod
    def from_kafka_configs(cls, configs: dict[str, str], base: LogConfig | None = None,
                           stored: bool = False) -> LogConfig:
        """Build from Kafka-named string configs (``{"segment.bytes": "1048576"}``).

        Keys not given keep the value from ``base`` (default: LiteMQ defaults). ``stored``: the
        configs were accepted earlier (a topic's or the broker's kept configs), so Kafka 4's
        raised floor of ``segment.bytes`` (:data:`litemq.limits.MIN_SEGMENT_BYTES`) is not applied to them.
        Raises ``ValueError`` naming the key for unknown keys and bad values.
        """
        changes: dict[str, object] = {}
        for key, raw in configs.items():
            field = _KAFKA_TO_FIELD.get(key)
            if field is None:
                raise ValueError(
                    f"unsupported topic config {key!r}; supported: {', '.join(sorted(_KAFKA_TO_FIELD))}")
            changes[field] = _parse(key, field, raw)
        if not stored and "segment_bytes" in changes:
            _check(changes["segment_bytes"] >= MIN_SEGMENT_BYTES, "segment.bytes", changes["segment_bytes"],
                   f">= {MIN_SEGMENT_BYTES} (Kafka 4; internal.segment.bytes sets smaller segments)")
        return dataclasses.replace(base or cls(), **changes)

    def to_kafka_configs(self) -> dict[str, str]:
        """All supported settings by Kafka name, as strings (unset flush settings omitted)."""
        out: dict[str, str] = {}
        for key, field in _KAFKA_TO_FIELD.items():
            value = getattr(self, field)
            if value is None:
                continue
            out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return out


def _check(ok: bool, key: str, value: object, rule: str) -> None:
    if not ok:
        raise ValueError(f"invalid value {value!r} for topic config {key!r}: must be {rule}")


_KAFKA_TO_FIELD: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "internal.segment.bytes": "internal_segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "segment.jitter.ms": "segment_jitter_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "preallocate": "preallocate",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.type": "message_timestamp_type",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
}

INTERNAL_TOPIC_CONFIGS = frozenset({"internal.segment.bytes"})
"""Kafka 4's internal topic configs (``ConfigDef.defineInternal``): accepted when set, but not
listed with their defaults (DescribeConfigs names one only for a topic that sets it)."""

SUPPORTED_TOPIC_CONFIGS: tuple[str, ...] = tuple(_KAFKA_TO_FIELD)
"""Kafka topic config names LiteMQ's storage honours."""

KAFKA_TOPIC_CONFIG_DEFAULTS: dict[str, str] = LogConfig().to_kafka_configs()
"""Default value of every supported topic config, by Kafka name (flush.* unset = durable)."""


def _parse(key: str, field: str, raw: str) -> object:
    text = str(raw).strip()
    if field == "cleanup_policy":
        parts = sorted(p.strip() for p in text.split(",") if p.strip())
        value = ",".join(parts)
        if value not in CLEANUP_POLICIES:
            raise ValueError(f"invalid value {raw!r} for topic config {key!r}: must be delete, compact "
                             "or compact,delete")
        return value
    if field == "message_timestamp_type":
        return text
    if field == "preallocate":
        if text.lower() not in ("true", "false"):
            raise ValueError(f"invalid value {raw!r} for topic config {key!r}: must be true or false")
        return text.lower() == "true"
    if field == "min_cleanable_dirty_ratio":
        try:
            return float(text)
        except ValueError:
            raise ValueError(f"invalid value {raw!r} for topic config {key!r}: not a number") from None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"invalid value {raw!r} for topic config {key!r}: not an integer") from None
