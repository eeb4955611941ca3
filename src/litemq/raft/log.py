"""The log as the core sees it: a read-only :class:`LogView` the caller provides.

The core never writes the log. It asks the caller (through :class:`~litemq.raft.ready.Ready`)
to install a snapshot, truncate, append; and it reads back what was persisted through the
view. The broker backs the view with its PartitionLog and leader-epoch cache (the term of an
offset and :meth:`LogView.end_offset_for_epoch` are exactly what that cache answers); tests
and the simulator use :class:`MemoryLog`.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Protocol, Sequence

from litemq.raft.types import Entry, EntryKind, Snapshot

UNLIMITED_BYTES = 1 << 62

__all__ = ["EntrySeq", "LogView", "MemoryLog"]


class LogView(Protocol):
    """Read-only view of the persisted log. Offsets are Kafka offsets; terms are leader epochs.

    Terms never decrease along the log (a Raft log is sorted by term), which is what makes a
    leader-epoch cache possible.
    """

    @property
    def log_start_offset(self) -> int:
        """First offset still held (``snapshot().offset + 1``)."""

    @property
    def log_end_offset(self) -> int:
        """Offset after the last persisted entry."""

    def term_at(self, offset: int) -> int | None:
        """Term of ``offset`` for ``log_start_offset - 1 <= offset < log_end_offset`` (at
        ``log_start_offset - 1`` the snapshot's term; ``0`` for offset ``-1``), else ``None``."""

    def end_offset_for_epoch(self, epoch: int) -> int:
        """Kafka OffsetsForLeaderEpoch: the first offset whose term is greater than ``epoch``
        (``log_end_offset`` when there is none; ``log_start_offset`` when even the snapshot's
        term is greater)."""

    def entries(self, start: int, end: int, max_bytes: int) -> Sequence[Entry]:
        """Entries from the one *containing* ``start`` (like a Kafka fetch from the middle of a
        batch) up to those starting before ``end``, stopping before ``max_bytes`` of payload
        is exceeded, but always at least one entry if there is any. ``start`` is at least
        ``log_start_offset``."""

    def snapshot(self) -> Snapshot:
        """What precedes ``log_start_offset`` (offset ``-1``, term 0 for a log that starts at 0).
        ``voters`` and ``learners`` are the configuration at that offset (``voters`` ``None``
        if never recorded)."""

    def config_entries(self, start: int, end: int) -> Sequence[Entry]:
        """The ``CONFIG`` entries starting in ``[start, end)``, in log order: what a restarting
        node replays to know its configuration, without reading the whole log (the broker finds
        them among the few Raft-internal batches its offset translator knows)."""


class EntrySeq:
    """Contiguous run of entries starting at ``start`` with O(log n) lookup by offset."""

    __slots__ = ("start", "end", "_entries", "_offsets")

    def __init__(self, start: int = 0) -> None:
        self.start = start
        self.end = start
        """Offset after the last entry (``start`` when empty)."""
        self._entries: list[Entry] = []
        self._offsets: list[int] = []

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:
        return bool(self._entries)

    def __iter__(self):
        return iter(self._entries)

    def __getitem__(self, i: int) -> Entry:
        return self._entries[i]

    def index_of(self, offset: int) -> int:
        """Index of the entry containing ``offset`` (which must be in ``[start, end)``)."""
        return bisect_right(self._offsets, offset) - 1

    def entry_at(self, offset: int) -> Entry | None:
        if offset < self.start or offset >= self.end:
            return None
        return self._entries[self.index_of(offset)]

    def term_at(self, offset: int) -> int | None:
        e = self.entry_at(offset)
        return None if e is None else e.term

    def extend(self, entries: Sequence[Entry]) -> None:
        end = self.end
        for e in entries:
            if e.offset != end or e.count < 1:
                raise ValueError(f"entry at offset {e.offset} (count {e.count}) does not start at {end}")
            end = e.end_offset
        self._entries.extend(entries)
        self._offsets.extend(e.offset for e in entries)
        self.end = end

    def truncate_from(self, offset: int) -> None:
        """Drop every entry starting at or after ``offset`` (an entry boundary)."""
        if offset < self.start:
            raise ValueError(f"offset {offset} is below the start {self.start}")
        i = bisect_left(self._offsets, offset)
        if i > 0 and self._entries[i - 1].end_offset > offset:
            raise ValueError(f"offset {offset} is inside an entry")
        del self._entries[i:]
        del self._offsets[i:]
        self.end = self._entries[-1].end_offset if self._entries else self.start

    def drop_before(self, offset: int) -> None:
        """Drop every entry ending at or before ``offset``; ``start`` becomes ``offset``."""
        i = bisect_right(self._offsets, offset - 1)
        if i > 0 and self._entries[i - 1].end_offset > offset:
            raise ValueError(f"offset {offset} is inside an entry")
        del self._entries[:i]
        del self._offsets[:i]
        self.start = offset
        self.end = max(self.end, offset)

    def pop_front(self, n: int) -> None:
        if n:
            self.start = self._entries[n - 1].end_offset
            del self._entries[:n]
            del self._offsets[:n]

    def slice(self, start: int, end: int, max_bytes: int) -> list[Entry]:
        if start >= self.end or start >= end:
            return []
        i = self.index_of(max(start, self.start))
        out: list[Entry] = []
        size = 0
        entries = self._entries
        while i < len(entries) and entries[i].offset < end:
            e = entries[i]
            size += e.size
            if out and size > max_bytes:
                break
            out.append(e)
            i += 1
        return out

    def first_offset_above_term(self, term: int) -> int:
        """First offset whose term is > ``term`` (``end`` if none); terms are sorted."""
        lo, hi = 0, len(self._entries)
        while lo < hi:
            mid = (lo + hi) // 2
            if self._entries[mid].term > term:
                hi = mid
            else:
                lo = mid + 1
        return self._entries[lo].offset if lo < len(self._entries) else self.end


class MemoryLog:
    """In-memory :class:`LogView` plus the caller-side mutations a Ready asks for.

    Used by the tests and the simulator; its mutators mirror what the broker does with the
    PartitionLog (``truncate_to`` = Kafka ``truncateTo``, ``compact`` = advancing the log start
    offset / writing a metadata snapshot, ``install_snapshot`` = "start afresh")."""

    def __init__(self, snapshot: Snapshot | None = None, entries: Sequence[Entry] = ()) -> None:
        self._snap = snapshot or Snapshot()
        self._seq = EntrySeq(self._snap.offset + 1)
        self._seq.extend(entries)

    # --- LogView ---
    @property
    def log_start_offset(self) -> int:
        return self._snap.offset + 1

    @property
    def log_end_offset(self) -> int:
        return self._seq.end

    def term_at(self, offset: int) -> int | None:
        if offset == self._snap.offset:
            return self._snap.term
        return self._seq.term_at(offset)

    def end_offset_for_epoch(self, epoch: int) -> int:
        if self._snap.term > epoch:
            return self.log_start_offset
        return self._seq.first_offset_above_term(epoch)

    def entries(self, start: int, end: int, max_bytes: int) -> list[Entry]:
        if start < self.log_start_offset:
            raise ValueError(f"offset {start} is below the log start offset {self.log_start_offset}")
        return self._seq.slice(start, end, max_bytes)

    def snapshot(self) -> Snapshot:
        return self._snap

    def config_entries(self, start: int, end: int) -> list[Entry]:
        return [e for e in self._seq.slice(start, end, UNLIMITED_BYTES) if e.kind == EntryKind.CONFIG and e.offset >= start]

    # --- caller-side mutations ---
    def entry_at(self, offset: int) -> Entry | None:
        return self._seq.entry_at(offset)

    def all_entries(self) -> list[Entry]:
        return list(self._seq)

    def truncate_to(self, offset: int) -> list[Entry]:
        """Remove every entry at or after ``offset``; returns what was removed."""
        i = self._seq.index_of(offset) if offset < self._seq.end else len(self._seq)
        removed = list(self._seq)[i:] if i < len(self._seq) else []
        self._seq.truncate_from(offset)
        return removed

    def append(self, entries: Sequence[Entry]) -> None:
        self._seq.extend(entries)

    def install_snapshot(self, snapshot: Snapshot) -> list[Entry]:
        """Discard the whole log and start afresh after ``snapshot``; returns what was removed."""
        removed = list(self._seq)
        self._snap = snapshot
        self._seq = EntrySeq(snapshot.offset + 1)
        return removed

    def compact(self, snapshot: Snapshot) -> None:
        """Drop the prefix up to ``snapshot.offset`` (an entry end at or below the commit index)."""
        if snapshot.offset < self._snap.offset:
            return
        if self.term_at(snapshot.offset) != snapshot.term:
            raise ValueError("snapshot does not match the log")
        self._seq.drop_before(snapshot.offset + 1)
        self._snap = snapshot
