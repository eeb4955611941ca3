"""Producer state of one partition: idempotent sequences and transactions, with snapshots.

Source: Kafka ``ProducerStateManager``, ``ProducerStateEntry``, ``ProducerAppendInfo`` (KIP-98,
KIP-360). For every producer id the entry keeps its epoch, the metadata of its last 5
batches (``first_seq, last_seq, first_offset, last_offset, max_timestamp``), so a retried batch
is recognised as a duplicate and answered with its original offsets, the first offset of its
ongoing transaction (``current_txn_first_offset``) and the last coordinator epoch seen in one of
its transaction markers (``coordinator_epoch``).

Transactions (KIP-98): a transactional data batch of producer P starts P's transaction at the
batch's base offset unless one is ongoing; a COMMIT/ABORT control batch of P completes it (first
offset = the ongoing transaction's, or the marker's own offset if none, as Kafka). The manager
keeps the ongoing transactions in first-offset order (``ongoing``) and the completed ones whose
marker may still be above the high watermark (Kafka ``unreplicatedTxns``): completed
transactions with marker offset >= ``completed_floor``, the highest high watermark seen (it only
moves down on truncation). :meth:`first_unstable_offset_at` is O(log n) amortised (two heaps with
lazy deletion). Exact for any high watermark >= ``completed_floor``; a lower one (e.g. a replica
restarting with a stale high watermark) may miss completions the manager already dropped, which
is Kafka's behaviour too.

Rules on a leader append (``origin=client``), per batch carrying a producer id:

- epoch older than the entry's -> :class:`InvalidProducerEpochError`;
- same epoch, ``(base_seq, last_seq)`` equal to one of the 5 remembered batches -> duplicate;
- epoch newer than the entry's -> base sequence must be 0 (else
  :class:`OutOfOrderSequenceError`), unless the entry had no epoch;
- same epoch -> base sequence must be ``last_seq + 1`` (wrapping at 2**31-1 to 0), else
  :class:`OutOfOrderSequenceError`;
- unknown producer id, or same epoch with no remembered batch (only a transaction marker was
  written in that epoch) -> any sequence is accepted (Kafka >= 2.5, KIP-360: the state may have
  been removed by retention, so the broker cannot tell a new producer from a forgotten one).

Snapshots: ``<20-digit offset>.snapshot`` = the state covering every batch below that offset.
Binary, big-endian, ``version int16, crc uint32 (CRC-32C of everything after it)``, then:

- version 2 (written): ``producer_count int32``, per producer ``producer_id int64, epoch int16,
  coordinator_epoch int32, current_txn_first_offset int64 (-1 = none), batch_count int32``
  followed by ``batch_count`` rows ``first_seq int32, last_seq int32, first_offset int64,
  last_offset int64, timestamp int64`` (oldest first); then ``completed_floor int64,
  completed_count int32`` and ``completed_count`` rows ``producer_id int64, first_offset int64,
  last_offset int64`` (the completed transactions with marker offset >= ``completed_floor``).
  Kafka's snapshot also stores ``currentTxnFirstOffset`` and ``coordinatorEpoch`` per producer.
- version 1 (still read): ``count int32``, then ``count`` rows ``producer_id int64, epoch int16,
  first_seq int32, last_seq int32, first_offset int64, last_offset int64, timestamp int64``
  (one row per remembered batch, oldest first); no transaction state.

A snapshot whose CRC or length fails is ignored (the log is replayed from an older one).

Verification guards (KIP-890 part 1; Kafka ``VerificationGuard``, ``VerificationStateEntry``,
``ProducerStateManager.maybeCreateVerificationStateEntry``/``clearVerificationStateEntry``): before
a partition leader asks the transaction coordinator whether producer P may start writing a
transaction here, it takes a :class:`VerificationGuard` for P
(:meth:`ProducerStateManager.maybe_create_verification_state_entry`; an existing one is reused).
Any transactional batch or transaction marker of P applied to the state (:meth:`update`: leader,
follower or replay) clears it: either P's transaction now has a first offset here, or it was
completed. The leader's append of a transactional batch that would START a transaction must
present the guard still stored (:meth:`check_client_append`, else
:class:`InvalidTxnStateError`), so a batch verified before an ABORT marker and appended after it
is refused instead of opening a transaction the coordinator no longer knows ("hanging": the last
stable offset stuck below the high watermark, and P's next commit exposing the aborted records).
Guards are leader-local and in memory only (never in a snapshot), as in Kafka; an unused one
expires with :meth:`remove_expired`.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import logging
import os
import struct
from collections import OrderedDict, deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from litemq.protocol.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from litemq.protocol.records import TRANSACTIONAL_FLAG, BatchHeader
from litemq.storage.checkpoints import atomic_write

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT32_MAX = 2**31 - 1
_SNAP_HEAD = struct.Struct(">hIi")  # version, crc, count (v1: rows, v2: producers)
_SNAP_ROW = struct.Struct(">qhiiqqq")  # v1 row
_SNAP_PRODUCER = struct.Struct(">qhiqi")  # v2: pid, epoch, coordinator epoch, txn first offset, batches
_SNAP_BATCH = struct.Struct(">iiqqq")  # v2: first_seq, last_seq, first_offset, last_offset, timestamp
_SNAP_COMPLETED_HEAD = struct.Struct(">qi")  # v2: completed_floor, count
_SNAP_COMPLETED = struct.Struct(">qqq")  # v2: pid, first_offset, last_offset
_SNAP_VERSION = 2
NO_COORDINATOR_EPOCH = -1


class AppendOrigin(enum.Enum):
    """Who is appending (Kafka ``AppendOrigin``): a producer through Produce, or the transaction
    coordinator writing COMMIT/ABORT markers (WriteTxnMarkers). Replication has its own method
    (:meth:`PartitionLog.append_as_follower`)."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


class VerificationGuard:
    """An opaque token of one KIP-890 verification (Kafka ``VerificationGuard``): compared by
    identity, so only the append that took this very guard before verifying can present it.
    ``value`` (a process-wide counter) is for logs only."""

    __slots__ = ("value",)
    _counter = itertools.count(1)

    def __init__(self) -> None:
        self.value = next(VerificationGuard._counter)

    def __repr__(self) -> str:
        return f"VerificationGuard({self.value})"


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer's pending KIP-890 verification on one partition (Kafka
    ``VerificationStateEntry``): ``timestamp_ms`` when it was created (wall clock, ms; for
    expiry), the ``verification_guard`` an append must present, and the producer ``epoch`` of
    the verifying request (the highest seen while the entry lived)."""

    timestamp_ms: int
    verification_guard: VerificationGuard
    epoch: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction completed by a marker (Kafka ``CompletedTxn``): offsets inclusive,
    ``last_offset`` = the marker's offset; ``last_stable_offset`` = the LSO right after it
    (Kafka ``ProducerStateManager.lastStableOffset(CompletedTxn)``: the first offset of the
    earliest ongoing transaction of another producer, else ``last_offset + 1``)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool
    last_stable_offset: int


@dataclass(slots=True)
class BatchMetadata:
    """One remembered batch of a producer."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id (Kafka ``ProducerStateEntry``)."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    current_txn_first_offset: int | None = None
    """First offset of the producer's ongoing transaction (None: no transaction ongoing)."""
    coordinator_epoch: int = NO_COORDINATOR_EPOCH
    """Coordinator epoch of the last transaction marker seen for this producer."""
    marker_timestamp: int = -1
    """Timestamp (ms) of the last transaction marker seen for this producer."""

    @property
    def last_timestamp(self) -> int:
        """Timestamp (ms) of its last batch or marker (Kafka ``lastTimestamp``; -1 unknown)."""
        return max(self.batches[-1].timestamp if self.batches else -1, self.marker_timestamp)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, h: BatchHeader) -> BatchMetadata | None:
        if h.producer_epoch != self.epoch:
            return None
        last_seq = h.last_sequence
        for b in self.batches:
            if b.first_seq == h.base_sequence and b.last_seq == last_seq:
                return b
        return None

    def add(self, epoch: int, meta: BatchMetadata) -> None:
        self.set_epoch(epoch)
        self.batches.append(meta)

    def set_epoch(self, epoch: int) -> None:
        """Kafka ``maybeUpdateProducerEpoch``: a different epoch forgets the remembered batches."""
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """Producer id -> :class:`ProducerStateEntry` for one partition, plus snapshot files.

    ``map_end_offset`` is the offset up to which batches have been applied. ``ongoing`` maps
    producer id -> first offset of its ongoing transaction, in first-offset order (transactions
    start in offset order, so insertion order is first-offset order). Not thread-safe: the
    owning log serialises calls.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0
        self.ongoing: OrderedDict[int, int] = OrderedDict()
        self.verification_states: dict[int, VerificationStateEntry] = {}
        """Producer id -> pending KIP-890 verification (see the module docstring); leader-local,
        never snapshotted."""
        self._reset_completed(0)

    # ------------------------------------------------------------------ verification (KIP-890)
    def has_ongoing_transaction(self, producer_id: int, producer_epoch: int) -> bool:
        """Producer ``producer_id`` has a transaction ongoing here, in epoch ``producer_epoch``
        (Kafka ``UnifiedLog.hasOngoingTransaction``): its next transactional batch continues it
        and needs no verification."""
        e = self.producers.get(producer_id)
        return e is not None and e.current_txn_first_offset is not None and e.epoch == producer_epoch

    def maybe_create_verification_state_entry(self, producer_id: int, producer_epoch: int,
                                              now_ms: int) -> VerificationStateEntry:
        """The producer's pending verification, created (with a new :class:`VerificationGuard`,
        timestamp ``now_ms``) unless one exists, which is reused with its guard (two requests of
        one producer verifying at once share it; the first append clears it and the second then
        continues the transaction). Kafka ``maybeCreateVerificationStateEntry``."""
        entry = self.verification_states.get(producer_id)
        if entry is None:
            entry = self.verification_states[producer_id] = VerificationStateEntry(
                now_ms, VerificationGuard(), producer_epoch)
        elif producer_epoch > entry.epoch:
            entry.epoch = producer_epoch
        return entry

    def verification_state_entry(self, producer_id: int) -> VerificationStateEntry | None:
        """The producer's pending verification, or None (Kafka ``verificationStateEntry``)."""
        return self.verification_states.get(producer_id)

    def clear_verification_state_entry(self, producer_id: int) -> None:
        """Forget the producer's pending verification (Kafka ``clearVerificationStateEntry``)."""
        self.verification_states.pop(producer_id, None)

    def verification_guard(self, producer_id: int) -> VerificationGuard | None:
        """The guard of the producer's pending verification, or None (Kafka
        ``UnifiedLog.verificationGuard``: ``SENTINEL``)."""
        entry = self.verification_states.get(producer_id)
        return entry.verification_guard if entry is not None else None

    def _reset_completed(self, floor: int) -> None:
        # Completed transactions with marker offset >= completed_floor (Kafka unreplicatedTxns):
        # marker offset -> (producer id, first offset), plus two heaps with lazy deletion.
        self.completed_floor = floor
        self._completed: dict[int, tuple[int, int]] = {}
        self._by_first: list[tuple[int, int]] = []  # (first offset, marker offset)
        self._by_last: list[int] = []  # marker offsets

    def _add_completed(self, producer_id: int, first_offset: int, last_offset: int) -> None:
        self._completed[last_offset] = (producer_id, first_offset)
        heapq.heappush(self._by_first, (first_offset, last_offset))
        heapq.heappush(self._by_last, last_offset)

    def _prune_completed(self, floor: int) -> None:
        """Forget completed transactions whose marker offset < ``floor``."""
        by_last, completed = self._by_last, self._completed
        while by_last and by_last[0] < floor:
            completed.pop(heapq.heappop(by_last), None)

    # ------------------------------------------------------------------ transactions
    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest ongoing transaction, or None (Kafka
        ``firstUndecidedOffset``). O(1)."""
        for first in self.ongoing.values():
            return first
        return None

    def first_unstable_offset_at(self, high_watermark: int) -> int | None:
        """Smallest first offset among ongoing transactions and completed transactions whose
        marker offset is >= ``high_watermark`` (Kafka ``firstUnstableOffset`` with
        ``unreplicatedTxns`` trimmed by ``onHighWatermarkUpdated``); None if there is none.
        A higher ``high_watermark`` than ever before forgets completions below it.
        O(log n) amortised."""
        self.raise_completed_floor(high_watermark)
        by_first, completed = self._by_first, self._completed
        while by_first and by_first[0][1] not in completed:
            heapq.heappop(by_first)
        best = by_first[0][0] if by_first else None
        for first in self.ongoing.values():
            if best is None or first < best:
                best = first
            break
        return best

    def raise_completed_floor(self, floor: int) -> None:
        """Forget completed transactions with marker offset < ``floor`` (no-op if already)."""
        if floor > self.completed_floor:
            self.completed_floor = floor
            self._prune_completed(floor)

    def completed_transactions(self) -> list[tuple[int, int, int]]:
        """``(producer_id, first_offset, last_offset)`` of the tracked completed transactions
        (marker offset >= ``completed_floor``), by marker offset."""
        return [(pid, first, last) for last, (pid, first) in sorted(self._completed.items())]

    def ongoing_transactions(self) -> list[tuple[int, int, int]]:
        """``(producer_id, producer_epoch, first_offset)`` of ongoing transactions, by first offset."""
        producers = self.producers
        return [(pid, producers[pid].epoch, first) for pid, first in self.ongoing.items()]

    def check_end_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> None:
        """Validate a marker written by the coordinator (Kafka ``ProducerAppendInfo
        .appendEndTxnMarker`` -> ``checkProducerEpoch``, ``checkCoordinatorEpoch``).

        Raises :class:`InvalidProducerEpochError` (marker epoch < the producer's epoch),
        :class:`TransactionCoordinatorFencedError` (coordinator epoch < the last one recorded)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        if entry.epoch != NO_PRODUCER_EPOCH and producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {producer_id}: marker epoch {producer_epoch} is older than the current epoch {entry.epoch}")
        if coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"producer {producer_id}: marker coordinator epoch {coordinator_epoch} is older than "
                f"{entry.coordinator_epoch}")

    def _complete_txn(self, entry: ProducerStateEntry, offset: int, producer_epoch: int, control_type: int,
                      coordinator_epoch: int) -> CompletedTxn:
        pid = entry.producer_id
        first = entry.current_txn_first_offset
        if first is None:
            first = offset
        lso = offset + 1
        for other, other_first in self.ongoing.items():  # P appears at most once: <= 2 steps
            if other != pid:
                lso = other_first
                break
        entry.current_txn_first_offset = None
        self.ongoing.pop(pid, None)
        entry.set_epoch(producer_epoch)
        entry.coordinator_epoch = coordinator_epoch
        self._add_completed(pid, first, offset)
        return CompletedTxn(pid, first, offset, control_type == 0, lso)

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers with no transaction ongoing whose last batch or marker is at
        least ``expiration_ms`` old (Kafka ``ProducerStateManager.removeExpiredProducers``,
        ``producer.id.expiration.ms``); returns how many. Without it the state of every
        short-lived idempotent producer ever seen stayed, in memory and in every snapshot."""
        expired = [pid for pid, e in self.producers.items()
                   if e.current_txn_first_offset is None and now_ms - e.last_timestamp >= expiration_ms]
        for pid in expired:
            del self.producers[pid]
        if self.verification_states:  # Kafka: "also expire any verification state entries that
            # are lingering as unverified" (a verification that failed or was never followed up)
            for pid in [pid for pid, v in self.verification_states.items() if now_ms - v.timestamp_ms >= expiration_ms]:
                del self.verification_states[pid]
        return len(expired)

    # ------------------------------------------------------------------ queries
    def last_sequence(self, producer_id: int) -> int:
        e = self.producers.get(producer_id)
        return e.last_seq if e else -1

    def epoch(self, producer_id: int) -> int:
        e = self.producers.get(producer_id)
        return e.epoch if e else NO_PRODUCER_EPOCH

    def entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    # ------------------------------------------------------------------ leader validation
    def check_client_append(self, headers: list[BatchHeader],
                            verification_guard: VerificationGuard | None = None) -> BatchMetadata | None:
        """Validate sequences/epochs of a client append without changing state.

        Returns the remembered :class:`BatchMetadata` of the first duplicate batch (the caller
        appends nothing and answers with its offsets), else ``None``. Raises
        :class:`InvalidProducerEpochError`, :class:`OutOfOrderSequenceError`,
        :class:`InvalidRecordError` (producer id with a negative sequence),
        :class:`InvalidTxnStateError` (a non-transactional batch of a producer whose transaction
        is ongoing; or a transactional batch that would start a transaction while
        ``verification_guard`` is not the producer's stored guard, KIP-890: Kafka
        ``UnifiedLog.batchMissingRequiredVerification``, checked here after the epoch and
        sequence checks so a fenced producer still gets INVALID_PRODUCER_EPOCH). Batches
        continuing an ongoing transaction of the same epoch need no guard.
        """
        pending: dict[int, tuple[int, int]] = {}  # pid -> (epoch, last_seq) within this append
        txn_started: set[int] = set()  # pids whose transaction starts within this append
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                if h.is_transactional:
                    raise InvalidRecordError("transactional batch without a producer id")
                continue
            if h.base_sequence < 0:
                raise InvalidRecordError(f"producer {pid}: invalid base sequence {h.base_sequence}")
            entry = self.producers.get(pid)
            if entry is not None:
                dup = entry.find_duplicate(h)
                if dup is not None:
                    return dup
            if pid in pending:
                cur_epoch, cur_last = pending[pid]
            elif entry is not None:
                cur_epoch, cur_last = entry.epoch, entry.last_seq
            else:
                cur_epoch, cur_last = NO_PRODUCER_EPOCH, -1
            epoch = h.producer_epoch
            if cur_epoch != NO_PRODUCER_EPOCH and epoch < cur_epoch:
                raise InvalidProducerEpochError(
                    f"producer {pid}: epoch {epoch} is older than the current epoch {cur_epoch}")
            if epoch != cur_epoch:
                if h.base_sequence != 0 and cur_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {pid}: new epoch {epoch} must start at sequence 0, got {h.base_sequence}")
            elif cur_last >= 0 and not _in_sequence(cur_last, h.base_sequence):
                # cur_last -1: same epoch but no batch remembered (only a transaction marker was
                # written in this epoch): any sequence is accepted (Kafka ``checkSequence``)
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {epoch}: expected sequence {cur_last + 1}, got {h.base_sequence}")
            if h.is_transactional:
                if pid not in txn_started and not self.has_ongoing_transaction(pid, epoch):
                    if verification_guard is None or self.verification_guard(pid) is not verification_guard:
                        raise InvalidTxnStateError(
                            f"producer {pid} epoch {epoch}: record was not part of an ongoing transaction "
                            "(no verification of this transaction, or a marker or batch of the producer was "
                            "written since it was verified)")
                txn_started.add(pid)
            elif pid in txn_started or (entry is not None and entry.current_txn_first_offset is not None):
                raise InvalidTxnStateError(
                    f"producer {pid}: non-transactional batch while its transaction is ongoing")
            pending[pid] = (epoch, h.last_sequence)
        return None

    # ------------------------------------------------------------------ updates
    def update(self, h: BatchHeader, base_offset: int | None = None,
               marker: tuple[int, int] | None = None) -> CompletedTxn | None:
        """Apply one appended batch (leader, follower or replay), no validation. ``base_offset``
        overrides the header's (the leader rewrites it in the buffer after parsing).

        A data batch with a producer id is remembered; a transactional one starts the producer's
        transaction if none is ongoing. ``marker`` = ``(control_type, coordinator_epoch)`` of a
        COMMIT(1)/ABORT(0) control batch (decoded by the caller) completes the producer's
        transaction and returns it; other control batches only move ``map_end_offset``. A
        transactional batch or a marker clears the producer's verification guard (Kafka
        ``ProducerStateManager.clearVerificationStateEntry`` in ``UnifiedLog.updateProducers``:
        "either the transaction is complete or we have a first offset")."""
        first = h.base_offset if base_offset is None else base_offset
        last = first + h.last_offset_delta
        done = None
        pid = h.producer_id
        if pid >= 0:
            entry = self.producers.get(pid)
            if h.is_control:
                if marker is not None:
                    if entry is None:
                        entry = self.producers[pid] = ProducerStateEntry(pid)
                    done = self._complete_txn(entry, first, h.producer_epoch, marker[0], marker[1])
                    entry.marker_timestamp = h.max_timestamp
                    if self.verification_states:
                        self.clear_verification_state_entry(pid)
            else:
                if entry is None:
                    entry = self.producers[pid] = ProducerStateEntry(pid)
                entry.add(h.producer_epoch, BatchMetadata(h.base_sequence, h.last_sequence, first, last,
                                                          h.max_timestamp))
                if h.attributes & TRANSACTIONAL_FLAG:
                    if entry.current_txn_first_offset is None:
                        entry.current_txn_first_offset = first
                        self.ongoing[pid] = first
                    if self.verification_states:
                        self.clear_verification_state_entry(pid)
        self.map_end_offset = last + 1
        return done

    def update_all(self, headers: Iterable[BatchHeader]) -> None:
        for h in headers:
            self.update(h)

    def clear(self, offset: int) -> None:
        """Forget everything; the state now covers the (empty) log below ``offset``."""
        self.producers.clear()
        self.ongoing.clear()
        self.verification_states.clear()
        self._reset_completed(offset)
        self.map_end_offset = offset

    # ------------------------------------------------------------------ snapshots
    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files present, ascending."""
        out = []
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return []
        for name in names:
            if name.endswith(SNAPSHOT_SUFFIX) and len(name) == 20 + len(SNAPSHOT_SUFFIX) and name[:20].isdigit():
                out.append(int(name[:20]))
        return sorted(out)

    def take_snapshot(self, *, sync: bool = False) -> None:
        """Write the current state as ``<map_end_offset>.snapshot`` (format version 2, atomic;
        fsync if ``sync``)."""
        rows = [struct.pack(">i", len(self.producers))]
        for e in self.producers.values():
            txn_first = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
            rows.append(_SNAP_PRODUCER.pack(e.producer_id, e.epoch, e.coordinator_epoch, txn_first, len(e.batches)))
            for b in e.batches:
                rows.append(_SNAP_BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp))
        self._prune_completed(self.completed_floor)
        completed = self.completed_transactions()
        rows.append(_SNAP_COMPLETED_HEAD.pack(self.completed_floor, len(completed)))
        rows += [_SNAP_COMPLETED.pack(*c) for c in completed]
        body = b"".join(rows)
        data = struct.pack(">hI", _SNAP_VERSION, crc32c(body)) + body
        atomic_write(self.dir / snapshot_name(self.map_end_offset), data, sync=sync)

    def _read_snapshot(self, offset: int) -> tuple[dict[int, ProducerStateEntry], int, list] | None:
        """``(producers, completed_floor, completed rows)`` of a snapshot file, None if unusable."""
        path = self.dir / snapshot_name(offset)
        try:
            data = path.read_bytes()
            version, crc, count = _SNAP_HEAD.unpack_from(data, 0)
            if version not in (1, 2) or crc32c(memoryview(data)[6:]) != crc:
                raise ValueError("bad version or CRC")
            if version == 1:
                return _parse_snapshot_v1(data, count)
            return _parse_snapshot_v2(data, count)
        except (OSError, ValueError, struct.error) as exc:
            log.warning("ignoring producer snapshot %s: %s", path, exc)
            return None

    def load_latest_snapshot(self, max_offset: int, min_offset: int = 0) -> bool:
        """Load the newest valid snapshot with ``min_offset <= offset <= max_offset``; sets
        ``map_end_offset`` to its offset. Returns False (state cleared to ``min_offset``) if none."""
        for off in reversed(self.snapshot_offsets()):
            if off > max_offset or off < min_offset:
                continue
            snap = self._read_snapshot(off)
            if snap is not None:
                producers, floor, completed = snap
                self.producers = producers
                self.ongoing = OrderedDict(sorted(
                    ((e.producer_id, e.current_txn_first_offset) for e in producers.values()
                     if e.current_txn_first_offset is not None), key=lambda kv: kv[1]))
                self._reset_completed(floor)
                for pid, first, last in completed:
                    self._add_completed(pid, first, last)
                self.map_end_offset = off
                return True
        self.clear(min_offset)
        return False

    def delete_snapshots(self, *, above: int | None = None, below: int | None = None,
                         keep_latest: int = 0) -> None:
        """Delete snapshot files with offset > ``above`` and/or < ``below`` (keeping the newest
        ``keep_latest`` of those below)."""
        offsets = self.snapshot_offsets()
        doomed = []
        if above is not None:
            doomed += [o for o in offsets if o > above]
        if below is not None:
            olds = [o for o in offsets if o < below]
            doomed += olds[: max(0, len(olds) - keep_latest)]
        for o in doomed:
            try:
                os.unlink(self.dir / snapshot_name(o))
            except FileNotFoundError:
                pass


def _parse_snapshot_v1(data: bytes, count: int) -> tuple[dict[int, ProducerStateEntry], int, list]:
    if len(data) != _SNAP_HEAD.size + count * _SNAP_ROW.size:
        raise ValueError("bad length")
    producers: dict[int, ProducerStateEntry] = {}
    for pid, epoch, fseq, lseq, foff, loff, ts in _SNAP_ROW.iter_unpack(memoryview(data)[_SNAP_HEAD.size:]):
        entry = producers.get(pid)
        if entry is None:
            entry = producers[pid] = ProducerStateEntry(pid)
        entry.add(epoch, BatchMetadata(fseq, lseq, foff, loff, ts))
    return producers, 0, []  # written before transactions existed: nothing was forgotten


def _parse_snapshot_v2(data: bytes, count: int) -> tuple[dict[int, ProducerStateEntry], int, list]:
    """Raises ValueError / struct.error on a length that does not match the counts."""
    pos = _SNAP_HEAD.size
    if count < 0:
        raise ValueError("negative producer count")
    producers: dict[int, ProducerStateEntry] = {}
    for _ in range(count):
        pid, epoch, coord_epoch, txn_first, n = _SNAP_PRODUCER.unpack_from(data, pos)
        pos += _SNAP_PRODUCER.size
        if not 0 <= n <= NUM_BATCHES_TO_RETAIN:
            raise ValueError(f"producer {pid}: {n} batches")
        entry = producers[pid] = ProducerStateEntry(pid, epoch)
        for _ in range(n):
            entry.batches.append(BatchMetadata(*_SNAP_BATCH.unpack_from(data, pos)))
            pos += _SNAP_BATCH.size
        entry.current_txn_first_offset = None if txn_first < 0 else txn_first
        entry.coordinator_epoch = coord_epoch
    floor, n = _SNAP_COMPLETED_HEAD.unpack_from(data, pos)
    pos += _SNAP_COMPLETED_HEAD.size
    if n < 0 or len(data) != pos + n * _SNAP_COMPLETED.size:
        raise ValueError("bad length")
    completed = list(_SNAP_COMPLETED.iter_unpack(memoryview(data)[pos:]))
    return producers, floor, completed
