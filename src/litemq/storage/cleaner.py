"""Log compaction (``cleanup.policy=compact``): keep the latest record of every key.

Source: Kafka ``LogCleaner`` / ``Cleaner`` (``doClean``, ``cleanSegments``,
``buildOffsetMap``), ``LogCleanerManager`` (dirty ratio, ``cleaner-offset-checkpoint``).

Algorithm, run by :meth:`PartitionLog.compact` on a worker thread:

1. Under the log lock, take the *cleanable* segments: every inactive segment, oldest first,
   stopping at the first one holding a record younger than ``min.compaction.lag.ms`` or an
   offset at/after the first unstable offset (ongoing transactions and completed ones whose
   marker may not be replicated yet; Kafka ``LogCleanerManager`` bounds cleaning by the LSO).
   Also take the aborted transactions of that range from the ``.txnindex`` files.
   Skip unless dirty bytes (segments at/after the cleaner checkpoint) / cleanable bytes >=
   ``min.cleanable.dirty.ratio``.
2. Without the lock: build key -> latest offset over the cleanable range (records decoded),
   then rewrite each segment into ``<base>.log.cleaned``: a record survives if it is the latest
   of its key; a tombstone (value None) survives only while its timestamp is within
   ``delete.retention.ms`` of ``now``; records without a key and control batches are kept.
   Data batches of aborted transactions are dropped whole and never enter the key map, so an
   aborted record never shadows a committed one (Kafka ``CleanedTransactionMetadata``: walking
   in offset order, a producer is "aborting" from its aborted transaction's first offset until
   its next control batch, the ABORT marker). Transaction markers are kept forever (Kafka drops
   them after ``delete.retention.ms`` once their data is gone; not done here) and so is every
   ``.txnindex`` entry, copied into the cleaned segment.
   A batch whose records all survive is copied byte for byte; otherwise it is rebuilt with the
   same base offset, last offset delta, base timestamp, codec, producer id/epoch/sequence and
   leader epoch (offsets never change). An emptied batch is dropped, except the last batch of a
   producer id, kept empty so the producer's sequence survives a reload (Kafka does the same).
3. The cleaned segment and its indexes (``.txnindex`` too) are fsynced, renamed ``.cleaned`` ->
   ``.swap``; then under
   the lock, for segments still present in the log, the indexes and then the ``.log`` are
   atomically renamed over the old files and the segment list is swapped. A crash leaves either
   ``.cleaned`` files (discarded on open) or ``.log.swap`` files (completed on open).

Appends and reads continue during step 2; readers holding regions of the old files keep
reading them (the old inode stays alive until their file object is dropped).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from litemq.protocol.records import BatchHeader, build_batch, decode_batch
from litemq.storage.checkpoints import fsync_dir, read_offset_checkpoint, write_offset_checkpoint
from litemq.storage.segment import CLEANED_SUFFIX, SWAP_SUFFIX, LogSegment

if TYPE_CHECKING:
    from litemq.storage.log import PartitionLog

log = logging.getLogger(__name__)

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


class _AbortedTxnTracker:
    """Which data batches belong to aborted transactions, fed every batch in offset order
    (Kafka ``CleanedTransactionMetadata``). ``aborted``: ``(producer_id, first_offset)`` sorted
    by first offset (:meth:`PartitionLog.collect_aborted_transactions`)."""

    def __init__(self, aborted: list[tuple[int, int]]) -> None:
        self.aborted = aborted
        self.next = 0
        self.aborting: set[int] = set()  # producer ids inside an aborted transaction

    def is_aborted_data(self, h: BatchHeader) -> bool:
        aborted = self.aborted
        while self.next < len(aborted) and aborted[self.next][1] <= h.base_offset:
            self.aborting.add(aborted[self.next][0])
            self.next += 1
        pid = h.producer_id
        if pid < 0 or pid not in self.aborting:
            return False
        if h.is_control:  # the producer's next control batch is its ABORT marker
            self.aborting.discard(pid)
            return False
        return h.is_transactional


@dataclass(slots=True)
class CleanStats:
    """What one :meth:`LogCleaner.clean` did (bytes are ``.log`` bytes)."""

    segments_cleaned: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_removed: int = 0
    tombstones_removed: int = 0
    skipped: str = ""
    """Why nothing was done ("" when a clean ran)."""
    end_offset: int = -1
    """First offset not cleaned (the first uncleanable segment's base)."""
    details: list[str] = field(default_factory=list)


class LogCleaner:
    """Compacts one :class:`PartitionLog` (see module doc)."""

    def __init__(self, plog: PartitionLog) -> None:
        self.log = plog
        self.checkpoint_path = plog.dir / CLEANER_OFFSET_CHECKPOINT

    def clean(self, now_ms: int) -> CleanStats:
        plog = self.log
        stats = CleanStats()
        cfg = plog.config
        if not cfg.compact:
            stats.skipped = "cleanup.policy has no compact"
            return stats
        with plog._lock:
            if plog.closed:
                stats.skipped = "log closed"
                return stats
            segments = plog.segments
            ps = plog.producer_state
            unstable = ps.first_unstable_offset_at(ps.completed_floor)
            cleanable: list[LogSegment] = []
            for i, seg in enumerate(segments[:-1]):
                seg.ensure_indexes()
                if seg.max_timestamp >= 0 and seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
                    break
                if unstable is not None and segments[i + 1].base_offset > unstable:
                    break
                cleanable.append(seg)
            if not cleanable:
                stats.skipped = "no cleanable segment"
                return stats
            end_offset = segments[len(cleanable)].base_offset
            start_offset = plog.log_start_offset
            aborted = plog.collect_aborted_transactions(start_offset, end_offset)
        stats.end_offset = end_offset
        first_dirty = read_offset_checkpoint(self.checkpoint_path) or 0
        total = sum(s.size for s in cleanable)
        dirty = sum(s.size for s in cleanable if s.base_offset >= first_dirty)
        if total == 0 or dirty / total < cfg.min_cleanable_dirty_ratio:
            stats.skipped = f"dirty ratio {dirty}/{total} below {cfg.min_cleanable_dirty_ratio}"
            return stats

        latest, last_batch_of_producer = self._build_offset_map(cleanable, start_offset, aborted)
        horizon = now_ms - cfg.delete_retention_ms
        cleaned: list[tuple[LogSegment, LogSegment]] = []
        tracker = _AbortedTxnTracker(aborted)
        try:
            for seg in cleanable:
                new = self._clean_segment(seg, latest, last_batch_of_producer, horizon, stats, tracker)
                cleaned.append((seg, new))
        except BaseException:
            for _, new in cleaned:
                new.delete_files()
            raise
        self._swap(cleaned, stats)
        write_offset_checkpoint(self.checkpoint_path, end_offset)
        return stats

    def _build_offset_map(self, segments: list[LogSegment], start_offset: int, aborted: list[tuple[int, int]]):
        latest: dict[bytes, int] = {}
        last_batch_of_producer: dict[int, int] = {}
        tracker = _AbortedTxnTracker(aborted)
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

    def _clean_segment(self, seg: LogSegment, latest: dict[bytes, int], last_of_producer: dict[int, int],
                       horizon: int, stats: CleanStats, tracker: _AbortedTxnTracker) -> LogSegment:
        new = LogSegment(seg.dir, seg.base_offset, seg.config, suffix=CLEANED_SUFFIX, create=True)
        try:
            for pos, h in seg.iter_headers():
                data = os.pread(seg.fd, h.size, pos)
                stats.bytes_read += h.size
                last = h.base_offset + h.last_offset_delta
                aborted_data = tracker.is_aborted_data(h)
                if h.is_control:
                    new.append(data, last, h.max_timestamp, last)
                    continue
                _, recs = decode_batch(data)
                stats.records_read += len(recs)
                keep = []
                for r in recs:
                    if aborted_data:
                        break
                    if r.key is not None and latest.get(r.key, -1) != r.offset:
                        continue
                    if r.key is not None and r.value is None and r.timestamp < horizon:
                        stats.tombstones_removed += 1
                        continue
                    keep.append(r)
                stats.records_removed += len(recs) - len(keep)
                if len(keep) == len(recs):
                    out = data
                elif not keep and not (h.producer_id >= 0 and last_of_producer.get(h.producer_id) == h.base_offset):
                    continue
                else:
                    out = build_batch(
                        keep, base_offset=h.base_offset, partition_leader_epoch=h.partition_leader_epoch,
                        compression=h.compression, timestamp_type=h.timestamp_type, producer_id=h.producer_id,
                        producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                        is_transactional=h.is_transactional, base_timestamp=h.base_timestamp,
                        last_offset_delta=h.last_offset_delta)
                max_ts = max((r.timestamp for r in keep), default=h.base_timestamp)
                new.append(out, last, max_ts, last)
                stats.bytes_written += len(out)
            for entry in seg.txn_index.entries:
                new.txn_index.append(entry)
            new.on_become_inactive()
            new.sync()
            new.flush_indexes(sync=True)
            new.rename_suffix(CLEANED_SUFFIX, SWAP_SUFFIX)
        except BaseException:
            new.delete_files()
            raise
        return new

    def _swap(self, cleaned: list[tuple[LogSegment, LogSegment]], stats: CleanStats) -> None:
        plog = self.log
        fsync_dir(plog.dir)
        with plog._lock:
            current = plog.segments
            index = {id(s): i for i, s in enumerate(current)}
            replaced = list(current)
            for old, new in cleaned:
                i = index.get(id(old))
                if i is None or plog.closed:  # deleted/truncated meanwhile: drop the cleaned copy
                    new.delete_files()
                    continue
                # indexes first, then the .log: a .log.swap left by a crash means "not done yet"
                for idx in (new.offset_index, new.time_index, new.txn_index):
                    final = idx.path.with_name(idx.path.name[: -len(SWAP_SUFFIX)])
                    idx.rename(final)
                final_log = new.log_path.with_name(new.log_path.name[: -len(SWAP_SUFFIX)])
                os.replace(new.log_path, final_log)
                new.log_path = final_log
                new.next_offset = None
                replaced[i] = new
                stats.segments_cleaned += 1
            plog._set_segments(replaced)
        fsync_dir(plog.dir)
        log.info("%s: compacted %d segments: %d -> %d bytes, %d records removed (%d tombstones)",
                 plog.dir, stats.segments_cleaned, stats.bytes_read, stats.bytes_written,
                 stats.records_removed, stats.tombstones_removed)
