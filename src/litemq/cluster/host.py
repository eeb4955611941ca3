"""What the cluster manager needs from the broker that runs it.

``cluster/`` sits below ``broker/`` and never imports it: the broker passes in an object with
the members of :class:`ClusterHost` (the :class:`~litemq.broker.broker.BrokerRuntime` itself),
so the cluster manager sees the log manager, the replica registry, the topic-config rules, the
advertised endpoints and one leadership callback, and nothing else of the broker. Event-loop
thread only (``executor`` runs blocking log work).
"""

from __future__ import annotations

from concurrent.futures import Executor
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from litemq.config import BrokerConfig
    from litemq.replica import ReplicaManager
    from litemq.storage.config import LogConfig
    from litemq.storage.manager import LogManager
    from litemq.storage.meta_properties import DataDirIdentity


class TopicConfigs(Protocol):
    """A topic as the log config needs it: its dynamic configs (Kafka names -> values)."""

    configs: dict[str, str]


class RaftObserver(Protocol):
    """Receives what the Raft groups of this broker report (the broker passes its metrics)."""

    def on_flush(self, seconds: float) -> None:
        """One fsync of a group's log took ``seconds``."""

    def on_raft_soft_state(self, group_type: str, old_role: str | None, old_leader: int | None,
                           role: str, leader: int | None) -> None:
        """A group's role or known leader changed (``group_type``: ``metadata`` or ``partition``)."""


class ClusterHost(Protocol):
    """The broker services :class:`~litemq.cluster.manager.ClusterManager` uses.

    Attributes:
        config: the broker's :class:`~litemq.config.BrokerConfig` (node id, peers, Raft timings).
        executor: the broker's thread pool for blocking log work (fsync, snapshots).
        default_log_config: the broker-wide :class:`~litemq.storage.config.LogConfig` defaults.
        log_manager: the data dir's :class:`~litemq.storage.manager.LogManager` (open, create and
            delete partition logs).
        replicas: the :class:`~litemq.replica.ReplicaManager` registry of hosted partitions (set
            at start, before :meth:`ClusterManager.start`); the manager adds and removes its
            ``ReplicatedPartition`` s there.
        metrics: the :class:`RaftObserver` of fsync times and Raft role changes (the broker's
            ``BrokerMetrics``).
        identity: the data dir's ``meta.properties`` (cluster id once known, node id, directory
            id): the manager stores the cluster id when it learns it and sends the directory id
            with its heartbeats (``register_broker`` records it).
    """

    config: "BrokerConfig"
    executor: Executor
    default_log_config: "LogConfig"
    log_manager: "LogManager"
    replicas: "ReplicaManager | None"
    metrics: RaftObserver
    identity: "DataDirIdentity"

    def log_config_for(self, info: TopicConfigs) -> "LogConfig":
        """The log config of a topic: broker defaults overlaid with its dynamic configs."""

    def validate_topic_configs(self, configs: dict[str, str]) -> None:
        """Raises KafkaError(INVALID_CONFIG) naming the bad key (log and broker topic configs)."""

    def validate_broker_configs(self, resource: str, configs: dict[str, str]) -> None:
        """Raises KafkaError (INVALID_REQUEST, INVALID_CONFIG) for a bad new set of dynamic
        configs of broker resource ``resource`` (a node id, or "" for the cluster-wide default)."""

    def on_broker_configs_changed(self) -> None:
        """The image's dynamic broker configs changed (a record, a snapshot, the replay at
        start): apply them (broker settings, topic config defaults of every hosted partition)."""

    def fail(self, reason: str) -> None:
        """The broker cannot go on (its data dir belongs to another cluster): stop it, exit 1."""

    def advertised(self, listener_name: str | None = None) -> tuple[str, int]:
        """(host, port) clients are told for this broker on ``listener_name`` (default listener
        when None). Raises KeyError for a listener it does not advertise."""

    def advertised_endpoints(self) -> dict[str, tuple[str, int]]:
        """Listener name -> (host, port) this broker advertises, in configuration order."""

    def on_partition_leader(self, topic: str, index: int, leader: bool) -> None:
        """This broker became leader of ``topic``-``index`` with everything before its term
        committed (``leader``), or stopped leading it: the coordinators load or unload the
        internal partitions they own (Kafka ``onElection``/``onResignation``)."""
