"""The log as the core reasons about it (etcd ``raftLog``): the caller's persisted
:class:`~litemq.raft.log.LogView` overlaid with the :class:`~litemq.raft.unstable.Unstable`
tail (a pending snapshot and entries not persisted yet).
"""

from __future__ import annotations

from typing import Sequence

from litemq.raft.log import LogView
from litemq.raft.types import Entry, Snapshot
from litemq.raft.unstable import Unstable

__all__ = ["UNLIMITED", "RaftLog"]

UNLIMITED = 1 << 62
"""An offset or byte bound that never limits anything."""


class RaftLog:
    """Persisted view + unstable tail. Offsets are Kafka offsets, terms leader epochs."""

    __slots__ = ("view", "unstable")

    def __init__(self, view: LogView) -> None:
        self.view = view
        self.unstable = Unstable(view.log_end_offset)

    @property
    def first_offset(self) -> int:
        """First offset held (the log start offset, after the pending snapshot if any)."""
        snap = self.unstable.snapshot
        return snap.offset + 1 if snap is not None else self.view.log_start_offset

    @property
    def end_offset(self) -> int:
        """Log end offset, including entries not persisted yet."""
        return self.unstable.entries.end

    @property
    def last_offset(self) -> int:
        return self.unstable.entries.end - 1

    def term_at(self, offset: int) -> int | None:
        """Term of ``offset`` from ``first_offset - 1`` to ``last_offset``, else ``None``."""
        unstable = self.unstable
        entries = unstable.entries
        if offset >= entries.start:
            return entries.term_at(offset)
        snap = unstable.snapshot
        if snap is not None:
            return snap.term if offset == snap.offset else None
        return self.view.term_at(offset)

    @property
    def last_term(self) -> int:
        t = self.term_at(self.last_offset)
        return 0 if t is None else t

    def snapshot(self) -> Snapshot:
        """The pending snapshot, else the view's: what precedes ``first_offset``."""
        snap = self.unstable.snapshot
        return snap if snap is not None else self.view.snapshot()

    def persisted_last(self) -> int:
        """Last offset that is durable and still part of the log."""
        unstable = self.unstable
        if unstable.snapshot is not None:
            return unstable.snapshot.offset
        return min(unstable.entries.start, self.view.log_end_offset) - 1

    def truncate_needed(self) -> int | None:
        """Log end offset the caller must truncate the persisted log to, if its suffix is stale."""
        unstable = self.unstable
        if unstable.snapshot is None and unstable.entries.start < self.view.log_end_offset:
            return unstable.entries.start
        return None

    def is_up_to_date(self, last_offset: int, last_term: int) -> bool:
        """Paper §5.4.1: the candidate's log is at least as up-to-date as ours."""
        my_term = self.last_term
        return last_term > my_term or (last_term == my_term and last_offset >= self.last_offset)

    def entries(self, start: int, end: int, max_bytes: int) -> list[Entry]:
        """Entries from the one containing ``start`` up to those starting before ``end``, at
        most ``max_bytes`` of payload (but at least one entry)."""
        end = min(end, self.end_offset)
        unstable = self.unstable.entries
        ustart = unstable.start
        if start >= ustart:
            return unstable.slice(start, end, max_bytes)
        if start >= end:
            return []
        out = list(self.view.entries(start, min(end, ustart), max_bytes))
        if end <= ustart or not out or out[-1].end_offset < ustart:
            return out
        used = sum(e.size for e in out)
        for e in unstable:
            if e.offset >= end:
                break
            used += e.size
            if used > max_bytes:
                break
            out.append(e)
        return out

    def append(self, entries: Sequence[Entry]) -> None:
        """Append (possibly replacing a suffix from ``entries[0].offset``)."""
        self.unstable.truncate_and_append(entries)

    def find_conflict_by_term(self, offset: int, term: int) -> int:
        """Largest offset ``<= offset`` whose term is ``<= term`` (etcd ``findConflictByTerm``;
        with a leader-epoch cache: ``end_offset_for_epoch(term) - 1``). Answers at or below
        ``first_offset - 1`` mean "no better knowledge"."""
        o = min(offset, self.last_offset)
        unstable = self.unstable.entries
        while o >= unstable.start:
            e = unstable.entry_at(o)
            if e is None or e.term <= term:
                return o
            o = e.offset - 1
        first = self.first_offset
        if o < first or self.unstable.snapshot is not None:
            return o
        return max(first - 1, min(o, self.view.end_offset_for_epoch(term) - 1))

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Discard the whole log: it restarts after ``snapshot`` (pending until persisted)."""
        self.unstable.restore(snapshot)
