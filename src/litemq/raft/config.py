"""Tunables of one Raft group (etcd ``raft.Config``), each bounded by ``litemq.limits``.

Not to be confused with the group's *configuration* in the Raft sense (its voter set), which
:mod:`litemq.raft.membership` tracks.
"""

from __future__ import annotations

from dataclasses import dataclass

from litemq import limits

__all__ = ["RaftConfig"]


@dataclass(frozen=True)
class RaftConfig:
    """Tunables of one group. Ticks are the caller's unit of time (the broker: e.g. 100 ms).

    Raises ``ValueError`` when a value is outside its bound in ``litemq.limits``."""

    election_timeout_ticks: int = 10
    """Base election timeout T; each node waits a random ``[T, 2T)`` ticks (paper §5.2)."""
    heartbeat_interval_ticks: int = 1
    """A leader sends heartbeats this often (must be below the election timeout)."""
    pre_vote: bool = True
    check_quorum: bool = True
    max_append_bytes: int = limits.RAFT_MAX_APPEND_BYTES
    max_inflight_appends: int = limits.RAFT_MAX_INFLIGHT_APPENDS
    max_apply_bytes: int = limits.RAFT_MAX_APPLY_BYTES
    apply_entries: bool = True
    """Hand committed entries back in ``Ready.committed_entries``. A partition group sets it
    to False: only its high watermark matters and nothing is read back from the log."""
    noop_only_when_needed: bool = False
    """A new leader whose whole log is known committed (commit index = last offset) appends no
    no-op: paper §5.4.2/§8 and thesis §6.4 need one only to commit entries of earlier terms.
    A configuration change still waits until an entry of the leader's term is committed (the
    2015 raft-dev erratum): :func:`litemq.raft.leader.propose_config` then appends the no-op
    first. A partition group sets it, so a leader change of a caught-up partition takes no
    offset (Kafka's offsets have no such gaps)."""
    eager_commit_broadcast: bool = True
    """A leader whose commit index moved sends it to every follower at the next Ready, in an
    Append of its own if no new entries go out (etcd). With False, followers learn it with the
    next Append of entries or the next heartbeat (``heartbeat_interval_ticks``): one message
    less each way per follower and commit, as Kafka followers learn the high watermark with
    their next fetch. A partition group sets it to False (only the leader answers producers on
    commit); the metadata group keeps it (its followers apply the committed records).
    :meth:`litemq.raft.RaftNode.ready` still reports the leader's own commit at once."""

    def __post_init__(self) -> None:
        if not 1 <= self.election_timeout_ticks <= limits.RAFT_MAX_ELECTION_TIMEOUT_TICKS:
            raise ValueError("election_timeout_ticks out of range")
        if not 1 <= self.heartbeat_interval_ticks < self.election_timeout_ticks:
            raise ValueError("heartbeat_interval_ticks must be in [1, election_timeout_ticks)")
        if not 1 <= self.max_append_bytes <= limits.RAFT_MAX_APPEND_BYTES:
            raise ValueError("max_append_bytes out of range")
        if not 1 <= self.max_inflight_appends <= limits.RAFT_MAX_INFLIGHT_APPENDS:
            raise ValueError("max_inflight_appends out of range")
        if not 1 <= self.max_apply_bytes <= limits.RAFT_MAX_APPLY_BYTES:
            raise ValueError("max_apply_bytes out of range")
