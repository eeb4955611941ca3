"""Partitions hosted by this broker: append, read, high watermark, grouped fsync, waiters.

One :class:`Partition` wraps one :class:`~litemq.storage.log.PartitionLog`. The high watermark
is the offset below which records are committed and visible to consumers:

- durable topics (``flush.messages`` unset, LiteMQ's default): the high watermark is the
  offset up to which the log is fsynced. Appends schedule one flush in a worker thread; the
  flush covers every append issued before it (group commit) and, when it completes, the high
  watermark moves and every waiter whose offset it passed is woken. With Raft (issue 7) this
  becomes the commit index.
- non-durable topics (``flush.messages`` set): the high watermark is the log end offset;
  fsync follows Kafka's ``flush.messages`` / ``flush.ms`` policy.

Waiters (``acks=all`` produce, long-poll fetch) are futures keyed by an offset; nothing polls.
This module runs on the broker's event-loop thread; only ``flush`` runs elsewhere, on the
broker's fsync thread (:class:`~litemq.replica.sync_queue.SyncQueue`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor
from typing import Protocol

from litemq.protocol.errors import ErrorCode, KafkaError, KafkaStorageError
from litemq.replica.sync_queue import SyncQueue
from litemq.storage.log import AppendInfo, AppendOrigin, PartitionLog
from litemq.storage.producer_state import VerificationGuard

log = logging.getLogger(__name__)


class Partition:
    """One hosted partition: its log, high watermark and the futures waiting on it."""

    __slots__ = ("topic", "index", "log", "high_watermark", "leader_epoch", "_waiters",
                 "_flush_running", "_manager", "_offline")

    def __init__(self, topic: str, index: int, plog: PartitionLog, manager: "ReplicaManager") -> None:
        self.topic = topic
        self.index = index
        self.log = plog
        self.leader_epoch = 0
        self._manager = manager
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self._flush_running = False
        self._offline = False
        # Everything on disk at open time passed recovery: it is committed.
        self.high_watermark = plog.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    is_leader = True
    """A single broker leads every partition it hosts (ReplicatedPartition overrides this)."""

    is_follower = False
    """A follower replica that serves consumer fetches (KIP-392); ReplicatedPartition overrides this."""

    leader_ready = True
    """This replica leads and every record written before its leadership began is below the high
    watermark, so a coordinator may load its state from it (a single broker: always;
    ReplicatedPartition: once its Raft term's first entry is committed)."""

    leadership_current = True
    """This replica leads and may act on what it leads *now* (Raft thesis §6.4.1, the leader
    lease): a single broker always; ReplicatedPartition: a quorum of its voters acknowledged its
    term within an election timeout (see ``RaftGroup.lease_current``). A coordinator that is not
    current defers its timers and answers NOT_COORDINATOR rather than acting on state a newer
    leader may have moved past."""

    def renew_leadership(self) -> None:
        """Ask the followers to acknowledge this leader again (a replicated partition wakes its
        quiet Raft group so it heartbeats); nothing on a single broker."""

    async def confirm_leadership(self) -> bool:
        """Whether :attr:`leadership_current` holds, waiting for it (bounded by one election
        timeout in a cluster) when it does not yet; False when this replica does not lead."""
        return self.is_leader

    def in_sync_follower_log_ends(self) -> dict[int, int]:
        """As the leader: node id -> log end offset (log offsets) of each in-sync follower, the
        candidates for a consumer's preferred read replica (KIP-392). None on a single broker."""
        return {}

    def in_sync_count(self) -> int:
        """Replicas in sync (min.insync.replicas check of acks=all): 1 on a single broker."""
        return 1

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    # ------------------------------------------------------------------ append
    def append(self, records: bytearray, origin: AppendOrigin = AppendOrigin.CLIENT,
               verification_guard: VerificationGuard | None = None) -> AppendInfo:
        """Append a produced records blob (or, ``origin=COORDINATOR``, a transaction marker) as
        leader; schedule the flush that commits it. ``verification_guard``: the KIP-890 guard a
        transactional batch starting a transaction must present
        (:meth:`PartitionLog.maybe_start_transaction_verification`).

        Raises:
            KafkaError: the storage's validation errors (CORRUPT_MESSAGE, INVALID_RECORD,
                MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_TXN_STATE, ...),
                KAFKA_STORAGE_ERROR.
        """
        if self._offline:
            raise KafkaStorageError(f"{self.topic}-{self.index} is offline after a storage error")
        info = self.log.append(records, leader_epoch=self.leader_epoch, origin=origin,
                               verification_guard=verification_guard)
        if not info.duplicate:
            self._after_append()
        return info

    def _after_append(self) -> None:
        cfg = self.log.config
        if cfg.durable:
            self._schedule_flush()
            return
        self._advance_high_watermark(self.log.log_end_offset)
        if self.log.flush_due(int(time.time() * 1000)):
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush_running:
            return  # the running flush reschedules itself if more was appended meanwhile
        self._flush_running = True
        target = self.log.log_end_offset
        plog = self.log
        SyncQueue.of(self._manager.loop).submit(lambda: timed_flush(plog),
                                                lambda took, exc: self._flush_done(took, exc, target))

    def _flush_done(self, took: float | None, exc: BaseException | None, target: int) -> None:
        self._flush_running = False
        if exc is not None:
            log.error("fsync of %s-%d failed: %s; partition goes offline", self.topic, self.index, exc)
            self._offline = True
            self._fail_waiters(KafkaStorageError(f"fsync failed: {exc}"))
            return
        if self._manager.metrics is not None:
            self._manager.metrics.on_flush(took)
        if self.log.config.durable:
            self._advance_high_watermark(target)
            if self.log.log_end_offset > target:
                self._schedule_flush()

    def _advance_high_watermark(self, offset: int) -> None:
        if offset <= self.high_watermark:
            return
        self.high_watermark = offset
        if not self._waiters:
            return
        keep = []
        for target, fut in self._waiters:
            if fut.done():
                continue
            if target <= offset:
                fut.set_result(offset)
            else:
                keep.append((target, fut))
        self._waiters = keep

    def _fail_waiters(self, exc: BaseException) -> None:
        for _, fut in self._waiters:
            if not fut.done():
                fut.set_exception(exc)
                fut.exception()  # awaiters still get it; an abandoned long-poll future logs nothing
        self._waiters = []

    # ------------------------------------------------------------------ waiting
    def waiter(self, offset: int) -> asyncio.Future:
        """A future completed (with the new high watermark) once the high watermark >= offset."""
        fut = self._manager.loop.create_future()
        self.watch(offset, fut)
        return fut

    def watch(self, offset: int, fut: asyncio.Future) -> None:
        """Complete ``fut`` (with the new high watermark) once the high watermark >= offset,
        unless it is done by then: one future may watch many partitions (a long-poll Fetch)."""
        if self.high_watermark >= offset:
            if not fut.done():
                fut.set_result(self.high_watermark)
            return
        if len(self._waiters) >= 256:  # drop futures of fetches that already timed out
            self._waiters = [w for w in self._waiters if not w[1].done()]
        self._waiters.append((offset, fut))

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: the high watermark, or the first offset of the oldest transaction that
        is not yet decided (or whose marker is not yet committed), whichever is lower."""
        return self.log.last_stable_offset(self.high_watermark)

    def truncate_after_delete_records(self) -> None:
        """Keep the high watermark >= log start offset after DeleteRecords/retention."""
        if self.high_watermark < self.log.log_start_offset:
            self._advance_high_watermark(self.log.log_start_offset)

    @property
    def low_watermark(self) -> int:
        """Kafka's ``Partition.lowWatermarkIfLeader`` (log offsets): the lowest log start offset
        of the leader and of its followers on live brokers, what DeleteRecords answers (KIP-107).
        A single broker has no followers: its own log start offset. ReplicatedPartition
        overrides this."""
        return self.log.log_start_offset

    def low_watermark_waiter(self, offset: int) -> asyncio.Future:
        """DeleteRecords (Kafka's ``DelayedDeleteRecords``): a future completed with
        :attr:`low_watermark` (log offsets) once it is >= ``offset``; on a single broker at
        once. ReplicatedPartition overrides this (it fails the future with KafkaError
        NOT_LEADER_OR_FOLLOWER when this replica stops leading). The caller bounds the wait
        and cancels the future when it gives up."""
        fut = self._manager.loop.create_future()
        fut.set_result(self.low_watermark)
        return fut

    # ------------------------------------------------------------------ Kafka offsets
    # The attributes above are log offsets (a replicated partition's Raft offsets, which its
    # waiters, Raft and storage use); what a client sees goes through these (issue 19; the
    # identity on a single broker).
    def kafka_offset(self, log_offset: int) -> int:
        """The Kafka offset of log offset ``log_offset`` (for a Raft-internal one, of the next
        record); see :class:`~litemq.storage.offset_translator.OffsetTranslator`."""
        return self.log.translator.kafka_offset(log_offset)

    def log_offset(self, kafka_offset: int) -> int:
        """The log offset of the record at Kafka offset ``kafka_offset`` (the log end offset for
        the Kafka log end offset)."""
        return self.log.translator.raft_offset(kafka_offset)

    @property
    def kafka_high_watermark(self) -> int:
        return self.log.translator.kafka_offset(self.high_watermark)

    @property
    def kafka_log_start_offset(self) -> int:
        return self.log.translator.kafka_offset(self.log.log_start_offset)

    @property
    def kafka_log_end_offset(self) -> int:
        return self.log.translator.kafka_offset(self.log.log_end_offset)

    @property
    def kafka_last_stable_offset(self) -> int:
        return self.log.translator.kafka_offset(self.last_stable_offset)

    def check_leader_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320 fencing: compare the client's known leader epoch with ours (-1 = unknown)."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.NONE
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.UNKNOWN_LEADER_EPOCH


def timed_flush(plog: PartitionLog) -> float:
    """``plog.flush()`` (in a worker thread); returns the seconds it took (log flush metrics)."""
    started = time.perf_counter()
    plog.flush()
    return time.perf_counter() - started


class FlushObserver(Protocol):
    """Receives the duration of every partition fsync (the broker passes its metrics)."""

    def on_flush(self, seconds: float) -> None: ...


class ReplicaManager:
    """The partitions this broker hosts, keyed by (topic, partition index).

    ``metrics`` (a :class:`FlushObserver`, the runtime's ``litemq.metrics.BrokerMetrics``, set by
    the runtime) receives flush times.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, executor: Executor) -> None:
        self.loop = loop
        self.executor = executor
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.metrics: FlushObserver | None = None

    def add_partition(self, p: Partition) -> Partition:
        self.partitions[(p.topic, p.index)] = p
        return p

    def add(self, topic: str, index: int, plog: PartitionLog) -> Partition:
        p = Partition(topic, index, plog, self)
        self.partitions[(topic, index)] = p
        return p

    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    def require(self, topic: str, index: int) -> Partition:
        """The partition, or KafkaError(UNKNOWN_TOPIC_OR_PARTITION)."""
        p = self.partitions.get((topic, index))
        if p is None:
            raise KafkaError(f"unknown partition {topic}-{index}", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        return p

    def remove(self, topic: str, index: int) -> Partition | None:
        p = self.partitions.pop((topic, index), None)
        if p is not None:
            p._fail_waiters(KafkaError("partition deleted", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        return p

    async def wait_any(self, futures: list[asyncio.Future], timeout_s: float) -> None:
        """Wait until any future completes or ``timeout_s`` passes (long-poll fetch)."""
        if timeout_s <= 0 or not futures:
            return
        try:
            await asyncio.wait(futures, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for f in futures:
                if not f.done():
                    f.cancel()
