"""Persisting and rebuilding a partition log's :class:`OffsetTranslator` (issue 19).

File ``offset-translator-checkpoint`` (Kafka checkpoint format, entries of two integers, see
:meth:`OffsetTranslator.checkpoint_entries`): the log start offset and the internal offsets
below it, the log end offset it covered, and every Raft-internal offset in between with the
count of internal offsets below it (so a damaged file is detected, never believed).

When it is written (by :class:`~litemq.storage.log.PartitionLog`): before the log start
offset moves (retention, DeleteRecords, a follower following its leader's log start) - the one
fact a scan of the log cannot recover, since the segments below are deleted -, after a
truncation, with every recovery-point checkpoint and at close.

Loading (:func:`load_offset_translator`) never trusts the file alone: it adopts the log start
and end found by the loader, scans the batch headers the file does not cover (only control
batches are read in full), and checks that every internal offset it lists is a Raft-internal
batch in the log. A missing file (a log written before issue 19, or a new log) means a scan of
the whole log, in which the LEADER_CHANGE batches of old versions (control key version 0) are
data offsets: their offsets stay as they were. A file that fails a check is rebuilt by a full
scan, keeping its count of internal offsets below the log start, with one warning.
"""

from __future__ import annotations

import logging
import os
from bisect import bisect_right
from pathlib import Path

from litemq.protocol.records import CONTROL_FLAG, is_raft_internal_batch
from litemq.storage.checkpoints import read_checkpoint, write_checkpoint
from litemq.storage.offset_translator import OffsetTranslator, TranslatorCheckpointError
from litemq.storage.segment import LogSegment

log = logging.getLogger("litemq.storage.log")

OFFSET_TRANSLATOR_CHECKPOINT = "offset-translator-checkpoint"


def write_translator_checkpoint(directory: Path, translator: OffsetTranslator) -> None:
    """Write ``translator`` atomically (tmp, fsync, rename, directory fsync).

    Raises:
        OSError: the file cannot be written.
    """
    write_checkpoint(directory / OFFSET_TRANSLATOR_CHECKPOINT, translator.checkpoint_entries())


def _batch_is_internal(seg: LogSegment, pos: int, h) -> bool:
    if not h.attributes & CONTROL_FLAG:
        return False
    return is_raft_internal_batch(os.pread(seg.fd, h.size, pos), 0, h)


def _segment_index(segments: list[LogSegment], offset: int) -> int:
    """Index of the segment holding ``offset`` (the last one whose base offset is <= it; 0 below
    the first), as PartitionLog's own lookup."""
    return max(0, bisect_right([s.base_offset for s in segments], offset) - 1)


def scan_internal_offsets(segments: list[LogSegment], start: int, end: int) -> list[int]:
    """Raft-internal offsets in ``[start, end)`` of the log made of ``segments`` (batch headers
    read in chunks, control batches read whole).

    Raises:
        CorruptRecordError: a bad batch header (the loader validated the log before).
    """
    out: list[int] = []
    if start >= end:
        return out
    for seg in segments[_segment_index(segments, start):]:
        if seg.base_offset >= end:
            break
        found = seg.find(start)
        if found is None:
            continue
        for pos, h in seg.iter_headers(found[0]):
            if h.base_offset >= end:
                return out
            if h.base_offset >= start and _batch_is_internal(seg, pos, h):
                out.append(h.base_offset)
    return out


def _verify(segments: list[LogSegment], translator: OffsetTranslator, upto: int) -> bool:
    """Every internal offset below ``upto`` listed by ``translator`` starts a Raft-internal
    batch of the log."""
    for o in translator.internal_offsets:
        if o >= upto:
            break
        seg = segments[_segment_index(segments, o)]
        found = seg.find(o)
        if found is None or found[1].base_offset != o or not _batch_is_internal(seg, found[0], found[1]):
            return False
    return True


def load_offset_translator(directory: Path, segments: list[LogSegment], log_start_offset: int,
                           log_end_offset: int) -> OffsetTranslator:
    """The translator of a loaded log (see the module docstring). Never raises for a bad file:
    it is rebuilt (one warning)."""
    t: OffsetTranslator | None = None
    entries = read_checkpoint(directory / OFFSET_TRANSLATOR_CHECKPOINT, 2)
    if entries:
        try:
            t = OffsetTranslator.from_checkpoint_entries(entries)
        except TranslatorCheckpointError as exc:
            log.warning("%s: ignoring the offset translator checkpoint (%s); rebuilding it", directory, exc)
    if t is None:
        return OffsetTranslator(log_start_offset, 0, log_end_offset,
                                scan_internal_offsets(segments, log_start_offset, log_end_offset))
    base_delta = t.base_delta
    try:
        if t.base_raft_offset > log_start_offset:
            # The file was written for a log start not yet checkpointed (a crash between the two
            # writes): the internal offsets between the two starts are still in the log.
            below = scan_internal_offsets(segments, log_start_offset, min(t.base_raft_offset, log_end_offset))
            if len(below) > t.base_delta:
                raise TranslatorCheckpointError(f"{len(below)} internal offsets below a base delta of {t.base_delta}")
            t = OffsetTranslator(log_start_offset, t.base_delta - len(below), max(t.end_raft_offset, log_start_offset),
                                 below + list(t.internal_offsets))
        elif t.base_raft_offset < log_start_offset:
            if log_start_offset > t.end_raft_offset:
                # The log start moved past what the file covered and the segments are gone:
                # assume no internal offset in between (data offsets keep their count).
                log.warning("%s: offset translator checkpoint ends at %d, below the log start %d",
                            directory, t.end_raft_offset, log_start_offset)
                t = OffsetTranslator(log_start_offset, t.end_raft_offset - t.kafka_offset(t.end_raft_offset),
                                     log_start_offset)
            else:
                t.prefix_truncate(log_start_offset)
        covered = min(t.end_raft_offset, log_end_offset)
        if t.end_raft_offset > log_end_offset:
            t.truncate(max(log_end_offset, t.base_raft_offset))
        if not _verify(segments, t, covered):
            raise TranslatorCheckpointError("an internal offset it lists is not a Raft-internal batch of the log")
        for o in scan_internal_offsets(segments, t.end_raft_offset, log_end_offset):
            t.extend(o)
            t.append(o, 1, True)
        t.extend(log_end_offset)
    except (TranslatorCheckpointError, ValueError) as exc:
        log.warning("%s: offset translator checkpoint does not match the log (%s); rebuilding it from the log",
                    directory, exc)
        internal = scan_internal_offsets(segments, log_start_offset, log_end_offset)
        t = OffsetTranslator(log_start_offset, min(base_delta, log_start_offset), log_end_offset, internal)
    return t
