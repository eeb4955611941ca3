"""The broker runtime: state shared by all connections and handlers, and its lifecycle.

:class:`BrokerRuntime` owns the cluster metadata, the log manager, the replica manager, the
request handler table and one listening socket per listener (``listeners``: PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL). It runs on one asyncio event loop; blocking storage work (fsync,
retention deletes, compaction) runs in its thread pool.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import ssl
import time
from functools import partial
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from litemq import limits
from litemq.broker import dynamic_config
from litemq.broker.client_quota_manager import ClientQuotaManager
from litemq.broker.client_telemetry import ClientTelemetryManager
from litemq.broker.fetch_sessions import FetchSessionCache
from litemq.broker.http import HttpServer
from litemq.broker.loop_errors import RateLimitedAcceptErrors
from litemq.broker.record_validation import target_codec
from litemq.replica import Partition, ReplicaManager
from litemq.broker.server import Connection
from litemq.broker.topic_configs import BROKER_TOPIC_CONFIGS, REMOVED_TOPIC_CONFIGS, check_topic_config
from litemq.cluster.image import manual_partition_assignments, manual_topic_assignments
from litemq.cluster.metadata import ClusterMetadata, TopicInfo, validate_topic_name
from litemq.cluster.throttle import FOLLOWER_REPLICAS, LEADER_REPLICAS, parse_throttled_replicas
from litemq.metrics import BrokerMetrics
from litemq.config import TLS_PROTOCOLS, BrokerConfig, ListenerSpec
from litemq.protocol.errors import ErrorCode, KafkaError, KafkaStorageError
from litemq.protocol.messages import request_spec
from litemq.security.authorizer import create_authorizer
from litemq.storage.config import LogConfig
from litemq.storage.manager import LogManager
from litemq.storage.meta_properties import DataDirIdentity

log = logging.getLogger(__name__)

class BrokerRuntime:
    """One broker's live state. Create, ``await start()``, ``await stop()``.

    Attributes:
        config: the :class:`BrokerConfig`.
        metadata: persisted :class:`ClusterMetadata` (topics, configs, producer ids, ACLs, SCRAM
            credentials); the cluster's ``MetadataImage`` in cluster mode.
        authorizer: :class:`~litemq.security.authorizer.StandardAuthorizer`, or None when
            ``authorizer.class.name`` is empty (everything allowed).
        replicas: the :class:`ReplicaManager` of hosted partitions.
        handlers: api_key -> handler(ctx, request) returning a response body (dict/Message),
            a coroutine producing one, or None (acks=0).
        api_versions: api_key -> (min_version, max_version) advertised in ApiVersions.
        listeners: the configured listeners, in order (the first is the default one).
        ports: listener name -> bound port (after start).
        metrics: this broker's :class:`~litemq.metrics.BrokerMetrics` (its own Prometheus registry).
        http: the :class:`~litemq.broker.http.HttpServer` (``http.listen``: /metrics, console, REST).
        static_config: the settings as given at start; ``config`` is the effective one, with
            the dynamic broker configs applied (:mod:`litemq.broker.dynamic_config`).
        identity: the data dir's :class:`~litemq.storage.meta_properties.DataDirIdentity`
            (``meta.properties``: cluster id, node id, directory id).
        failed: completed with a one-line reason when the broker must stop (its data dir turned
            out to belong to another cluster); ``litemq serve`` then exits with status 1.

    Raises:
        ValueError: bad listener or TLS settings (naming the setting), unreadable PEM files.
        InconsistentDataDirError (a ValueError): ``meta.properties`` names another node id or
            cluster id (Kafka's message).
    """

    def __init__(self, config: BrokerConfig) -> None:
        from litemq.security.tls import server_context

        config.validate()
        self.config = config
        self.static_config = copy.copy(config)
        self.listeners: list[ListenerSpec] = config.listener_specs()
        self._ssl_contexts: dict[str, ssl.SSLContext] = {
            s.name: server_context(config, s.name, s.security_protocol)
            for s in self.listeners if s.security_protocol in TLS_PROTOCOLS}
        self.ports: dict[str, int] = {}
        self._advertised = config.advertised_endpoints()  # parsed once: Metadata asks on every request
        self.loop: asyncio.AbstractEventLoop | None = None
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="litemq-io")
        self.default_log_config = LogConfig.from_kafka_configs(
            {k: v for k, v in config.log_config_defaults().items() if k not in BROKER_TOPIC_CONFIGS}, stored=True)
        # One broker per data dir: DATA_DIR/.lock is taken before anything in it is read
        # (DataDirInUseError naming the holder's pid); stop() releases it, as does a failure below.
        self.log_manager = LogManager(Path(config.data_dir), self.default_log_config,
                                      page_cache_retain_bytes=config.log_page_cache_retain_bytes)
        self.failed: asyncio.Future | None = None
        self.replicas: ReplicaManager | None = None
        try:
            # data = partition logs or the metadata store (a broker.log or the lock file is not)
            had_data = any(e.is_dir() for e in Path(config.data_dir).iterdir())
            self.identity = DataDirIdentity.open(Path(config.data_dir), config.node_id, had_data)
            self.cluster = None
            if config.clustered:
                from litemq.cluster.manager import ClusterManager

                self.cluster = ClusterManager(self)
                self._local_metadata = None
            else:
                self._local_metadata = ClusterMetadata(config.data_dir, new_cluster_id=self.identity.cluster_id)
                self.identity.bind_cluster_id(self._local_metadata.cluster_id)
                self.on_broker_configs_changed()
            self.authorizer = create_authorizer(self)  # None unless authorizer.class.name is set
            self.connections: set[Connection] = set()
            self.client_quotas = ClientQuotaManager(lambda: self.metadata.client_quotas,
                                                    lambda: time.monotonic() * 1000.0)
            self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots,
                                                    lambda: time.monotonic() * 1000.0)  # KIP-227
            self.client_telemetry = ClientTelemetryManager(lambda: self.metadata.client_metrics,
                                                           config.telemetry_max_bytes) \
                if config.client_telemetry_enable else None  # KIP-714, off by default as in Kafka
            self.handlers: dict[int, Callable[..., Any]] = {}
            self.api_versions: dict[int, tuple[int, int]] = {}
            self.coordinator = None
            self.txn_coordinator = None
            self._servers: list[asyncio.base_events.Server] = []
            self._tasks: set[asyncio.Task] = set()
            self.started_ms = int(time.time() * 1000)
            self.port = self.listeners[0].port
            self.metrics = BrokerMetrics(self)
            self.http = HttpServer(self)  # /metrics, console, REST API (http.listen); ValueError if malformed
        except BaseException:
            self.log_manager.close_all()
            raise

    @property
    def metadata(self):
        """The metadata: :class:`ClusterMetadata` on a single broker, the cluster's current
        ``MetadataImage`` in cluster mode (a new object when a snapshot is installed)."""
        cluster = self.cluster
        return self._local_metadata if cluster is None else cluster.image

    def on_partition_leader(self, topic: str, index: int, leader: bool) -> None:
        """``ClusterHost`` callback: leadership of ``topic``-``index`` gained (everything before
        the term committed) or lost; the coordinator owning that internal topic loads or unloads
        its state (Kafka ``onElection``/``onResignation``)."""
        if topic == "__consumer_offsets":
            coord = self.coordinator
        elif topic == "__transaction_state":
            coord = self.txn_coordinator
        else:
            return
        if coord is not None:
            coord.on_leadership(index, leader)

    # ------------------------------------------------------------ handlers
    def register(self, api_key: int, handler: Callable[..., Any], min_version: int | None = None,
                 max_version: int | None = None) -> None:
        """Serve ``api_key`` with ``handler``; advertise the schema's version range by default."""
        spec = request_spec(api_key)
        lo = spec.min_version if min_version is None else max(min_version, spec.min_version)
        hi = spec.max_version if max_version is None else min(max_version, spec.max_version)
        self.handlers[api_key] = handler
        self.api_versions[api_key] = (lo, hi)

    def supports(self, api_key: int, version: int) -> bool:
        rng = self.api_versions.get(api_key)
        return rng is not None and rng[0] <= version <= rng[1]

    def api_versions_body(self, error_unsupported: bool = False) -> dict:
        return {
            "error_code": ErrorCode.UNSUPPORTED_VERSION if error_unsupported else ErrorCode.NONE,
            "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi}
                         for k, (lo, hi) in sorted(self.api_versions.items())],
            "throttle_time_ms": 0,
        }

    # ------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Open every log (recovering after a crash), register handlers, start listening."""
        from litemq.broker.handlers import register_all

        self.loop = asyncio.get_running_loop()
        if self.loop.get_exception_handler() is None:  # not an embedding application's own
            self.loop.set_exception_handler(RateLimitedAcceptErrors())
        self.failed = self.loop.create_future()
        self.replicas = ReplicaManager(self.loop, self.executor)
        self.replicas.metrics = self.metrics
        logs = await self.loop.run_in_executor(self.executor, self.log_manager.load_all)
        if self.cluster is not None:
            from litemq.broker.handlers.txn import register_rpc_ops

            register_rpc_ops(self)  # write_txn_markers, verify_txn for the other brokers
            await self.cluster.start(logs)
            logs = {}
        for (topic, index), plog in logs.items():
            info = self.metadata.topics.get(topic)
            if info is None or index >= info.num_partitions:
                log.warning("log %s-%d belongs to no known topic; deleting it", topic, index)
                self.log_manager.delete(topic, index)
                continue
            plog.update_config(self.log_config_for(info))
            self.replicas.add(topic, index, plog)
        if self.cluster is None:
            for info in self.metadata.topics.values():
                self._ensure_partitions(info)
        register_all(self)
        try:
            for spec in self.listeners:
                await self._listen(spec)
        except OSError:
            for server in self._servers:
                server.close()
            raise
        self.port = self.ports[self.listeners[0].name]
        try:
            await self.http.start()
        except OSError:
            for server in self._servers:
                server.close()
            raise
        self.spawn(self._housekeeping())
        log.info("LiteMQ broker %d listening on %s (data dir %s)", self.config.node_id,
                 ", ".join(f"{s.name}://{s.host}:{self.ports[s.name]}" for s in self.listeners),
                 self.config.data_dir)

    async def _listen(self, spec: ListenerSpec) -> None:
        """Bind one listener (``host`` "" = every interface); its connections know its name,
        protocol and TLS context."""
        ctx = self._ssl_contexts.get(spec.name)
        server = await self.loop.create_server(
            lambda: Connection(self, spec.name, spec.security_protocol, ctx), spec.host or None, spec.port,
            reuse_address=True, backlog=1024)
        self._servers.append(server)
        self.ports[spec.name] = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop accepting, close connections, flush and close every log (clean shutdown).

        Every step runs even when one before it failed (a full disk, no file descriptor): a
        failure is logged in one line and the shutdown goes on, so the logs that can be closed
        cleanly are, and the data dir's lock is released. Never raises (but CancelledError)."""
        failures = 0

        async def step(what: str, fn, *args) -> None:
            nonlocal failures
            try:
                result = fn(*args)
                if asyncio.iscoroutine(result):
                    await result
            except Exception as exc:  # noqa: BLE001 - the other steps must still run
                failures += 1
                log.error("shutdown: %s failed: %r", what, exc)

        await step("stopping the HTTP server", self.http.stop)
        for server in self._servers:
            await step("closing a listener", server.close)
        for conn in list(self.connections):
            if conn.transport is not None:
                await step("closing a connection", conn.transport.close)
        await step("cancelling the broker's tasks", self._cancel_tasks)
        if self.txn_coordinator is not None:
            await step("stopping the transaction coordinator", self.txn_coordinator.stop)
        if self.coordinator is not None and hasattr(self.coordinator, "stop"):
            await step("stopping the group coordinator", self.coordinator.stop)
        if self.cluster is not None:
            await step("stopping the cluster manager", self.cluster.stop)
        await step("closing the logs", self.loop.run_in_executor, self.executor, self.log_manager.close_all)
        self.executor.shutdown(wait=True)
        if failures:
            log.warning("LiteMQ broker %d stopped; %d shutdown step(s) failed (see above)",
                        self.config.node_id, failures)
        else:
            log.info("LiteMQ broker %d stopped cleanly", self.config.node_id)

    def spawn(self, coro) -> asyncio.Task:
        """Run ``coro`` as a task of this broker (a request's handler, a delayed fetch or
        produce, a connection's TLS handshake or writer, housekeeping): :meth:`stop` cancels
        and awaits every one still running."""
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _cancel_tasks(self) -> None:
        """Cancel every task :meth:`spawn` started and wait until each has ended (at most
        ``limits.SHUTDOWN_TASKS_TIMEOUT_MS``), so none is left pending on the loop."""
        tasks = [t for t in self._tasks if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=limits.SHUTDOWN_TASKS_TIMEOUT_MS / 1000)

    async def _housekeeping(self) -> None:
        """Retention every ``log.retention.check.interval.ms`` (Kafka's log-retention task; the
        first check ``limits.LOG_RETENTION_INITIAL_DELAY_MS`` after start, or sooner when the
        interval is shorter), compaction every ``log.cleaner.backoff.ms``, time-based flushes
        with either; off the event loop."""
        loop = self.loop
        next_retention = loop.time() + min(limits.LOG_RETENTION_INITIAL_DELAY_MS,
                                           self.config.log_retention_check_interval_ms) / 1000
        next_expiry = loop.time() + self.config.producer_id_expiration_check_interval_ms / 1000
        while True:
            # read every round: log.cleaner.backoff.ms is a dynamic broker config
            await asyncio.sleep(max(0.05, min(next_retention - loop.time(), next_expiry - loop.time(),
                                              self.config.log_cleaner_backoff_ms / 1000)))
            if loop.time() >= next_expiry:
                next_expiry = loop.time() + self.config.producer_id_expiration_check_interval_ms / 1000
                self.remove_expired_producers()
            retention = loop.time() >= next_retention
            if retention:
                next_retention = loop.time() + self.config.log_retention_check_interval_ms / 1000
            try:
                await self.run_log_maintenance(retention=retention)
            except Exception:  # keep the broker serving; the next round retries
                log.exception("log maintenance failed")

    def remove_expired_producers(self) -> int:
        """Every replica forgets its producers idle for ``producer.id.expiration.ms`` (Kafka's
        ``LogManager`` task every ``producer.id.expiration.check.interval.ms``); how many."""
        now_ms = int(time.time() * 1000)
        removed = 0
        for p in list(self.replicas.partitions.values()):
            try:
                removed += p.log.remove_expired_producers(now_ms, self.config.producer_id_expiration_ms)
            except Exception:  # a closed or failed log: the next round retries
                log.exception("removing expired producers of %s-%d failed", p.topic, p.index)
        if removed:
            log.info("removed %d expired producer ids (producer.id.expiration.ms)", removed)
        return removed

    async def run_log_maintenance(self, retention: bool = True) -> None:
        """One round over every hosted partition: retention (when ``retention``), compaction
        and due time-based flushes."""
        now_ms = int(time.time() * 1000)
        for p in list(self.replicas.partitions.values()):
            cfg = p.log.config
            if retention and cfg.delete and p.is_leader:  # a follower's log start follows its leader's
                deleted = await self.loop.run_in_executor(self.executor, partial(
                    p.log.enforce_retention, now_ms, high_watermark=p.high_watermark))
                if deleted:
                    log.info("retention deleted %d segment(s) of %s-%d; log start offset %d",
                             deleted, p.topic, p.index, p.log.log_start_offset)
                    p.truncate_after_delete_records()
            if cfg.compact:
                # below the high watermark only: an uncommitted tail may still be truncated
                await self.loop.run_in_executor(self.executor, partial(p.log.compact, now_ms,
                                                                       high_watermark=p.high_watermark))
            if not cfg.durable and p.log.flush_due(now_ms):
                p._schedule_flush()

    def fail(self, reason: str) -> None:
        """``ClusterHost``: the broker cannot go on (its data dir belongs to another cluster):
        log ``reason`` and complete :attr:`failed`, which ``litemq serve`` waits on (it stops
        the broker and exits with status 1). Idempotent."""
        if self.failed is not None and not self.failed.done():
            log.error("stopping the broker: %s", reason)
            self.failed.set_result(reason)

    # ------------------------------------------------------------ dynamic broker configs
    def dynamic_config_layers(self) -> tuple[dict[str, str], dict[str, str]]:
        """(this broker's own dynamic configs, the cluster-wide default ones)."""
        return dynamic_config.layers(self.metadata.broker_configs, self.config.node_id)

    def on_broker_configs_changed(self) -> None:
        """``ClusterHost``: the stored dynamic broker configs changed (or were loaded): make them
        effective without a restart - the dynamic settings of :attr:`config`, the broker-wide
        topic config defaults, and the log config of every hosted partition whose topic does not
        set that config itself (Kafka ``DynamicLogConfig.reconfigure``)."""
        per_broker, default = self.dynamic_config_layers()
        effective = dynamic_config.effective(self.static_config, per_broker, default)
        dynamic_config.apply_to(self.config, effective)
        defaults = dynamic_config.log_config_defaults(self.config, per_broker, default)
        new_default = LogConfig.from_kafka_configs({k: v for k, v in defaults.items() if k not in BROKER_TOPIC_CONFIGS},
                                                   stored=True)
        if new_default == self.default_log_config:
            return
        self.default_log_config = self.log_manager.default_config = new_default
        if self.replicas is None:
            return  # not started: the logs open with the new defaults
        for (topic, _index), p in list(self.replicas.partitions.items()):
            info = self.metadata.topics.get(topic)
            if info is not None:
                p.log.update_config(self.log_config_for(info))
        log.info("dynamic broker configs applied: %s", {**default, **per_broker} or "none (static settings)")

    def validate_broker_configs(self, resource: str, configs: dict[str, str]) -> None:
        """``ClusterHost``: raises KafkaError (INVALID_REQUEST, INVALID_CONFIG) for a bad new set
        of dynamic configs of broker resource ``resource`` (:func:`dynamic_config.validate`)."""
        dynamic_config.validate(resource, configs)

    async def set_broker_configs_async(self, resource: str, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of broker resource ``resource`` ("" = the cluster-wide
        default): persisted in ``metadata.json`` on a single broker, a ``set_broker_configs``
        record through the metadata leader in a cluster, then applied.

        Raises:
            KafkaError: INVALID_REQUEST / INVALID_CONFIG (validation), REQUEST_TIMED_OUT.
        """
        self.validate_broker_configs(resource, configs)
        if self.cluster is None:
            self.metadata.set_broker_configs(resource, configs)
            self.on_broker_configs_changed()
            return
        await self.cluster.admin("set_broker_configs", broker=resource, configs=configs)

    # ------------------------------------------------------------ topics
    def log_config_for(self, info: TopicInfo) -> LogConfig:
        """The LogConfig of a topic: broker defaults overlaid with its dynamic configs."""
        return self._log_config(info.configs)

    def _log_config(self, configs: dict[str, str]) -> LogConfig:
        log_keys = {k: v for k, v in configs.items()
                    if k not in BROKER_TOPIC_CONFIGS and k not in REMOVED_TOPIC_CONFIGS}
        return LogConfig.from_kafka_configs(log_keys, base=self.default_log_config, stored=True)

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        """Raises KafkaError(INVALID_CONFIG) naming the bad key."""
        try:
            LogConfig.from_kafka_configs({k: v for k, v in configs.items() if k not in BROKER_TOPIC_CONFIGS},
                                         base=self.default_log_config)
        except ValueError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_CONFIG) from None
        try:
            target_codec(configs.get("compression.type"))  # producer|uncompressed|gzip|snappy|lz4|zstd
        except ValueError as exc:
            raise KafkaError(str(exc), ErrorCode.INVALID_CONFIG) from None
        for name, value in configs.items():
            reason = check_topic_config(name, value)
            if reason is not None:
                raise KafkaError(reason, ErrorCode.INVALID_CONFIG)
        mir = configs.get("min.insync.replicas")
        if mir is not None and (not mir.isdigit() or int(mir) < 1):
            raise KafkaError("min.insync.replicas must be an integer >= 1", ErrorCode.INVALID_CONFIG)
        for name in (LEADER_REPLICAS, FOLLOWER_REPLICAS):
            if name in configs:
                try:
                    parse_throttled_replicas(name, configs[name])
                except ValueError as exc:
                    raise KafkaError(str(exc), ErrorCode.INVALID_CONFIG) from None

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], internal: bool = False,
                     assignments: list[tuple[int, list[int]]] | None = None) -> TopicInfo:
        """Create a topic and its partition logs.

        ``assignments``: manual replica assignment ``[(partition_index, [broker_id, ...])]``
        (CreateTopics ``Assignments``); on a single broker only this node's id is valid, and
        it replaces ``num_partitions``/``replication_factor`` (which the caller checked are -1).

        Raises:
            KafkaError: TOPIC_ALREADY_EXISTS, INVALID_TOPIC_EXCEPTION, INVALID_PARTITIONS,
                INVALID_REPLICATION_FACTOR (more replicas than brokers), INVALID_CONFIG,
                INVALID_REPLICA_ASSIGNMENT.
            KafkaStorageError(KAFKA_STORAGE_ERROR): not created (disk full, no file descriptor,
                I/O error); no trace of the topic is left.
        """
        if assignments:
            me = [self.config.node_id]
            replicas = manual_topic_assignments(assignments, me, me)
            num_partitions, replication_factor = len(replicas), len(replicas[0])
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        if replication_factor < 1 or replication_factor > self.live_broker_count():
            raise KafkaError(f"replication factor {replication_factor} is larger than the "
                             f"{self.live_broker_count()} available broker(s)",
                             ErrorCode.INVALID_REPLICATION_FACTOR)
        self.validate_topic_configs(configs)
        self.metadata.check_new_topic(name, num_partitions)
        info = self._with_new_logs(name, range(num_partitions), self._log_config(configs),
                                   lambda: self.metadata.create_topic(name, num_partitions, configs, internal))
        log.info("created topic %s with %d partition(s)", name, num_partitions)
        return info

    def _with_new_logs(self, name: str, indexes: range, cfg: LogConfig, record):
        """The partition logs first, the metadata last: create the logs of partitions
        ``indexes`` of topic ``name``, then ``record()`` the change in the metadata, and only
        then serve the partitions; returns what ``record`` returns. A failure (disk full, no file
        descriptor) at either step leaves no trace of the new partitions, rather than ones that
        clients see but cannot use (logs of partitions the metadata does not know are deleted at
        the next start).

        Raises:
            KafkaError: ``record``'s (the logs are deleted again); KafkaStorageError from
                :meth:`_create_logs`.
        """
        plogs = self._create_logs(name, indexes, cfg)
        try:
            result = record()
        except KafkaError:
            self._delete_logs(name, indexes)
            raise
        for i, plog in zip(indexes, plogs):
            self.replicas.add(name, i, plog)
        return result

    def _create_logs(self, name: str, indexes: range, cfg: LogConfig) -> list:
        """Open (create) the logs of partitions ``indexes`` of topic ``name``, all or none.

        Raises:
            KafkaStorageError(KAFKA_STORAGE_ERROR): a log could not be created (disk full, no
                file descriptor, I/O error); the ones this call created are deleted again.
        """
        plogs = []
        try:
            for i in indexes:
                plogs.append(self.log_manager.create(name, i, cfg))
        except OSError as exc:
            log.error("cannot create the log of %s-%d: %s", name, indexes[len(plogs)], exc)
            self._delete_logs(name, indexes[:len(plogs)])
            raise KafkaStorageError(f"cannot create the log of {name}-{indexes[len(plogs)]}: {exc}") from None
        return plogs

    def _delete_logs(self, name: str, indexes: range) -> None:
        for i in indexes:
            if self.replicas.get(name, i) is None:  # never handed out
                try:
                    self.log_manager.delete(name, i)
                except OSError as exc:
                    log.warning("cannot delete the log of %s-%d: %s", name, i, exc)

    def _ensure_partitions(self, info: TopicInfo) -> None:
        cfg = self.log_config_for(info)
        for i in range(info.num_partitions):
            if self.replicas.get(info.name, i) is None:
                plog = self.log_manager.create(info.name, i, cfg)
                self.replicas.add(info.name, i, plog)

    def delete_topic(self, name: str) -> TopicInfo:
        info = self.metadata.delete_topic(name)
        for i in range(info.num_partitions):
            self.replicas.remove(name, i)
            self.log_manager.delete(name, i)
        log.info("deleted topic %s", name)
        return info

    def add_partitions(self, name: str, count: int, assignments: list[list[int]] | None = None) -> None:
        """Grow topic ``name`` to ``count`` partitions; ``assignments`` (CreatePartitions
        ``Assignments``): one replica list per new partition, here only ``[this node id]``.

        Raises:
            KafkaError: INVALID_PARTITIONS, INVALID_REPLICA_ASSIGNMENT.
        """
        if assignments is not None:
            me = [self.config.node_id]
            manual_partition_assignments(assignments, self.metadata.topics[name].num_partitions, count, 1, me, me)
        info = self.metadata.topics[name]
        self.metadata.check_new_partition_count(name, count)
        self._with_new_logs(name, range(info.num_partitions, count), self.log_config_for(info),
                            lambda: self.metadata.set_partitions(name, count))

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        self.validate_topic_configs(configs)
        self.metadata.set_configs(name, configs)
        info = self.metadata.topics[name]
        cfg = self.log_config_for(info)
        for i in range(info.num_partitions):
            p = self.replicas.get(name, i)
            if p is not None:
                p.log.update_config(cfg)

    # ------------------------------------------------------------ topics, either mode
    async def create_topic_async(self, name: str, num_partitions: int, replication_factor: int,
                                 configs: dict[str, str], internal: bool = False,
                                 assignments: list[tuple[int, list[int]]] | None = None,
                                 timeout_s: float | None = None) -> TopicInfo:
        """:meth:`create_topic` on a single broker; through the metadata leader in a cluster,
        waiting at most ``timeout_s`` seconds (CreateTopics ``timeout_ms``; None = the cluster's
        default) and raising REQUEST_TIMED_OUT after it (the same for the two methods below)."""
        if self.cluster is None:
            return self.create_topic(name, num_partitions, replication_factor, configs, internal, assignments)
        deadline = self.loop.time() + (timeout_s if timeout_s is not None else self.config.request_timeout_ms / 1000)
        await self.cluster.admin("create_topic", timeout_s=timeout_s, name=name, num_partitions=num_partitions,
                                 replication_factor=replication_factor, configs=configs, internal=internal,
                                 assignments=[[i, list(ids)] for i, ids in assignments] if assignments else None)
        info = self.metadata.topics[name]
        await self._wait_partition_leaders(name, info.num_partitions, deadline)
        return info

    async def _wait_partition_leaders(self, name: str, num_partitions: int, deadline: float) -> None:
        """Until this broker knows a leader of every partition of ``name``, at most until
        ``deadline`` (loop time). Kafka's controller names the leaders in the records that
        create a topic, so a client may use the topic the moment CreateTopics answers; here the
        partitions' Raft groups elect them just after, and answering before they are known made
        an immediate Metadata/ListOffsets fail. The topic exists either way: on timeout the
        answer is still success (leaders then show as LEADER_NOT_AVAILABLE, which clients retry)."""
        delay_s = 0.002
        while True:
            if all(self.cluster.leader_of(name, i)[0] >= 0 for i in range(num_partitions)):
                return
            remaining = deadline - self.loop.time()
            if remaining <= 0 or name not in self.metadata.topics:
                return
            await asyncio.sleep(min(delay_s, remaining))
            delay_s = min(delay_s * 2, limits.ADMIN_RETRY_BACKOFF_MS / 1000)

    async def delete_topic_async(self, name: str, timeout_s: float | None = None) -> TopicInfo:
        if self.cluster is None:
            return self.delete_topic(name)
        info = self.metadata.topics.get(name)
        await self.cluster.admin("delete_topic", timeout_s=timeout_s, name=name)
        return info

    async def add_partitions_async(self, name: str, count: int, assignments: list[list[int]] | None = None,
                                   timeout_s: float | None = None) -> None:
        if self.cluster is None:
            return self.add_partitions(name, count, assignments)
        await self.cluster.admin("create_partitions", timeout_s=timeout_s, name=name, count=count,
                                 assignments=[list(ids) for ids in assignments] if assignments is not None else None)

    async def set_topic_configs_async(self, name: str, configs: dict[str, str]) -> None:
        if self.cluster is None:
            return self.set_topic_configs(name, configs)
        self.validate_topic_configs(configs)
        await self.cluster.admin("set_configs", name=name, configs=configs)

    async def allocate_producer_id(self) -> int:
        if self.cluster is None:
            return self.metadata.allocate_producer_id()
        return await self.cluster.allocate_producer_id()

    async def verify_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                 topic: str, index: int) -> int:
        """KIP-890 part 1: may ``producer_id``/``producer_epoch`` write transactional records to
        ``topic``-``index``? NONE when its transaction already started there (the partition's
        producer state says so) or when the transaction coordinator, wherever it is, has the
        partition in the ongoing transaction; otherwise the coordinator's error
        (INVALID_TXN_STATE, PRODUCER_FENCED, INVALID_PRODUCER_ID_MAPPING, CONCURRENT_TRANSACTIONS,
        NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, ...)."""
        p = self.replicas.get(topic, index)
        if p is not None:
            entry = p.log.producer_state.entry(producer_id)
            if entry is not None and entry.epoch == producer_epoch and entry.current_txn_first_offset is not None:
                return ErrorCode.NONE
        if not transactional_id:
            return ErrorCode.INVALID_TXN_STATE
        tc = self.txn_coordinator
        err = tc.coordinator_error(transactional_id)
        if err == ErrorCode.NONE:
            return tc.verify(transactional_id, producer_id, producer_epoch, {topic: {index}})
        if self.cluster is None or err != ErrorCode.NOT_COORDINATOR:
            return err
        from litemq.coordinator.transaction import TXN_TOPIC

        leader, _ = self.cluster.leader_of(TXN_TOPIC, tc.partition_for(transactional_id))
        if leader < 0 or leader == self.config.node_id:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        req = {"op": "verify_txn", "transactional_id": transactional_id, "producer_id": producer_id,
               "producer_epoch": producer_epoch, "topic": topic, "partition": index}
        try:
            res = await self.cluster.transport.rpc(leader, req, self.config.request_timeout_ms / 1000)
        except (ConnectionError, asyncio.TimeoutError, OSError):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return int(res.get("error", ErrorCode.COORDINATOR_NOT_AVAILABLE))

    def maybe_auto_create(self, name: str) -> TopicInfo | None:
        """Auto-create ``name`` if ``auto.create.topics.enable``; None when not allowed."""
        if not self.config.auto_create_topics_enable:
            return None
        validate_topic_name(name)  # INVALID_TOPIC_EXCEPTION now, as Kafka's auto-creation answers
        if self.cluster is not None:
            self.cluster.auto_create(name)  # in the background; Kafka answers LEADER_NOT_AVAILABLE meanwhile
            return None
        return self.create_topic(name, -1, -1, {})

    def partition(self, topic: str, index: int) -> Partition:
        return self.replicas.require(topic, index)

    # ------------------------------------------------------------ cluster view
    def live_broker_count(self) -> int:
        if self.cluster is not None:
            return len(self.cluster.live_broker_endpoints())
        return 1

    def registered_broker_ids(self) -> list[int]:
        """Node ids of the cluster's registered brokers (live or not); ``[node_id]`` alone."""
        if self.cluster is not None:
            return sorted(self.metadata.brokers)
        return [self.config.node_id]

    def leader_partition(self, topic: str, index: int) -> tuple[Partition | None, int]:
        """(partition, NONE) when this broker leads ``topic``-``index``, else (None, error):
        NOT_LEADER_OR_FOLLOWER when another broker of the cluster hosts it (the topic is known),
        UNKNOWN_TOPIC_OR_PARTITION otherwise."""
        p = self.replicas.get(topic, index)
        if p is None:
            if self.cluster is not None and topic in self.metadata.topics:
                return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
            return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not p.is_leader:
            return None, ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p, ErrorCode.NONE

    def advertised_endpoints(self) -> dict[str, tuple[str, int]]:
        """Listener name -> (host, port) clients are told for this broker (``advertised.listeners``,
        else ``listeners``), in configuration order; port 0 is replaced by the bound port."""
        return {name: (host, port or self.ports.get(name, 0)) for name, (host, port) in self._advertised.items()}

    def advertised(self, listener_name: str | None = None) -> tuple[str, int]:
        """(host, port) clients are told to use for this broker on ``listener_name`` (the first
        advertised listener when None).

        Raises:
            KeyError: ``listener_name`` is not an advertised listener.
        """
        endpoints = self.advertised_endpoints()
        if listener_name is None:
            return next(iter(endpoints.values()))
        return endpoints[listener_name]

    def brokers(self, listener_name: str | None = None) -> list[tuple[int, str, int]]:
        """(node_id, host, port) of every live broker as advertised on ``listener_name`` (Kafka
        answers Metadata with the endpoints of the listener the request came in on; a broker
        without that listener is left out). None: every live broker's default endpoint."""
        if self.cluster is not None:
            return self.cluster.live_broker_endpoints(listener_name)
        endpoints = self.advertised_endpoints()
        if listener_name is None:
            return [(self.config.node_id, *next(iter(endpoints.values())))]
        ep = endpoints.get(listener_name)
        return [] if ep is None else [(self.config.node_id, *ep)]

    def rack_of(self, node_id: int) -> str | None:
        """The ``broker.rack`` of broker ``node_id`` (KIP-392): this broker's from its config,
        another's as it registered it in the cluster metadata; None when it has none or is
        unknown."""
        if node_id == self.config.node_id:
            return self.config.broker_rack
        if self.cluster is None:
            return None
        b = self.metadata.brokers.get(node_id)
        return b.rack if b is not None else None

    def controller_id(self) -> int:
        """The metadata leader in a cluster (Kafka's active controller) when clients can reach
        it, else this broker (see ``ClusterManager.controller_id``); this node otherwise."""
        if self.cluster is not None:
            return self.cluster.controller_id()
        return self.config.node_id
