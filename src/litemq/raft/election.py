"""Elections (paper §5.2) with PreVote (thesis §9.6): the election timer of followers and
candidates, starting a (pre-)election, counting its votes, and answering vote requests.
etcd: ``tickElection``, ``hup``/``campaign``, ``poll`` and the ``MsgVote`` case of ``Step``.
"""

from __future__ import annotations

from litemq.raft.core import Raft
from litemq.raft.messages import VoteRequest, VoteResponse
from litemq.raft.tracker import VoteResult, vote_result
from litemq.raft.types import Role

__all__ = ["handle_vote_request", "hup", "tally", "tick_election"]


def tick_election(r: Raft) -> None:
    """One tick of a follower or (pre-)candidate: campaign once the randomized election
    timeout has passed without hearing from a leader."""
    r.election_elapsed += 1
    if r.election_elapsed >= r.randomized_election_timeout and r.promotable():
        r.election_elapsed = 0
        hup(r, transfer=False)


def hup(r: Raft, transfer: bool, pre_vote: bool | None = None) -> None:
    """Start a pre-election (if PreVote is on and this is not a leadership transfer) or an
    election: vote for itself and ask every other voter with ``(last_offset, last_term)``."""
    if pre_vote is None:
        pre_vote = r.config.pre_vote and not transfer
    if pre_vote:
        r.become_pre_candidate()
        term, pre = r.term + 1, True
    else:
        r.become_candidate()
        term, pre = r.term, False
    r.votes[r.id] = True
    if tally(r):
        return
    last_offset, last_term = r.raft_log.last_offset, r.raft_log.last_term
    for v in sorted(r.voters):
        if v != r.id:
            r.send(VoteRequest(r.id, v, term, last_offset, last_term, pre_vote=pre, transfer=transfer))


def tally(r: Raft) -> bool:
    """Count votes; win or lose the (pre-)election when decided. True if decided."""
    result = vote_result(r.votes, r.voters)
    if result is VoteResult.WON:
        if r.role is Role.PRE_CANDIDATE:
            hup(r, transfer=False, pre_vote=False)  # won the pre-vote: real election
        else:
            r.become_leader()
        return True
    if result is VoteResult.LOST:
        r.become_follower(r.term, None)
        return True
    return False


def handle_vote_request(r: Raft, m: VoteRequest) -> None:
    """Grant a (pre-)vote if we may vote for ``m.src`` in its term and its log is at least as
    up-to-date as ours (paper §5.4.1); a real vote is remembered and resets the timer. A
    recovering node (a replaced disk) grants nothing: it forgot its votes and its log."""
    can_vote = not r.recovering and (
        r.voted_for == m.src
        or (r.voted_for is None and r.leader_id is None)
        or (m.pre_vote and m.term > r.term)
    )
    if can_vote and r.raft_log.is_up_to_date(m.last_offset, m.last_term):
        r.send(VoteResponse(r.id, m.src, m.term, granted=True, pre_vote=m.pre_vote))
        if not m.pre_vote:
            r.election_elapsed = 0
            r.voted_for = m.src
    else:
        r.send(VoteResponse(r.id, m.src, r.term, granted=False, pre_vote=m.pre_vote))
