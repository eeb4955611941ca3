"""Client metrics pushed by Kafka clients (KIP-714), received by a broker and served on its
``/metrics``.

Off by default, as in Kafka (which advertises the two APIs only when a metrics reporter with a
``ClientTelemetry`` receiver is configured); ``client.telemetry.enable=true`` turns it on.
Then a client (librdkafka 2.5+, confluent-kafka, the Java client 3.7+) asks each broker it
connects to for its subscription (GetTelemetrySubscriptions), and, when a subscription matches
it, pushes the subscribed metrics every push interval (PushTelemetry) as an OpenTelemetry
``MetricsData`` protobuf, compressed with one of the codecs the broker accepts.

Per client instance (a UUID the broker hands out on the first GetTelemetrySubscriptions) the
manager keeps what Kafka's ``ClientMetricsManager`` keeps: the subscription evaluated against
the client's attributes (client id, software name and version from ApiVersions v3+, source
address and port), its subscription id, the push interval and the time of the last request,
which paces the client (a request before the interval has passed is answered
THROTTLING_QUOTA_EXCEEDED). Instances are dropped when their connection closes, when not heard
from for the longer of ``CLIENT_TELEMETRY_INSTANCE_EXPIRY_MS`` and three push intervals, and
beyond ``MAX_CLIENT_TELEMETRY_INSTANCES`` (the least recently heard from).

Where Kafka hands the payload to a plugin, LiteMQ keeps the latest value of each pushed series
(metric name and attributes) of a live instance and serves it on ``/metrics``: the metric name
with every character outside ``[a-zA-Z0-9_]`` replaced by ``_``
(``org.apache.kafka.producer.node.request.latency.avg`` ->
``org_apache_kafka_producer_node_request_latency_avg``), labelled ``client_instance_id``,
``client_id``, ``client_software_name``, ``client_software_version`` and the data point's and
resource's attributes (a name the broker's own series use, ``litemq_*``, ``kafka_*``,
``process_*``, ``python_*``, is dropped). Gauges are served as gauges; monotonic sums as counters (delta pushes,
which brokers ask for as Kafka does, are added up; cumulative ones replace the value); other
sums as gauges. Histograms and summaries (no Kafka client sends them) are skipped.

Errors (Kafka's): PushTelemetry with a reserved instance id, or after a terminating push:
INVALID_REQUEST; a subscription id that is not the instance's current one:
UNKNOWN_SUBSCRIPTION_ID (the client asks for its subscription again); a codec outside 0..4:
UNSUPPORTED_COMPRESSION_TYPE; more than ``telemetry.max.bytes`` compressed or decompressed:
TELEMETRY_TOO_LARGE; a payload that is not a readable ``MetricsData``: INVALID_RECORD (the
client stops pushing).

Sources: KIP-714; Kafka 4.x ``ClientMetricsManager``, ``ClientMetricsInstance``,
``ClientMetricsInstanceMetadata``; GetTelemetrySubscriptions v0 and PushTelemetry v0 schemas;
OpenTelemetry ``metrics/v1/metrics.proto``.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections import OrderedDict
from typing import Any, Callable

import crc32c
from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.metrics.v1 import metrics_pb2
from prometheus_client.metrics_core import Metric

from litemq import limits
from litemq.protocol.errors import CorruptRecordError, ErrorCode, InvalidRecordError, UnsupportedCompressionError
from litemq.protocol.records import decompress
from litemq.security.client_metrics import (
    ALL_METRICS,
    CLIENT_ID,
    CLIENT_INSTANCE_ID,
    CLIENT_SOFTWARE_NAME,
    CLIENT_SOFTWARE_VERSION,
    INTERVAL_MS_DEFAULT,
    ClientMetricsStore,
)

log = logging.getLogger(__name__)

ACCEPTED_COMPRESSION_TYPES = [4, 3, 1, 2]
"""zstd, lz4, gzip, snappy: the codecs PushTelemetry may use, preferred first (Kafka's order)."""
_RESERVED_IDS = frozenset({uuid.UUID(int=0), uuid.UUID(int=1)})  # Kafka Uuid.RESERVED
_INSTANCE_LABELS = (CLIENT_INSTANCE_ID, CLIENT_ID, CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION)
_BAD_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_]")
_DELTA = 1  # AggregationTemporality.AGGREGATION_TEMPORALITY_DELTA
_RESERVED_PREFIXES = ("litemq_", "kafka_", "process_", "python_", "_")
"""Prometheus name prefixes of the broker's own series: a pushed metric named so is dropped."""


def prometheus_name(name: str) -> str:
    """An OpenTelemetry metric or attribute name as a Prometheus one (``.`` and other
    characters outside ``[a-zA-Z0-9_]`` -> ``_``; a leading digit gets a ``_`` before it)."""
    out = _BAD_NAME_CHARS.sub("_", name)
    return "_" + out if out[:1].isdigit() else out


def _java_uuid_hash(u: uuid.UUID) -> int:
    """Kafka ``Uuid.hashCode``: the two 64-bit halves XORed, then the two 32-bit halves XORed."""
    h = (u.int >> 64) ^ (u.int & (2**64 - 1))
    return ((h >> 32) ^ h) & 0xFFFFFFFF


def _signed32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - 2**32 if n >= 2**31 else n


def _any_value(v) -> str:
    """An OpenTelemetry ``AnyValue`` as a label value (scalars only; others as their kind)."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        out = v.string_value
    elif kind in ("int_value", "double_value"):
        out = str(getattr(v, kind))
    elif kind == "bool_value":
        out = "true" if v.bool_value else "false"
    else:
        out = kind or ""
    return out[:limits.MAX_CLIENT_TELEMETRY_LABEL_CHARS]


class _Series:
    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value: float) -> None:
        self.kind = kind  # "gauge" or "counter"
        self.value = value


class ClientInstance:
    """One client instance's subscription state and latest pushed series.

    Attributes:
        instance_id: the client instance id (UUID).
        attributes: what subscriptions match on (``client_id``, ``client_software_name``, ...).
        subscription_id: int32 identifying the subscription set handed out (Kafka: CRC-32C of
            the metrics and interval, XORed with the id's hash).
        metrics: the requested metric prefixes (``["*"]``: all; ``[]``: none).
        push_interval_ms: the lowest interval of the matching subscriptions (default 300000).
        generation: the subscription store's generation it was evaluated against.
        series: (metric name, sorted label pairs) -> latest value.
    """

    __slots__ = ("instance_id", "attributes", "subscription_id", "metrics", "push_interval_ms", "generation",
                 "last_get_ms", "last_push_ms", "terminating", "last_error", "expires_ms", "series")

    def __init__(self, instance_id: uuid.UUID, attributes: dict[str, str | None]) -> None:
        self.instance_id = instance_id
        self.attributes = {**attributes, CLIENT_INSTANCE_ID: str(instance_id)}
        self.subscription_id = 0
        self.metrics: list[str] = []
        self.push_interval_ms = INTERVAL_MS_DEFAULT
        self.generation = -1
        self.last_get_ms = float("-inf")
        self.last_push_ms = float("-inf")
        self.terminating = False
        self.last_error = ErrorCode.NONE
        self.expires_ms = 0.0
        self.series: dict[tuple[str, tuple[tuple[str, str], ...]], _Series] = {}

    def evaluate(self, store: ClientMetricsStore) -> None:
        """Take the subscriptions of ``store`` matching this client (Kafka
        ``createClientInstance``): the union of their metrics (``*`` alone when one has it) and
        the lowest interval; the request timestamps start over, as Kafka's new instance's do."""
        interval_ms, metrics, all_metrics = INTERVAL_MS_DEFAULT, set(), False
        for sub in store.parsed():
            if sub.matches(self.attributes):
                all_metrics = all_metrics or ALL_METRICS in sub.metrics
                metrics.update(sub.metrics)
                interval_ms = min(interval_ms, sub.interval_ms)
        self.metrics = [ALL_METRICS] if all_metrics else sorted(metrics)
        self.push_interval_ms = interval_ms
        text = ("[" + ", ".join(self.metrics) + "]" + str(interval_ms)).encode()
        self.subscription_id = _signed32(crc32c.crc32c(text) ^ _java_uuid_hash(self.instance_id))
        self.generation = store.generation
        self.last_get_ms = self.last_push_ms = float("-inf")

    def may_get(self, now_ms: float) -> bool:
        """A GetTelemetrySubscriptions at ``now_ms`` is on time (a push interval after the last
        request of either kind); records it when so."""
        if now_ms - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now_ms
            return True
        return False

    def may_push(self, now_ms: float) -> bool:
        """A PushTelemetry at ``now_ms`` is on time: the first after a GetTelemetrySubscriptions
        (the client jitters it), or a push interval after the last push; records it when so."""
        if self.last_get_ms > self.last_push_ms or now_ms - self.last_push_ms >= self.push_interval_ms:
            self.last_push_ms = now_ms
            return True
        return False


class ClientTelemetryManager:
    """The broker's KIP-714 receiver. See the module docstring.

    Args:
        subscriptions: returns the cluster's current :class:`ClientMetricsStore`.
        telemetry_max_bytes: the largest payload a push may carry, compressed or not
            (``telemetry.max.bytes``).
        clock_ms: monotonic milliseconds (tests pass their own).
    """

    def __init__(self, subscriptions: Callable[[], ClientMetricsStore], telemetry_max_bytes: int,
                 clock_ms: Callable[[], float] | None = None) -> None:
        self._subscriptions = subscriptions
        self.telemetry_max_bytes = telemetry_max_bytes
        self._clock_ms = clock_ms or (lambda: time.monotonic() * 1000)
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self.pushes: dict[str, int] = {}
        """Push outcomes by error name (``NONE`` = accepted), for ``/metrics``."""
        self.dropped_series = 0

    # ------------------------------------------------------------ requests
    def get_subscriptions(self, instance_id: uuid.UUID | None, attributes: dict[str, str | None],
                          connection: Any = None) -> dict:
        """A GetTelemetrySubscriptions v0 response body for the client with ``attributes``
        (``instance_id`` zero or None: a new instance, its id in the answer)."""
        now = self._clock_ms()
        if instance_id is None or instance_id in _RESERVED_IDS:
            instance_id = uuid.uuid4()
            while instance_id in self.instances:
                instance_id = uuid.uuid4()
        inst = self._instance(instance_id, attributes, connection, now)
        if not inst.may_get(now) and inst.last_error not in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                                                             ErrorCode.UNSUPPORTED_COMPRESSION_TYPE):
            return _get_error(ErrorCode.THROTTLING_QUOTA_EXCEEDED)
        inst.last_error = ErrorCode.NONE
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "client_instance_id": instance_id,
                "subscription_id": inst.subscription_id, "accepted_compression_types": ACCEPTED_COMPRESSION_TYPES,
                "push_interval_ms": inst.push_interval_ms, "telemetry_max_bytes": self.telemetry_max_bytes,
                "delta_temporality": True, "requested_metrics": list(inst.metrics)}

    def push(self, req: Any, attributes: dict[str, str | None], connection: Any = None) -> dict:
        """A PushTelemetry v0 response body: ``req`` (``client_instance_id``,
        ``subscription_id``, ``terminating``, ``compression_type``, ``metrics``) checked as Kafka
        checks it, its metrics kept for ``/metrics``."""
        instance_id = req.client_instance_id
        if instance_id is None or instance_id in _RESERVED_IDS:
            return self._pushed(ErrorCode.INVALID_REQUEST)
        now = self._clock_ms()
        inst = self._instance(instance_id, attributes, connection, now)
        payload = bytes(req.metrics or b"")
        error = self._push_error(inst, req, payload, now)
        inst.terminating = bool(req.terminating)
        if error:
            inst.last_error = error
            return self._pushed(error)
        if payload:
            error = self._export(inst, req.compression_type, payload)
            if error:
                inst.last_error = error
                return self._pushed(error)
        inst.last_error = ErrorCode.NONE
        return self._pushed(ErrorCode.NONE)

    def _push_error(self, inst: ClientInstance, req: Any, payload: bytes, now: float) -> int:
        if inst.terminating:
            return ErrorCode.INVALID_REQUEST  # nothing is accepted after a terminating push
        if not inst.may_push(now) and not req.terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        if req.subscription_id != inst.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if not 0 <= req.compression_type <= 4:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if len(payload) > self.telemetry_max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        return ErrorCode.NONE

    def _pushed(self, error: int) -> dict:
        name = ErrorCode(error).name
        self.pushes[name] = self.pushes.get(name, 0) + 1
        return {"throttle_time_ms": 0, "error_code": error}

    def forget(self, instance_id: uuid.UUID) -> None:
        """Drop an instance and its series (its connection closed)."""
        self.instances.pop(instance_id, None)

    def _instance(self, instance_id: uuid.UUID, attributes: dict[str, str | None], connection: Any,
                  now: float) -> ClientInstance:
        """The instance ``instance_id`` (created, or re-evaluated after a subscription change),
        marked as heard from at ``now``; older instances past their expiry are dropped."""
        self._expire(now)
        store = self._subscriptions()
        inst = self.instances.get(instance_id)
        if inst is None:
            inst = ClientInstance(instance_id, attributes)
            self.instances[instance_id] = inst
            while len(self.instances) > limits.MAX_CLIENT_TELEMETRY_INSTANCES:
                self.instances.popitem(last=False)
        else:
            self.instances.move_to_end(instance_id)
        if inst.generation != store.generation:
            inst.evaluate(store)
        inst.expires_ms = now + max(limits.CLIENT_TELEMETRY_INSTANCE_EXPIRY_MS, 3 * inst.push_interval_ms)
        callbacks = getattr(connection, "close_callbacks", None)
        if callbacks is not None:  # Kafka's disconnect listener: the instance goes with its connection
            callbacks["client_telemetry"] = lambda: self.forget(instance_id)
        return inst

    def _expire(self, now: float) -> None:
        while self.instances:
            first = next(iter(self.instances.values()))
            if first.expires_ms > now:
                return
            self.instances.popitem(last=False)

    # ------------------------------------------------------------ payloads
    def _export(self, inst: ClientInstance, compression_type: int, payload: bytes) -> int:
        """Decode a pushed ``MetricsData`` into ``inst.series``; an error code when it cannot be."""
        try:
            data = metrics_pb2.MetricsData.FromString(
                decompress(compression_type, payload, self.telemetry_max_bytes))
        except InvalidRecordError:
            return ErrorCode.TELEMETRY_TOO_LARGE
        except (CorruptRecordError, UnsupportedCompressionError, ProtobufDecodeError) as exc:
            log.warning("client instance %s pushed unreadable metrics (%s): %s", inst.instance_id,
                        ErrorCode(ErrorCode.INVALID_RECORD).name, exc)
            return ErrorCode.INVALID_RECORD
        for rm in data.resource_metrics:
            resource = {prometheus_name(kv.key): _any_value(kv.value) for kv in rm.resource.attributes}
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    self._keep(inst, metric, resource)
        return ErrorCode.NONE

    def _keep(self, inst: ClientInstance, metric, resource: dict[str, str]) -> None:
        data_kind = metric.WhichOneof("data")
        if data_kind == "gauge":
            points, kind, delta = metric.gauge.data_points, "gauge", False
        elif data_kind == "sum":
            points = metric.sum.data_points
            kind = "counter" if metric.sum.is_monotonic else "gauge"
            delta = metric.sum.aggregation_temporality == _DELTA
        else:
            return  # histograms, summaries: no Kafka client pushes them
        name = prometheus_name(metric.name)
        if not name or name.startswith(_RESERVED_PREFIXES):
            self.dropped_series += len(points)
            return
        for point in points:
            value = float(point.as_int if point.WhichOneof("value") == "as_int" else point.as_double)
            labels = dict(resource)
            labels.update((prometheus_name(kv.key), _any_value(kv.value)) for kv in point.attributes)
            key = (name, tuple(sorted(labels.items())))
            series = inst.series.get(key)
            if series is None:
                if len(inst.series) >= limits.MAX_CLIENT_TELEMETRY_SERIES_PER_INSTANCE:
                    self.dropped_series += 1
                    continue
                inst.series[key] = _Series(kind, value)
            elif delta:
                series.value += value
            else:
                series.value = value

    # ------------------------------------------------------------ /metrics
    def metric_families(self) -> list[Metric]:
        """The pushed series of every live instance, plus the receiver's own counters."""
        now = self._clock_ms()
        families: dict[str, Metric] = {}
        for inst in self.instances.values():
            if inst.expires_ms <= now:
                continue
            base = {k: (inst.attributes.get(k) or "")[:limits.MAX_CLIENT_TELEMETRY_LABEL_CHARS]
                    for k in _INSTANCE_LABELS}
            for (name, pairs), series in inst.series.items():
                family_name = name[:-6] if series.kind == "counter" and name.endswith("_total") else name
                fam = families.get(family_name)
                if fam is None:
                    fam = families[family_name] = Metric(family_name, "Pushed by Kafka clients (KIP-714).",
                                                         series.kind)
                sample = family_name + "_total" if fam.type == "counter" else family_name
                fam.add_sample(sample, {**dict(pairs), **base}, series.value)
        instances = Metric("litemq_client_telemetry_instances", "Client instances (KIP-714) this broker "
                           "keeps pushed metrics of.", "gauge")
        instances.add_sample("litemq_client_telemetry_instances", {}, len(self.instances))
        pushes = Metric("litemq_client_telemetry_pushes", "PushTelemetry requests answered, per error "
                        "(NONE: accepted).", "counter")
        for error, n in sorted(self.pushes.items()):
            pushes.add_sample("litemq_client_telemetry_pushes_total", {"error": error}, n)
        dropped = Metric("litemq_client_telemetry_dropped_series", "Pushed data points not kept (beyond "
                         "the per-instance series bound, or under a reserved name).", "counter")
        dropped.add_sample("litemq_client_telemetry_dropped_series_total", {}, self.dropped_series)
        return [*families.values(), instances, pushes, dropped]


def _get_error(error: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "client_instance_id": None, "subscription_id": 0,
            "accepted_compression_types": [], "push_interval_ms": 0, "telemetry_max_bytes": 0,
            "delta_temporality": False, "requested_metrics": []}
