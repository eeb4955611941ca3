"""The unstable tail of the log (etcd ``unstable``): what the core has produced but the caller
has not persisted yet.

It holds at most one pending snapshot (to be installed first) and a contiguous run of entries
from ``entries.start``. Entries of the persisted log at or after ``entries.start`` are stale: a
truncation the caller has not done yet (``Ready.truncate_to``). A :class:`~litemq.raft.ready.Ready`
hands both out; :meth:`Unstable.stable_to` drops them once the caller has persisted them.
"""

from __future__ import annotations

from typing import Sequence

from litemq.raft.log import EntrySeq
from litemq.raft.types import Entry, Snapshot

__all__ = ["Unstable"]


class Unstable:
    """Pending snapshot + entries not yet persisted, starting at offset ``start`` (the
    persisted log end offset when the core starts)."""

    __slots__ = ("snapshot", "entries")

    def __init__(self, start: int) -> None:
        self.snapshot: Snapshot | None = None
        self.entries = EntrySeq(start)

    def restore(self, snapshot: Snapshot) -> None:
        """Replace everything by ``snapshot``; the log restarts at ``snapshot.offset + 1``."""
        self.snapshot = snapshot
        self.entries = EntrySeq(snapshot.offset + 1)

    def truncate_and_append(self, entries: Sequence[Entry]) -> None:
        """Append ``entries`` (non-empty, contiguous), replacing any suffix from
        ``entries[0].offset``: inside the tail it is cut; below it the tail restarts there
        (the persisted suffix becomes stale). ``AssertionError`` on a gap."""
        first = entries[0].offset
        seq = self.entries
        if first > seq.end:
            raise AssertionError(f"gap: appending at {first} after log end {seq.end}")
        if first >= seq.start:
            seq.truncate_from(first)
        else:
            seq = self.entries = EntrySeq(first)
        seq.extend(entries)

    def stable_to(self, snapshot: Snapshot | None, entries: Sequence[Entry]) -> None:
        """The caller persisted ``snapshot`` and ``entries`` (those of one Ready): forget them,
        unless they were replaced in the meantime."""
        if snapshot is not None and snapshot is self.snapshot:
            self.snapshot = None
        if not entries:
            return
        seq = self.entries
        if seq.start != entries[0].offset:
            return  # replaced in the meantime: everything unstable still has to be written
        n = 0
        for e in entries:
            if n < len(seq) and seq[n].offset == e.offset and seq[n].term == e.term:
                n += 1
            else:
                break
        seq.pop_front(n)
