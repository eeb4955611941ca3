"""The shared ``Step`` (etcd ``raft.Step``) and tick dispatch: every received message goes
through :func:`step`, which handles terms (a higher term makes us a follower, a lower one is
answered so a stale leader or pre-candidate learns it), the leader lease of CheckQuorum
(thesis §4.2.3), PreVote's "no term change" rule (thesis §9.6) and vote requests, then
dispatches to the role's step function (:func:`~litemq.raft.leader.step_leader`,
:func:`~litemq.raft.candidate.step_candidate`, :func:`~litemq.raft.follower.step_follower`).

etcd stores the role's step and tick functions in the ``raft`` struct; here the role is the
dispatch key, so the transitions in :mod:`~litemq.raft.core` need not know the role modules.
"""

from __future__ import annotations

from litemq.raft.candidate import step_candidate
from litemq.raft.core import Raft
from litemq.raft.election import handle_vote_request, tick_election
from litemq.raft.follower import step_follower
from litemq.raft.leader import step_leader, tick_leader
from litemq.raft.messages import (
    Append,
    AppendResponse,
    Heartbeat,
    InstallSnapshot,
    Message,
    VoteRequest,
    VoteResponse,
)
from litemq.raft.types import Role

__all__ = ["step", "tick"]


def tick(r: Raft) -> None:
    """Advance logical time by one tick (etcd ``tickHeartbeat`` / ``tickElection``)."""
    if r.role is Role.LEADER:
        tick_leader(r)
    else:
        tick_election(r)


def step(r: Raft, m: Message) -> None:
    """Handle one received message (any order, duplicates and losses are fine)."""
    if m.dst != r.id:
        return
    if r.recovering and m.term > r.recovery_term and not getattr(m, "pre_vote", False):
        r.recovery_term = m.term  # a term the old disk may have voted in
    if m.term > r.term:
        if isinstance(m, VoteRequest):
            in_lease = (
                r.config.check_quorum
                and r.leader_id is not None
                and r.election_elapsed < r.config.election_timeout_ticks
            )
            if in_lease and not m.transfer:
                return  # leader lease (thesis §4.2.3): ignore, do not even answer
        if isinstance(m, VoteRequest) and m.pre_vote:
            pass  # PreVote never changes our term (thesis §9.6)
        elif isinstance(m, VoteResponse) and m.pre_vote and m.granted:
            pass  # granted pre-votes carry the term we would campaign in
        else:
            leader = m.src if isinstance(m, (Append, Heartbeat, InstallSnapshot)) else None
            r.become_follower(m.term, leader)
    elif m.term < r.term:
        if isinstance(m, (Append, Heartbeat)) and (r.config.check_quorum or r.config.pre_vote):
            # A stale leader (e.g. partitioned, then out-voted) learns our term and steps
            # down; without this PreVote could leave it stranded (etcd does the same).
            r.send(AppendResponse(r.id, m.src, r.term, success=False))
        elif isinstance(m, VoteRequest) and m.pre_vote:
            r.send(VoteResponse(r.id, m.src, r.term, granted=False, pre_vote=True))
        return

    if isinstance(m, VoteRequest):
        handle_vote_request(r, m)
    elif r.role is Role.LEADER:
        step_leader(r, m)
    elif r.role is Role.FOLLOWER:
        step_follower(r, m)
    else:
        step_candidate(r, m)
