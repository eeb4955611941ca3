"""The (pre-)candidate's step function (etcd ``stepCandidate``): count vote answers of the
current (pre-)election; a message from a leader of this term makes it a follower of it."""

from __future__ import annotations

from litemq.raft.core import Raft
from litemq.raft.election import tally
from litemq.raft.follower import step_follower
from litemq.raft.messages import Append, Heartbeat, InstallSnapshot, Message, VoteResponse
from litemq.raft.types import Role

__all__ = ["step_candidate"]


def step_candidate(r: Raft, m: Message) -> None:
    """A message of the current term (vote requests aside) received as a (pre-)candidate."""
    if isinstance(m, VoteResponse):
        if m.pre_vote == (r.role is Role.PRE_CANDIDATE) and m.src not in r.votes:
            r.votes[m.src] = m.granted
            tally(r)
    elif isinstance(m, (Append, Heartbeat, InstallSnapshot)):
        r.become_follower(m.term, m.src)
        step_follower(r, m)
