"""Option handling of the ``litemq`` Spark data source, with Spark's Kafka option names.

Source: "Structured Streaming + Kafka Integration Guide" (Spark 4.x), sections "Reading Data
from Kafka", "Writing Data to Kafka" and "Kafka Specific Configurations". Spark hands a Python
data source its options as a case-insensitive dict (keys lowercased); every check here is on
lowercased names, error messages use the documented spelling.

Kafka client settings are passed as ``kafka.<name>`` (``bootstrap.servers`` is also accepted
without the prefix); they go to the librdkafka client (confluent-kafka) mostly unchanged: the
options Spark itself refuses are refused here with the same reasons, and Java-only consumer
settings that librdkafka does not know are dropped with a warning (see
:data:`JAVA_ONLY_CLIENT_SETTINGS`); a Java SASL login (``kafka.sasl.jaas.config``) is translated.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field

from litemq.security.client_settings import librdkafka_security_settings

log = logging.getLogger("litemq.spark")

# Every option of Spark's Kafka source and sink, as documented (Spark 4.x guide), spelled as
# documented. "kafka.*" settings are open-ended and not listed.
SOURCE_OPTIONS = (
    "assign", "subscribe", "subscribePattern", "kafka.bootstrap.servers",
    "startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets",
    "endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets",
    "failOnDataLoss", "kafkaConsumer.pollTimeoutMs", "fetchOffset.numRetries",
    "fetchOffset.retryIntervalMs", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition", "groupIdPrefix",
    "kafka.group.id", "includeHeaders", "startingOffsetsByTimestampStrategy",
)
SINK_OPTIONS = ("kafka.bootstrap.servers", "topic", "includeHeaders")
EXTRA_OPTIONS = ("bootstrap.servers", "exactlyOnce", "value.format", "schema.registry.url",
                 "schema.registry.basic.auth.user.info", "schema.registry.bearer.auth.token",
                 "schema.registry.ssl.ca.location", "value.subject", "value.schema.version", "value.decode.mode")
"""Accepted in addition to Spark's names: ``bootstrap.servers`` without the ``kafka.`` prefix;
``exactlyOnce`` (sink, default true: transactional writes, see :mod:`litemq.spark.writer`); the
``value.*`` and ``schema.registry.*`` options of Avro values (source, :func:`avro_value_options`)."""
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
"""Values of ``kafka.isolation.level`` (source; default ``read_uncommitted`` as in Spark's Kafka
source, while librdkafka's own default is read_committed)."""

# Spark refuses these (KafkaSourceProvider.validateGeneralOptions / validateSinkOptions).
UNSUPPORTED_SOURCE_KAFKA = {
    "auto.offset.reset": "Set startingOffsets instead: offsets are managed by the query.",
    "key.deserializer": "Keys are always read as bytes (column key, binary).",
    "value.deserializer": "Values are always read as bytes (column value, binary).",
    "enable.auto.commit": "Offsets are never committed to Kafka by the source.",
    "interceptor.classes": "Interceptors are not supported.",
}
UNSUPPORTED_SINK_KAFKA = {
    "key.serializer": "Keys are written from the key column (string or binary).",
    "value.serializer": "Values are written from the value column (string or binary).",
}
JAVA_ONLY_CLIENT_SETTINGS = {
    "max.poll.records", "max.poll.interval.ms", "default.api.timeout.ms", "fetch.max.wait.ms",
    "request.timeout.ms", "ssl.truststore.type", "ssl.keystore.type",
    "partition.assignment.strategy", "exclude.internal.topics", "allow.auto.create.topics",
    "buffer.memory", "max.block.ms", "partitioner.class",
}
"""Java client settings with no librdkafka equivalent: dropped (warning), not passed on. The
Java SASL login (``kafka.sasl.jaas.config``) is translated instead
(:func:`~litemq.security.client_settings.librdkafka_security_settings`)."""

_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.I)


class OptionError(ValueError):
    """An invalid or conflicting option (message names the option as documented)."""


def _bool(opts: dict, name: str, default: bool) -> bool:
    v = opts.get(name.lower())
    if v is None:
        return default
    s = str(v).strip().lower()
    if s in ("true", "1", "yes"):
        return True
    if s in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name} must be true or false, got {v!r}")


def _int(opts: dict, name: str, default: int | None = None, minimum: int = 1) -> int | None:
    v = opts.get(name.lower())
    if v is None:
        return default
    try:
        n = int(str(v).strip())
    except ValueError:
        raise OptionError(f"option {name} must be an integer, got {v!r}") from None
    if n < minimum:
        raise OptionError(f"option {name} must be >= {minimum}, got {n}")
    return n


def parse_duration_ms(text: str, name: str = "maxTriggerDelay") -> int:
    """``"15m"``, ``"30s"``, ``"500ms"``, ``"2h"``, ``"1d"`` or plain ms -> milliseconds."""
    m = _DURATION.match(str(text))
    if not m:
        raise OptionError(f"option {name} must be a duration like 15m, 30s or 500ms, got {text!r}")
    n = int(m.group(1))
    unit = (m.group(2) or "ms").lower()
    return n * {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}[unit]


def client_config(opts: dict, *, sink: bool = False) -> dict:
    """librdkafka settings from ``kafka.*`` options (+ plain ``bootstrap.servers``).

    Raises OptionError for a missing bootstrap server list or an option Spark refuses.
    """
    cfg: dict[str, str] = {}
    refused = UNSUPPORTED_SINK_KAFKA if sink else UNSUPPORTED_SOURCE_KAFKA
    for k, v in opts.items():
        k = k.lower()
        if not k.startswith("kafka."):
            continue
        name = k[len("kafka."):]
        if name in refused:
            raise OptionError(f"Kafka option 'kafka.{name}' is not supported. {refused[name]}")
        if name in JAVA_ONLY_CLIENT_SETTINGS:
            log.warning("litemq: Kafka option 'kafka.%s' has no librdkafka equivalent; ignored", name)
            continue
        cfg[name] = str(v)
    cfg = librdkafka_security_settings(cfg)
    if "bootstrap.servers" not in cfg and opts.get("bootstrap.servers"):
        cfg["bootstrap.servers"] = str(opts["bootstrap.servers"])
    if not cfg.get("bootstrap.servers"):
        raise OptionError("option kafka.bootstrap.servers is required")
    return cfg


@dataclass
class SourceOptions:
    """Validated source options. Offsets specs are kept as given (resolved by the reader)."""

    client: dict
    subscribe: list[str] | None = None
    pattern: str | None = None
    assign: dict[str, list[int]] | None = None
    starting: str | dict | None = None          # "earliest" | "latest" | {topic: {part: off}}
    starting_ts: int | dict | None = None       # startingTimestamp (int) | ...ByTimestamp (dict)
    starting_ts_strategy: str = "error"
    ending: str | dict | None = None
    ending_ts: int | dict | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    poll_timeout_ms: int = 120_000
    num_retries: int = 3
    retry_interval_ms: int = 10
    read_committed: bool = False
    extra: dict = field(default_factory=dict)
    value_decoder: object = None
    """A :class:`~litemq.spark.avro_values.ValueDecoder` with ``value.format=avro``, else None."""

    @property
    def subscription(self) -> str:
        if self.subscribe is not None:
            return "subscribe=" + ",".join(self.subscribe)
        if self.pattern is not None:
            return "subscribePattern=" + self.pattern
        return "assign=" + json.dumps(self.assign)


def _offsets_json(name: str, text: str, allowed: tuple[str, ...]) -> str | dict:
    s = str(text).strip()
    if s.lower() in allowed:
        return s.lower()
    try:
        d = json.loads(s)
    except ValueError:
        raise OptionError(f"option {name} must be one of {', '.join(allowed)} or a JSON object like "
                          f'{{"topicA":{{"0":23,"1":-2}}}}, got {text!r}') from None
    if not isinstance(d, dict) or not all(isinstance(v, dict) for v in d.values()):
        raise OptionError(f'option {name}: JSON must map topic -> {{partition: offset}}, got {text!r}')
    try:
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in d.items()}
    except (TypeError, ValueError):
        raise OptionError(f"option {name}: partitions and offsets must be integers, got {text!r}") from None


@dataclass
class AvroValueOptions:
    """``value.format=avro``: where the reader schema comes from and what a bad value does."""

    url: str
    user_info: str | None
    subject: str
    version: str
    permissive: bool
    bearer_token: str | None = None
    """``schema.registry.bearer.auth.token``: an OAuth token sent as ``Authorization: Bearer``."""
    ssl_ca_location: str | None = None
    """``schema.registry.ssl.ca.location``: PEM CA bundle of an https registry."""


def avro_value_options(opts: dict) -> AvroValueOptions | None:
    """The Avro value options of a source (None with ``value.format`` unset or ``binary``):
    ``schema.registry.url`` (required), ``schema.registry.basic.auth.user.info``,
    ``schema.registry.bearer.auth.token``, ``schema.registry.ssl.ca.location``,
    ``value.subject`` (default ``<topic>-value`` of the one subscribed topic),
    ``value.schema.version`` (default ``latest``), ``value.decode.mode`` (FAILFAST or PERMISSIVE).

    Raises:
        OptionError: a bad value, or a missing URL or subject.
    """
    o = {k.lower(): v for k, v in opts.items()}
    fmt = str(o.get("value.format", "binary")).strip().lower()
    if fmt == "binary":
        return None
    if fmt != "avro":
        raise OptionError(f"option value.format must be binary or avro, got {fmt!r}")
    url = str(o.get("schema.registry.url") or "").strip()
    if not url.startswith(("http://", "https://")):
        raise OptionError("option schema.registry.url (http://host:port of a schema registry: a LiteMQ broker's "
                          "HTTP port) is needed with value.format=avro")
    subject = str(o.get("value.subject") or "").strip()
    topics = [t.strip() for t in str(o.get("subscribe") or "").split(",") if t.strip()]
    if not subject:
        if len(topics) != 1:
            raise OptionError("option value.subject is needed with value.format=avro unless the query names "
                              "one topic (subscribe, or the sink's topic option; then it is <topic>-value)")
        subject = f"{topics[0]}-value"
    version = str(o.get("value.schema.version", "latest")).strip()
    if version != "latest" and not version.isdigit():
        raise OptionError(f"option value.schema.version must be a version number or latest, got {version!r}")
    mode = str(o.get("value.decode.mode", "FAILFAST")).strip().upper()
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise OptionError(f"option value.decode.mode must be FAILFAST or PERMISSIVE, got {mode!r}")
    user_info = o.get("schema.registry.basic.auth.user.info")
    token = o.get("schema.registry.bearer.auth.token")
    ca = o.get("schema.registry.ssl.ca.location")
    return AvroValueOptions(url, str(user_info) if user_info else None, subject, version, mode == "PERMISSIVE",
                            str(token) if token else None, str(ca) if ca else None)


def parse_source_options(opts: dict, *, streaming: bool) -> SourceOptions:
    """Validate source options (lowercased keys) -> :class:`SourceOptions`. Raises OptionError."""
    o = {k.lower(): v for k, v in opts.items()}
    client = client_config(o)
    kinds = [k for k in ("assign", "subscribe", "subscribepattern") if o.get(k) not in (None, "")]
    if len(kinds) != 1:
        raise OptionError("exactly one of the options assign, subscribe, subscribePattern must be given"
                          + (f" (got {', '.join(kinds)})" if kinds else ""))
    so = SourceOptions(client=client)
    if kinds[0] == "subscribe":
        so.subscribe = [t.strip() for t in str(o["subscribe"]).split(",") if t.strip()]
        if not so.subscribe:
            raise OptionError("option subscribe: no topic given")
    elif kinds[0] == "subscribepattern":
        so.pattern = str(o["subscribepattern"])
        try:
            re.compile(so.pattern)
        except re.error as exc:
            raise OptionError(f"option subscribePattern: invalid regular expression: {exc}") from None
    else:
        try:
            d = json.loads(str(o["assign"]))
            so.assign = {t: sorted(int(p) for p in parts) for t, parts in d.items()}
        except (ValueError, TypeError, AttributeError):
            raise OptionError(f'option assign must be JSON like {{"topicA":[0,1],"topicB":[2,4]}}, '
                              f"got {o['assign']!r}") from None
        if not any(so.assign.values()):
            raise OptionError("option assign: no partition given")

    if o.get("startingtimestamp") is not None:
        so.starting_ts = _int(o, "startingTimestamp", minimum=0)
    elif o.get("startingoffsetsbytimestamp") is not None:
        v = _offsets_json("startingOffsetsByTimestamp", o["startingoffsetsbytimestamp"], ())
        so.starting_ts = v
    so.starting_ts_strategy = str(o.get("startingoffsetsbytimestampstrategy", "error")).lower()
    if so.starting_ts_strategy not in ("error", "latest"):
        raise OptionError("option startingOffsetsByTimestampStrategy must be error or latest")
    so.starting = _offsets_json("startingOffsets", o.get("startingoffsets", "latest" if streaming else "earliest"),
                                ("earliest", "latest"))
    if not streaming:
        if so.starting == "latest":
            raise OptionError("option startingOffsets: latest is not allowed for batch queries")
        if isinstance(so.starting, dict) and any(off == -1 for p in so.starting.values() for off in p.values()):
            raise OptionError("option startingOffsets: -1 (latest) is not allowed for batch queries")
        if o.get("endingtimestamp") is not None:
            so.ending_ts = _int(o, "endingTimestamp", minimum=0)
        elif o.get("endingoffsetsbytimestamp") is not None:
            so.ending_ts = _offsets_json("endingOffsetsByTimestamp", o["endingoffsetsbytimestamp"], ())
        so.ending = _offsets_json("endingOffsets", o.get("endingoffsets", "latest"), ("earliest", "latest"))
        if so.ending == "earliest":
            raise OptionError("option endingOffsets: earliest is not allowed for batch queries")
        if isinstance(so.ending, dict) and any(off == -2 for p in so.ending.values() for off in p.values()):
            raise OptionError("option endingOffsets: -2 (earliest) is not allowed for batch queries")
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
            if o.get(name.lower()) is not None:
                log.warning("litemq: option %s is ignored by batch queries", name)
    else:
        for name in ("endingOffsets", "endingOffsetsByTimestamp", "endingTimestamp"):
            if o.get(name.lower()) is not None:
                raise OptionError(f"option {name} is not allowed for streaming queries")
        so.max_offsets_per_trigger = _int(o, "maxOffsetsPerTrigger")
        so.min_offsets_per_trigger = _int(o, "minOffsetsPerTrigger")
        if o.get("maxtriggerdelay") is not None:
            so.max_trigger_delay_ms = parse_duration_ms(o["maxtriggerdelay"])
        if (so.min_offsets_per_trigger and so.max_offsets_per_trigger
                and so.min_offsets_per_trigger > so.max_offsets_per_trigger):
            raise OptionError("option minOffsetsPerTrigger must be <= maxOffsetsPerTrigger")
    so.fail_on_data_loss = _bool(o, "failOnDataLoss", True)
    so.include_headers = _bool(o, "includeHeaders", False)
    so.min_partitions = _int(o, "minPartitions")
    so.max_records_per_partition = _int(o, "maxRecordsPerPartition")
    so.poll_timeout_ms = _int(o, "kafkaConsumer.pollTimeoutMs", 120_000)
    so.num_retries = _int(o, "fetchOffset.numRetries", 3, minimum=0)
    so.retry_interval_ms = _int(o, "fetchOffset.retryIntervalMs", 10, minimum=0)
    level = str(client.get("isolation.level", "read_uncommitted")).strip().lower()
    if level not in ISOLATION_LEVELS:
        raise OptionError(f"option kafka.isolation.level must be read_uncommitted or read_committed, got {level!r}")
    client["isolation.level"] = level  # explicit: librdkafka would default to read_committed
    so.read_committed = level == "read_committed"
    if o.get("groupidprefix"):
        so.extra["groupidprefix"] = str(o["groupidprefix"])
    return so
