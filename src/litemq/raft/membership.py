"""The configuration (voters and learners) in effect at each offset (thesis §4.1, single-server
changes; §4.2.1 learners).

A ``CONFIG`` entry takes effect on a server as soon as it is in its log (appended), not when
committed, and is undone if truncated. :class:`Membership` keeps the configuration in effect
at a ``base`` offset (the latest one at or below the commit index, or the restart / snapshot
point) plus every ``CONFIG`` entry after it, in log order; committing folds them into the base.

:func:`check_single_change` is the rule a leader applies to a proposed configuration: at most
one server changes its role (none / learner / voter) per change, so two consecutive voter sets
differ by at most one voter and any two majorities of them overlap (thesis §4.1).
"""

from __future__ import annotations

from typing import Sequence

from litemq import limits
from litemq.raft.types import ConfState, Entry, EntryKind, decode_config

__all__ = ["Membership", "changed_members", "check_single_change"]


def changed_members(old: ConfState, new: ConfState) -> set[int]:
    """Servers whose role (voter, learner, none) differs between ``old`` and ``new``."""
    return {n for n in old.members | new.members if old.role_of(n) != new.role_of(n)}


def check_single_change(old: ConfState, new: ConfState) -> None:
    """Raise ``ValueError`` unless ``new`` is a valid single-server change of ``old``: exactly
    one server changes its role (add or remove a voter or a learner, promote a learner, demote
    a voter), voters and learners disjoint, at least one voter left, sets within
    ``limits.RAFT_MAX_VOTERS``."""
    if new.voters & new.learners:
        raise ValueError(f"{sorted(new.voters & new.learners)} cannot be both voter and learner")
    if not new.voters:
        raise ValueError("cannot remove the last voter")
    if len(new.voters) > limits.RAFT_MAX_VOTERS or len(new.learners) > limits.RAFT_MAX_VOTERS:
        raise ValueError("too many voters or learners")
    changed = changed_members(old, new)
    if not changed:
        raise ValueError("the configuration does not change")
    if len(changed) > 1:
        raise ValueError(f"one server at a time: {sorted(changed)} would change their roles")


class Membership:
    """Configurations by offset: ``base`` = (offset, configuration in effect there),
    ``changes`` = the ``(offset, configuration)`` of every ``CONFIG`` entry after it, in log
    order."""

    __slots__ = ("base", "changes")

    def __init__(self, offset: int, conf: ConfState) -> None:
        self.base: tuple[int, ConfState] = (offset, conf)
        self.changes: list[tuple[int, ConfState]] = []

    @property
    def conf(self) -> ConfState:
        """The configuration in effect at the end of the log."""
        return self.changes[-1][1] if self.changes else self.base[1]

    @property
    def voters(self) -> frozenset[int]:
        """The voter set in effect at the end of the log."""
        return self.conf.voters

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
        configuration in effect may have changed."""
        first = entries[0].offset
        changes = self.changes
        changed = False
        while changes and changes[-1][0] >= first:
            changes.pop()  # truncated: fall back to the previous configuration
            changed = True
        for e in entries:
            if e.kind == EntryKind.CONFIG:
                changes.append((e.offset, decode_config(e.payload)))
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

    def restore(self, offset: int, conf: ConfState) -> None:
        """A snapshot up to ``offset`` with configuration ``conf`` replaced the whole log."""
        self.base = (offset, conf)
        self.changes = []

    def conf_at(self, offset: int) -> ConfState | None:
        """Configuration in effect at ``offset``, or ``None`` if that is below the base."""
        base_offset, conf = self.base
        if offset < base_offset:
            return None
        for off, c in self.changes:
            if off > offset:
                break
            conf = c
        return conf

    def voters_at(self, offset: int) -> frozenset[int] | None:
        """Voter set in effect at ``offset``, or ``None`` if that is below the base."""
        conf = self.conf_at(offset)
        return None if conf is None else conf.voters
