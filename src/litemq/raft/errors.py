"""Errors a proposal to the Raft core can raise (etcd ``ErrProposalDropped`` and friends)."""

from __future__ import annotations

__all__ = ["ConfigChangeInProgress", "NotLeader", "ProposalDropped", "RaftError"]


class RaftError(Exception):
    """Base of the errors a proposal can raise."""


class NotLeader(RaftError):
    """Raised by proposals on a node that is not the leader. ``leader_id`` is the current
    leader if known (Kafka: NOT_LEADER_OR_FOLLOWER, the client refreshes its metadata)."""

    def __init__(self, leader_id: int | None) -> None:
        super().__init__(f"not the leader (leader is {leader_id})")
        self.leader_id = leader_id


class ProposalDropped(RaftError):
    """Raised while a leadership transfer is in progress (thesis §3.10: the old leader stops
    accepting client requests)."""


class ConfigChangeInProgress(RaftError):
    """Raised when a membership change is proposed before the previous one has committed
    (thesis §4.1: one change at a time)."""
