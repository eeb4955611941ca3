"""The broker's side of :class:`litemq.coordinator.host.CoordinatorHost`: what the group and
transaction coordinators may use of a :class:`~litemq.broker.broker.BrokerRuntime`, and nothing
more (the coordinators never see the runtime itself). What this module itself uses of the runtime
is :class:`CoordinatorRuntime`, declared here so it does not import ``broker.py``, which imports it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from litemq.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from litemq.cluster.manager import ClusterManager
    from litemq.config import BrokerConfig
    from litemq.coordinator.host import TopicPartitions
    from litemq.replica import Partition, ReplicaManager


class CoordinatorRuntime(Protocol):
    """What :class:`BrokerCoordinatorHost` uses of the broker runtime
    (:class:`~litemq.broker.broker.BrokerRuntime` satisfies it structurally)."""

    config: BrokerConfig
    loop: asyncio.AbstractEventLoop | None
    cluster: ClusterManager | None
    """The replicated cluster's manager; None on a single broker."""
    replicas: ReplicaManager | None
    coordinator: Any
    """The group coordinator (``complete_txn(index, producer_id, commit)``), None until started."""

    @property
    def metadata(self) -> Any:
        """Topics by name (``metadata.topics``): ClusterMetadata, or the cluster's MetadataImage."""

    def live_broker_count(self) -> int:
        """Brokers alive now (1 on a single broker)."""

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], internal: bool = False) -> TopicPartitions:
        """Create a topic on a single broker; KafkaError TOPIC_ALREADY_EXISTS if it exists."""

    async def allocate_producer_id(self) -> int:
        """A new producer id (from the metadata leader's block in a cluster)."""

    async def verify_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                 topic: str, index: int) -> int:
        """KIP-890 part 1 verification of a transactional write; an error code (0 = NONE)."""


class BrokerCoordinatorHost:
    """Implements :class:`~litemq.coordinator.host.CoordinatorHost` over one broker runtime
    (see that protocol for each member's contract). Event-loop thread only."""

    __slots__ = ("_runtime", "config")

    def __init__(self, runtime: CoordinatorRuntime) -> None:
        self._runtime = runtime
        self.config = runtime.config

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._runtime.loop

    @property
    def clustered(self) -> bool:
        return self._runtime.cluster is not None

    def topic(self, name: str) -> "TopicPartitions | None":
        return self._runtime.metadata.topics.get(name)

    def topics(self) -> "Mapping[str, TopicPartitions]":
        return self._runtime.metadata.topics

    def partition(self, topic: str, index: int) -> "Partition | None":
        return self._runtime.replicas.get(topic, index)

    def ensure_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                              segment_bytes: int) -> "TopicPartitions":
        runtime = self._runtime
        info = runtime.metadata.topics.get(name)
        if info is not None:
            return info
        configs = {"cleanup.policy": "compact", "segment.bytes": str(segment_bytes)}
        if runtime.cluster is not None:  # the metadata leader caps the factor at its live brokers
            runtime.cluster.auto_create(name, num_partitions, replication_factor, configs, internal=True)
            raise KafkaError(f"{name} is being created", ErrorCode.COORDINATOR_NOT_AVAILABLE)
        rf = min(replication_factor, runtime.live_broker_count())
        try:
            return runtime.create_topic(name, num_partitions, rf, configs, internal=True)
        except KafkaError as exc:
            if exc.code != ErrorCode.TOPIC_ALREADY_EXISTS:
                raise
            return runtime.metadata.topics[name]

    def partition_leader(self, topic: str, index: int) -> int:
        cluster = self._runtime.cluster
        if cluster is None:
            return self.config.node_id
        return cluster.leader_of(topic, index)[0]

    async def rpc(self, node_id: int, request: dict, timeout_s: float) -> dict:
        return await self._runtime.cluster.transport.rpc(node_id, request, timeout_s)

    async def allocate_producer_id(self) -> int:
        return await self._runtime.allocate_producer_id()

    async def verify_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                 topic: str, index: int) -> int:
        return await self._runtime.verify_transaction(transactional_id, producer_id, producer_epoch, topic, index)

    def complete_txn_offsets(self, index: int, producer_id: int, commit: bool) -> None:
        coordinator = self._runtime.coordinator
        if coordinator is not None:
            coordinator.complete_txn(index, producer_id, commit)
