"""What a leader knows of each follower, and the quorum arithmetic (etcd ``tracker`` and
``quorum``).

A :class:`Progress` is in one of three states (etcd ``StateProbe``/``StateReplicate``/
``StateSnapshot``): *probe*, one append per round trip until the follower's match point is
found; *replicate*, appends pipelined with at most ``max_inflight_appends`` in flight; *snapshot*,
an InstallSnapshot is on its way (retried after an election timeout).
"""

from __future__ import annotations

import enum
from collections import deque
from typing import Mapping

__all__ = [
    "PROBE",
    "REPLICATE",
    "SNAPSHOT",
    "Progress",
    "VoteResult",
    "committed_offset",
    "quorum_active",
    "vote_result",
]

PROBE, REPLICATE, SNAPSHOT = 0, 1, 2


class Progress:
    """One follower as the leader tracks it (etcd ``tracker.Progress``): ``match`` is the last
    offset known replicated on it (-1: none), ``next`` the next offset to send, ``inflight``
    the last offsets of the appends not acknowledged yet (etcd ``Inflights``),
    ``recent_active`` whether it was heard from in the current CheckQuorum window,
    ``log_start_offset`` the log start offset its last answer reported (-1: none yet)."""

    __slots__ = ("match", "next", "state", "probe_sent", "inflight", "recent_active",
                 "snapshot_offset", "snapshot_ticks", "log_start_offset")

    def __init__(self, next_offset: int) -> None:
        self.match = -1
        self.next = next_offset
        self.state = PROBE
        self.probe_sent = False
        self.inflight: deque[int] = deque()
        self.recent_active = False
        self.snapshot_offset = -1
        self.snapshot_ticks = 0
        self.log_start_offset = -1

    def become_probe(self, next_offset: int) -> None:
        self.state = PROBE
        self.next = max(next_offset, self.match + 1)
        self.probe_sent = False
        self.inflight.clear()

    def become_replicate(self) -> None:
        self.state = REPLICATE
        self.next = self.match + 1
        self.inflight.clear()

    def become_snapshot(self, offset: int) -> None:
        self.state = SNAPSHOT
        self.snapshot_offset = offset
        self.snapshot_ticks = 0
        self.inflight.clear()

    def ack(self, offset: int) -> bool:
        """Record that the follower matches up to ``offset``; True if that is news (etcd
        ``MaybeUpdate``)."""
        inflight = self.inflight
        while inflight and inflight[0] <= offset:
            inflight.popleft()
        if offset > self.match:
            self.match = offset
            self.next = max(self.next, offset + 1)
            return True
        return False

    def is_paused(self, max_inflight: int) -> bool:
        """No append may go out now: a snapshot is in flight, a probe is unanswered, or
        ``max_inflight`` appends are (etcd ``IsPaused``)."""
        state = self.state
        return (
            state == SNAPSHOT
            or (state == PROBE and self.probe_sent)
            or (state == REPLICATE and len(self.inflight) >= max_inflight)
        )


def committed_offset(progress: Mapping[int, Progress], voters: frozenset[int]) -> int:
    """Largest offset held by a majority of ``voters`` (non-empty, all in ``progress``):
    etcd ``MajorityConfig.CommittedIndex``."""
    matches = sorted((progress[v].match for v in voters), reverse=True)
    return matches[len(voters) // 2]


def quorum_active(progress: Mapping[int, Progress], voters: frozenset[int], self_id: int) -> bool:
    """CheckQuorum (thesis §6.2): a majority of ``voters`` (``self_id`` counts) was heard from
    in this window (etcd ``QuorumActive``)."""
    active = sum(1 for v in voters if v == self_id or progress[v].recent_active)
    return active >= len(voters) // 2 + 1


class VoteResult(enum.Enum):
    """Outcome of an election so far (etcd ``quorum.VoteResult``)."""

    PENDING = 0
    WON = 1
    LOST = 2


def vote_result(votes: Mapping[int, bool], voters: frozenset[int]) -> VoteResult:
    """Count the votes of ``voters`` (granted: True) against a majority; votes of non-voters
    do not count."""
    q = len(voters) // 2 + 1
    granted = sum(1 for v, g in votes.items() if g and v in voters)
    rejected = sum(1 for v, g in votes.items() if not g and v in voters)
    if granted >= q:
        return VoteResult.WON
    if rejected >= q:
        return VoteResult.LOST
    return VoteResult.PENDING
