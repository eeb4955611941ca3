"""Idempotent-producer state of one partition: last batches per producer id, with snapshots.

Source: Kafka ``ProducerStateManager``, ``ProducerStateEntry``, ``ProducerAppendInfo`` (KIP-98,
KIP-360). For every producer id the entry keeps its epoch and the metadata of its last 5
batches (``first_seq, last_seq, first_offset, last_offset, max_timestamp``), so a retried batch
is recognised as a duplicate and answered with its original offsets.

Rules on a leader append (``origin=client``), per batch carrying a producer id:

- epoch older than the entry's -> :class:`InvalidProducerEpochError`;
- same epoch, ``(base_seq, last_seq)`` equal to one of the 5 remembered batches -> duplicate;
- epoch newer than the entry's -> base sequence must be 0 (else
  :class:`OutOfOrderSequenceError`), unless the entry had no epoch;
- same epoch -> base sequence must be ``last_seq + 1`` (wrapping at 2**31-1 to 0), else
  :class:`OutOfOrderSequenceError`;
- unknown producer id -> any sequence is accepted (Kafka >= 2.5, KIP-360: the state may have
  been removed by retention, so the broker cannot tell a new producer from a forgotten one).

Snapshots: ``<20-digit offset>.snapshot`` = the state covering every batch below that offset.
Binary, big-endian: ``version int16 (1), crc uint32 (CRC-32C of what follows), count int32``,
then ``count`` rows ``producer_id int64, epoch int16, first_seq int32, last_seq int32,
first_offset int64, last_offset int64, timestamp int64`` (one row per remembered batch, oldest
first). A snapshot whose CRC fails is ignored (the log is replayed from an older one).
"""

from __future__ import annotations

import logging
import os
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crc32c import crc32c

from litemq.protocol.errors import InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError
from litemq.protocol.records import BatchHeader
from litemq.storage.checkpoints import atomic_write

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT32_MAX = 2**31 - 1
_SNAP_HEAD = struct.Struct(">hIi")
_SNAP_ROW = struct.Struct(">qhiiqqq")
_SNAP_VERSION = 1


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
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch
        self.batches.append(meta)


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class ProducerStateManager:
    """Producer id -> :class:`ProducerStateEntry` for one partition, plus snapshot files.

    ``map_end_offset`` is the offset up to which batches have been applied. Not thread-safe:
    the owning log serialises calls.
    """

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0

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
    def check_client_append(self, headers: list[BatchHeader]) -> BatchMetadata | None:
        """Validate sequences/epochs of a client append without changing state.

        Returns the remembered :class:`BatchMetadata` of the first duplicate batch (the caller
        appends nothing and answers with its offsets), else ``None``. Raises
        :class:`InvalidProducerEpochError`, :class:`OutOfOrderSequenceError`,
        :class:`InvalidRecordError` (producer id with a negative sequence).
        """
        pending: dict[int, tuple[int, int]] = {}  # pid -> (epoch, last_seq) within this append
        for h in headers:
            pid = h.producer_id
            if pid < 0:
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
            elif not _in_sequence(cur_last, h.base_sequence) and (entry is not None or pid in pending):
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {epoch}: expected sequence {cur_last + 1}, got {h.base_sequence}")
            pending[pid] = (epoch, h.last_sequence)
        return None

    # ------------------------------------------------------------------ updates
    def update(self, h: BatchHeader, base_offset: int | None = None) -> None:
        """Apply one appended batch (leader, follower or replay). ``base_offset`` overrides the
        header's (the leader rewrites it in the buffer after parsing)."""
        first = h.base_offset if base_offset is None else base_offset
        last = first + h.last_offset_delta
        if h.producer_id >= 0:
            entry = self.producers.get(h.producer_id)
            if entry is None:
                entry = self.producers[h.producer_id] = ProducerStateEntry(h.producer_id)
            entry.add(h.producer_epoch, BatchMetadata(h.base_sequence, h.last_sequence, first, last,
                                                      h.max_timestamp))
        self.map_end_offset = last + 1

    def update_all(self, headers: Iterable[BatchHeader]) -> None:
        for h in headers:
            self.update(h)

    def clear(self, offset: int) -> None:
        self.producers.clear()
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
        """Write the current state as ``<map_end_offset>.snapshot`` (atomic; fsync if ``sync``)."""
        rows = []
        for entry in self.producers.values():
            for b in entry.batches:
                rows.append(_SNAP_ROW.pack(entry.producer_id, entry.epoch, b.first_seq, b.last_seq,
                                           b.first_offset, b.last_offset, b.timestamp))
        body = struct.pack(">i", len(rows)) + b"".join(rows)
        data = struct.pack(">hI", _SNAP_VERSION, crc32c(body)) + body
        atomic_write(self.dir / snapshot_name(self.map_end_offset), data, sync=sync)

    def _read_snapshot(self, offset: int) -> dict[int, ProducerStateEntry] | None:
        path = self.dir / snapshot_name(offset)
        try:
            data = path.read_bytes()
            version, crc, count = _SNAP_HEAD.unpack_from(data, 0)
            if version != _SNAP_VERSION or crc32c(memoryview(data)[6:]) != crc:
                raise ValueError("bad version or CRC")
            if len(data) != _SNAP_HEAD.size + count * _SNAP_ROW.size:
                raise ValueError("bad length")
        except (OSError, ValueError, struct.error) as exc:
            log.warning("ignoring producer snapshot %s: %s", path, exc)
            return None
        producers: dict[int, ProducerStateEntry] = {}
        for pid, epoch, fseq, lseq, foff, loff, ts in _SNAP_ROW.iter_unpack(memoryview(data)[_SNAP_HEAD.size:]):
            entry = producers.get(pid)
            if entry is None:
                entry = producers[pid] = ProducerStateEntry(pid)
            entry.add(epoch, BatchMetadata(fseq, lseq, foff, loff, ts))
        return producers

    def load_latest_snapshot(self, max_offset: int, min_offset: int = 0) -> bool:
        """Load the newest valid snapshot with ``min_offset <= offset <= max_offset``; sets
        ``map_end_offset`` to its offset. Returns False (state cleared to ``min_offset``) if none."""
        for off in reversed(self.snapshot_offsets()):
            if off > max_offset or off < min_offset:
                continue
            producers = self._read_snapshot(off)
            if producers is not None:
                self.producers = producers
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
