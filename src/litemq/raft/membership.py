"""The voter set in effect at each offset (thesis §4.1, single-server changes).

A ``CONFIG`` entry takes effect on a server as soon as it is in its log (appended), not when
committed, and is undone if truncated. :class:`Membership` keeps the configuration in effect
at a ``base`` offset (the latest one at or below the commit index, or the restart / snapshot
point) plus every ``CONFIG`` entry after it, in log order; committing folds them into the base.
"""

from __future__ import annotations

from typing import Sequence

from litemq.raft.types import Entry, EntryKind, decode_voters

__all__ = ["Membership"]


class Membership:
    """Voter sets by offset: ``base`` = (offset, voters in effect there), ``changes`` = the
    ``(offset, voters)`` of every ``CONFIG`` entry after it, in log order."""

    __slots__ = ("base", "changes")

    def __init__(self, offset: int, voters: frozenset[int]) -> None:
        self.base: tuple[int, frozenset[int]] = (offset, voters)
        self.changes: list[tuple[int, frozenset[int]]] = []

    @property
    def voters(self) -> frozenset[int]:
        """The voter set in effect at the end of the log."""
        return self.changes[-1][1] if self.changes else self.base[1]

    @property
    def offset(self) -> int:
        """Offset of the configuration in effect at the end of the log."""
        return self.changes[-1][0] if self.changes else self.base[0]

    def uncommitted(self, commit_index: int) -> bool:
        """A ``CONFIG`` entry above ``commit_index`` is in the log."""
        return bool(self.changes) and self.changes[-1][0] > commit_index

    def append(self, entries: Sequence[Entry]) -> bool:
        """``entries`` (non-empty) were appended, replacing any suffix from
        ``entries[0].offset``: undo the changes truncated, take the new ones. True if the
        voter set in effect may have changed."""
        first = entries[0].offset
        changes = self.changes
        changed = False
        while changes and changes[-1][0] >= first:
            changes.pop()  # truncated: fall back to the previous configuration
            changed = True
        for e in entries:
            if e.kind == EntryKind.CONFIG:
                changes.append((e.offset, decode_voters(e.payload)))
                changed = True
        return changed

    def commit_to(self, commit_index: int) -> None:
        """Fold the changes at or below ``commit_index`` into the base."""
        changes = self.changes
        i = 0
        while i < len(changes) and changes[i][0] <= commit_index:
            i += 1
        if i:
            self.base = changes[i - 1]
            del changes[:i]

    def restore(self, offset: int, voters: frozenset[int]) -> None:
        """A snapshot up to ``offset`` with ``voters`` replaced the whole log."""
        self.base = (offset, voters)
        self.changes = []

    def voters_at(self, offset: int) -> frozenset[int] | None:
        """Voter set in effect at ``offset``, or ``None`` if that is below the base."""
        base_offset, voters = self.base
        if offset < base_offset:
            return None
        for off, v in self.changes:
            if off > offset:
                break
            voters = v
        return voters
