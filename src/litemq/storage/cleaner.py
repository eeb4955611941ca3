"""Log compaction (``cleanup.policy=compact``): keep the latest record of every key.

Source: Kafka ``LogCleaner`` / ``Cleaner`` (``doClean``, ``cleanSegments``,
``buildOffsetMap``), ``LogCleanerManager`` (dirty ratio, ``cleaner-offset-checkpoint``).

Algorithm, run by :meth:`PartitionLog.compact` on a worker thread in three phases
(:meth:`LogCleaner.plan`, :meth:`~LogCleaner.rewrite`, :meth:`~LogCleaner.swap`); one clean
of a log at a time (a second concurrent call is skipped):

1. Under the log lock, take the *cleanable* segments: every inactive segment, oldest first,
   stopping at the first one holding a record younger than ``min.compaction.lag.ms`` or an
   offset at/after the high watermark or the first unstable offset (ongoing transactions and
   completed ones whose marker may not be replicated yet). Kafka ``LogCleanerManager`` bounds
   cleaning by the LSO, which is <= the high watermark: records at/after the high watermark
   may still be truncated (a Raft replica's uncommitted suffix), and a record removed because
   an uncommitted one superseded it would be lost with it. Also take the aborted transactions
   of that range from the ``.txnindex`` files and the log's truncation count.
   Skip unless dirty bytes (segments at/after the cleaner checkpoint) / cleanable bytes >=
   ``min.cleanable.dirty.ratio``.
2. Without the lock: build key -> latest offset over the cleanable range (records decoded),
   then rewrite each segment into ``<base>.log.cleaned``: a record survives if it is the latest
   of its key; records without a key are kept. A tombstone (value None) that is the latest of
   its key survives ``delete.retention.ms`` from the first clean that keeps it: that clean
   rewrites its batch with a delete horizon of ``now + delete.retention.ms`` (KIP-534: the
   horizon in the base timestamp, attribute bit 6; the records keep their timestamps), and the
   first clean after the horizon removes it - so a consumer that has not read the key's older
   values yet sees the delete, whatever timestamp the tombstone was produced with.
   Data batches of aborted transactions are dropped whole and never enter the key map, so an
   aborted record never shadows a committed one (Kafka ``CleanedTransactionMetadata``: walking
   in offset order, a producer is "aborting" from its aborted transaction's first offset until
   its next control batch, the ABORT marker). A transaction marker (COMMIT or ABORT) stays while
   any batch of its transaction does; once a clean finds none left, it gets a delete horizon
   the same way, and the first clean after it removes it - unless it is its producer's last
   batch (the producer's state must survive a reload). A consumer that read the transaction's
   data before it was compacted away therefore still finds the marker for
   ``delete.retention.ms`` (Kafka ``CleanedTransactionMetadata``). A ``.txnindex`` entry goes
   with its ABORT marker. Raft-internal control batches (no producer id) are always kept. A
   log whose earliest delete horizon has passed is cleaned whatever its dirty ratio (Kafka's
   ``latestDeleteHorizon``).
   A batch whose records all survive (and needs no new horizon) is copied byte for byte;
   otherwise it is rebuilt with the same base offset, last offset delta, base timestamp (or
   delete horizon), codec, producer id/epoch/sequence and leader epoch (offsets never change). An emptied batch is dropped, except the last batch of a
   producer id, kept empty so the producer's sequence survives a reload (Kafka does the same).
   Consecutive segments are cleaned into one (Kafka ``groupSegmentsBySize``,
   :func:`group_segments_by_size`): as many as fit ``segment.bytes`` and ``segment.index.bytes``
   by their sizes before the clean, so segments an earlier clean shrank or emptied are merged
   into their neighbours and a compacted log keeps a bounded number of segments. The cleaned
   segment takes the first one's base offset and the last one's modification time (Kafka
   ``cleaned.setLastModified``: ``retention.ms`` of a ``compact,delete`` log dates a segment left
   without record timestamps by its mtime, which must not move forward at every clean). It and
   its indexes (``.txnindex`` too) are fsynced as ``.cleaned`` files.
3. Under the lock: if the log was truncated (or closed) since step 1, the clean is abandoned -
   its ``.cleaned`` files deleted, the cleaner checkpoint left alone, the next round redoes it
   (Kafka aborts cleaning before a truncation): the truncation may have cut a cleaned segment or
   removed the records whose presence made older ones redundant, and swapping the copies in
   would bring back truncated records or lose the latest value of a key. Otherwise, for every
   group of segments still in the log (retention or DeleteRecords may have deleted some: the
   copy of their group is deleted), the files are renamed ``.cleaned`` -> ``.swap``, the group's
   other old segments deleted, and ``.swap`` -> final, each rename the indexes first and the
   ``.log`` last, and the segment list is swapped. The renames
   are metadata only (no fsync under the lock; the directory is fsynced after): they reach the
   disk in the order made (ext4/xfs journal), so a crash leaves ``.cleaned`` files (discarded on
   open), or a ``.log.swap`` (the swap completed on open, deleting the old segments whose base
   offset is inside the swapped segment's offsets), or the finished swap - and no
   ``.swap`` file of a segment a truncation changed ever exists.

Appends and reads continue during step 2; readers holding regions of the old files keep
reading them (the old inode stays alive until their file object is dropped).
"""

from __future__ import annotations

import logging
import os
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from litemq.protocol.records import BatchHeader, build_batch, decode_batch
from litemq.storage.checkpoints import fsync_dir, read_offset_checkpoint, write_offset_checkpoint
from litemq.storage.config import LogConfig
from litemq.storage.producer_state import ProducerStateManager
from litemq.storage.segment import CLEANED_SUFFIX, INT32_MAX, SWAP_SUFFIX, LogSegment
from litemq.storage.txn_index import AbortedTxnTracker

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


class CleanableLog(Protocol):
    """What the cleaner needs of a partition log (:class:`~litemq.storage.log.PartitionLog`
    implements it; declared here so the cleaner does not import the log)."""

    dir: Path
    log_start_offset: int
    producer_state: ProducerStateManager

    @property
    def lock(self) -> AbstractContextManager:
        """The log lock guarding the segment list and the offsets."""

    @property
    def config(self) -> LogConfig: ...

    @property
    def closed(self) -> bool: ...

    @property
    def segments(self) -> list[LogSegment]:
        """The segment list, oldest first (copy-on-write)."""

    @property
    def truncation_count(self) -> int:
        """How many truncations (``truncate_to``, ``truncate_fully_and_start_at``) the log has had."""

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """``(producer_id, first_offset)`` of the aborted transactions of the range, by first offset."""

    def replace_segments(self, segments: list[LogSegment]) -> None:
        """(lock held) Install a new segment list: the same offsets, consecutive segments possibly
        merged into one (the first one's base offset)."""


class _DeleteHorizons:
    """The delete horizons of one clean (KIP-534, module doc step 2): when a new one falls, whether
    one has passed, the earliest kept; and which transaction markers the clean keeps, rewrites
    with a horizon or removes, fed every batch kept, in offset order (Kafka
    ``CleanedTransactionMetadata``).

    Args:
        last_of_producer: producer id -> base offset of its last batch in the cleaned range.
        now_ms: the clean's time. delete_retention_ms: ``delete.retention.ms``.
    """

    def __init__(self, last_of_producer: dict[int, int], now_ms: int, delete_retention_ms: int) -> None:
        self.last_of_producer = last_of_producer
        self.now_ms = now_ms
        self.delete_retention_ms = delete_retention_ms
        self.with_data: set[int] = set()
        """Producer ids with a transactional data batch kept since their last marker."""
        self.next_horizon_ms: int | None = None
        """The earliest delete horizon of a batch this clean kept (a marker's, a tombstone's)."""

    def fresh(self) -> int:
        """The horizon of a batch that gets its first: now + ``delete.retention.ms``."""
        return self.now_ms + self.delete_retention_ms

    def passed(self, horizon_ms: int | None) -> bool:
        """Whether a batch's horizon (None: it has none) has come."""
        return horizon_ms is not None and horizon_ms <= self.now_ms

    def note_horizon(self, horizon_ms: int) -> None:
        """A batch kept with delete horizon ``horizon_ms``."""
        if self.next_horizon_ms is None or horizon_ms < self.next_horizon_ms:
            self.next_horizon_ms = horizon_ms

    def retained(self, h: BatchHeader) -> None:
        """A data batch was kept (with records, or empty as its producer's last)."""
        if h.is_transactional and h.producer_id >= 0:
            self.with_data.add(h.producer_id)

    def clean(self, h: BatchHeader, data: bytes, stats: CleanStats) -> bytes | None:
        """The control batch ``data`` (header ``h``) as the cleaned segment holds it: as is, with
        a delete horizon, or None (removed)."""
        pid = h.producer_id
        if not h.is_transactional or pid < 0:
            return data  # not a transaction marker (a Raft-internal batch)
        had_data = pid in self.with_data
        self.with_data.discard(pid)
        if had_data or self.last_of_producer.get(pid) == h.base_offset:
            return data
        horizon = h.delete_horizon_ms
        if self.passed(horizon):
            stats.markers_removed += 1
            return None
        if horizon is None:
            stats.markers_expiring += 1
            horizon = self.fresh()
            _, recs = decode_batch(data)
            data = build_batch(
                recs, base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                compression=h.compression, timestamp_type=h.timestamp_type, producer_id=pid,
                producer_epoch=h.producer_epoch, base_sequence=h.base_sequence, is_transactional=True,
                is_control=True, last_offset_delta=h.last_offset_delta, delete_horizon_ms=horizon)
        self.note_horizon(horizon)
        return data


@dataclass(slots=True)
class CleanPlan:
    """What :meth:`LogCleaner.plan` chose: the segments to clean (oldest first), the offset range
    ``[start_offset, end_offset)`` they cover, its aborted transactions, the log's truncation
    count when chosen, and the segments grouped into the cleaned segments they become
    (:func:`group_segments_by_size`; concatenated, the groups are ``segments``)."""

    segments: list[LogSegment]
    start_offset: int
    end_offset: int
    aborted: list[tuple[int, int]]
    truncation_count: int
    groups: list[list[LogSegment]] = field(default_factory=list)


def group_segments_by_size(segments: list[LogSegment], end_offset: int, max_bytes: int,
                           max_index_bytes: int) -> list[list[LogSegment]]:
    """Consecutive runs of ``segments`` (oldest first, contiguous, every offset below
    ``end_offset``) that are cleaned into one segment each (Kafka ``Cleaner.groupSegmentsBySize``).

    A run grows while its ``.log`` bytes stay <= ``max_bytes`` (``segment.bytes``), its offset
    index and time index bytes each <= ``max_index_bytes`` (``segment.index.bytes``; sizes before
    cleaning, so the cleaned segment fits), and its last offset stays within ``INT32_MAX`` of its
    base (relative offsets are int32); an empty segment joins whatever its offsets. So segments
    a clean shrank or emptied are merged into their neighbours at the next clean, and the number
    of segments (files, descriptors) of a compacted log stays bounded by its live data. Indexes
    must be loaded (:meth:`LogSegment.ensure_indexes`)."""
    groups: list[list[LogSegment]] = []
    i, n = 0, len(segments)
    while i < n:
        group = [segments[i]]
        log_bytes = segments[i].size
        index_bytes = segments[i].offset_index.size_bytes
        time_bytes = segments[i].time_index.size_bytes
        i += 1
        while i < n:
            seg = segments[i]
            last = (segments[i + 1].base_offset if i + 1 < n else end_offset) - 1
            if (log_bytes + seg.size > max_bytes
                    or index_bytes + seg.offset_index.size_bytes > max_index_bytes
                    or time_bytes + seg.time_index.size_bytes > max_index_bytes
                    or (seg.size and last - group[0].base_offset > INT32_MAX)):
                break
            group.append(seg)
            log_bytes += seg.size
            index_bytes += seg.offset_index.size_bytes
            time_bytes += seg.time_index.size_bytes
            i += 1
        groups.append(group)
    return groups


@dataclass(slots=True)
class CleanStats:
    """What one :meth:`LogCleaner.clean` did (bytes are ``.log`` bytes)."""

    segments_cleaned: int = 0
    """Old segments replaced by cleaned ones (several may become one: see :func:`group_segments_by_size`)."""
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    markers_removed: int = 0
    """Transaction markers removed (their transaction's data gone, their delete horizon passed)."""
    markers_expiring: int = 0
    """Transaction markers given a delete horizon by this clean."""
    skipped: str = ""
    """Why nothing was done ("" when a clean ran)."""
    end_offset: int = -1
    """First offset not cleaned (the first uncleanable segment's base)."""
    details: list[str] = field(default_factory=list)


class LogCleaner:
    """Compacts one partition log (see module doc). One per log: :meth:`clean` runs one clean
    at a time."""

    def __init__(self, plog: CleanableLog) -> None:
        self.log = plog
        self.checkpoint_path = plog.dir / CLEANER_OFFSET_CHECKPOINT
        self._running = threading.Lock()
        self.next_horizon_ms: int | None = None
        """The earliest delete horizon of a batch (a marker's, a tombstone's) the last clean
        kept: once it passes, the log is cleaned whatever its dirty ratio (Kafka's
        ``latestDeleteHorizon``), so they go without waiting for new records. In memory only:
        after a restart it is learnt again at the next clean."""

    def clean(self, now_ms: int, high_watermark: int) -> CleanStats:
        """One compaction of the log's cleanable segments below ``high_watermark`` (an offset,
        exclusive) as of ``now_ms`` (epoch ms; ``min.compaction.lag.ms``, ``delete.retention.ms``).
        Raises :class:`~litemq.protocol.errors.KafkaStorageError`/``OSError`` if a file cannot be
        written (the log is unchanged)."""
        stats = CleanStats()
        if not self._running.acquire(blocking=False):
            stats.skipped = "a clean of this log is already running"
            return stats
        try:
            plan = self.plan(now_ms, high_watermark, stats)
            if plan is None:
                return stats
            cleaned = self.rewrite(plan, now_ms, stats)
            if self.swap(plan, cleaned, stats):
                write_offset_checkpoint(self.checkpoint_path, plan.end_offset)
            return stats
        finally:
            self._running.release()

    def plan(self, now_ms: int, high_watermark: int, stats: CleanStats) -> CleanPlan | None:
        """Phase 1 (takes the log lock): the segments to clean, or None with ``stats.skipped`` set."""
        plog = self.log
        cfg = plog.config
        if not cfg.compact:
            stats.skipped = "cleanup.policy has no compact"
            return None
        with plog.lock:
            if plog.closed:
                stats.skipped = "log closed"
                return None
            segments = plog.segments
            ps = plog.producer_state
            # the LSO at this high watermark (a completed transaction whose marker is below it
            # is stable, whether or not a Fetch asked for the LSO since)
            unstable = ps.first_unstable_offset_at(high_watermark)
            upper = high_watermark if unstable is None else min(high_watermark, unstable)
            cleanable: list[LogSegment] = []
            for i, seg in enumerate(segments[:-1]):
                seg.ensure_indexes()
                if seg.max_timestamp >= 0 and seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
                    break
                if segments[i + 1].base_offset > upper:
                    break
                cleanable.append(seg)
            if not cleanable:
                stats.skipped = "no cleanable segment"
                return None
            end_offset = segments[len(cleanable)].base_offset
            start_offset = plog.log_start_offset
            aborted = plog.collect_aborted_transactions(start_offset, end_offset)
            truncations = plog.truncation_count
        stats.end_offset = end_offset
        first_dirty = read_offset_checkpoint(self.checkpoint_path) or 0
        total = sum(s.size for s in cleanable)
        dirty = sum(s.size for s in cleanable if s.base_offset >= first_dirty)
        horizon_due = self.next_horizon_ms is not None and self.next_horizon_ms <= now_ms
        if total == 0 or (dirty / total < cfg.min_cleanable_dirty_ratio and not horizon_due
                          and not (dirty and self._past_max_compaction_lag(cleanable, first_dirty, now_ms))):
            stats.skipped = f"dirty ratio {dirty}/{total} below {cfg.min_cleanable_dirty_ratio}"
            return None
        groups = group_segments_by_size(cleanable, end_offset, cfg.segment_size_bytes, cfg.segment_index_bytes)
        return CleanPlan(cleanable, start_offset, end_offset, aborted, truncations, groups)

    def _past_max_compaction_lag(self, cleanable: list[LogSegment], first_dirty: int, now_ms: int) -> bool:
        """True when a dirty segment's first batch is older than ``max.compaction.lag.ms``
        (KIP-354; Kafka ``LogCleanerManager.maxCompactionDelay``: such a log is compacted whatever
        its dirty ratio). Reads one batch header per dirty segment, only when the lag is set."""
        lag_ms = self.log.config.max_compaction_lag_ms
        if lag_ms >= now_ms:  # unset (Long.MAX_VALUE) or longer than the epoch
            return False
        for seg in cleanable:
            if seg.base_offset < first_dirty:
                continue
            for _pos, h in seg.iter_headers(0, seg.size):
                if 0 < h.max_timestamp < now_ms - lag_ms:
                    return True
                break
        return False

    def rewrite(self, plan: CleanPlan, now_ms: int,
                stats: CleanStats) -> list[tuple[list[LogSegment], LogSegment]]:
        """Phase 2 (no lock): ``(old segments, cleaned copy)`` per group of ``plan.groups``, the
        copies fsynced as ``.cleaned`` files (deleted again if anything fails)."""
        latest, last_batch_of_producer = self._build_offset_map(plan.segments, plan.start_offset, plan.aborted)
        cleaned: list[tuple[list[LogSegment], LogSegment]] = []
        tracker = AbortedTxnTracker(plan.aborted)
        horizons = _DeleteHorizons(last_batch_of_producer, now_ms, self.log.config.delete_retention_ms)
        try:
            for group in plan.groups or [[seg] for seg in plan.segments]:
                new = self._clean_segments(group, latest, last_batch_of_producer, stats, tracker, horizons)
                cleaned.append((group, new))
        except BaseException:
            for _, new in cleaned:
                new.delete_files()
            raise
        self.next_horizon_ms = horizons.next_horizon_ms
        return cleaned

    def _build_offset_map(self, segments: list[LogSegment], start_offset: int, aborted: list[tuple[int, int]]):
        latest: dict[bytes, int] = {}
        last_batch_of_producer: dict[int, int] = {}
        tracker = AbortedTxnTracker(aborted)
        for seg in segments:
            for pos, h in seg.iter_headers():
                if h.producer_id >= 0:
                    last_batch_of_producer[h.producer_id] = h.base_offset
                if tracker.is_aborted_data(h) or h.is_control:
                    continue
                _, recs = decode_batch(os.pread(seg.fd, h.size, pos))
                for r in recs:
                    if r.key is not None and r.offset >= start_offset:
                        latest[r.key] = r.offset
        return latest, last_batch_of_producer

    def _clean_segments(self, group: list[LogSegment], latest: dict[bytes, int], last_of_producer: dict[int, int],
                        stats: CleanStats, tracker: AbortedTxnTracker, horizons: _DeleteHorizons) -> LogSegment:
        """Clean the segments of ``group`` (consecutive, oldest first) into one new segment at the
        first one's base offset, ``<base>.log.cleaned`` and its indexes, fsynced (Kafka
        ``Cleaner.cleanSegments``). The copy keeps the last source segment's modification time
        (Kafka ``cleaned.setLastModified(segments.last.lastModified)``): ``retention.ms`` dates a
        segment with no record timestamp left (emptied by the clean) by its file's mtime, which
        a fresh file would push forward at every clean. Raises ``OSError`` /
        :class:`~litemq.protocol.errors.KafkaStorageError` (the copy is deleted)."""
        first = group[0]
        new = LogSegment(first.dir, first.base_offset, first.config, suffix=CLEANED_SUFFIX, create=True)
        try:
            modified_ns = os.fstat(group[-1].fd).st_mtime_ns
            for seg in group:
                self._clean_into(seg, new, latest, last_of_producer, stats, tracker, horizons)
            if first.txn_index.exists and not new.txn_index.exists:
                new.txn_index.create_empty()  # replaces the old file in the swap
            new.on_become_inactive()
            new.set_last_modified(modified_ns)
            new.sync(metadata=True)
            new.flush_indexes(sync=True)
        except BaseException:
            new.delete_files()
            raise
        return new

    def _clean_into(self, seg: LogSegment, new: LogSegment, latest: dict[bytes, int],
                    last_of_producer: dict[int, int], stats: CleanStats, tracker: AbortedTxnTracker,
                    horizons: _DeleteHorizons) -> None:
        """Append what survives of ``seg``'s batches to ``new`` (module doc, step 2), with the
        ``.txnindex`` entries of the ABORT markers kept (Kafka ``Cleaner.cleanInto``)."""
        dropped_markers: set[int] = set()
        for pos, h in seg.iter_headers():
            data = os.pread(seg.fd, h.size, pos)
            stats.bytes_read += h.size
            last = h.base_offset + h.last_offset_delta
            aborted_data = tracker.is_aborted_data(h)
            if h.is_control:
                out = horizons.clean(h, data, stats)
                if out is None:
                    dropped_markers.add(last)
                else:
                    new.append(out, last, h.max_timestamp, last)
                    stats.bytes_written += len(out)
                continue
            _, recs = decode_batch(data)
            stats.records_read += len(recs)
            horizon = h.delete_horizon_ms
            expired = horizons.passed(horizon)
            keep = []
            tombstones = False
            for r in recs:
                if aborted_data:
                    break
                if r.key is not None and latest.get(r.key, -1) != r.offset:
                    continue
                if r.key is not None and r.value is None:
                    if expired:
                        stats.tombstones_removed += 1
                        continue
                    tombstones = True
                keep.append(r)
            stats.records_removed += len(recs) - len(keep)
            if tombstones and horizon is None:
                horizon = horizons.fresh()  # first kept: the clock starts
            elif not tombstones:
                horizon = None  # nothing left that a horizon is for
            # a base timestamp that holds a horizon is no record's: the max timestamp is
            record_ts = h.base_timestamp if h.delete_horizon_ms is None else h.max_timestamp
            if len(keep) == len(recs) and horizon == h.delete_horizon_ms:
                out = data
            elif not keep and not (h.producer_id >= 0 and last_of_producer.get(h.producer_id) == h.base_offset):
                continue
            else:
                base_ts = h.base_timestamp if h.delete_horizon_ms is None else (
                    keep[0].timestamp if keep else record_ts)
                out = build_batch(
                    keep, base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                    compression=h.compression, timestamp_type=h.timestamp_type, producer_id=h.producer_id,
                    producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                    is_transactional=h.is_transactional, base_timestamp=base_ts,
                    last_offset_delta=h.last_offset_delta, delete_horizon_ms=horizon)
            if horizon is not None:
                horizons.note_horizon(horizon)
            max_ts = max((r.timestamp for r in keep), default=record_ts)
            new.append(out, last, max_ts, last)
            stats.bytes_written += len(out)
            horizons.retained(h)
        for entry in seg.txn_index.entries:
            if entry.last_offset not in dropped_markers:  # an entry goes with its ABORT marker
                new.txn_index.append(entry)

    def swap(self, plan: CleanPlan, cleaned: list[tuple[list[LogSegment], LogSegment]], stats: CleanStats) -> bool:
        """Phase 3 (takes the log lock): install the cleaned copies, each in place of its group
        of old segments, or abandon the clean if the log was truncated or closed since
        :meth:`plan` (module doc, step 3). True if installed.

        Order on disk, so a crash at any point loads a consistent log (:class:`LogLoader`): every
        copy ``.cleaned`` -> ``.swap``; the old segments of a group other than its first are
        deleted (a ``.log.swap`` makes the loader delete the segments whose base offset lies in
        its offset range, Kafka's swap recovery); every ``.swap`` -> final name, replacing the
        group's first segment (same base offset)."""
        plog = self.log
        fsync_dir(plog.dir)  # the .cleaned files' names are durable before any rename
        with plog.lock:
            if plog.closed or plog.truncation_count != plan.truncation_count:
                for _, new in cleaned:
                    new.delete_files()
                stats.skipped = ("log closed" if plog.closed else "log truncated") + " while cleaning: abandoned"
                log.info("%s: compaction of offsets %d..%d abandoned: %s", plog.dir, plan.start_offset,
                         plan.end_offset - 1, stats.skipped)
                return False
            current = plog.segments
            index = {id(s): i for i, s in enumerate(current[:-1])}  # the active segment is never replaced
            replaced: list[LogSegment | None] = list(current)
            swapped: list[tuple[list[int], list[LogSegment], LogSegment]] = []
            for olds, new in cleaned:
                positions = [index.get(id(old), -1) for old in olds]
                if positions != list(range(positions[0], positions[0] + len(olds))) or positions[0] < 0:
                    # retention or DeleteRecords deleted (some of) them meanwhile: drop the copy,
                    # the segments left are cleaned by the next round
                    new.delete_files()
                    continue
                new.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
                swapped.append((positions, olds, new))
            for _, olds, _ in swapped:
                for old in olds[1:]:
                    old.delete_files()
            for positions, olds, new in swapped:  # a .log.swap on disk means "complete the swap" (LogLoader)
                new.rename_suffix(SWAP_SUFFIX, "")
                new.next_offset = None
                replaced[positions[0]] = new
                for i in positions[1:]:
                    replaced[i] = None
            stats.segments_cleaned = sum(len(olds) for _, olds, _ in swapped)
            plog.replace_segments([s for s in replaced if s is not None])
        fsync_dir(plog.dir)
        log.info("%s: compacted %d segments into %d: %d -> %d bytes, %d records removed (%d tombstones), "
                 "%d transaction markers removed", plog.dir, stats.segments_cleaned, len(swapped),
                 stats.bytes_read, stats.bytes_written, stats.records_removed, stats.tombstones_removed,
                 stats.markers_removed)
        return True
