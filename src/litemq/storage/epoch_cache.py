"""Leader epoch -> start offset cache, persisted as ``leader-epoch-checkpoint``.

Source: Kafka ``LeaderEpochFileCache`` (KIP-101, KIP-279). Each entry says "epoch E started at
offset S". The file is Kafka's checkpoint format: ``0``, count, then ``<epoch> <start_offset>``.
Used by Raft/replication to find where a follower's log diverges (OffsetsForLeaderEpoch).
Thread-safety: the owning :class:`PartitionLog` serialises calls under its lock.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path

from litemq.storage.checkpoints import read_checkpoint, write_checkpoint

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


class LeaderEpochFileCache:
    """Ordered ``(epoch, start_offset)`` entries, both strictly increasing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.epochs: list[int] = []
        self.start_offsets: list[int] = []
        entries = read_checkpoint(path, 2) or []
        for epoch, start in entries:
            if self.epochs and (epoch <= self.epochs[-1] or start < self.start_offsets[-1]):
                log.warning("%s: ignoring out-of-order entry (%d, %d)", path, epoch, start)
                continue
            self.epochs.append(epoch)
            self.start_offsets.append(start)

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.epochs, self.start_offsets))

    def latest_epoch(self) -> int:
        """Latest epoch, or -1 when empty."""
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def earliest_entry(self) -> tuple[int, int] | None:
        return (self.epochs[0], self.start_offsets[0]) if self.epochs else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka ``assign``): entries it conflicts
        with (epoch >= it or start >= it) are removed first. O(1) when nothing changes."""
        if epoch < 0:
            return
        if self.epochs and self.epochs[-1] == epoch and start_offset >= self.start_offsets[-1]:
            return
        while self.epochs and (self.epochs[-1] >= epoch or self.start_offsets[-1] >= start_offset):
            log.info("%s: epoch (%d, %d) replaces (%d, %d)", self.path, epoch, start_offset,
                     self.epochs[-1], self.start_offsets[-1])
            self.epochs.pop()
            self.start_offsets.pop()
        self.epochs.append(epoch)
        self.start_offsets.append(start_offset)
        self.flush()

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka ``endOffsetFor``: ``(epoch, end_offset)`` where ``end_offset`` is the start offset
        of the first epoch after ``requested_epoch`` (or the log end for the latest epoch);
        ``(-1, -1)`` when the requested epoch is undefined or newer than every known epoch."""
        if requested_epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self.epochs, requested_epoch)
        if higher == len(self.epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self.start_offsets[0]
        return self.epochs[higher - 1], self.start_offsets[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch of the entry covering ``offset`` (-1 if before the first entry)."""
        i = bisect.bisect_right(self.start_offsets, offset) - 1
        return self.epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def truncate_from_end(self, end_offset: int) -> None:
        """Remove entries starting at or after ``end_offset`` (log truncated to it)."""
        keep = bisect.bisect_left(self.start_offsets, end_offset)
        if keep < len(self.epochs):
            del self.epochs[keep:]
            del self.start_offsets[keep:]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: drop entries wholly before it, and move the entry
        covering it to start there (Kafka ``truncateFromStart``)."""
        i = bisect.bisect_right(self.start_offsets, start_offset) - 1
        if i < 0 or (i == 0 and self.start_offsets[0] == start_offset):
            return
        del self.epochs[:i]
        del self.start_offsets[:i]
        self.start_offsets[0] = start_offset
        self.flush()

    def clear(self) -> None:
        self.epochs.clear()
        self.start_offsets.clear()
        self.flush()

    def flush(self) -> None:
        """Persist (atomic replace + fsync)."""
        write_checkpoint(self.path, self.entries())
