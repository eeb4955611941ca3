"""One broker's metrics, exposed as Prometheus text with Kafka's metric names.

Every broker runtime owns one :class:`BrokerMetrics` with its own
``prometheus_client.CollectorRegistry`` (brokers embedded in one process never share series).
Names follow what the Prometheus JMX exporter's Kafka rules make of Kafka's MBeans
(``lowercaseOutputName``: ``kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=t``
becomes ``kafka_server_brokertopicmetrics_bytesin_total{topic="t"}``; a Yammer timer such as
``kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Produce`` becomes a summary
``kafka_network_requestmetrics_totaltimems{request="Produce",quantile="0.99"}`` in ms), and
kafka-exporter's names for consumer group lag (``kafka_consumergroup_lag``). What Kafka has no
metric for is ``litemq_*``. docs/operations.md lists every series.

Cost on the hot paths: the network layer calls :meth:`BrokerMetrics.on_response` once per
answered request, Produce/Fetch call :meth:`on_produce`/:meth:`on_fetch_response` once per
partition per request, a flush calls :meth:`on_flush` once per fsync: dict and list updates,
no locks, no label lookups. Everything else (partition counts, ISR state, log sizes, group lag)
is computed when ``/metrics`` is scraped (:meth:`render`), or by a 1 s ISR sampler
(:meth:`sample_isr`). All methods run on the broker's event-loop thread.
"""

from __future__ import annotations

import asyncio
import logging
import time
from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from litemq import limits
from litemq.protocol.messages import api_name
from litemq.replica.sync_queue import SyncQueue

if TYPE_CHECKING:
    from litemq.cluster.manager import ClusterManager
    from litemq.config import BrokerConfig, ListenerSpec
    from litemq.replica import ReplicaManager

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
"""Content type of :meth:`BrokerMetrics.render` (Prometheus text exposition format 0.0.4)."""

LATENCY_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds (seconds) of the ``litemq_*_duration_seconds`` histogram buckets (+Inf added)."""

QUANTILES = (("0.50", 0.50), ("0.99", 0.99), ("0.999", 0.999))
"""(label, q) of the summary quantiles, labelled as the JMX exporter labels Kafka's
``50thPercentile``/``99thPercentile``/``999thPercentile`` attributes."""


def request_name(api_key: int) -> str:
    """Kafka's ``request`` label of an API: its name (``Produce``, ``Metadata``), except Fetch,
    which Kafka splits into ``FetchConsumer`` and ``FetchFollower``; LiteMQ replicates over Raft,
    so every Fetch is a consumer's (Kafka ``RequestMetrics.consumerFetchMetricName``)."""
    if api_key == 1:
        return "FetchConsumer"
    try:
        return api_name(api_key)
    except KeyError:
        return f"api_{api_key}"


class LatencyStats:
    """Count, sum, histogram buckets and a sliding window of one latency series (seconds).

    Quantiles are taken over the last :data:`limits.METRICS_LATENCY_WINDOW_SAMPLES`
    observations (nearest rank), like the 1028-sample reservoir of Kafka's Yammer timers.
    """

    __slots__ = ("buckets", "count", "pos", "sum_s", "window")

    def __init__(self) -> None:
        self.count = 0
        self.sum_s = 0.0
        self.buckets = [0] * (len(LATENCY_BUCKETS_S) + 1)
        self.window: list[float] = []
        self.pos = 0

    def observe(self, seconds: float) -> None:
        """Record one observation of ``seconds`` (O(log buckets))."""
        self.count += 1
        self.sum_s += seconds
        self.buckets[bisect_left(LATENCY_BUCKETS_S, seconds)] += 1
        w = self.window
        if len(w) < limits.METRICS_LATENCY_WINDOW_SAMPLES:
            w.append(seconds)
        else:
            w[self.pos] = seconds
            self.pos = (self.pos + 1) % limits.METRICS_LATENCY_WINDOW_SAMPLES

    def quantiles(self) -> list[tuple[str, float]]:
        """[(label, seconds)] for :data:`QUANTILES` over the window; NaN when empty."""
        data = sorted(self.window)
        n = len(data)
        if n == 0:
            return [(label, float("nan")) for label, _ in QUANTILES]
        out = []
        for label, q in QUANTILES:
            rank = max(1, -(-int(q * n * 1000) // 1000))  # ceil(q * n) without float surprises
            out.append((label, data[min(rank, n) - 1]))
        return out

    def cumulative_buckets(self) -> list[tuple[str, int]]:
        """[(le, cumulative count)] for a Prometheus histogram, ending with ``+Inf``."""
        out, total = [], 0
        for bound, c in zip((*LATENCY_BUCKETS_S, float("inf")), self.buckets):
            total += c
            out.append(("+Inf" if bound == float("inf") else repr(bound), total))
        return out


class GroupLag:
    """One row of consumer group lag: committed offset vs the partition's high watermark."""

    __slots__ = ("committed", "end_offset", "group", "partition", "topic")

    def __init__(self, group: str, topic: str, partition: int, committed: int, end_offset: int) -> None:
        self.group, self.topic, self.partition = group, topic, partition
        self.committed, self.end_offset = committed, end_offset

    @property
    def lag(self) -> int:
        """``end_offset - committed`` (never negative); -1 when the end offset is unknown."""
        if self.end_offset < 0:
            return -1
        return max(0, self.end_offset - self.committed)


class MetricsSource(Protocol):
    """The broker state the metrics read at scrape time (``litemq.broker.broker.BrokerRuntime``
    implements it; ``metrics`` sits below ``broker/`` and never imports it).

    Attributes:
        config: ``node.id`` and ``min.insync.replicas``.
        listeners: the configured listeners (``name``), for per-listener connection counts.
        connections: the open client connections (each has ``listener_name``).
        metadata: the metadata (``topics``: name -> topic with ``num_partitions`` and
            ``configs``; ``cluster_id`` when clustered).
        replicas: the hosted partitions, None before start.
        cluster: the cluster manager (metadata Raft node, ``leader_of``), None on a single broker.
        loop: the broker's event loop (its fsync thread's timings), None before start.
    """

    config: "BrokerConfig"
    loop: "asyncio.AbstractEventLoop | None"
    listeners: "list[ListenerSpec]"
    connections: Iterable[Any]
    replicas: "ReplicaManager | None"
    cluster: "ClusterManager | None"

    @property
    def metadata(self) -> Any: ...


class BrokerMetrics:
    """The metrics of one broker runtime (see the module docstring).

    Attributes:
        registry: this broker's ``CollectorRegistry`` (Kafka-named series plus ``process_*``).
        group_lag: :class:`GroupLag` rows of the groups this broker coordinates, refreshed by
            the HTTP layer before each scrape (it may need other brokers' high watermarks).
        group_members: group id -> member count of those groups.
    """

    def __init__(self, runtime: MetricsSource) -> None:
        self.runtime = runtime
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_BrokerCollector(self))
        ProcessCollector(registry=self.registry)
        self.requests: dict[tuple[int, int], int] = {}
        self.request_latency: dict[int, LatencyStats] = {}
        self.bytes_in: dict[str, int] = {}
        self.messages_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.log_flush = LatencyStats()
        self.elections: dict[str, int] = {"metadata": 0, "partition": 0}
        self.leader_changes: dict[str, int] = {"metadata": 0, "partition": 0}
        self.isr_shrinks = 0
        self.isr_expands = 0
        self._isr_sizes: dict[tuple[str, int], int] = {}
        self.group_lag: list[GroupLag] = []
        self.group_members: dict[str, int] = {}
        self.http_requests: dict[tuple[str, str, int], int] = {}
        self.connections_refused: dict[str, int] = {}
        """Client connections closed at once for a connection limit, by its config name."""
        self.authentications: dict[tuple[str, str], int] = {}
        """SASL (re-)authentications by (listener, outcome): outcome is one of
        :data:`AUTHENTICATION_OUTCOMES`."""
        self._names: dict[int, str] = {}
        self._sampler: asyncio.Task | None = None

    # ------------------------------------------------------------ hot paths
    def on_authentication(self, listener: str, outcome: str) -> None:
        """Count one SASL outcome (a key of :data:`AUTHENTICATION_OUTCOMES`) on ``listener``."""
        key = (listener, outcome)
        self.authentications[key] = self.authentications.get(key, 0) + 1

    def on_response(self, api_key: int, api_version: int, started: float) -> None:
        """A response to (``api_key``, ``api_version``) is ready; ``started`` is the
        ``time.perf_counter()`` when the request was decoded."""
        elapsed = time.perf_counter() - started
        key = (api_key, api_version)
        self.requests[key] = self.requests.get(key, 0) + 1
        stats = self.request_latency.get(api_key)
        if stats is None:
            stats = self.request_latency[api_key] = LatencyStats()
        stats.observe(elapsed)

    def on_produce(self, topic: str, nbytes: int, nmessages: int) -> None:
        """A leader appended ``nmessages`` records in ``nbytes`` bytes to ``topic``."""
        if topic not in self.bytes_in and len(self.bytes_in) >= limits.METRICS_MAX_TOPIC_SERIES:
            return
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + nbytes
        self.messages_in[topic] = self.messages_in.get(topic, 0) + nmessages

    def on_fetch_response(self, topics_out: Iterable[dict]) -> None:
        """Count the record bytes of a Fetch response body's ``responses`` per topic."""
        for t in topics_out:
            n = 0
            for p in t["partitions"]:
                records = p["records"]
                if records:
                    n += len(records)
            if n:
                name = t["topic"]
                if name not in self.bytes_out and len(self.bytes_out) >= limits.METRICS_MAX_TOPIC_SERIES:
                    continue
                self.bytes_out[name] = self.bytes_out.get(name, 0) + n

    def on_flush(self, seconds: float) -> None:
        """One log fsync took ``seconds`` (Kafka ``LogFlushStats.LogFlushRateAndTimeMs``)."""
        self.log_flush.observe(seconds)

    def on_raft_soft_state(self, group_type: str, old_role: str | None, old_leader: int | None,
                           role: str, leader: int | None) -> None:
        """A Raft group's role or leader changed (``group_type`` ``metadata`` or ``partition``).

        An election is counted when this node becomes a candidate, or a leader without having
        been seen as a candidate (a single voter wins at once); a leader change when the known
        leader becomes a different node."""
        if role == "candidate" or (role == "leader" and old_role not in ("candidate", "leader")):
            self.elections[group_type] = self.elections.get(group_type, 0) + 1
        if leader is not None and leader != old_leader:
            self.leader_changes[group_type] = self.leader_changes.get(group_type, 0) + 1

    def on_http(self, method: str, route: str, status: int) -> None:
        """The HTTP port answered ``status`` to ``method`` on ``route`` (its path template)."""
        key = (method, route, status)
        self.http_requests[key] = self.http_requests.get(key, 0) + 1

    # ------------------------------------------------------------ ISR sampling
    def sample_isr(self) -> None:
        """Compare each led partition's ISR size with the last sample: count shrinks/expands
        (Kafka ``ReplicaManager.IsrShrinksPerSec``/``IsrExpandsPerSec``). A partition seen led
        for the first time is compared with its replica assignment, so a leader that starts (or
        takes over) with a replica missing counts one shrink, as Kafka's would when it drops it."""
        replicas = self.runtime.replicas
        if replicas is None:
            return
        seen: dict[tuple[str, int], int] = {}
        for key, p in replicas.partitions.items():
            isr_of = getattr(p, "in_sync_replicas", None)
            if isr_of is None or not p.is_leader:
                continue
            size = len(isr_of())
            seen[key] = size
            before = self._isr_sizes.get(key)
            if before is None:  # first seen led: compare with the assignment (a new ISR is all of it)
                before = len(p.replicas)
            if size < before:
                self.isr_shrinks += 1
            elif size > before:
                self.isr_expands += 1
        self._isr_sizes = seen

    def start(self) -> None:
        """Start the ISR sampler (cluster mode only) on the running loop."""
        if self.runtime.cluster is not None and self._sampler is None:
            self._sampler = asyncio.get_running_loop().create_task(self._sample_loop())

    async def _sample_loop(self) -> None:
        while True:
            await asyncio.sleep(limits.METRICS_ISR_SAMPLE_INTERVAL_MS / 1000)
            try:
                self.sample_isr()
            except Exception:  # a metrics bug must not stop the sampler (nor the broker)
                log.exception("ISR sampling failed")

    def stop(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            self._sampler = None

    # ------------------------------------------------------------ exposition
    def render(self) -> bytes:
        """The Prometheus text exposition (format 0.0.4) of every series of this broker."""
        return generate_latest(self.registry)

    def name_of(self, api_key: int) -> str:
        name = self._names.get(api_key)
        if name is None:
            name = self._names[api_key] = request_name(api_key)
        return name

    def throughput(self) -> dict:
        """Cumulative per-topic counters of this broker (console charts): ``{"time_ms", "bytes_in",
        "bytes_out", "messages_in", "requests"}`` (``requests``: total answered requests)."""
        return {"time_ms": int(time.time() * 1000), "bytes_in": dict(self.bytes_in),
                "bytes_out": dict(self.bytes_out), "messages_in": dict(self.messages_in),
                "requests": sum(self.requests.values())}


def _summary(name: str, labels: dict[str, str], stats: LatencyStats, scale: float) -> list:
    """Samples of one summary series: quantiles, ``_count`` and ``_sum`` (values times ``scale``)."""
    out = [(name, {**labels, "quantile": label}, v * scale) for label, v in stats.quantiles()]
    out.append((name + "_count", labels, stats.count))
    out.append((name + "_sum", labels, stats.sum_s * scale))
    return out


AUTHENTICATION_OUTCOMES = {
    "successful_authentication": "SASL authentications that succeeded, per listener.",
    "failed_authentication": "SASL authentications that failed (the connection was closed), per listener.",
    "successful_authentication_no_reauth": "SASL authentications of clients that cannot re-authenticate "
                                           "(SaslAuthenticate v0 or raw tokens; KIP-368), per listener.",
    "successful_reauthentication": "SASL re-authentications (KIP-368) that succeeded, per listener.",
    "failed_reauthentication": "SASL re-authentications (KIP-368) that failed, per listener.",
    "expired_connections_killed": "Connections closed because their SASL session expired without "
                                  "re-authentication (KIP-368; an OAUTHBEARER token's expiry), per listener.",
}
"""Kafka's ``socket-server-metrics`` authentication counters (``successful-authentication-total``,
..., ``expired-connections-killed-count``) as Prometheus counter names (``_total`` added)."""


class _BrokerCollector:
    """Builds every LiteMQ series from the broker's state at scrape time."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.m = metrics

    def collect(self):
        m, rt = self.m, self.m.runtime
        yield from self._traffic(m)
        yield from self._requests(m)
        yield from self._log_flush(m)
        yield from self._sync_queue(rt)
        yield from self._partitions(m, rt)
        yield from self._raft(m, rt)
        yield from self._groups(m)
        yield from self._share_groups(getattr(rt, "share_coordinator", None))
        yield from self._client_quotas(getattr(rt, "client_quotas", None))
        yield from self._fetch_sessions(getattr(rt, "fetch_sessions", None))
        telemetry = getattr(rt, "client_telemetry", None)
        if telemetry is not None:  # KIP-714 metrics pushed by clients
            yield from telemetry.metric_families()
        conns = GaugeMetricFamily("kafka_server_socket_server_metrics_connection_count",
                                  "Open client connections per listener.", labels=["listener"])
        per_listener: dict[str, int] = {s.name: 0 for s in rt.listeners}
        for c in rt.connections:
            per_listener[c.listener_name] = per_listener.get(c.listener_name, 0) + 1
        for name, n in sorted(per_listener.items()):
            conns.add_metric([name], n)
        yield conns
        for outcome, doc in AUTHENTICATION_OUTCOMES.items():
            family = CounterMetricFamily(f"kafka_server_socket_server_metrics_{outcome}", doc, labels=["listener"])
            for (listener, what), n in sorted(m.authentications.items()):
                if what == outcome:
                    family.add_metric([listener], n)
            yield family
        refused = CounterMetricFamily("litemq_connections_refused", "Client connections closed at once for a "
                                      "connection limit (max.connections, max.connections.per.ip).",
                                      labels=["limit"])
        for limit, n in sorted(m.connections_refused.items()):
            refused.add_metric([limit], n)
        yield refused
        http = CounterMetricFamily("litemq_http_requests", "HTTP requests answered, per method, path template "
                                   "and status code.", labels=["method", "path", "code"])
        for (method, route, status), n in sorted(m.http_requests.items()):
            http.add_metric([method, route, str(status)], n)
        yield http
        info = GaugeMetricFamily("litemq_broker_info", "This broker: node id and cluster id (value 1).",
                                 labels=["node_id", "cluster_id"])
        info.add_metric([str(rt.config.node_id), str(getattr(rt.metadata, "cluster_id", "") or "")], 1)
        yield info

    @staticmethod
    def _fetch_sessions(cache):
        """Kafka's ``kafka.server:type=FetchSessionCache`` metrics (KIP-227)."""
        if cache is None:
            return
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchsessions",
                                "Incremental fetch sessions this broker keeps.", value=len(cache))
        yield GaugeMetricFamily("kafka_server_fetchsessioncache_numincrementalfetchpartitionscached",
                                "Partitions in this broker's incremental fetch sessions.",
                                value=cache.partitions_cached)
        yield CounterMetricFamily("kafka_server_fetchsessioncache_incrementalfetchsessionevictions",
                                  "Fetch sessions evicted to make room for a new one.", value=cache.evictions)

    @staticmethod
    def _client_quotas(quotas):
        """Throttling by client quotas (Kafka's per-quota-type ``throttle-time``), per quota key."""
        total = CounterMetricFamily("litemq_client_quota_throttle_time_ms",
                                    "Throttle time (ms) responses carried for client quotas, per quota.",
                                    labels=["quota"])
        count = CounterMetricFamily("litemq_client_quota_throttled_responses",
                                    "Responses throttled by a client quota, per quota.", labels=["quota"])
        if quotas is not None:
            for key, ms in sorted(quotas.throttle_ms_total.items()):
                total.add_metric([key], ms)
                count.add_metric([key], quotas.throttled.get(key, 0))
        yield total
        yield count

    @staticmethod
    def _traffic(m: BrokerMetrics):
        live = set(m.runtime.metadata.topics)
        for attr, name, doc in (
                ("bytes_in", "kafka_server_brokertopicmetrics_bytesin", "Bytes appended by producers, per topic."),
                ("bytes_out", "kafka_server_brokertopicmetrics_bytesout", "Record bytes sent to consumers, per topic."),
                ("messages_in", "kafka_server_brokertopicmetrics_messagesin", "Records appended by producers, per topic.")):
            counts: dict[str, int] = getattr(m, attr)
            for gone in [t for t in counts if t not in live]:
                del counts[gone]
            fam = CounterMetricFamily(name, doc, labels=["topic"])
            for topic, n in sorted(counts.items()):
                fam.add_metric([topic], n)
            yield fam

    @staticmethod
    def _requests(m: BrokerMetrics):
        reqs = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                   "Requests answered, per API and version.", labels=["request", "version"])
        for (key, version), n in sorted(m.requests.items()):
            reqs.add_metric([m.name_of(key), str(version)], n)
        yield reqs
        total = Metric("kafka_network_requestmetrics_totaltimems",
                       "Time from request decoded to response ready (ms), per API; quantiles over the "
                       f"last {limits.METRICS_LATENCY_WINDOW_SAMPLES} requests.", "summary")
        hist = HistogramMetricFamily("litemq_request_duration_seconds",
                                     "Time from request decoded to response ready, per API.", labels=["request"])
        for key, stats in sorted(m.request_latency.items()):
            name = m.name_of(key)
            for sample in _summary(total.name, {"request": name}, stats, 1000.0):
                total.add_sample(*sample)
            hist.add_metric([name], stats.cumulative_buckets(), stats.sum_s)
        yield total
        yield hist

    @staticmethod
    def _log_flush(m: BrokerMetrics):
        fam = Metric("kafka_log_logflushstats_logflushrateandtimems",
                     "Log fsync time (ms); quantiles over the last "
                     f"{limits.METRICS_LATENCY_WINDOW_SAMPLES} flushes.", "summary")
        for sample in _summary(fam.name, {}, m.log_flush, 1000.0):
            fam.add_sample(*sample)
        yield fam
        hist = HistogramMetricFamily("litemq_log_flush_duration_seconds", "Log fsync time.")
        hist.add_metric([], m.log_flush.cumulative_buckets(), m.log_flush.sum_s)
        yield hist

    @staticmethod
    def _sync_queue(rt):
        """The broker's fsync thread (:class:`SyncQueue`): jobs and where their time went."""
        q = SyncQueue.existing(rt.loop) if rt.loop is not None else None
        if q is None:
            return
        st = q.stats
        yield CounterMetricFamily("litemq_sync_jobs", "Durability jobs (fsyncs of a log or a Raft Ready) "
                                  "run by the broker's fsync thread.", value=st.jobs)
        yield CounterMetricFamily("litemq_sync_batches", "Batches of jobs the fsync thread took at once "
                                  "(one wake-up and one hand-back each).", value=st.batches)
        for name, value, what in (
                ("wait", st.wait_s, "from submission to the job's start on the fsync thread"),
                ("run", st.run_s, "running on the fsync thread (the fsync)"),
                ("hand_back", st.hand_back_s, "from the job's end to its result on the event loop")):
            yield CounterMetricFamily(f"litemq_sync_{name}_seconds", f"Seconds of durability jobs {what}, "
                                      "summed (divide by litemq_sync_jobs_total for the mean).", value=value)

    @staticmethod
    def _partitions(m: BrokerMetrics, rt):
        parts = list(rt.replicas.partitions.values()) if rt.replicas is not None else []
        leaders = under = under_min = offline_local = reassigning = 0
        moves = rt.cluster.image.reassignments if rt.cluster is not None else {}
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a hosted partition's log.",
                                 labels=["topic", "partition"])
        leo = GaugeMetricFamily("kafka_log_log_logendoffset", "Log end offset of a hosted partition.",
                                labels=["topic", "partition"])
        lso = GaugeMetricFamily("kafka_log_log_logstartoffset", "Log start offset of a hosted partition.",
                                labels=["topic", "partition"])
        hw = GaugeMetricFamily("litemq_partition_high_watermark", "High watermark of a hosted partition.",
                               labels=["topic", "partition"])
        for p in parts:
            labels = [p.topic, str(p.index)]
            size.add_metric(labels, p.log.size_bytes)
            leo.add_metric(labels, p.kafka_log_end_offset)  # Kafka offsets (issue 19)
            lso.add_metric(labels, p.kafka_log_start_offset)
            hw.add_metric(labels, p.kafka_high_watermark)
            failed = getattr(p, "_offline", False) or getattr(getattr(p, "group", None), "failed", False)
            if failed:
                offline_local += 1
            if not p.is_leader:
                continue
            leaders += 1
            if (p.topic, p.index) in moves:
                reassigning += 1
            isr_of = getattr(p, "in_sync_replicas", None)
            if isr_of is None:
                continue
            isr = len(isr_of())
            if isr < len(p.replicas):
                under += 1
            info = rt.metadata.topics.get(p.topic)
            mir = int(info.configs.get("min.insync.replicas", rt.config.min_insync_replicas)) if info else 1
            if isr < mir:
                under_min += 1
        yield from (size, leo, lso, hw)
        for name, doc, value in (
                ("kafka_server_replicamanager_partitioncount", "Partitions hosted by this broker.", len(parts)),
                ("kafka_server_replicamanager_leadercount", "Partitions this broker leads.", leaders),
                ("kafka_server_replicamanager_underreplicatedpartitions",
                 "Partitions led here whose ISR is smaller than their replica set.", under),
                ("kafka_server_replicamanager_underminisrpartitioncount",
                 "Partitions led here whose ISR is smaller than min.insync.replicas.", under_min),
                ("kafka_server_replicamanager_offlinereplicacount",
                 "Hosted replicas offline after a storage error.", offline_local),
                ("kafka_server_replicamanager_reassigningpartitions",
                 "Partitions led here whose reassignment (KIP-455) is in progress.", reassigning)):
            yield GaugeMetricFamily(name, doc, value=value)
        throttle = getattr(rt.cluster, "throttle", None) if rt.cluster is not None else None
        if throttle is not None:  # Kafka LeaderReplication/FollowerReplication byte-rate = rate() of these
            yield CounterMetricFamily("kafka_server_leaderreplication_bytes",
                                      "Throttled replication bytes sent as leader (leader.replication.throttled.rate).",
                                      value=throttle.bytes_leader)
            yield CounterMetricFamily("kafka_server_followerreplication_bytes",
                                      "Throttled replication bytes processed as follower "
                                      "(follower.replication.throttled.rate).", value=throttle.bytes_follower)
            yield GaugeMetricFamily("litemq_replication_throttle_held_bytes",
                                    "Bytes of Raft Appends held back by the replication throttles now.",
                                    value=throttle.held_bytes())
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks",
                                  "Times the ISR of a partition led here shrank (sampled each second).",
                                  value=m.isr_shrinks)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands",
                                  "Times the ISR of a partition led here grew (sampled each second).",
                                  value=m.isr_expands)
        active, offline = _controller_view(rt, offline_local)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller (the metadata Raft leader; a single broker).",
                                value=active)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a live leader (reported by the active controller only).",
                                value=offline)
        yield GaugeMetricFamily("litemq_controller_reassigning_partitions",
                                "Partition reassignments in progress in the cluster (reported by the active "
                                "controller only).", value=len(moves) if active and rt.cluster is not None else 0)
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_globaltopiccount", "Topics in the cluster.",
                                value=len(rt.metadata.topics))
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_globalpartitioncount",
                                "Partitions in the cluster.",
                                value=sum(t.num_partitions for t in rt.metadata.topics.values()))

    @staticmethod
    def _raft(m: BrokerMetrics, rt):
        el = CounterMetricFamily("litemq_raft_elections", "Raft elections this node started (or won at once), "
                                 "per group type (metadata, partition).", labels=["group_type"])
        lc = CounterMetricFamily("litemq_raft_leader_changes", "Leader changes this node observed, per group type.",
                                 labels=["group_type"])
        for kind in sorted(m.elections):
            el.add_metric([kind], m.elections[kind])
            lc.add_metric([kind], m.leader_changes.get(kind, 0))
        yield el
        yield lc
        cluster = rt.cluster
        if cluster is not None and cluster.meta is not None:
            node = cluster.meta.node
            yield GaugeMetricFamily("kafka_server_raft_metrics_current_leader",
                                    "Metadata Raft leader id (-1: none known).",
                                    value=-1 if node.leader_id is None else node.leader_id)
            yield GaugeMetricFamily("kafka_server_raft_metrics_current_epoch", "Metadata Raft term.", value=node.term)
            yield GaugeMetricFamily("kafka_server_raft_metrics_high_watermark", "Metadata log high watermark.",
                                    value=node.high_watermark)

    @staticmethod
    def _groups(m: BrokerMetrics):
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "High watermark minus committed offset, per group and "
                                "partition (groups this broker coordinates).",
                                labels=["consumergroup", "topic", "partition"])
        cur = GaugeMetricFamily("kafka_consumergroup_current_offset", "Committed offset, per group and partition.",
                                labels=["consumergroup", "topic", "partition"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "Lag of a group summed over a topic's partitions.",
                                    labels=["consumergroup", "topic"])
        sums: dict[tuple[str, str], int] = {}
        for row in m.group_lag:
            labels = [row.group, row.topic, str(row.partition)]
            cur.add_metric(labels, row.committed)
            if row.lag >= 0:
                lag.add_metric(labels, row.lag)
                sums[(row.group, row.topic)] = sums.get((row.group, row.topic), 0) + row.lag
        for (g, t), v in sorted(sums.items()):
            lag_sum.add_metric([g, t], v)
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a group this broker coordinates.",
                                    labels=["consumergroup"])
        for g, n in sorted(m.group_members.items()):
            members.add_metric([g], n)
        yield from (lag, cur, lag_sum, members)


    @staticmethod
    def _share_groups(share):
        """KIP-932 share groups: members of the groups coordinated here; per share-partition led
        here its start offset (SPSO), in-flight window (SPEO - SPSO), acquired (locked) records
        and lag (records at or past SPSO not yet acknowledged or archived, up to the high
        watermark); redeliveries (acquisitions past the first)."""
        members = GaugeMetricFamily("kafka_sharegroup_members", "Members of a share group this broker coordinates.",
                                    labels=["sharegroup"])
        labels = ["sharegroup", "topic", "partition"]
        start = GaugeMetricFamily("kafka_sharegroup_start_offset", "Share-partition start offset (SPSO).",
                                  labels=labels)
        window = GaugeMetricFamily("kafka_sharegroup_in_flight", "Offsets between SPSO and SPEO of a "
                                   "share-partition (bounded by group.share.partition.max.record.locks).",
                                   labels=labels)
        acquired = GaugeMetricFamily("kafka_sharegroup_acquired_records", "Records locked to a member now.",
                                     labels=labels)
        lag = GaugeMetricFamily("kafka_sharegroup_lag", "Records of a share-partition not yet acknowledged or "
                                "archived, up to the high watermark.", labels=labels)
        redeliveries = CounterMetricFamily("litemq_sharegroup_redeliveries", "Records delivered again (after a "
                                           "release, a lock expiry or a failover) by this broker.")
        if share is not None:
            for g in sorted(share.list_groups(), key=lambda g: g.group_id):
                members.add_metric([g.group_id], len(g.members))
            for g, t, i, sp, p in share.partition_states():
                row = [g, t, str(i)]
                start.add_metric(row, sp.start_offset)
                window.add_metric(row, sp.in_flight)
                acquired.add_metric(row, sp.acquired_count())
                lag.add_metric(row, max(p.kafka_high_watermark - sp.end_offset, 0) + len(sp.records))
            redeliveries.add_metric([], share.redeliveries)
        yield from (members, start, window, acquired, lag, redeliveries)


def _controller_view(rt, offline_local: int) -> tuple[int, int]:
    """(active controller 0/1, offline partitions) as Kafka's controller reports them."""
    cluster = rt.cluster
    if cluster is None:
        return 1, offline_local
    if cluster.meta is None or not cluster.meta.node.is_leader:
        return 0, 0
    offline = 0
    for info in rt.metadata.topics.values():
        for i in range(info.num_partitions):
            if cluster.leader_of(info.name, i)[0] < 0:
                offline += 1
    return 1, offline
