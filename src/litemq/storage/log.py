"""The durable log of one partition: segments, append, read, flush, recovery, truncation, retention.

Source: Kafka ``UnifiedLog`` + ``LocalLog`` (storage module); opening and crash recovery are
:mod:`litemq.storage.log_loader` (Kafka ``LogLoader``), compaction :mod:`litemq.storage.cleaner`
(Kafka ``LogCleaner``). Directory layout (Kafka's)::

    <topic>-<partition>/
        00000000000000000000.log / .index / .timeindex     segments, named by base offset
        00000000000000000000.txnindex                      aborted transactions of the segment
                                                           (only once one aborted in it)
        00000000000000000000.snapshot                      producer state snapshots
        leader-epoch-checkpoint                            epoch -> start offset
        offset-translator-checkpoint                       Raft-internal offsets (cluster logs)
        log-start-offset-checkpoint                        first readable offset
        recovery-point-offset-checkpoint                   everything below is fsynced
        .kafka_cleanshutdown                               present only after a clean close

Offsets: a replicated partition's log is its Raft log, so the offsets stored here are Raft
offsets; Raft-internal batches (a new leader's no-op) take one but no Kafka offset.
:attr:`PartitionLog.translator` (:class:`~litemq.storage.offset_translator.OffsetTranslator`)
follows every append, truncation and log start move, and is persisted and verified by
:mod:`litemq.storage.translator_store`; the broker translates at its edges and
:meth:`PartitionLog.read_for_clients` rewrites batches as clients see them. A log that never
held an internal batch (every single-broker log) translates as the identity.

Threading model: the event-loop thread calls :meth:`append`/:meth:`read`; worker threads may
call :meth:`flush`, :meth:`enforce_retention`, :meth:`delete_records_before` and
:meth:`compact` concurrently. One ``RLock`` guards the segment list and the offsets; it is held
only for in-memory work and short writes, never for an fsync nor for a compaction rewrite.
Group commit: :meth:`flush` takes the log end offset under the lock, fsyncs outside it, and then
advances ``flushed_offset``; every append before the snapshot is covered by that one fsync.

Page cache: by default the OS keeps written segment bytes cached as it sees fit (Kafka's
behaviour). With :attr:`PartitionLog.page_cache_retain_bytes` >= 0 (the broker setting
``log.page.cache.retain.bytes``), each :meth:`flush` drops what it made durable from the page
cache except the last ``page_cache_retain_bytes`` of the log (``posix_fadvise(DONTNEED)``): the
log's footprint in memory stays bounded, for machines where growing the page cache is costly
(virtual machines whose free memory goes back to the host; docs/benchmarks-cluster.md, tenth
round). Reads of older bytes then come from the disk.

Durability: ``recovery_point`` (== ``flushed_offset``) is the first offset not known to be on
disk. It is checkpointed lazily (segment roll, truncation, close, every
``RECOVERY_POINT_CHECKPOINT_INTERVAL_MS``); after a crash every batch from the segment holding
the checkpointed recovery point onwards is validated (length, magic, CRC) and a torn tail is
truncated. Data fsynced but not yet covered by the checkpoint is simply validated again.

Transactions (KIP-98; Kafka ``UnifiedLog``/``ProducerStateManager``/``TransactionIndex``): a
transactional data batch starts its producer's transaction; a COMMIT/ABORT control batch
(written by the coordinator, :attr:`AppendOrigin.COORDINATOR`, or replicated) completes it, and
an ABORT adds ``(producer_id, first_offset, last_offset, last_stable_offset)`` to the
``.txnindex`` of the segment holding the marker. Only control batches are ever decoded (one
record); data batches are handled by their headers. :meth:`last_stable_offset` gives the LSO for
a high watermark, :meth:`collect_aborted_transactions` the aborted list of a read_committed
fetch. Recovery rebuilds the ``.txnindex`` of every re-validated segment from producer state
replayed up to the segment's base; a ``.txnindex`` failing its size check on open makes its
segment (and the later ones) re-validated the same way.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from litemq.protocol.errors import InvalidRecordError, KafkaStorageError, OffsetOutOfRangeError
from litemq.protocol.records import (
    CONTROL_FLAG,
    BatchHeader,
    decode_batch,
    is_raft_internal_batch,
    iter_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_batches,
)
from litemq.protocol.regions import FileRegion
from litemq.storage.checkpoints import fsync_dir, write_checkpoint, write_offset_checkpoint
from litemq.storage.cleaner import CleanStats, LogCleaner
from litemq.storage.config import LogConfig
from litemq.storage.epoch_cache import LEADER_EPOCH_CHECKPOINT, LeaderEpochFileCache
from litemq.storage.offset_translator import OffsetTranslator, rewrite_for_clients
from litemq.storage.translator_store import (
    OFFSET_TRANSLATOR_CHECKPOINT,
    load_offset_translator,
    write_translator_checkpoint,
)
from litemq.storage.log_loader import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    LogLoader,
    aborted_txn,
    end_txn_marker,
    rebuild_producer_state,
)
from litemq.storage.producer_state import AppendOrigin, ProducerStateManager, VerificationGuard
from litemq.storage.segment import LogSegment

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT_INTERVAL_MS = 60_000
"""Kafka ``log.flush.offset.checkpoint.interval.ms`` default."""
PRODUCER_SNAPSHOTS_TO_KEEP = 2


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class AppendInfo:
    """Result of an append. Offsets inclusive; ``duplicate`` = idempotent retry, nothing written
    (the offsets are the original batch's)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int
    num_batches: int
    size_bytes: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches as file regions (for sendfile), or as ``bytes`` when they were rewritten
    (:meth:`PartitionLog.read_for_clients`). ``first_offset`` is the base offset of the first
    batch returned (<= the requested offset), or the requested offset when empty (log offsets)."""

    regions: list[FileRegion | bytes | bytearray]
    size: int
    first_offset: int

    def to_bytes(self) -> bytes:
        return b"".join(r if isinstance(r, (bytes, bytearray)) else r.read() for r in self.regions)

    def to_bytearray(self) -> bytearray:
        """The batches in one new ``bytearray`` of ``size`` bytes, file regions read straight
        into it (``os.preadv``: one copy). Raises OSError, or EOFError if a file is shorter
        than its region (a segment truncated meanwhile)."""
        out = bytearray(self.size)
        view = memoryview(out)
        pos = 0
        for r in self.regions:
            if isinstance(r, (bytes, bytearray)):
                view[pos:pos + len(r)] = r
                pos += len(r)
                continue
            got = 0
            while got < r.length:
                n = os.preadv(r.file.fileno(), [view[pos + got:pos + r.length]], r.position + got)
                if n == 0:
                    raise EOFError(f"{r.length - got} bytes missing at {r.position + got}")
                got += n
            pos += r.length
        return out


class PartitionLog:
    """Kafka ``UnifiedLog`` for one partition directory. Create with :meth:`open`."""

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.dir = directory
        self._config = config
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self._leo = 0
        self._flushed = 0
        self._checkpointed_recovery_point = 0
        # the first recovery-point checkpoint comes one interval after open, not at the first
        # flush: a broker opening or creating many partitions would otherwise write two
        # checkpoint files (fsync, rename, directory fsync each) per partition at once
        self._last_checkpoint_ms = _now_ms()
        self._truncations = 0
        self._dir_dirty = False
        self.unflushed_messages = 0
        self._first_unflushed_ms: int | None = None
        self.last_flush_ms = _now_ms()
        self._closed = False
        self.leader_epoch_cache = LeaderEpochFileCache(directory / LEADER_EPOCH_CHECKPOINT)
        self.producer_state = ProducerStateManager(directory)
        self.translator = OffsetTranslator()
        """Log (Raft) offset <-> Kafka offset of this log; see the module docstring."""
        self._cleaner = LogCleaner(self)
        self.page_cache_retain_bytes = -1
        """Bytes at the end of the log kept in the OS page cache once flushed; -1 (the default):
        the OS decides. See "Page cache" in the module docstring."""

    # ================================================================== properties
    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """New topic config; applies to later appends/rolls/retention (segments keep their files)."""
        with self._lock:
            self._config = config
            for seg in self._segments:
                seg.config = config

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def flushed_offset(self) -> int:
        """First offset not yet known durable (everything below it has been fsynced)."""
        return self._flushed

    @property
    def recovery_point(self) -> int:
        return self._flushed

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def segments(self) -> list[LogSegment]:
        """Snapshot of the segment list, oldest first (do not mutate)."""
        return self._segments

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def lock(self) -> threading.RLock:
        """The log lock (segment list, offsets); held only for in-memory work and short writes."""
        return self._lock

    @property
    def truncation_count(self) -> int:
        """How many truncations (:meth:`truncate_to`, :meth:`truncate_fully_and_start_at`) this
        log object has made; the cleaner abandons a clean that one overlapped."""
        return self._truncations

    @property
    def name(self) -> str:
        return self.dir.name

    def __repr__(self) -> str:
        return f"PartitionLog({self.dir}, start={self.log_start_offset}, end={self._leo})"

    # ================================================================== open / recovery
    @classmethod
    def open(cls, path: Path, config: LogConfig) -> PartitionLog:
        """Create or load the log in ``path``. After a clean close nothing is scanned; after a
        crash every batch past the recovery point is validated and a bad tail truncated.
        Raises :class:`KafkaStorageError` if the directory cannot be used."""
        path = Path(path)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise KafkaStorageError(f"cannot create log directory {path}: {exc}") from exc
        self = cls(path, config)
        loaded = LogLoader(path, config, self.leader_epoch_cache, self.producer_state).load()
        self._set_segments(loaded.segments)
        self.log_start_offset = loaded.log_start_offset
        self._leo = loaded.log_end_offset
        self._flushed = self._checkpointed_recovery_point = loaded.recovery_point
        self._dir_dirty = loaded.dir_dirty
        self.translator = load_offset_translator(path, self._segments, self.log_start_offset, self._leo)
        return self

    # ================================================================== segment list helpers
    def _set_segments(self, segments: list[LogSegment]) -> None:
        """Replace the segment list (copy-on-write: readers keep a consistent old list)."""
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

    def replace_segments(self, segments: list[LogSegment]) -> None:
        """(lock held) Install a new segment list holding the same offsets, consecutive inactive
        segments possibly merged into one at the first one's base offset (the cleaner's swap)."""
        self._set_segments(segments)

    def _segment_index_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def _segments_from(self, offset: int) -> list[LogSegment]:
        return self._segments[self._segment_index_for(offset):]

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"log {self.dir} is closed")

    # ================================================================== append
    def maybe_start_transaction_verification(self, producer_id: int, producer_epoch: int,
                                             now_ms: int | None = None) -> VerificationGuard | None:
        """KIP-890 part 1, before a leader asks the transaction coordinator whether
        ``producer_id``/``producer_epoch`` may write a transaction here (Kafka
        ``UnifiedLog.maybeStartTransactionVerification``): None when its transaction is already
        ongoing here in that epoch (its batches continue it and need no guard; Kafka's
        ``SENTINEL``), else the producer's :class:`VerificationGuard`, created now (timestamp
        ``now_ms``, wall clock ms) or reused. Pass it to :meth:`append` once the coordinator said
        yes; a transaction marker or transactional batch of the producer appended meanwhile
        invalidates it. Leader-local, in memory."""
        with self._lock:
            ps = self.producer_state
            if ps.has_ongoing_transaction(producer_id, producer_epoch):
                return None
            now = _now_ms() if now_ms is None else now_ms
            return ps.maybe_create_verification_state_entry(producer_id, producer_epoch, now).verification_guard

    def append(self, records: bytearray, *, leader_epoch: int, now_ms: int | None = None,
               origin: AppendOrigin = AppendOrigin.CLIENT,
               verification_guard: VerificationGuard | None = None) -> AppendInfo:
        """Leader append of a Produce partition's ``records`` (one or more whole batches), or of
        one transaction marker from the transaction coordinator.

        Validates from headers only (framing, magic 2, CRC, size <= ``max.message.bytes``,
        ``records_count == last_offset_delta + 1``), assigns dense offsets and ``leader_epoch``
        in place (``records`` is modified), stamps LogAppendTime if configured, writes with one
        ``pwrite``. Kafka ``UnifiedLog.appendAsLeader`` + ``ProducerAppendInfo``:

        - ``origin=CLIENT``: control batches are refused (:class:`InvalidRecordError`);
          idempotent-producer sequences/epochs are checked (a retried batch answers
          ``duplicate=True`` with its original offsets); a transactional batch starts its
          producer's transaction at its base offset if none is ongoing, and only when
          ``verification_guard`` is the producer's current guard (KIP-890 part 1, see
          :meth:`maybe_start_transaction_verification`), else :class:`InvalidTxnStateError`;
          a non-transactional batch from a producer with an ongoing transaction raises
          :class:`InvalidTxnStateError` too.
        - ``origin=COORDINATOR``: ``records`` must be exactly one control batch with one
          COMMIT/ABORT record (else :class:`InvalidRecordError`); its producer epoch must not be
          older than the producer's (:class:`InvalidProducerEpochError`) nor its coordinator
          epoch older than the last recorded one (:class:`TransactionCoordinatorFencedError`).
          No sequence check. It completes the producer's transaction; an ABORT is added to the
          active segment's ``.txnindex``.

        Also raises :class:`CorruptRecordError`, :class:`RecordTooLargeError`,
        :class:`UnsupportedCompressionError`, :class:`OutOfOrderSequenceError`,
        :class:`KafkaStorageError`. The log is unchanged whenever an error is raised.
        """
        buf = records if isinstance(records, bytearray) else bytearray(records)
        config = self._config
        headers = validate_batches(buf, max_batch_bytes=config.max_message_bytes, dense=True)
        if not headers:
            raise InvalidRecordError("no record batch in the append")
        markers = None
        if origin is AppendOrigin.COORDINATOR:
            h0 = headers[0]
            if len(headers) != 1 or not h0.is_control or h0.producer_id < 0:
                raise InvalidRecordError("a coordinator append must be one control batch with a producer id")
            marker = end_txn_marker(buf, 0, h0, strict=True)
            markers = {0: marker}
        elif origin is AppendOrigin.CLIENT:
            for h in headers:
                if h.is_control:
                    raise InvalidRecordError("clients may not write control batches")
        else:
            raise ValueError(f"unknown append origin {origin!r}")
        now = _now_ms() if now_ms is None else now_ms
        append_time = config.log_append_time
        with self._lock:
            self._check_open()
            if markers is not None:
                self.producer_state.check_end_txn_marker(h0.producer_id, h0.producer_epoch, marker[1])
            else:
                dup = self.producer_state.check_client_append(headers, verification_guard)
                if dup is not None:
                    return AppendInfo(dup.first_offset, dup.last_offset, dup.timestamp, -1, len(headers), 0, True)
            offset = first = self._leo
            pos = 0
            max_ts, offset_of_max = -1, -1
            bases = []
            for h in headers:
                set_base_offset(buf, pos, offset)
                set_partition_leader_epoch(buf, pos, leader_epoch)
                if append_time:
                    set_log_append_time(buf, pos, now)
                ts = now if append_time else h.max_timestamp
                bases.append(offset)
                offset += h.last_offset_delta + 1
                if ts > max_ts:
                    max_ts, offset_of_max = ts, offset - 1
                pos += h.batch_length + 12
            self._append_locked(buf, headers, bases, leader_epoch, max_ts, offset_of_max, now, markers)
            return AppendInfo(first, offset - 1, max_ts, now if append_time else -1, len(headers), len(buf))

    def append_as_follower(self, records: bytearray | bytes, *, now_ms: int | None = None,
                           first_offset: int | None = None) -> AppendInfo:
        """Append batches whose offsets (and epochs) were assigned by the leader.

        ``first_offset``: the offset this append continues the log from, i.e. the Raft entry's
        offset (:class:`~litemq.raft.Entry`), which must be ``log_end_offset``. The first batch
        may start above it: the leader's compaction removed the records in between, and a
        compaction gap belongs to the batch after it (``PartitionLogView.entries``). Kafka
        accepts any offset gap in a follower append (``UnifiedLog.append``: only a first offset
        below the log end is refused, ``UnexpectedAppendOffsetException``); this one keeps the
        stricter check that the entry itself starts at the log end, so the Raft log never gets
        a hole it was not told of. The gap's offsets get no record, no Kafka offset of their own
        and no leader epoch entry (the epoch cache records the batch at its base offset, as a
        Kafka follower does), and the offset translator's end moves over them (every replica
        keeps the same Raft-internal offsets, compaction never removes those, so a record has
        the same Kafka offset on every replica). ``None`` (the default): the first batch must
        start at ``log_end_offset``.

        Later batches' offsets must increase (gaps between them are allowed, as in a compacted
        log), else :class:`InvalidRecordError`; so is a ``first_offset`` other than the log end
        or a first batch below it. Producer sequences and transactions are recorded, not
        checked (Kafka ``AppendOrigin.REPLICATION``): transactional batches start transactions,
        COMMIT/ABORT control batches complete them (ABORTs go to the ``.txnindex``); other
        control batches (LEADER_CHANGE) and undecodable ones are not transaction markers.
        Returns the offsets of the first and last record (``first_offset`` is the first
        batch's base offset).
        """
        buf = records
        headers = validate_batches(buf)
        if not headers:
            raise InvalidRecordError("no record batch in the append")
        markers: dict[int, tuple[int, int]] | None = None
        pos = 0
        for i, h in enumerate(headers):
            if h.is_control and h.producer_id >= 0:
                marker = end_txn_marker(buf, pos, h)
                if marker is not None:
                    if markers is None:
                        markers = {}
                    markers[i] = marker
            pos += h.batch_length + 12
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            expected = self._leo
            base = headers[0].base_offset
            if first_offset is None:
                first_offset = base
            if first_offset != expected or base < expected:
                raise InvalidRecordError(
                    f"follower append at offset {first_offset} (first batch at {base}), log end offset is {expected}")
            max_ts, offset_of_max = -1, -1
            nxt = expected
            for h in headers:
                if h.base_offset < nxt:
                    raise InvalidRecordError(f"follower batch offset {h.base_offset} < expected {nxt}")
                nxt = h.base_offset + h.last_offset_delta + 1
                if h.max_timestamp > max_ts:
                    max_ts, offset_of_max = h.max_timestamp, nxt - 1
            self._append_locked(buf, headers, None, None, max_ts, offset_of_max, now, markers)
            return AppendInfo(base, nxt - 1, max_ts, -1, len(headers), len(buf))

    def _append_locked(self, buf, headers: list[BatchHeader], bases: list[int] | None, epoch: int | None,
                       max_ts: int, offset_of_max: int, now: int,
                       markers: dict[int, tuple[int, int]] | None = None) -> None:
        """Write, then update epochs and producer state. ``markers``: batch index ->
        ``(control_type, coordinator_epoch)`` of the transaction markers among ``headers``."""
        first = bases[0] if bases else headers[0].base_offset
        last_h = headers[-1]
        last = (bases[-1] if bases else last_h.base_offset) + last_h.last_offset_delta
        seg = self.active_segment
        if seg.should_roll(len(buf), max_ts, last, now):
            seg = self._roll(first)
        seg.append(buf, last, max_ts, offset_of_max)
        self._leo = last + 1
        cache = self.leader_epoch_cache
        ps = self.producer_state
        translator = self.translator
        count = 0
        pos = 0
        for i, h in enumerate(headers):
            base = bases[i] if bases else h.base_offset
            if h.attributes & CONTROL_FLAG and is_raft_internal_batch(buf, pos, h):
                translator.extend(base)
                translator.append(base, h.last_offset_delta + 1, True)
            pos += h.batch_length + 12
            cache.assign(h.partition_leader_epoch if epoch is None else epoch, base)
            done = ps.update(h, base, markers.get(i) if markers else None)
            if done is not None and done.is_aborted:
                if seg.txn_index.is_empty:
                    self._dir_dirty = True  # the .txnindex file may be new
                seg.txn_index.append(aborted_txn(done))
            count += h.records_count
        translator.extend(last + 1)
        self.unflushed_messages += count
        if self._first_unflushed_ms is None:
            self._first_unflushed_ms = now

    def _roll(self, new_base: int) -> LogSegment:
        """Close the active segment for appends and start a new one at ``new_base`` (the LEO, or
        the base offset of a follower's first batch after a compaction gap, as Kafka names a
        segment by its first batch)."""
        old = self.active_segment
        seg = LogSegment.create(self.dir, new_base, self._config)  # may raise KafkaStorageError
        old.on_become_inactive()
        if old.size == 0:
            # An empty active segment is replaced (Kafka deletes and recreates it).
            old.delete_files()
            segments = self._segments[:-1]
        else:
            segments = list(self._segments)
        self._set_segments(segments + [seg])
        self._dir_dirty = True
        self.producer_state.map_end_offset = new_base
        try:
            self.producer_state.take_snapshot(sync=False)
        except OSError as exc:
            log.warning("%s: cannot write producer snapshot at %d: %s", self.dir, new_base, exc)
        self.producer_state.delete_snapshots(below=new_base, keep_latest=PRODUCER_SNAPSHOTS_TO_KEEP - 1)
        log.debug("%s: rolled new segment at offset %d", self.dir, new_base)
        return seg

    def roll(self) -> None:
        """Force a roll of the active segment (if it holds data)."""
        with self._lock:
            if self.active_segment.size:
                self._roll(self._leo)

    # ================================================================== read
    def read(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True) -> ReadResult:
        """Whole batches from the one containing ``start_offset``, as file regions.

        More batches follow while the total stays <= ``max_bytes`` and their base offset is
        < ``max_offset`` (exclusive; the high watermark). The first batch is returned whole even
        if larger than ``max_bytes`` when ``min_one_batch``. ``start_offset == log_end_offset``
        (or >= ``max_offset``) gives an empty result. Raises :class:`OffsetOutOfRangeError` when
        ``start_offset`` is below the log start or above the log end.
        """
        with self._lock:
            leo = self._leo
            if start_offset < self.log_start_offset or start_offset > leo:
                raise OffsetOutOfRangeError(
                    f"offset {start_offset} out of range [{self.log_start_offset}, {leo}] of {self.name}")
            limit_offset = leo if max_offset is None else min(max_offset, leo)
            regions: list[FileRegion] = []
            if start_offset >= limit_offset:
                return ReadResult(regions, 0, start_offset)
            segments = self._segments
            i = self._segment_index_for(start_offset)
            total = 0
            first_offset = None
            while i < len(segments):
                seg = segments[i]
                i += 1
                seg_end_offset = segments[i].base_offset if i < len(segments) else leo
                found = seg.find(start_offset)
                if found is None:
                    continue
                pos, h = found
                if h.base_offset >= limit_offset:
                    break
                budget = max_bytes - total
                if h.size > budget and not (min_one_batch and first_offset is None):
                    break
                end = pos + h.size
                if budget > h.size:
                    end = seg.batch_boundary_at_or_before(pos + budget, end)
                if limit_offset < seg_end_offset and end > pos + h.size:
                    bound = seg.find(limit_offset, pos + h.size)
                    if bound is not None:
                        bpos, bh = bound
                        end = min(end, bpos + bh.size if bh.base_offset < limit_offset else bpos)
                if first_offset is None:
                    first_offset = h.base_offset
                regions.append(FileRegion(seg.file, pos, end - pos))
                total += end - pos
                if end < seg.size or total >= max_bytes or seg_end_offset >= limit_offset:
                    break
            return ReadResult(regions, total, start_offset if first_offset is None else first_offset)

    def read_for_clients(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
                         min_one_batch: bool = True) -> ReadResult:
        """:meth:`read` (log offsets in, as there) with the batches as a Kafka client must see
        them: base offsets in Kafka offsets, Raft-internal batches left out
        (:func:`~litemq.storage.offset_translator.rewrite_for_clients`). File regions, untouched,
        while the translator is the identity over what was read (every single-broker log, and a
        replicated one until a leader inherits uncommitted records); else one ``bytes`` region.
        Raises what :meth:`read` raises."""
        with self._lock:
            res = self.read(start_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
            translator = self.translator
            if not res.size or translator.is_identity_below(self._leo):
                return res
            data = rewrite_for_clients(res.to_bytearray(), translator)
            while not data and res.size:
                # Only internal batches were read (compaction left nothing before them): go on
                # past them, so a client never sees an empty answer where records follow.
                nxt = res.first_offset + 1
                for _, h in iter_batches(res.to_bytes()):
                    nxt = h.base_offset + h.last_offset_delta + 1
                if nxt >= self._leo or (max_offset is not None and nxt >= max_offset):
                    break
                res = self.read(nxt, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)
                data = rewrite_for_clients(res.to_bytearray(), translator) if res.size else b""
            return ReadResult([data] if data else [], len(data), res.first_offset)

    def read_bytes(self, start_offset: int, max_bytes: int, *, max_offset: int | None = None,
                   min_one_batch: bool = True) -> bytes:
        """:meth:`read` as one ``bytes`` (tests, tools, the non-sendfile path)."""
        return self.read(start_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch).to_bytes()

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record with timestamp >= ``timestamp_ms``
        (ListOffsets by time, Kafka ``fetchOffsetByTimestamp``); ``None`` if there is none.
        The matching batch is decoded to find the exact record (rare path)."""
        with self._lock:
            start = self.log_start_offset
            segments = self._segments
            for seg in segments[self._segment_index_for(start):]:
                seg.ensure_indexes()
                if seg.max_timestamp < timestamp_ms:
                    continue
                found = seg.find_offset_by_timestamp(timestamp_ms, start)
                if found is None:
                    continue
                pos, h = found
                data = os.pread(seg.fd, h.size, pos)
                break
            else:
                return None
        return _first_record_at_or_after(data, h, timestamp_ms, start)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """``(offset, timestamp)`` of the first record holding the largest timestamp in the log
        (ListOffsets with timestamp -3, KIP-734; Kafka ``UnifiedLog.fetchOffsetByTimestamp``):
        the first segment with the largest max timestamp, in it the first batch whose header
        max timestamp equals it (found from the segment's offset of max timestamp), and that one
        batch decoded for the exact record (Kafka ``RecordBatch.offsetOfMaxTimestamp``).
        Records below the log start offset are not considered. ``None`` for a log with no
        timestamped batch. The caller filters by high watermark."""
        with self._lock:
            start = self.log_start_offset
            best = None
            for seg in self._segments[self._segment_index_for(start):]:
                seg.ensure_indexes()
                if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                    best = seg
            if best is None:
                return None
            ts = best.max_timestamp
            found = best.find(max(best.offset_of_max_timestamp, start))
            if found is None or found[1].max_timestamp != ts:  # index disagrees: scan the segment
                found = next(((p, h) for p, h in best.iter_headers()
                              if h.max_timestamp == ts and h.base_offset + h.last_offset_delta >= start), found)
            if found is None:
                return None
            pos, h = found
            data = os.pread(best.fd, h.size, pos)
        return _first_record_with_max_timestamp(data, h, start)

    # ================================================================== transactions
    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's LSO for ``high_watermark``: ``min(high_watermark, first unstable offset)``,
        where the first unstable offset is the smallest first offset of the ongoing
        transactions and of the completed ones whose marker offset is >= ``high_watermark``
        (Kafka ``unreplicatedTxns``), raised to the log start offset if below it (Kafka
        ``UnifiedLog.maybeIncrementFirstUnstableOffset``). O(log n) amortised; a high watermark
        above every earlier one forgets the completions below it (see
        :class:`ProducerStateManager`), so pass the current one."""
        with self._lock:
            first = self.producer_state.first_unstable_offset_at(high_watermark)
            if first is None or first >= high_watermark:
                return high_watermark
            return min(high_watermark, max(first, self.log_start_offset))

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest ongoing transaction (not counting completed ones), or
        None (DescribeProducers, tools)."""
        with self._lock:
            return self.producer_state.first_unstable_offset

    def ongoing_transactions(self) -> list[tuple[int, int, int]]:
        """``(producer_id, producer_epoch, first_offset)`` of every ongoing transaction, sorted by
        first offset (DescribeProducers, ListTransactions)."""
        with self._lock:
            return self.producer_state.ongoing_transactions()

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of every aborted transaction with
        ``last_offset >= max(start_offset, log_start_offset)`` and
        ``first_offset < upper_bound_offset``, sorted by first offset: the ``AbortedTransactions``
        of a read_committed fetch from ``start_offset`` whose data ends below
        ``upper_bound_offset`` (Kafka ``UnifiedLog.collectAbortedTransactions``: the
        ``.txnindex`` of the segment holding ``start_offset`` and of the later ones, stopping at
        the first entry whose ``last_stable_offset >= upper_bound_offset``)."""
        with self._lock:
            start = max(start_offset, self.log_start_offset)
            segments = self._segments
            out: list[tuple[int, int]] = []
            for seg in segments[self._segment_index_for(start):]:
                entries, complete = seg.txn_index.collect(start, upper_bound_offset)
                out += [(e.producer_id, e.first_offset) for e in entries]
                if complete:
                    break
        out.sort(key=lambda t: (t[1], t[0]))
        return out

    # ================================================================== flush
    def flush(self) -> None:
        """fsync everything appended so far (group commit; safe from any thread).

        Advances ``flushed_offset``/``recovery_point`` to the log end offset seen on entry.
        Raises :class:`KafkaStorageError` if fsync fails (``flushed_offset`` unchanged).
        """
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                target = self._leo
                truncations = self._truncations
                if target <= self._flushed and not self._dir_dirty:
                    return
                segs = self._segments_from(self._flushed)
                sizes = [seg.size for seg in segs] if self.page_cache_retain_bytes >= 0 else None
                dir_dirty, self._dir_dirty = self._dir_dirty, False
                self.unflushed_messages = 0
                self._first_unflushed_ms = None
                for seg in segs:
                    seg.flush_indexes(sync=False)
            try:
                for seg in segs:
                    seg.sync()
                if dir_dirty:
                    fsync_dir(self.dir)
            except (OSError, KafkaStorageError) as exc:
                with self._lock:
                    self._dir_dirty = self._dir_dirty or dir_dirty
                raise exc if isinstance(exc, KafkaStorageError) else KafkaStorageError(str(exc))
            if sizes is not None and self._truncations == truncations:
                self._drop_flushed_from_cache(segs, sizes)  # (after a truncation: at the next flush)
            now = _now_ms()
            with self._lock:
                self.last_flush_ms = now
                if self._truncations == truncations and target > self._flushed:
                    self._flushed = target
                need_checkpoint = self._recovery_checkpoint_due(now)
            if need_checkpoint:
                self._checkpoint_recovery_point()

    def _drop_flushed_from_cache(self, segs: list[LogSegment], sizes: list[int]) -> None:
        """Drop durable bytes from the page cache except the last :attr:`page_cache_retain_bytes`
        of them. ``segs`` were just fsynced up to ``sizes``; the segments before them were durable
        already, the ones after them (rolled since) are not yet. Walks back from the newest durable
        byte and stops at the first segment that lies before the kept window and is dropped
        entirely (the older ones were dropped before it)."""
        keep = self.page_cache_retain_bytes
        synced = {id(seg): size for seg, size in zip(segs, sizes)}
        last_base = segs[-1].base_offset
        with self._lock:
            candidates = [seg for seg in self._segments if seg.base_offset <= last_base]
        for seg in reversed(candidates):
            size = synced.get(id(seg), seg.size)
            kept = min(size, keep)
            keep -= kept
            if kept == 0 and seg.cache_dropped_bytes >= size:
                break
            seg.drop_cache_before(size - kept)

    def _recovery_checkpoint_due(self, now: int) -> bool:
        if self._flushed == self._checkpointed_recovery_point:
            return False
        if now - self._last_checkpoint_ms >= RECOVERY_POINT_CHECKPOINT_INTERVAL_MS:
            return True
        # Crossing a segment boundary: recovery would rescan a whole old segment otherwise.
        return self._segment_index_for(self._flushed) != self._segment_index_for(self._checkpointed_recovery_point)

    def _checkpoint_recovery_point(self) -> None:
        """Make indexes below the flushed offset durable, then checkpoint the recovery point."""
        with self._lock:
            point = self._flushed
            segs = [s for s in self._segments_from(self._checkpointed_recovery_point)
                    if s.base_offset < point]
            for s in segs:
                s.flush_indexes(sync=False)
        for s in segs:
            s.flush_indexes(sync=True)
        with self._lock:
            entries = self.translator.checkpoint_entries()
        write_checkpoint(self.dir / OFFSET_TRANSLATOR_CHECKPOINT, entries)
        write_offset_checkpoint(self.dir / RECOVERY_POINT_CHECKPOINT, point)
        with self._lock:
            if self._flushed >= point:
                self._checkpointed_recovery_point = point
            self._last_checkpoint_ms = _now_ms()

    def flush_due(self, now_ms: int | None = None) -> bool:
        """Whether the flush policy asks for an fsync now: ``flush.messages`` reached,
        ``flush.ms`` elapsed, or (durable default) anything unflushed."""
        if self.unflushed_messages == 0:
            return False
        cfg = self._config
        if cfg.flush_messages is None:
            return True
        if self.unflushed_messages >= cfg.flush_messages:
            return True
        if cfg.flush_ms is not None and self._first_unflushed_ms is not None:
            now = _now_ms() if now_ms is None else now_ms
            return now - self._first_unflushed_ms >= cfg.flush_ms
        return False

    # ================================================================== truncation
    def truncate_to(self, offset: int) -> None:
        """Remove every offset >= ``offset`` (Raft conflict / follower divergence), with the
        ``.txnindex`` entries of aborts at/after it; producer state (sequences, transactions) is
        rebuilt from a snapshot below ``offset``.

        Batches are never split: if ``offset`` falls inside a batch, that whole batch goes and
        the log end becomes its base offset (Raft truncates at batch boundaries anyway).
        ``offset <= log_start_offset`` empties the log (:meth:`truncate_fully_and_start_at`)."""
        with self._lock:
            self._check_open()
            if offset >= self._leo:
                return
            if offset <= self.log_start_offset:
                self.truncate_fully_and_start_at(offset)
                return
            log.info("%s: truncating from offset %d (log end %d)", self.dir, offset, self._leo)
            i = self._segment_index_for(offset)
            segments = self._segments
            keep, doomed = segments[: i + 1], segments[i + 1:]
            if segments[i].base_offset >= offset and i > 0:
                keep, doomed = segments[:i], segments[i:]
            self._set_segments(keep)
            for s in doomed:
                s.delete_files()
            active = self.active_segment
            found = active.find(offset)
            if found is not None and found[1].base_offset < offset:
                offset = max(found[1].base_offset, self.log_start_offset)  # never split a batch
            active.truncate_to(offset)
            active.next_offset = offset
            self._leo = offset
            self._truncations += 1
            self._dir_dirty = True
            if self._flushed > offset:
                self._flushed = offset
            self.translator.truncate(offset)
            self._checkpoint_translator()
            self.leader_epoch_cache.truncate_from_end(offset)
            self.unflushed_messages = 0
            floor = min(self.producer_state.completed_floor, offset)
            rebuild_producer_state(self.producer_state, self._segments, self.log_start_offset, offset)
            self.producer_state.raise_completed_floor(floor)
            self._checkpoint_recovery_now()

    def _checkpoint_translator(self) -> None:
        """(locked) Persist the offset translator (fsynced; see translator_store)."""
        try:
            write_translator_checkpoint(self.dir, self.translator)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write the offset translator checkpoint of {self.dir}: {exc}") from exc

    def _checkpoint_recovery_now(self) -> None:
        point = min(self._flushed, self._checkpointed_recovery_point)
        write_offset_checkpoint(self.dir / RECOVERY_POINT_CHECKPOINT, point)
        self._checkpointed_recovery_point = point
        self._last_checkpoint_ms = _now_ms()

    def truncate_fully_and_start_at(self, offset: int, internal_below: int | None = None) -> None:
        """Delete all data; the log restarts empty at ``offset`` (start = end = ``offset``).

        ``internal_below``: Raft-internal offsets below ``offset`` (a follower starting afresh
        at its leader's log start takes the leader's count, so both translate alike); ``None``
        keeps this log's own count at ``offset``."""
        with self._lock:
            self._check_open()
            log.info("%s: truncating fully, restarting at offset %d", self.dir, offset)
            if internal_below is None:
                internal_below = offset - self.translator.kafka_offset(offset)
            self.translator.reset(offset, max(0, min(internal_below, offset)))
            self._checkpoint_translator()
            for s in self._segments:
                s.delete_files()
            self._set_segments([LogSegment.create(self.dir, offset, self._config)])
            self._leo = self.log_start_offset = self._flushed = offset
            self._truncations += 1
            self._dir_dirty = True
            self.unflushed_messages = 0
            self.leader_epoch_cache.clear()
            self.producer_state.delete_snapshots(above=-1)
            self.producer_state.clear(offset)
            write_offset_checkpoint(self.dir / LOG_START_OFFSET_CHECKPOINT, offset)
            self._checkpoint_recovery_now()
            fsync_dir(self.dir)
            self._dir_dirty = False

    # ================================================================== retention
    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers idle for ``expiration_ms`` with no transaction ongoing (Kafka's
        ``producer.id.expiration.ms``; :meth:`ProducerStateManager.remove_expired`); how many."""
        with self._lock:
            return self.producer_state.remove_expired(now_ms, expiration_ms)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to ``offset`` (<= log end), delete whole
        segments below it, checkpoint. Returns the new log start offset.
        Raises :class:`OffsetOutOfRangeError` if ``offset`` > log end offset."""
        with self._lock:
            self._check_open()
            if offset > self._leo:
                raise OffsetOutOfRangeError(f"cannot delete records before {offset}: log end is {self._leo}")
            if offset > self.log_start_offset:
                self._advance_log_start(offset)
            return self.log_start_offset

    def _advance_log_start(self, offset: int) -> None:
        """(locked) Set the log start, drop segments wholly below it, update caches, checkpoint
        (the offset translator first: the count of internal offsets below the new start cannot
        be recomputed once the segments are gone)."""
        self.translator.prefix_truncate(min(offset, self.translator.end_raft_offset))
        self._checkpoint_translator()
        self.log_start_offset = offset
        segments = self._segments
        n = 0
        while n + 1 < len(segments) and segments[n + 1].base_offset <= offset:
            n += 1
        if n:
            self._delete_segments(n)
        self.leader_epoch_cache.truncate_from_start(offset)
        self.producer_state.delete_snapshots(below=offset, keep_latest=0)
        write_offset_checkpoint(self.dir / LOG_START_OFFSET_CHECKPOINT, offset)

    def _delete_segments(self, n: int) -> None:
        """(locked) Delete the ``n`` oldest segments (never the active one); log start follows."""
        doomed = self._segments[:n]
        self._set_segments(self._segments[n:])
        for s in doomed:
            s.delete_files()
        log.info("%s: deleted %d segments (offsets %d..%d)", self.dir, n, doomed[0].base_offset,
                 self._segments[0].base_offset - 1)

    def enforce_retention(self, now_ms: int | None = None, high_watermark: int | None = None) -> int:
        """Delete old segments by ``retention.ms`` (segment's largest timestamp, or its file
        mtime when it has none) and ``retention.bytes``; only with ``cleanup.policy`` containing
        ``delete``. If the active segment itself has expired it is rolled first, so only
        inactive segments are deleted. With ``high_watermark`` (log offset) the new log start
        never passes it: only segments wholly below it go (Kafka ``UnifiedLog.deletableSegments``
        bounds them by the high watermark), so retention never deletes records that are not
        committed yet. Returns the number of segments deleted."""
        now = _now_ms() if now_ms is None else now_ms
        with self._lock:
            self._check_open()
            cfg = self._config
            if not cfg.delete:
                return 0
            n = 0
            segments = self._segments
            if cfg.retention_ms >= 0:
                while n < len(segments) and now - self._largest_timestamp(segments[n]) > cfg.retention_ms:
                    n += 1
                if n == len(segments):
                    if self.active_segment.size:
                        self._roll(self._leo)
                        segments = self._segments
                    else:
                        n -= 1
            if cfg.retention_bytes >= 0:
                diff = sum(s.size for s in segments) - cfg.retention_bytes
                m = 0
                while m < len(segments) - 1 and diff - segments[m].size >= 0:
                    diff -= segments[m].size
                    m += 1
                n = max(n, m)
            n = min(n, len(segments) - 1)
            if high_watermark is not None:
                while n > 0 and segments[n].base_offset > high_watermark:
                    n -= 1
            if n <= 0:
                return 0
            new_start = segments[n].base_offset
            if new_start > self.log_start_offset:
                self._advance_log_start(new_start)  # deletes the n segments wholly below it
            else:
                self._delete_segments(n)
            return n

    @staticmethod
    def _largest_timestamp(seg: LogSegment) -> int:
        seg.ensure_indexes()
        if seg.max_timestamp >= 0:
            return seg.max_timestamp
        try:
            return int(os.stat(seg.log_path).st_mtime * 1000)
        except FileNotFoundError:
            return 0

    # ================================================================== compaction
    def compact(self, now_ms: int | None = None, *, high_watermark: int) -> CleanStats:
        """Compact (``cleanup.policy`` contains ``compact``) the inactive segments wholly below
        ``high_watermark`` (exclusive offset: records at/after it may still be truncated, Kafka
        cleans below the LSO <= high watermark) and the first unstable offset; ``now_ms``
        (epoch ms, default now) dates ``min.compaction.lag.ms`` and ``delete.retention.ms``.
        One clean at a time per log (a concurrent call is skipped); a clean overlapped by a
        truncation is abandoned (``skipped``). See :mod:`litemq.storage.cleaner`."""
        return self._cleaner.clean(_now_ms() if now_ms is None else now_ms, high_watermark)

    # ================================================================== close / delete
    def close(self) -> None:
        """Flush, write checkpoints and a producer snapshot, then the clean-shutdown marker.

        The active segment's time index gets its largest timestamp as last entry first (Kafka
        ``LogSegment.close``): a log opened after a clean close reads each segment's largest
        timestamp from there (ListOffsets by timestamp and MAX_TIMESTAMP, retention)."""
        with self._lock:
            if self._closed:
                return
        self.flush()
        with self._flush_lock, self._lock:
            if self._closed:
                return
            point = self._leo
            self.active_segment.append_max_timestamp_entry()
            for s in self._segments_from(self._checkpointed_recovery_point):
                s.flush_indexes(sync=True)
            write_offset_checkpoint(self.dir / RECOVERY_POINT_CHECKPOINT, point)
            write_offset_checkpoint(self.dir / LOG_START_OFFSET_CHECKPOINT, self.log_start_offset)
            self._checkpoint_translator()
            self.leader_epoch_cache.flush()
            self.producer_state.map_end_offset = point
            self.producer_state.take_snapshot(sync=True)
            self.producer_state.delete_snapshots(below=point, keep_latest=PRODUCER_SNAPSHOTS_TO_KEEP - 1)
            marker = self.dir / CLEAN_SHUTDOWN_MARKER
            marker.touch()
            fsync_dir(self.dir)
            self._closed = True
            self._set_segments(list(self._segments))

    def delete(self) -> None:
        """Remove the whole directory (topic deletion). Open file objects are left to the GC."""
        with self._lock:
            self._closed = True
            shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def closed(self) -> bool:
        return self._closed


def _first_record_with_max_timestamp(data: bytes, h: BatchHeader, min_offset: int) -> tuple[int, int]:
    """Exact ``(offset, timestamp)`` of the first record of batch ``data`` (offset >=
    ``min_offset``) whose timestamp is the batch header's max timestamp (Kafka
    ``RecordBatch.offsetOfMaxTimestamp``); if ``min_offset`` cut that record off, the record with
    the largest timestamp at/after ``min_offset``; the batch's last offset if none decodes."""
    if h.timestamp_type == 1:  # LogAppendTime: every record has the batch max timestamp
        return max(h.base_offset, min_offset), h.max_timestamp
    best: tuple[int, int] | None = None
    for rec in decode_batch(data)[1]:
        if rec.offset < min_offset:
            continue
        if rec.timestamp == h.max_timestamp:
            return rec.offset, rec.timestamp
        if best is None or rec.timestamp > best[1]:
            best = (rec.offset, rec.timestamp)
    return best if best is not None else (h.base_offset + h.last_offset_delta, h.max_timestamp)


def _first_record_at_or_after(data: bytes, h: BatchHeader, timestamp_ms: int, min_offset: int) -> tuple[int, int]:
    """Exact ``(offset, timestamp)`` of the first record of batch ``data`` with timestamp >=
    ``timestamp_ms`` and offset >= ``min_offset``; falls back to the batch's last offset."""
    if h.timestamp_type == 1:  # LogAppendTime: every record has the batch max timestamp
        return max(h.base_offset, min_offset), h.max_timestamp
    for rec in decode_batch(data)[1]:
        if rec.offset >= min_offset and rec.timestamp >= timestamp_ms:
            return rec.offset, rec.timestamp
    return h.base_offset + h.last_offset_delta, h.max_timestamp
