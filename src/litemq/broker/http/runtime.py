"""What the HTTP layer (``/metrics``, console, REST API, in-process Kafka calls) uses of the
broker runtime: :class:`HttpRuntime`.

:class:`~litemq.broker.broker.BrokerRuntime` satisfies it structurally and passes itself in
(``HttpServer(runtime)``). Declared in this package so nothing here imports ``broker.py``, the
composition root that imports the HTTP layer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from concurrent.futures import ThreadPoolExecutor

    from litemq.cluster.manager import ClusterManager
    from litemq.config import BrokerConfig, ListenerSpec
    from litemq.metrics import BrokerMetrics
    from litemq.replica import ReplicaManager


class HttpRuntime(Protocol):
    """The broker state and queries the HTTP layer reads (and hands to the Kafka handlers it runs
    in process, through a :class:`~litemq.broker.context.RequestContext`)."""

    config: BrokerConfig
    """``http.listen``, ``node.id``, ``request.timeout.ms``, the SASL/PLAIN users of Basic auth."""
    listeners: list[ListenerSpec]
    """The configured listeners; the first names the endpoints HTTP answers show."""
    cluster: ClusterManager | None
    """The replicated cluster (leaders, peer RPC: ``transport.rpc``, ``rpc_ops``, the metadata
    quorum's voters: ``meta.node.voters``); None on a single broker."""
    replicas: ReplicaManager | None
    """The hosted partitions (``get(topic, index)``)."""
    coordinator: Any
    """The group coordinator (``coordinator_of``/group state for lag), None until started."""
    authorizer: Any
    """The ACL authorizer the access checks ask, None when every request is allowed."""
    metrics: BrokerMetrics
    """Prometheus registry: ``render``, ``on_http``, ``throughput``, ``group_lag``, ``start``/``stop``."""
    executor: ThreadPoolExecutor
    """Thread pool for blocking work (the password hash checks of Basic auth)."""
    handlers: dict[int, Callable[..., Any]]
    """api_key -> handler(ctx, request): run in process for REST and console requests."""

    @property
    def metadata(self) -> Any:
        """Topics, brokers, SCRAM credentials: ClusterMetadata, or the cluster's MetadataImage."""

    def controller_id(self) -> int:
        """The active controller's node id (Metadata's ``controller_id``)."""

    def brokers(self, listener_name: str | None = None) -> list[tuple[int, str, int]]:
        """(node id, host, port) of every live broker as advertised on ``listener_name`` (each one's
        default endpoint when None)."""

    def advertised(self, listener_name: str | None = None) -> tuple[str, int]:
        """This broker's advertised (host, port) on ``listener_name`` (the first when None); KeyError
        when it has no such listener."""

    def rack_of(self, node_id: int) -> str | None:
        """The ``broker.rack`` of broker ``node_id`` (None: none, or unknown)."""

    def registered_broker_ids(self) -> list[int]:
        """Node ids of the cluster's registered brokers (live or not), sorted; ``[node_id]`` alone."""
