"""Loading a partition directory (Kafka ``LogLoader``) and replaying its batches into producer
state (Kafka ``UnifiedLog.rebuildProducerState``), for :class:`~litemq.storage.log.PartitionLog`.

:meth:`LogLoader.load` completes or rolls back an interrupted compaction swap, deletes stray
files, checks the ``.txnindex`` files, and - after a crash, or for a ``.txnindex`` failing its
size check - validates every batch from the recovery point on, truncating a torn or corrupt
tail (Kafka ``LogLoader.recoverLog``). It returns the segments and offsets the log starts with;
the leader epoch cache and producer state it is given are brought up to the log end.
"""

from __future__ import annotations

import bisect
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from litemq.protocol.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from litemq.protocol.records import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    BatchHeader,
    decode_batch,
    parse_control_key,
    parse_end_txn_marker,
)
from litemq.storage.checkpoints import fsync_dir, read_offset_checkpoint
from litemq.storage.config import LogConfig
from litemq.storage.epoch_cache import LeaderEpochFileCache
from litemq.storage.producer_state import CompletedTxn, ProducerStateManager
from litemq.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    parse_segment_name,
)
from litemq.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn, TransactionIndex

log = logging.getLogger("litemq.storage.log")  # the partition log's logger, as before the split

LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"
_SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
"""The files of a segment (not its ``.snapshot``, also named by an offset)."""


def end_txn_marker(buf, pos: int, h: BatchHeader, *, strict: bool = False) -> tuple[int, int] | None:
    """``(control_type, coordinator_epoch)`` of the COMMIT/ABORT control batch at ``buf[pos:]``
    (Kafka ``EndTransactionMarker``: one control record, key = version 0 + type, value = version
    + coordinator epoch). None for other control batches (LEADER_CHANGE, ...) or, unless
    ``strict``, an undecodable one; with ``strict`` those raise :class:`InvalidRecordError`."""
    try:
        _, recs = decode_batch(buf, pos, check_crc=False)
        if len(recs) != 1:
            raise InvalidRecordError(f"control batch with {len(recs)} records")
        version, control_type = parse_control_key(recs[0].key)
        if version != 0 or control_type not in (CONTROL_ABORT, CONTROL_COMMIT):
            raise InvalidRecordError(f"control record version {version} type {control_type} is not a "
                                     "transaction marker")
        _, coordinator_epoch = parse_end_txn_marker(recs[0].value)
        return control_type, coordinator_epoch
    except (CorruptRecordError, InvalidRecordError, UnsupportedCompressionError) as exc:
        if strict:
            raise InvalidRecordError(f"not a transaction marker batch: {exc}") from None
        return None


def aborted_txn(done: CompletedTxn) -> AbortedTxn:
    """The ``.txnindex`` entry of an aborted transaction."""
    return AbortedTxn(done.producer_id, done.first_offset, done.last_offset, done.last_stable_offset)


def rebuild_producer_state(ps: ProducerStateManager, segments: list[LogSegment], log_start_offset: int,
                           end: int) -> None:
    """Load the newest snapshot <= ``end`` into ``ps`` and replay batch headers of ``segments``
    (oldest first) from it up to ``end`` (Kafka ``UnifiedLog.rebuildProducerState``): sequences,
    ongoing transactions and the completed ones. Only the producers' control batches are read
    whole (markers); the ``.txnindex`` files are not touched. Batches below ``log_start_offset``
    are skipped."""
    ps.delete_snapshots(above=end)
    ps.load_latest_snapshot(end, min_offset=log_start_offset)
    start = max(ps.map_end_offset, log_start_offset)
    if start < end:
        bases = [s.base_offset for s in segments]
        for seg in segments[max(0, bisect.bisect_right(bases, start) - 1):]:
            if seg.base_offset >= end:
                break
            found = seg.find(start) if seg.base_offset < start else None
            pos = found[0] if found else 0
            if seg.base_offset < start and found is None:
                continue
            for p, h in seg.iter_headers(pos):
                if h.base_offset >= end:
                    break
                if h.base_offset + h.last_offset_delta >= start:
                    marker = None
                    if h.is_control and h.producer_id >= 0:
                        marker = end_txn_marker(os.pread(seg.fd, h.size, p), 0, h)
                    ps.update(h, None, marker)
    ps.map_end_offset = end


@dataclass(frozen=True, slots=True)
class LoadedLog:
    """What :meth:`LogLoader.load` found: the segments (oldest first, the last one active), the
    log start and end offsets, the recovery point (everything below it is on disk) and whether
    the directory has entries not yet fsynced (a segment created)."""

    segments: list[LogSegment]
    log_start_offset: int
    log_end_offset: int
    recovery_point: int
    dir_dirty: bool


class LogLoader:
    """Loads one partition directory (Kafka ``LogLoader``); used once, through :meth:`load`."""

    def __init__(self, directory: Path, config: LogConfig, leader_epoch_cache: LeaderEpochFileCache,
                 producer_state: ProducerStateManager) -> None:
        self.dir = directory
        self._config = config
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state = producer_state
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self.log_start_offset = 0
        self._dir_dirty = False

    def _set_segments(self, segments: list[LogSegment]) -> None:
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    def load(self) -> LoadedLog:
        """Open the directory's segments: complete interrupted compaction swaps, check the
        ``.txnindex`` files, recover after a crash (or from a bad ``.txnindex``), rebuild the
        producer state and the leader epoch cache up to the log end. Raises
        :class:`KafkaStorageError` if a file cannot be used."""
        d = self.dir
        marker = d / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        self._complete_swaps()
        names = os.listdir(d)
        bases = sorted(b for b in (parse_segment_name(n) for n in names if n.endswith(LOG_SUFFIX))
                       if b is not None)
        bad_txn_index = self._check_txn_indexes(names, set(bases))
        segments = [LogSegment(d, b, self._config) for b in bases]
        start = read_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT)
        fresh = not segments  # a new log (or one with no segment left): nothing to recover
        if fresh:
            first = start or 0
            segments = [LogSegment.create(d, first, self._config)]
            self._dir_dirty = True
        self._set_segments(segments)
        self.log_start_offset = max(start if start is not None else 0, segments[0].base_offset)
        recovery_point = read_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT)
        if recovery_point is None:
            recovery_point = self.log_start_offset if clean else 0

        recover_from = None if clean or fresh else recovery_point
        if bad_txn_index is not None:
            recover_from = bad_txn_index if recover_from is None else min(recover_from, bad_txn_index)
        if recover_from is not None:
            self._recover_from(recover_from)  # producer state rebuilt along the way
            for seg in self._segments:  # rebuilt .txnindex files: durable before a clean-load
                seg.txn_index.flush(sync=True)  # recovery point may pass them
            fsync_dir(d)
        leo = self.active_segment.read_next_offset()
        if leo < self.log_start_offset:
            # Unflushed data below a checkpointed log start was lost: restart empty there.
            log.warning("%s: log end %d below log start %d after recovery: starting empty at %d",
                        d, leo, self.log_start_offset, self.log_start_offset)
            for s in self._segments:
                s.delete_files()
            self._set_segments([LogSegment.create(d, self.log_start_offset, self._config)])
            self.leader_epoch_cache.clear()
            leo = self.log_start_offset
            recover_from = None
        if clean or fresh:
            recovery_point = leo
        # An empty log (DeleteRecords or retention took every record) keeps the entry that
        # truncate_from_start moved to its log start: it is the only epoch known at the log
        # start, which a replicated partition's Raft log reports as the term before it; a
        # replica that dropped it at a restart disagreed with its leader there and never caught
        # up (tests/cluster/test_cluster_delete_records.py).
        self.leader_epoch_cache.truncate_from_end(leo + 1 if leo == self.log_start_offset else leo)
        if self.leader_epoch_cache.epochs:
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        if recover_from is None:
            rebuild_producer_state(self.producer_state, self._segments, self.log_start_offset, leo)
        else:
            self.producer_state.delete_snapshots(above=leo)
            self.producer_state.map_end_offset = leo
        if clean:
            os.unlink(marker)
            fsync_dir(d)
        if fresh and not clean:
            log.info("created log %s at offset %d", d, leo)
        else:
            log.info("loaded log %s: start %d, end %d, %d segments (%s shutdown)", d, self.log_start_offset,
                     leo, len(self._segments), "clean" if clean else "unclean")
        return LoadedLog(self._segments, self.log_start_offset, leo, min(recovery_point, leo), self._dir_dirty)

    def _complete_swaps(self) -> None:
        """Finish or roll back an interrupted compaction swap (Kafka ``LogLoader``):
        ``.cleaned`` files are incomplete -> deleted; a ``.log.swap`` is a complete cleaned
        segment -> the old segments whose base offset lies inside its offsets (merged into it,
        not deleted yet) are deleted, then its index ``.swap`` files and the ``.log.swap`` are
        renamed over the segment they replace (same base offset). Index ``.swap`` files without
        a ``.log.swap`` were already superseded -> deleted."""
        names = os.listdir(self.dir)
        log_swaps = {n[: -len(SWAP_SUFFIX)] for n in names if n.endswith(LOG_SUFFIX + SWAP_SUFFIX)}
        self._delete_merged_segments(names, log_swaps)
        for n in names:
            path = self.dir / n
            if n.endswith(CLEANED_SUFFIX) or n.endswith(".tmp") or n.endswith(".deleted"):
                os.unlink(path)
            elif n.endswith(SWAP_SUFFIX) and not n.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                final = n[: -len(SWAP_SUFFIX)]
                if final.rsplit(".", 1)[0] + LOG_SUFFIX in log_swaps:
                    os.replace(path, self.dir / final)
                else:
                    os.unlink(path)
        for final in sorted(log_swaps):
            os.replace(self.dir / (final + SWAP_SUFFIX), self.dir / final)
            log.info("%s: completed interrupted compaction swap of %s", self.dir, final)

    def _delete_merged_segments(self, names: list[str], log_swaps: set[str]) -> None:
        """Delete the files of every segment whose base offset is in ``(B, E)`` for a
        ``<B>.log.swap`` holding offsets below ``E`` (Kafka ``LogLoader``: segments between the
        swap files' base and next offsets were compacted into them). ``names``: the directory's
        entries; ``log_swaps``: the ``.log.swap`` names without the suffix."""
        ranges = []
        for final in log_swaps:
            base = parse_segment_name(final)
            if base is None:
                continue
            swap = LogSegment(self.dir, base, self._config, suffix=SWAP_SUFFIX)
            end = base
            try:
                for _, h in swap.iter_headers():
                    end = h.base_offset + h.last_offset_delta + 1
            except CorruptRecordError as exc:  # fsynced before its rename: not expected
                log.warning("%s: %s%s: %s", self.dir, final, SWAP_SUFFIX, exc)
            ranges.append((base, end))
        for n in names:
            ext = n.partition(".")[2]
            offset = parse_segment_name(n)
            if offset is None or "." + ext not in _SEGMENT_FILE_SUFFIXES:
                continue
            if any(base < offset < end for base, end in ranges):
                log.info("%s: deleting %s, compacted into a swapped segment", self.dir, n)
                os.unlink(self.dir / n)

    def _check_txn_indexes(self, names: list[str], bases: set[int]) -> int | None:
        """Delete ``.txnindex`` files without a segment; return the lowest base offset of a
        segment whose ``.txnindex`` fails its size check (Kafka ``LogSegment.sanityCheck``), or
        None. One log line per bad file."""
        worst = None
        for n in names:
            if not n.endswith(TXN_INDEX_SUFFIX):
                continue
            base = parse_segment_name(n)
            if base is None:
                continue
            if base not in bases:
                os.unlink(self.dir / n)
                continue
            problem = TransactionIndex.sanity_check_file(self.dir / n)
            if problem is not None:
                log.warning("%s: transaction index %s: %s: re-validating the log from offset %d to rebuild it",
                            self.dir, n, problem, base)
                worst = base if worst is None else min(worst, base)
        return worst

    def _recover_from(self, recovery_point: int) -> None:
        """Validate segments holding offsets >= ``recovery_point``; truncate at the first bad batch
        and delete every later segment (Kafka ``LogLoader.recoverLog``). Producer state is
        rebuilt up to the first such segment's base, then advanced batch by batch through the
        validated ones, whose ``.txnindex`` is rebuilt from the aborts met (Kafka
        ``LogSegment.recover(producerStateManager)``). Leaves the producer state at the new log end."""
        segs = self._segments
        i = max(0, bisect.bisect_right(self._bases, recovery_point) - 1)
        epochs = self.leader_epoch_cache
        rebuild_producer_state(self.producer_state, segs, self.log_start_offset, segs[i].base_offset)
        ps = self.producer_state
        start = self.log_start_offset
        current: list[LogSegment] = []

        def on_batch(h: BatchHeader, batch: memoryview) -> None:
            if h.partition_leader_epoch > epochs.latest_epoch():  # Kafka: only newer epochs
                epochs.assign(h.partition_leader_epoch, h.base_offset)
            if h.base_offset + h.last_offset_delta < start:
                return
            marker = end_txn_marker(batch, 0, h) if h.is_control and h.producer_id >= 0 else None
            done = ps.update(h, None, marker)
            if done is not None and done.is_aborted:
                current[-1].txn_index.append(aborted_txn(done))
        for j in range(i, len(segs)):
            seg = segs[j]
            current.append(seg)
            seg.txn_index.reset()
            truncated = seg.recover(on_batch)
            if truncated and j + 1 < len(segs):
                doomed = segs[j + 1:]
                log.warning("%s: deleting %d segments after the corrupt segment %d (offsets %d..)",
                            self.dir, len(doomed), seg.base_offset, doomed[0].base_offset)
                for s in doomed:
                    s.delete_files()
                self._set_segments(segs[: j + 1])
                break
        log.info("%s: recovered from offset %d to %d", self.dir, recovery_point,
                 self.active_segment.next_offset)
