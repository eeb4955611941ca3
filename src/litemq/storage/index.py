"""Sparse segment indexes: ``.index`` (offset -> position) and ``.timeindex`` (timestamp -> offset).

Source: Kafka ``OffsetIndex``, ``TimeIndex``, ``AbstractIndex`` (storage module). On-disk entry
layout is Kafka's (big-endian):

- ``.index`` entry, 8 bytes: ``relativeOffset int32, position int32``. ``relativeOffset`` is the
  *last* offset of the append that starts at ``position`` minus the segment base offset.
- ``.timeindex`` entry, 12 bytes: ``timestamp int64, relativeOffset int32``: the largest timestamp
  seen so far in the segment and the offset of the record carrying it.

Differences from Kafka: entries live in memory (``array``), the file is not preallocated/mmapped;
new entries are written to the file on :meth:`flush` (group commit with the log). An index is only
trusted below the recovery point; :meth:`load` sanity-checks it and reports whether it must be
rebuilt from the segment. Not thread-safe by itself: :class:`PartitionLog` serialises mutation.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class CorruptIndexError(Exception):
    """An index file failed its sanity check; the caller rebuilds it from the segment."""


class _Index:
    """Common part: an ordered list of entries mirrored in a file of fixed-size records."""

    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.entry.size)
        self._written = 0  # entries already written to the file
        self._file_made = False  # this object created or opened the file at ``path``

    # subclasses: _columns() -> tuple of arrays, _entry_values(i)
    def __len__(self) -> int:
        return len(self.rel_offsets)

    @property
    def is_full(self) -> bool:
        return len(self.rel_offsets) >= self.max_entries

    @property
    def size_bytes(self) -> int:
        return len(self) * self.entry.size

    def _entry_values(self, i: int) -> tuple[int, ...]:
        return tuple(col[i] for col in self._columns())

    def flush(self, *, sync: bool = True) -> None:
        """Write entries not yet in the file and fsync it (creates the file if missing).
        Without ``sync`` and with nothing new to write, the file is not even opened (a log's
        flush after each Ready: most add no index entry)."""
        n = len(self)
        if not sync and self._written >= n and self._file_made:
            return
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        self._file_made = True
        try:
            if self._written < n:
                data = b"".join(self.entry.pack(*self._entry_values(i)) for i in range(self._written, n))
                os.pwrite(fd, data, self._written * self.entry.size)
                self._written = n
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _truncate_entries(self, keep: int) -> None:
        for col in self._columns():
            del col[keep:]
        if self._written > keep:
            self._written = keep
            try:
                os.truncate(self.path, keep * self.entry.size)
            except FileNotFoundError:
                pass

    def reset(self) -> None:
        """Drop every entry (memory and file)."""
        self._truncate_entries(0)
        try:
            os.truncate(self.path, 0)
        except FileNotFoundError:
            pass

    def delete_file(self) -> None:
        self._file_made = False
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def rename(self, new_path: Path) -> None:
        if self.path.exists():
            os.replace(self.path, new_path)
        else:
            self._file_made = False
        self.path = new_path

    def _read_entries(self) -> list[tuple[int, ...]]:
        data = self.path.read_bytes()
        if len(data) % self.entry.size:
            raise CorruptIndexError(f"{self.path}: size {len(data)} not a multiple of {self.entry.size}")
        return [e for e in self.entry.iter_unpack(data)]


class OffsetIndex(_Index):
    """Offset -> file position, sparse (Kafka ``OffsetIndex``)."""

    entry = _OFFSET_ENTRY

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.rel_offsets = array("i")
        self.positions = array("i")

    def _columns(self) -> tuple[array, array]:
        return (self.rel_offsets, self.positions)

    def append(self, offset: int, position: int) -> None:
        """Add ``offset`` (last offset of the append at ``position``); ignored if not increasing."""
        rel = offset - self.base_offset
        if self.rel_offsets and (rel <= self.rel_offsets[-1] or position <= self.positions[-1]):
            return
        self.rel_offsets.append(rel)
        self.positions.append(position)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.rel_offsets[-1] if self.rel_offsets else self.base_offset

    def lookup(self, offset: int) -> tuple[int, int]:
        """Largest entry with offset <= ``offset`` as ``(offset, position)``; ``(base, 0)`` if none."""
        i = bisect.bisect_right(self.rel_offsets, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self.rel_offsets[i], self.positions[i]

    def floor_position(self, position: int) -> int:
        """Largest indexed position <= ``position`` (0 if none): always a batch boundary."""
        i = bisect.bisect_right(self.positions, position) - 1
        return self.positions[i] if i >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset`` (Kafka ``truncateTo``)."""
        self._truncate_entries(bisect.bisect_left(self.rel_offsets, offset - self.base_offset))

    def truncate_to_position(self, position: int) -> None:
        """Remove entries pointing at or after file ``position``."""
        self._truncate_entries(bisect.bisect_left(self.positions, position))

    def load(self, log_size: int) -> None:
        """Read and sanity-check the file: offsets and positions strictly increasing, positions
        inside the log file. Raises :class:`CorruptIndexError` (caller rebuilds)."""
        rel_prev = pos_prev = -1
        rels, poss = array("i"), array("i")
        for rel, pos in self._read_entries():
            if rel <= rel_prev or pos <= pos_prev or rel < 0 or pos < 0 or pos >= log_size:
                raise CorruptIndexError(f"{self.path}: bad entry ({rel}, {pos}) after ({rel_prev}, {pos_prev})")
            rels.append(rel)
            poss.append(pos)
            rel_prev, pos_prev = rel, pos
        if len(rels) > self.max_entries:
            raise CorruptIndexError(f"{self.path}: {len(rels)} entries > capacity {self.max_entries}")
        self.rel_offsets, self.positions = rels, poss
        self._written = len(rels)


class TimeIndex(_Index):
    """Max-timestamp-so-far -> offset, sparse (Kafka ``TimeIndex``)."""

    entry = _TIME_ENTRY

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int) -> None:
        super().__init__(path, base_offset, max_index_bytes)
        self.timestamps = array("q")
        self.rel_offsets = array("i")

    def _columns(self) -> tuple[array, array]:
        return (self.timestamps, self.rel_offsets)

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Append if ``timestamp`` is larger than the last entry's (Kafka ``maybeAppend``)."""
        if timestamp < 0:
            return
        rel = offset - self.base_offset
        if self.timestamps and (timestamp <= self.timestamps[-1] or rel < self.rel_offsets[-1]):
            return
        self.timestamps.append(timestamp)
        self.rel_offsets.append(rel)

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry; ``(-1, base_offset)`` when empty."""
        if not self.timestamps:
            return -1, self.base_offset
        return self.timestamps[-1], self.base_offset + self.rel_offsets[-1]

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= ``timestamp`` as ``(ts, offset)``; ``(-1, base)`` if none."""
        i = bisect.bisect_right(self.timestamps, timestamp) - 1
        if i < 0:
            return -1, self.base_offset
        return self.timestamps[i], self.base_offset + self.rel_offsets[i]

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= ``offset``."""
        rel = offset - self.base_offset
        keep = len(self.rel_offsets)
        while keep and self.rel_offsets[keep - 1] >= rel:
            keep -= 1
        self._truncate_entries(keep)

    def load(self, max_rel_offset: int) -> None:
        """Read and sanity-check: timestamps strictly and offsets weakly increasing, offsets
        within ``[0, max_rel_offset]``. Raises :class:`CorruptIndexError`."""
        ts_prev, rel_prev = -1, 0
        tss, rels = array("q"), array("i")
        for ts, rel in self._read_entries():
            if ts <= ts_prev or rel < rel_prev or rel > max_rel_offset:
                raise CorruptIndexError(f"{self.path}: bad entry ({ts}, {rel}) after ({ts_prev}, {rel_prev})")
            tss.append(ts)
            rels.append(rel)
            ts_prev, rel_prev = ts, rel
        self.timestamps, self.rel_offsets = tss, rels
        self._written = len(tss)
