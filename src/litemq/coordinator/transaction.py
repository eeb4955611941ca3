"""The transaction coordinator (KIP-98, KIP-447, KIP-360, KIP-890 part 1 verification).

Kafka ``TransactionCoordinator`` + ``TransactionStateManager`` + ``TransactionMarkerChannelManager``
on the broker's event loop. A transactional id's coordinator is the leader of its
``__transaction_state`` partition (``abs(java hashCode(id)) % partitions``); its state
(:class:`TransactionMetadata`) is written there (formats in
:mod:`litemq.coordinator.txn_records`) and a change is answered only once committed (fsynced;
with replication, the Raft commit index), so a coordinator elected after a crash resumes every
transaction exactly where the log says it was.

State machine (Kafka ``TransactionState``)::

    Empty/CompleteCommit/CompleteAbort --AddPartitionsToTxn/AddOffsetsToTxn--> Ongoing
    Ongoing --EndTxn(commit)--> PrepareCommit --markers written--> CompleteCommit
    Ongoing --EndTxn(abort) / timeout / InitProducerId fence--> PrepareAbort --markers--> CompleteAbort
    Empty/Complete* --InitProducerId--> Empty with epoch + 1 (or a new producer id when exhausted)

Markers: for every partition of a transaction the coordinator asks the partition's leader to
append a COMMIT or ABORT control batch (locally, or through the broker-to-broker RPC in a
cluster; :meth:`write_markers_local` is also what the WriteTxnMarkers API runs), retrying until
each is committed; only then is Complete* written. On load, transactions found in Prepare*
have their markers sent again (idempotent for the reader: a second marker of a finished
transaction completes nothing). Ongoing transactions stay ongoing and are aborted by the
timeout if their producer does not come back, so nothing is ever half visible.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from litemq import limits
from litemq.coordinator.internal_topic import append_committed, replay_latest
from litemq.coordinator.records import FormatError, partition_for
from litemq.coordinator.txn_records import (TxnLogValue, TxnState, decode_txn_key, decode_txn_value,
                                            encode_txn_key, encode_txn_value)
from litemq.protocol.errors import ErrorCode as E
from litemq.protocol.errors import KafkaError
from litemq.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_batch, build_control_batch
from litemq.storage.log import AppendOrigin

if TYPE_CHECKING:
    from litemq.coordinator.host import CoordinatorHost

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
TXN_TOPIC_SEGMENT_BYTES = 100 * 1024 * 1024
"""Kafka's ``transaction.state.log.segment.bytes`` default."""
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32767
_MARKER_RETRY_BACKOFF_S = (0.05, 1.0)


def _now_ms() -> int:
    return int(time.time() * 1000)


def epoch_exhausted(epoch: int) -> bool:
    """Kafka ``TransactionMetadata.isEpochExhausted``: one epoch is kept for fencing."""
    return epoch >= MAX_PRODUCER_EPOCH - 1


@dataclass(slots=True)
class TransactionMetadata:
    """One transactional id (Kafka ``TransactionMetadata``). Times in ms since the epoch."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    txn_timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: dict[str, set[int]] = field(default_factory=dict)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    pending: bool = False
    """A state write or a marker round is in flight: other requests get CONCURRENT_TRANSACTIONS."""
    next_txn_refused: bool = False
    """An AddPartitionsToTxn/AddOffsetsToTxn got CONCURRENT_TRANSACTIONS while the previous
    transaction's markers were being written (Prepare*): the producer has begun its next
    transaction and the coordinator holds none of its partitions (see :meth:`end_txn`). In
    memory only; cleared when a transaction starts or the producer id/epoch changes."""

    def to_value(self, **changes: Any) -> TxnLogValue:
        v = TxnLogValue(self.producer_id, self.producer_epoch, self.txn_timeout_ms, self.state,
                        {t: set(ps) for t, ps in self.partitions.items()}, _now_ms(), self.start_ms)
        for k, val in changes.items():
            setattr(v, k, val)
        return v

    def apply(self, v: TxnLogValue) -> None:
        if v.producer_id != self.producer_id:
            self.last_producer_id = self.producer_id
        if (v.producer_id, v.producer_epoch) != (self.producer_id, self.producer_epoch) or v.state not in (
                TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            self.next_txn_refused = False
        self.producer_id, self.producer_epoch, self.txn_timeout_ms = v.producer_id, v.producer_epoch, v.txn_timeout_ms
        self.state, self.partitions, self.last_update_ms, self.start_ms = v.state, v.partitions, v.last_update_ms, v.start_ms

    def has_partitions(self, wanted: dict[str, set[int]]) -> bool:
        return all(ps <= self.partitions.get(t, set()) for t, ps in wanted.items())

    def partition_list(self) -> list[tuple[str, int]]:
        return sorted((t, p) for t, ps in self.partitions.items() for p in ps)


class TransactionCoordinator:
    """Every transactional id whose ``__transaction_state`` partition this broker leads."""

    def __init__(self, host: "CoordinatorHost") -> None:
        self.host = host
        self.config = host.config
        self.txns: dict[str, TransactionMetadata] = {}
        self.num_partitions = self.config.transaction_state_log_num_partitions
        self.loaded_partitions: set[int] = set()
        self._tasks: set[asyncio.Task] = set()
        self._stopped = False
        self._timer: asyncio.Task | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.host.loop

    # ================================================================== lifecycle
    def start(self) -> None:
        info = self.host.topic(TXN_TOPIC)
        if info is not None:
            self.num_partitions = info.num_partitions
            for i in range(info.num_partitions):
                p = self.host.partition(TXN_TOPIC, i)
                if not self.host.clustered:
                    self.on_leadership(i, True)
                elif p is not None and getattr(p, "_announced", False):
                    self.on_leadership(i, True)
        self._timer = self.loop.create_task(self._timer_loop())

    async def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for t in list(self._tasks):
            t.cancel()

    def _spawn(self, coro) -> None:
        task = self.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ================================================================== partitions
    def ensure_txn_topic(self) -> None:
        """Create ``__transaction_state`` (compacted, internal) on first use.

        Raises:
            KafkaError(COORDINATOR_NOT_AVAILABLE): in a cluster, while it is being created.
        """
        created = self.host.topic(TXN_TOPIC) is None
        info = self.host.ensure_internal_topic(TXN_TOPIC, self.config.transaction_state_log_num_partitions,
                                               self.config.transaction_state_log_replication_factor,
                                               TXN_TOPIC_SEGMENT_BYTES)
        self.num_partitions = info.num_partitions
        if created:  # a single broker leads every partition of the topic it just created
            for i in range(info.num_partitions):
                self.on_leadership(i, True)

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def coordinator_error(self, transactional_id: str | None) -> int:
        """NONE when this broker coordinates ``transactional_id`` (Kafka ``getTransactionState``
        errors: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE)."""
        if self._stopped:
            return E.COORDINATOR_NOT_AVAILABLE
        if not transactional_id:
            return E.INVALID_REQUEST
        try:
            self.ensure_txn_topic()
        except KafkaError:
            return E.COORDINATOR_NOT_AVAILABLE
        index = self.partition_for(transactional_id)
        p = self.host.partition(TXN_TOPIC, index)
        if p is None or not p.is_leader:
            return E.NOT_COORDINATOR
        if index not in self.loaded_partitions:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return E.NONE

    def coordinator_epoch(self, transactional_id: str) -> int:
        p = self.host.partition(TXN_TOPIC, self.partition_for(transactional_id))
        return p.leader_epoch if p is not None else -1

    def on_leadership(self, index: int, leader: bool) -> None:
        """This broker became (everything before its term committed) or stopped being the leader
        of ``__transaction_state`` partition ``index`` (Kafka ``onElection``/``onResignation``)."""
        if leader:
            if index not in self.loaded_partitions:
                self._load_partition(index)
                self.loaded_partitions.add(index)
            return
        self.loaded_partitions.discard(index)
        for tid in [t for t in self.txns if self.partition_for(t) == index]:
            del self.txns[tid]
        log.info("unloaded the transactions of %s-%d (no longer its leader)", TXN_TOPIC, index)

    def _load_partition(self, index: int) -> None:
        """Replay one ``__transaction_state`` partition; resume transactions caught in Prepare*."""
        p = self.host.partition(TXN_TOPIC, index)
        if p is None:
            return
        latest: dict[str, TxnLogValue | None] = replay_latest(p, decode_txn_key, decode_txn_value, FormatError)
        resumed = 0
        for tid, v in latest.items():
            if v is None:
                self.txns.pop(tid, None)
                continue
            meta = TransactionMetadata(tid, v.producer_id, v.producer_epoch, v.txn_timeout_ms)
            meta.apply(v)
            self.txns[tid] = meta
            if v.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                meta.pending = True
                self._spawn(self._complete(meta, v.state is TxnState.PREPARE_COMMIT))
                resumed += 1
        if latest:
            log.info("loaded %d transactional id(s) from %s-%d (%d completion(s) resumed)", len(latest), TXN_TOPIC,
                     index, resumed)

    # ================================================================== state writes
    async def _write(self, meta: TransactionMetadata, value: TxnLogValue | None) -> int:
        """Write ``value`` (None = tombstone) for ``meta`` and apply it once committed.

        Returns an error code; NOT_COORDINATOR if this broker lost the partition meanwhile.
        """
        tid = meta.transactional_id
        index = self.partition_for(tid)
        epoch = self.coordinator_epoch(tid)
        p = self.host.partition(TXN_TOPIC, index)
        batch = build_batch([(encode_txn_key(tid), None if value is None else encode_txn_value(value))])
        err, _ = await append_committed(p, batch, self.config.request_timeout_ms / 1000)
        if err == E.REQUEST_TIMED_OUT:
            err = E.COORDINATOR_NOT_AVAILABLE
        if err:
            log.warning("writing transaction state of %s failed: %s", tid, E(err).name)
            return err
        if self.coordinator_epoch(tid) != epoch or index not in self.loaded_partitions:
            return E.NOT_COORDINATOR
        if value is None:
            self.txns.pop(tid, None)
        else:
            meta.apply(value)
        return E.NONE

    async def _write_pending(self, meta: TransactionMetadata, value: TxnLogValue) -> int:
        meta.pending = True
        try:
            return await self._write(meta, value)
        finally:
            meta.pending = False

    # ================================================================== InitProducerId
    async def init_producer_id(self, transactional_id: str, txn_timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> tuple[int, int, int]:
        """InitProducerId with a transactional id (Kafka ``handleInitProducerId``; KIP-360 when
        ``producer_id``/``producer_epoch`` are given). Returns ``(error, producer id, epoch)``."""
        if not transactional_id:
            return E.INVALID_REQUEST, -1, -1
        if not 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms:
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        err = self.coordinator_error(transactional_id)
        if err:
            return err, -1, -1
        meta = self.txns.get(transactional_id)
        if meta is None:
            if len(self.txns) >= limits.MAX_TRANSACTIONAL_IDS:
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
            pid = await self._new_producer_id()
            if pid < 0:
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
            meta = self.txns.setdefault(transactional_id, TransactionMetadata(
                transactional_id, pid, NO_PRODUCER_EPOCH, txn_timeout_ms))
        if meta.pending:
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        if producer_id >= 0 and not (meta.producer_epoch == NO_PRODUCER_EPOCH or producer_id == meta.producer_id
                                     or (producer_id == meta.last_producer_id and epoch_exhausted(producer_epoch))):
            return E.PRODUCER_FENCED, -1, -1
        state = meta.state
        if state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        if state is TxnState.ONGOING:
            # Fence the current producer: bump the epoch and abort its transaction with it.
            if producer_id >= 0 and producer_epoch != meta.producer_epoch:
                return E.PRODUCER_FENCED, -1, -1
            self._fence_and_abort(meta, "a new producer with the same transactional id started")
            return E.CONCURRENT_TRANSACTIONS, -1, -1
        # Empty / CompleteCommit / CompleteAbort: bump the epoch (or a new producer id).
        if producer_id >= 0 and producer_id == meta.producer_id and producer_epoch != meta.producer_epoch:
            if producer_epoch == meta.last_producer_epoch and meta.producer_epoch != NO_PRODUCER_EPOCH:
                return E.NONE, meta.producer_id, meta.producer_epoch  # retry of a bump already done
            return E.PRODUCER_FENCED, -1, -1
        if meta.producer_epoch != NO_PRODUCER_EPOCH and epoch_exhausted(meta.producer_epoch):
            pid = await self._new_producer_id()
            if pid < 0:
                return E.COORDINATOR_NOT_AVAILABLE, -1, -1
            new_pid, new_epoch = pid, 0
        else:
            new_pid, new_epoch = meta.producer_id, meta.producer_epoch + 1
        old_epoch = meta.producer_epoch
        value = meta.to_value(producer_id=new_pid, producer_epoch=new_epoch, txn_timeout_ms=txn_timeout_ms,
                              state=TxnState.EMPTY, partitions={}, start_ms=-1)
        err = await self._write_pending(meta, value)
        if err:
            return err, -1, -1
        meta.last_producer_epoch = old_epoch if new_pid == meta.producer_id else NO_PRODUCER_EPOCH
        log.info("transactional id %s: producer id %d epoch %d", transactional_id, new_pid, new_epoch)
        return E.NONE, new_pid, new_epoch

    async def _new_producer_id(self) -> int:
        try:
            return await self.host.allocate_producer_id()
        except KafkaError as exc:
            log.warning("cannot allocate a producer id: %s", exc)
            return -1

    # ================================================================== AddPartitions / AddOffsets
    def _producer_txn(self, transactional_id: str, producer_id: int,
                      producer_epoch: int) -> tuple[int, TransactionMetadata | None]:
        """(error, metadata) of the transaction a producer names: this broker's coordinator
        error first (NOT_COORDINATOR, ...), INVALID_PRODUCER_ID_MAPPING for an unknown id or
        another producer id, PRODUCER_FENCED for another epoch; else (NONE, metadata)."""
        err = self.coordinator_error(transactional_id)
        if err:
            return err, None
        meta = self.txns.get(transactional_id)
        if meta is None or producer_id != meta.producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING, None
        if producer_epoch != meta.producer_epoch:
            return E.PRODUCER_FENCED, None
        return E.NONE, meta

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: dict[str, set[int]]) -> int:
        """AddPartitionsToTxn v0-3 / AddOffsetsToTxn (Kafka ``handleAddPartitionsToTransaction``):
        one error for all ``partitions`` (the caller has checked that they exist)."""
        err, meta = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if err:
            return err
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            meta.next_txn_refused = True
            return E.CONCURRENT_TRANSACTIONS
        if meta.pending or meta.state is TxnState.PREPARE_EPOCH_FENCE:
            return E.CONCURRENT_TRANSACTIONS
        if meta.state is TxnState.ONGOING and meta.has_partitions(partitions):
            return E.NONE
        merged = {t: set(ps) for t, ps in meta.partitions.items()} if meta.state is TxnState.ONGOING else {}
        for t, ps in partitions.items():
            merged.setdefault(t, set()).update(ps)
        if sum(len(ps) for ps in merged.values()) > limits.MAX_PARTITIONS_PER_TRANSACTION:
            return E.INVALID_REQUEST
        start = meta.start_ms if meta.state is TxnState.ONGOING else _now_ms()
        return await self._write_pending(meta, meta.to_value(state=TxnState.ONGOING, partitions=merged,
                                                              start_ms=start))

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: dict[str, set[int]]) -> int:
        """KIP-890 part 1 (AddPartitionsToTxn v4 ``verify_only``): NONE when the transaction of
        ``producer_id``/``producer_epoch`` is ongoing and holds every one of ``partitions``;
        INVALID_TXN_STATE when it does not; the producer errors as AddPartitionsToTxn."""
        err, meta = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if err:
            return err
        if meta.state is not TxnState.ONGOING or not meta.has_partitions(partitions):
            return E.INVALID_TXN_STATE
        return E.NONE

    # ================================================================== EndTxn
    async def _end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        err, meta = self._producer_txn(transactional_id, producer_id, producer_epoch)
        if err:
            return err
        if meta.pending:
            return E.CONCURRENT_TRANSACTIONS
        state = meta.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            err = await self._write_pending(meta, meta.to_value(state=target))
            if err:
                return err
            meta.pending = True
            self._spawn(self._complete(meta, commit))
            return E.NONE
        if state is TxnState.COMPLETE_COMMIT:
            if not commit and meta.next_txn_refused:
                # librdkafka (confluentinc/librdkafka#4849) sends EndTxn(abort) for a transaction
                # whose AddPartitionsToTxn was refused while the previous one completed: that
                # transaction holds no partition and wrote no record, so aborting it is a no-op.
                # Kafka answers INVALID_TXN_STATE, fatal for the producer. Only this proven case
                # is let through: an abort after a commit of the same transaction still fails.
                log.info("EndTxn(abort) of transactional id %s: its transaction holds no partition "
                         "(AddPartitionsToTxn refused during the previous commit); nothing to abort",
                         transactional_id)
                return E.NONE
            return E.NONE if commit else E.INVALID_TXN_STATE
        if state is TxnState.COMPLETE_ABORT:
            return E.NONE if not commit else E.INVALID_TXN_STATE
        if state is TxnState.PREPARE_COMMIT:
            return E.CONCURRENT_TRANSACTIONS if commit or meta.next_txn_refused else E.INVALID_TXN_STATE
        if state is TxnState.PREPARE_ABORT:
            return E.CONCURRENT_TRANSACTIONS if not commit else E.INVALID_TXN_STATE
        if state is TxnState.PREPARE_EPOCH_FENCE:
            return E.PRODUCER_FENCED
        return E.INVALID_TXN_STATE  # Empty, Dead

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> int:
        """EndTxn (Kafka ``handleEndTransaction``): answered once Prepare* is committed; the
        markers and Complete* follow in the background. A refusal for the transaction's state
        (INVALID_TXN_STATE, fatal for the producer) is logged with that state."""
        err = await self._end_txn(transactional_id, producer_id, producer_epoch, commit)
        if err == E.INVALID_TXN_STATE:
            meta = self.txns.get(transactional_id)
            log.warning("EndTxn(%s) of transactional id %s (producer %d epoch %d) refused in state %s",
                        "commit" if commit else "abort", transactional_id, producer_id, producer_epoch,
                        meta.state.name if meta is not None else "-")
        return err

    def _fence_and_abort(self, meta: TransactionMetadata, reason: str) -> None:
        """Bump the epoch and abort the ongoing transaction with it (Kafka
        ``prepareFenceProducerEpoch`` + ``endTransaction(ABORT, isFromClient=false)``)."""
        meta.pending = True

        async def run():
            epoch = meta.producer_epoch if epoch_exhausted(meta.producer_epoch) else meta.producer_epoch + 1
            log.info("transactional id %s: aborting the ongoing transaction (%s); epoch %d -> %d",
                     meta.transactional_id, reason, meta.producer_epoch, epoch)
            err = await self._write(meta, meta.to_value(producer_epoch=epoch, state=TxnState.PREPARE_ABORT))
            if err:
                meta.pending = False
                return
            await self._complete(meta, False)
        self._spawn(run())

    async def _complete(self, meta: TransactionMetadata, commit: bool) -> None:
        """Write the markers of ``meta``'s transaction, then Complete* (``meta.pending`` is set)."""
        tid = meta.transactional_id
        epoch = self.coordinator_epoch(tid)
        try:
            ok = await self._send_markers(tid, meta.producer_id, meta.producer_epoch, commit, epoch,
                                          meta.partition_list())
            if not ok:
                return  # no longer the coordinator: the new one resumes from Prepare*
            target = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
            while not self._stopped:
                err = await self._write(meta, meta.to_value(state=target, partitions={}))
                if err in (E.NONE, E.NOT_COORDINATOR):
                    break
                await asyncio.sleep(_MARKER_RETRY_BACKOFF_S[1])
        finally:
            meta.pending = False

    async def _send_markers(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                            coordinator_epoch: int, partitions: list[tuple[str, int]]) -> bool:
        """Write the marker to every partition, retrying until each is written or its topic is
        gone. False when this broker stopped coordinating ``transactional_id`` meanwhile."""
        left = list(partitions)
        backoff = _MARKER_RETRY_BACKOFF_S[0]
        while left:
            if self._stopped or self.coordinator_epoch(transactional_id) != coordinator_epoch or \
                    self.partition_for(transactional_id) not in self.loaded_partitions:
                return False
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for tp in left:
                by_leader.setdefault(self._leader_of(*tp), []).append(tp)
            results: dict[tuple[str, int], int] = {}
            for leader, tps in by_leader.items():
                results.update(await self._markers_to(leader, producer_id, producer_epoch, commit,
                                                      coordinator_epoch, tps))
            retry = []
            for tp in left:
                err = results.get(tp, E.REQUEST_TIMED_OUT)
                if err == E.NONE:
                    continue
                if self.host.topic(tp[0]) is None:
                    continue  # deleted topic: nothing to mark
                if err in (E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED, E.PRODUCER_FENCED):
                    log.warning("marker for producer %d on %s-%d refused: %s", producer_id, tp[0], tp[1], E(err).name)
                    continue
                retry.append(tp)
            left = retry
            if left:
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, _MARKER_RETRY_BACKOFF_S[1])
        return True

    def _leader_of(self, topic: str, index: int) -> int:
        return self.host.partition_leader(topic, index)

    async def _markers_to(self, leader: int, producer_id: int, producer_epoch: int, commit: bool,
                          coordinator_epoch: int, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if leader < 0:
            return {tp: E.NOT_LEADER_OR_FOLLOWER for tp in tps}
        if leader == self.config.node_id:
            return await write_markers_local(self.host, producer_id, producer_epoch, commit, coordinator_epoch, tps)
        req = {"op": "write_txn_markers", "producer_id": producer_id, "producer_epoch": producer_epoch,
               "commit": commit, "coordinator_epoch": coordinator_epoch, "partitions": [list(tp) for tp in tps]}
        try:
            res = await self.host.rpc(leader, req, self.config.request_timeout_ms / 1000)
        except (ConnectionError, asyncio.TimeoutError, OSError):
            return {tp: E.NOT_LEADER_OR_FOLLOWER for tp in tps}
        errors = res.get("errors")
        if not isinstance(errors, list) or len(errors) != len(tps):
            return {tp: E.NOT_LEADER_OR_FOLLOWER for tp in tps}
        return {tp: int(e) for tp, e in zip(tps, errors)}

    # ================================================================== timers
    async def _timer_loop(self) -> None:
        interval_s = self.config.transaction_abort_timed_out_transaction_cleanup_interval_ms / 1000
        last_expiry = 0.0
        while True:
            await asyncio.sleep(interval_s)
            try:
                self.abort_timed_out(_now_ms())
                if self.loop.time() - last_expiry >= \
                        self.config.transaction_remove_expired_transaction_cleanup_interval_ms / 1000:
                    last_expiry = self.loop.time()
                    await self.remove_expired(_now_ms())
            except Exception:  # keep the coordinator running; the next round retries
                log.exception("transaction timer round failed")

    def abort_timed_out(self, now_ms: int) -> int:
        """Abort every ongoing transaction older than its timeout (Kafka
        ``abortTimedOutTransactions``), fencing its producer. Returns how many were started."""
        n = 0
        for meta in list(self.txns.values()):
            if (meta.state is TxnState.ONGOING and not meta.pending and meta.start_ms >= 0
                    and now_ms - meta.start_ms > meta.txn_timeout_ms
                    and self.partition_for(meta.transactional_id) in self.loaded_partitions):
                self._fence_and_abort(meta, f"timed out after {meta.txn_timeout_ms} ms")
                n += 1
        return n

    async def remove_expired(self, now_ms: int) -> int:
        """Tombstone transactional ids idle for ``transactional.id.expiration.ms`` (Kafka
        ``removeExpiredTransactionalIds``): only Empty/Complete* ones."""
        n = 0
        for meta in list(self.txns.values()):
            if (meta.state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
                    and not meta.pending and meta.last_update_ms >= 0
                    and now_ms - meta.last_update_ms > self.config.transactional_id_expiration_ms):
                if await self._write(meta, None) == E.NONE:
                    n += 1
        return n

    # ================================================================== describe
    def list_transactions(self, states: set[str], producer_ids: set[int], min_duration_ms: int
                          ) -> list[TransactionMetadata]:
        """ListTransactions (KIP-664): transactions of loaded partitions matching the filters."""
        now = _now_ms()
        out = []
        for meta in self.txns.values():
            if self.partition_for(meta.transactional_id) not in self.loaded_partitions:
                continue
            if states and meta.state.state_name not in states:
                continue
            if producer_ids and meta.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (meta.state is not TxnState.ONGOING or now - meta.start_ms < min_duration_ms):
                continue
            out.append(meta)
        return out


async def write_markers_local(host: "CoordinatorHost", producer_id: int, producer_epoch: int, commit: bool,
                              coordinator_epoch: int, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Append a COMMIT/ABORT marker to each hosted partition ``tps`` as leader and wait until it
    is committed (WriteTxnMarkers v0-1, Kafka ``handleWriteTxnMarkersRequest``). Markers that
    land in ``__consumer_offsets`` complete the group coordinator's pending TxnOffsetCommits.
    Returns an error code per partition (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
    INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED, REQUEST_TIMED_OUT, ...)."""
    control_type = CONTROL_COMMIT if commit else CONTROL_ABORT
    now = _now_ms()
    waits: list[tuple[tuple[str, int], Any, int]] = []
    out: dict[tuple[str, int], int] = {}
    for topic, index in tps:
        p = host.partition(topic, index)
        if p is None:
            info = host.topic(topic)
            known = info is not None and 0 <= index < info.num_partitions
            out[(topic, index)] = E.NOT_LEADER_OR_FOLLOWER if known else E.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if not p.is_leader:
            out[(topic, index)] = E.NOT_LEADER_OR_FOLLOWER
            continue
        batch = build_control_batch(base_offset=0, partition_leader_epoch=-1, control_type=control_type,
                                    timestamp_ms=now, producer_id=producer_id, producer_epoch=producer_epoch,
                                    coordinator_epoch=coordinator_epoch)
        try:
            info = p.append(bytearray(batch), origin=AppendOrigin.COORDINATOR)
        except KafkaError as exc:
            out[(topic, index)] = exc.code
            continue
        waits.append(((topic, index), p, info.last_offset + 1))
    timeout_s = host.config.request_timeout_ms / 1000
    for tp, p, target in waits:
        try:
            await asyncio.wait_for(p.waiter(target), timeout_s)
        except asyncio.TimeoutError:
            out[tp] = E.REQUEST_TIMED_OUT
            continue
        except KafkaError as exc:
            out[tp] = exc.code
            continue
        out[tp] = E.NONE
        if tp[0] == "__consumer_offsets":
            host.complete_txn_offsets(tp[1], producer_id, commit)
    return out
