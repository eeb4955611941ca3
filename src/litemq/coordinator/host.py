"""What the group and transaction coordinators need from the broker that hosts them.

The coordinators sit below ``broker/`` and never import it: the broker passes in an object
that has the members of :class:`CoordinatorHost` (``litemq.broker.coordinator_host``), so a
coordinator can be read, and driven, with nothing else in view. Everything here runs on the
broker's event-loop thread.

Source: the seams of Kafka's ``group-coordinator`` module (``CoordinatorRuntime`` appends to,
replays and leads the internal ``__consumer_offsets``/``__transaction_state`` partitions;
``ProducerIdManager`` allocates producer ids; ``AddPartitionsToTxnManager`` verifies a
transaction, KIP-890).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from litemq.config import BrokerConfig
    from litemq.replica import Partition


class TopicPartitions(Protocol):
    """A topic as the coordinators see it: its id (``uuid.UUID``), partition count, and whether
    it is internal."""

    topic_id: uuid.UUID
    num_partitions: int
    internal: bool


class CoordinatorHost(Protocol):
    """The broker services a coordinator uses (implemented by ``litemq.broker.coordinator_host``).

    Attributes:
        config: the broker's :class:`~litemq.config.BrokerConfig` (``offsets.*``,
            ``transaction.*`` settings, ``node.id``, ``request.timeout.ms``).
        loop: the broker's running event loop (timers, background stores).
        clustered: True with ``--peers`` (Raft-replicated partitions: a coordinator loads its
            groups on leadership, not at start).
    """

    config: "BrokerConfig"

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def clustered(self) -> bool: ...

    def topic(self, name: str) -> TopicPartitions | None:
        """The topic ``name`` as the metadata knows it now, or None."""

    def topics(self) -> Mapping[str, TopicPartitions]:
        """Every topic by name as the metadata knows it now (KIP-848 regex subscriptions, topic ids)."""

    def partition(self, topic: str, index: int) -> "Partition | None":
        """The hosted replica of ``topic``-``index`` (leader or follower), or None."""

    def ensure_internal_topic(self, name: str, num_partitions: int, replication_factor: int,
                              segment_bytes: int) -> TopicPartitions:
        """Internal compacted topic ``name`` (``__consumer_offsets``, ``__transaction_state``),
        created on first use with ``num_partitions`` partitions, ``segment.bytes`` =
        ``segment_bytes`` and ``min(replication_factor, live brokers)`` replicas.

        Raises:
            KafkaError(COORDINATOR_NOT_AVAILABLE): in a cluster, while the metadata leader
                creates it (clients retry); the creation errors of a single broker otherwise.
        """

    def partition_leader(self, topic: str, index: int) -> int:
        """Node id of the leader of ``topic``-``index`` as this broker knows it (this node on a
        single broker); -1 when no live leader is known."""

    async def rpc(self, node_id: int, request: dict, timeout_s: float) -> dict:
        """Send a broker-to-broker RPC (ops ``write_txn_markers``, ``verify_txn``) and return
        its answer.

        Raises:
            ConnectionError, asyncio.TimeoutError, OSError: the broker could not be reached in time.
        """

    async def allocate_producer_id(self) -> int:
        """A new producer id (from the metadata's producer-id blocks in a cluster).

        Raises:
            KafkaError: no producer id could be allocated (COORDINATOR_LOAD_IN_PROGRESS, ...).
        """

    async def verify_transaction(self, transactional_id: str | None, producer_id: int, producer_epoch: int,
                                 topic: str, index: int) -> int:
        """KIP-890 verification of a transactional write to ``topic``-``index``: an error code
        (NONE when the partition is in the producer's ongoing transaction)."""

    def complete_txn_offsets(self, index: int, producer_id: int, commit: bool) -> None:
        """A COMMIT (``commit``) or ABORT marker of ``producer_id`` was committed in
        ``__consumer_offsets`` partition ``index``: the group coordinator makes that
        transaction's pending offsets visible or drops them."""
