"""The state of one share-partition (KIP-932): which records of one topic partition a share
group has delivered, to whom, how often, and which are done.

Pure: no asyncio, no I/O, no clock (times are passed in, milliseconds). The share-partition
leader (the leader of the topic partition, :mod:`litemq.coordinator.share_coordinator`) owns
one :class:`SharePartition` per (group, topic, partition) it serves.

Offsets are Kafka offsets. The model (Kafka ``SharePartition``):

- ``start_offset`` (SPSO) and ``end_offset`` (SPEO, the first offset never acquired): every
  offset below SPSO is done; offsets in ``[SPSO, SPEO)`` are *in flight*: ``AVAILABLE`` (released
  or whose lock expired, to be delivered again), ``ACQUIRED`` (locked by one member until a
  deadline) or done (``ACKNOWLEDGED``/``ARCHIVED``, or a gap: no record there). Only the
  not-done offsets are kept (:attr:`SharePartition.records`), so SPSO is the smallest of them
  (or SPEO when there is none).
- Acquiring increments a record's delivery count. A record released (RELEASE, lock expiry,
  its member leaving) whose count reached ``delivery_count_limit`` is archived instead of made
  available again; REJECT archives at once; ACCEPT acknowledges; GAP marks an offset with no
  record.
- At most ``max_record_locks`` offsets are in flight (``[SPSO, SPEO)``), Kafka's
  ``group.share.partition.max.record.locks``: when the window is full, nothing new is acquired
  until SPSO moves.

Durable form (:meth:`SharePartition.snapshot`, Kafka ``ShareSnapshotValue``): SPSO, the state
epoch and *state batches* ``(first, last, state, delivery count)`` covering ``[SPSO, SPEO)``; an
acquired record is stored as ``AVAILABLE`` with its count, so a new leader delivers it again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable

from litemq.protocol.errors import ErrorCode as E


class RecordState(IntEnum):
    """Kafka ``RecordState`` ids (also the ``DeliveryState`` of a persisted state batch)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(IntEnum):
    """``AcknowledgeTypes`` of ShareFetch/ShareAcknowledge v1 (Kafka ``AcknowledgeType``)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


@dataclass(slots=True)
class InFlight:
    """One not-done offset: its state, delivery count, and while ACQUIRED its member and lock
    deadline (ms, the caller's clock)."""

    state: RecordState
    delivery_count: int
    member_id: str = ""
    deadline_ms: float = 0.0


@dataclass(slots=True)
class StateBatch:
    """A persisted run of offsets ``first..last`` (inclusive) in one state with one count."""

    first_offset: int
    last_offset: int
    state: int
    delivery_count: int


@dataclass(slots=True)
class BatchInfo:
    """What acquiring needs of one record batch read from the log (Kafka offsets):
    ``base_offset``, ``last_offset``, ``is_control`` and whether it belongs to an aborted
    transaction (read_committed only; its records are archived, never delivered)."""

    base_offset: int
    last_offset: int
    is_control: bool = False
    aborted: bool = False


class SharePartition:
    """One share-partition's in-flight records (see the module docstring).

    Args:
        lock_duration_ms: ``group.share.record.lock.duration.ms``.
        delivery_count_limit: ``group.share.delivery.count.limit``.
        max_record_locks: ``group.share.partition.max.record.locks``.
    """

    def __init__(self, lock_duration_ms: int, delivery_count_limit: int, max_record_locks: int) -> None:
        self.lock_duration_ms = lock_duration_ms
        self.delivery_count_limit = delivery_count_limit
        self.max_record_locks = max_record_locks
        self.start_offset = 0
        self.end_offset = 0
        self.state_epoch = 0
        self.records: dict[int, InFlight] = {}
        self.dirty = False
        """True when the state changed since the last :meth:`snapshot` was taken for storage."""

    # ------------------------------------------------------------------ load / store
    def initialize(self, start_offset: int, batches: Iterable[StateBatch] = (), state_epoch: int = 0) -> None:
        """Set the state from a persisted snapshot (or a fresh start at ``start_offset``)."""
        self.start_offset = self.end_offset = start_offset
        self.state_epoch = state_epoch
        self.records = {}
        for b in batches:
            first = max(b.first_offset, start_offset)
            self.end_offset = max(self.end_offset, b.last_offset + 1)
            if b.state in (RecordState.AVAILABLE, RecordState.ACQUIRED):
                for o in range(first, b.last_offset + 1):
                    self.records[o] = InFlight(RecordState.AVAILABLE, b.delivery_count)
        self._advance_start()

    def snapshot(self) -> tuple[int, int, list[StateBatch]]:
        """``(SPSO, state epoch, state batches over [SPSO, SPEO))`` for storage; clears :attr:`dirty`."""
        self.dirty = False
        batches: list[StateBatch] = []
        o = self.start_offset
        for off in sorted(self.records):
            if off > o:
                batches.append(StateBatch(o, off - 1, RecordState.ACKNOWLEDGED, 1))
            rec = self.records[off]
            last = batches[-1] if batches else None
            if last is not None and last.state == RecordState.AVAILABLE and last.last_offset == off - 1 \
                    and last.delivery_count == rec.delivery_count:
                last.last_offset = off
            else:
                batches.append(StateBatch(off, off, RecordState.AVAILABLE, rec.delivery_count))
            o = off + 1
        if o < self.end_offset:
            batches.append(StateBatch(o, self.end_offset - 1, RecordState.ACKNOWLEDGED, 1))
        return self.start_offset, self.state_epoch, batches

    # ------------------------------------------------------------------ views
    @property
    def in_flight(self) -> int:
        """Offsets in ``[SPSO, SPEO)`` (what ``max_record_locks`` bounds)."""
        return self.end_offset - self.start_offset

    def acquired_count(self) -> int:
        return sum(1 for r in self.records.values() if r.state == RecordState.ACQUIRED)

    def next_deadline_ms(self) -> float | None:
        """The earliest lock deadline, or None when nothing is acquired."""
        return min((r.deadline_ms for r in self.records.values() if r.state == RecordState.ACQUIRED), default=None)

    def first_fetchable(self) -> int:
        """The smallest offset a fetch could acquire: an AVAILABLE in-flight one, else SPEO."""
        return min((o for o, r in self.records.items() if r.state == RecordState.AVAILABLE), default=self.end_offset)

    def can_acquire_new(self) -> bool:
        return self.in_flight < self.max_record_locks

    # ------------------------------------------------------------------ transitions
    def _advance_start(self) -> None:
        start = min(self.records, default=self.end_offset)
        if start != self.start_offset:
            self.start_offset = start
            self.dirty = True

    def _release(self, off: int, rec: InFlight) -> None:
        if rec.delivery_count >= self.delivery_count_limit:
            del self.records[off]  # archived
        else:
            rec.state, rec.member_id, rec.deadline_ms = RecordState.AVAILABLE, "", 0.0
        self.dirty = True

    def move_start(self, log_start_offset: int) -> None:
        """Records below the log start offset are gone (retention, DeleteRecords): SPSO and SPEO
        move up to it (Kafka ``SharePartition.updateCacheAndOffsets``)."""
        if log_start_offset <= self.start_offset:
            return
        for off in [o for o in self.records if o < log_start_offset]:
            del self.records[off]
        self.end_offset = max(self.end_offset, log_start_offset)
        self._advance_start()
        self.dirty = True

    def expire_locks(self, now_ms: float) -> int:
        """Release every record whose lock deadline passed; returns how many."""
        n = 0
        for off, rec in list(self.records.items()):
            if rec.state == RecordState.ACQUIRED and rec.deadline_ms <= now_ms:
                self._release(off, rec)
                n += 1
        if n:
            self._advance_start()
        return n

    def release_member(self, member_id: str) -> int:
        """Release the records acquired by ``member_id`` (its share session ended or it left)."""
        n = 0
        for off, rec in list(self.records.items()):
            if rec.state == RecordState.ACQUIRED and rec.member_id == member_id:
                self._release(off, rec)
                n += 1
        if n:
            self._advance_start()
        return n

    def acquire(self, batches: Iterable[BatchInfo], member_id: str, now_ms: float, max_records: int,
                high_watermark: int) -> tuple[list[tuple[int, int, int]], list[int]]:
        """Acquire for ``member_id`` up to ``max_records`` records of ``batches`` (read from the log
        at :meth:`first_fetchable`, in offset order, ending below ``high_watermark``).

        Returns ``(acquired ranges, indexes of the batches that hold an acquired record)``; a
        range is ``(first offset, last offset, delivery count)`` (Kafka ``AcquiredRecords``).
        Control batches, aborted transactions' batches and offsets with no record below the last
        batch read are done at once (a gap moves SPEO over them, nothing is delivered).
        """
        acquired: list[int] = []
        used: list[int] = []
        deadline = now_ms + self.lock_duration_ms
        budget = max(1, max_records)
        lo = min(self.records, default=None)  # the in-flight window starts at the first not-done offset
        for i, b in enumerate(batches):
            if len(acquired) >= budget:
                break
            hit = False
            for off in range(max(b.base_offset, self.start_offset), min(b.last_offset + 1, high_watermark)):
                if len(acquired) >= budget:
                    break
                if off < self.end_offset:
                    rec = self.records.get(off)
                    if rec is None or rec.state != RecordState.AVAILABLE:
                        continue
                    if b.is_control or b.aborted:
                        del self.records[off]
                        self.dirty = True
                        continue
                    rec.state, rec.member_id, rec.deadline_ms = RecordState.ACQUIRED, member_id, deadline
                    rec.delivery_count += 1
                    acquired.append(off)
                    hit = True
                    continue
                # a new offset: SPEO moves over it (and over a gap below it)
                if b.is_control or b.aborted:
                    self.end_offset = off + 1
                    self.dirty = True
                    continue
                if lo is None:
                    lo = off  # everything below is done
                if off - lo >= self.max_record_locks:
                    break
                self.end_offset = off + 1
                self.records[off] = InFlight(RecordState.ACQUIRED, 1, member_id, deadline)
                acquired.append(off)
                hit = True
            if hit:
                used.append(i)
        self._advance_start()
        return _ranges(acquired, self.records), used

    def acknowledge(self, member_id: str, first_offset: int, last_offset: int, types: list[int],
                    undo: list[tuple[int, InFlight, InFlight, bool]] | None = None) -> int:
        """One acknowledgement batch (ShareFetch/ShareAcknowledge ``AcknowledgementBatches``):
        ``types`` has one type for the whole range or one per offset. Checked whole before any
        change. Returns NONE, INVALID_REQUEST (malformed) or INVALID_RECORD_STATE (an offset
        that is not acquired by ``member_id``; a GAP may name an offset already done). Each
        record changed is appended to ``undo`` as ``(offset, record, its state before, whether
        it is done now)`` for :meth:`rollback`."""
        n = last_offset - first_offset + 1
        if first_offset < 0 or n <= 0 or not types or (len(types) != 1 and len(types) != n) \
                or any(t not in (0, 1, 2, 3) for t in types):
            return E.INVALID_REQUEST
        if last_offset >= self.end_offset:
            return E.INVALID_RECORD_STATE  # never delivered
        below = types if len(types) == 1 else types[:max(0, self.start_offset - first_offset)]
        if first_offset < self.start_offset and any(t != AckType.GAP for t in below):
            return E.INVALID_RECORD_STATE  # done already
        plan = []
        # Below SPSO everything is done: only the window [SPSO, SPEO) (at most max_record_locks
        # offsets) is walked, whatever range the request names.
        for off in range(max(first_offset, self.start_offset), last_offset + 1):
            i = off - first_offset
            t = types[0] if len(types) == 1 else types[i]
            rec = self.records.get(off)
            if rec is None or rec.state != RecordState.ACQUIRED or rec.member_id != member_id:
                if t == AckType.GAP and (rec is None and off < self.end_offset):
                    continue
                return E.INVALID_RECORD_STATE
            plan.append((off, rec, t))
        for off, rec, t in plan:
            before = InFlight(rec.state, rec.delivery_count, rec.member_id, rec.deadline_ms)
            if t == AckType.RELEASE:
                self._release(off, rec)
            else:  # ACCEPT, REJECT, GAP: done
                del self.records[off]
                self.dirty = True
            if undo is not None:
                undo.append((off, rec, before, off not in self.records))
        self._advance_start()
        return E.NONE

    def acknowledge_all(self, member_id: str, batches: Iterable[tuple[int, int, list[int]]]
                        ) -> tuple[int, list[tuple[int, InFlight, InFlight, bool]]]:
        """The acknowledgement batches of one partition of a request, all or nothing (Kafka
        ``SharePartition.acknowledge``: the first batch that fails rolls back the ones before
        it): ``(NONE, undo)`` (``undo`` for :meth:`rollback` if the new state cannot be
        stored), or ``(the failing batch's error, [])`` with nothing changed."""
        undo: list[tuple[int, InFlight, InFlight, bool]] = []
        dirty = self.dirty
        for first, last, types in batches:
            code = self.acknowledge(member_id, first, last, types, undo)
            if code:
                self.rollback(undo)
                self.dirty = dirty  # nothing to store for it
                return code, []
        return E.NONE, undo

    def rollback(self, undo: list[tuple[int, InFlight, InFlight, bool]]) -> None:
        """Put the records an acknowledgement changed back as they were (ACQUIRED by their
        member until their lock deadline: delivered again after it), as Kafka's
        ``SharePartition.rollbackOrProcessStateUpdates`` does when the state write fails.
        A record released by it that another member has acquired since is left to that member;
        one done by it (accepted, rejected, archived) cannot have changed since."""
        for off, rec, before, done in reversed(undo):
            cur = self.records.get(off)
            if done and cur is None:
                self.records[off] = before
            elif not done and cur is rec and rec.state == RecordState.AVAILABLE:
                rec.state, rec.member_id, rec.deadline_ms = before.state, before.member_id, before.deadline_ms
        self.start_offset = min(self.records, default=self.end_offset)
        self.dirty = True


def _ranges(offsets: list[int], records: dict[int, InFlight]) -> list[tuple[int, int, int]]:
    """Consecutive offsets with the same delivery count, as ``(first, last, count)``."""
    out: list[tuple[int, int, int]] = []
    for off in sorted(offsets):
        count = records[off].delivery_count
        if out and out[-1][1] == off - 1 and out[-1][2] == count:
            out[-1] = (out[-1][0], off, count)
        else:
            out.append((off, off, count))
    return out
